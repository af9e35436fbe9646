"""What the notices tests (tests/test_notices_*.py) share: plain stand-ins for the labels and
head names a page passes in, and the check that every key a lesson's notices return is in its
catalog in every language."""

from __future__ import annotations

from course import i18n


def label(i):
    return f"`t{i}`"


def head_name(layer, head):
    return f"{layer}.{head}"


def keys(found):
    return [key for key, _ in found]


def missing_from_catalogs(page: str, produced) -> dict[str, list[str]]:
    """{language: the keys of ``produced`` that ``page``'s catalog lacks there, as the plain key
    or a model's variant of it}, for the languages that lack any."""
    out = {}
    for lang in i18n.LANGS:
        catalog = i18n.catalog(lang)
        missing = [k for k in produced if f"{page}.{k}" not in catalog
                   and not any(key.endswith(f".{k}") and key.startswith(f"{page}.") for key in catalog)]
        if missing:
            out[lang] = missing
    return out
