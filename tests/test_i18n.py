"""Every string and lesson section exists, non-empty, in all three languages; code only
uses keys that exist; no user-facing text is written into the code."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from course import i18n, nav

ROOT = Path(__file__).resolve().parent.parent
LANGS = list(i18n.LANGS)
CODE_FILES = [ROOT / "app.py", *sorted(p for folder in ("course", "classroom", "server") for p in (ROOT / folder).rglob("*.py")),
              *sorted((ROOT / "app_pages").glob("*.py"))]


def catalog_files() -> list[str]:
    """Catalog names, relative to assets/i18n/<lang>: "" for the app catalog, else the page."""
    names = {""}
    for lang in LANGS:
        names |= {p.stem for p in (i18n.ASSETS / "i18n" / lang).glob("*.json")}
    return sorted(names)


def lesson_files() -> list[str]:
    return sorted({p.stem for lang in LANGS for p in (i18n.ASSETS / "lessons" / lang).glob("*.md")})


def load_catalog(name: str, lang: str) -> dict[str, str]:
    path = i18n.ASSETS / "i18n" / (f"{lang}.json" if not name else f"{lang}/{name}.json")
    assert path.exists(), f"missing catalog {path.relative_to(ROOT)}"
    return i18n._flatten(json.loads(path.read_text("utf-8")))


@pytest.mark.parametrize("name", catalog_files())
def test_catalog_complete(name):
    tables = {lang: load_catalog(name, lang) for lang in LANGS}
    keys = set().union(*tables.values())
    for lang, table in tables.items():
        missing = sorted(keys - table.keys())
        assert not missing, f"{lang} {name or 'app'} catalog lacks {missing}"
        for key, text in table.items():
            assert isinstance(text, str) and text.strip(), f"{lang}: {name}.{key} is empty or not a string"
            assert i18n.placeholders(text) == i18n.placeholders(tables["en"][key]), \
                f"{lang}: {name}.{key} placeholders {i18n.placeholders(text)} differ from English"


@pytest.mark.parametrize("name", lesson_files())
def test_lesson_sections_complete(name):
    sections = {lang: i18n.lesson_sections(name, lang) for lang in LANGS}
    ids = set().union(*sections.values())
    assert ids, f"{name}.md has no '## section' headings"
    for lang, found in sections.items():
        assert (i18n.ASSETS / "lessons" / lang / f"{name}.md").exists(), f"missing lessons/{lang}/{name}.md"
        missing = sorted(ids - found.keys())
        assert not missing, f"lessons/{lang}/{name}.md lacks sections {missing}"
        empty = sorted(s for s, text in found.items() if not text.strip())
        assert not empty, f"lessons/{lang}/{name}.md has empty sections {empty}"


def test_catalogs_merge_without_clashes():
    for lang in LANGS:
        i18n.catalog.cache_clear()
        i18n.catalog(lang)


@pytest.mark.parametrize("page", nav.PAGES)
def test_every_page_has_titles(page):
    for lang in LANGS:
        table = i18n.catalog(lang)
        assert table.get(f"nav.{page}") and table.get(f"about.{page}")


# --- the code against the catalogs ---------------------------------------------------------

_T_CALL = re.compile(r"""(?<![\w.])t\(\s*["']([^"'{}]+)["']""")
_PAGE_T_CALL = re.compile(r"""\bpage\.t\(\s*["']([^"'{}]+)["']""")
_SECTION_CALL = re.compile(r"""\bpage\.(?:section|prose)\(\s*["']([^"']+)["']""")
_LESSON = re.compile(r"""\bLesson\(\s*["']([^"']+)["']""")


@pytest.mark.parametrize("path", CODE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_code_uses_existing_keys(path):
    source = path.read_text("utf-8")
    english = i18n.catalog("en")
    # t(...) is the catalog's t where the module imports it; elsewhere (course/cache) "t" may be a
    # lesson's own translator handed in, whose keys are the lesson's.
    catalog_t = re.search(r"^from course\.i18n import .*\bt\b", source, re.M) or path.name == "app.py"
    for key in _T_CALL.findall(source) if catalog_t else ():
        assert key in english, f"{path.name}: t({key!r}) is not in the English catalog"
    lesson = _LESSON.search(source) if path.parent.name == "app_pages" else None
    if lesson:
        page = lesson.group(1)
        for key in _PAGE_T_CALL.findall(source):
            assert f"{page}.{key}" in english, f"{path.name}: page.t({key!r}) is not in assets/i18n/en/{page}.json"
        sections = i18n.lesson_sections(page, "en")
        for section_id in {"intro", *_SECTION_CALL.findall(source)} | ({"math"} if "page.math(" in source else set()):
            assert section_id in sections, f"{path.name}: section {section_id!r} missing in lessons/en/{page}.md"


# Streamlit calls whose text reaches the learner: the first argument and these keywords.
_UI_CALLS = {
    "title", "header", "subheader", "markdown", "write", "caption", "text", "info", "warning", "error",
    "success", "toast", "button", "page_link", "selectbox", "slider", "select_slider", "radio",
    "text_input", "text_area", "number_input", "toggle", "checkbox", "metric", "expander", "popover",
    "spinner", "multiselect", "segmented_control", "pills", "download_button", "form_submit_button",
    "set_page_config", "Page", "tabs",
}
_UI_KEYWORDS = {"label", "help", "placeholder", "page_title", "title", "caption", "name"}
_NOT_ON_SCREEN = {"Thread", "ThreadPoolExecutor"}      # a thread's name is for the server's log and debugger
_LOGGERS = {"log", "logger", "logging"}                 # log.warning(...): the operator's log, not the screen
_LETTER = re.compile(r"[^\W\d_]")


def _literal_text(node: ast.AST) -> str:
    """The literal characters of a string or f-string argument ('' for anything else)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant))
    return ""


@pytest.mark.parametrize("path", CODE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_hardcoded_user_text(path):
    """Text on screen comes from the catalogs: no letters in literal labels of UI calls
    (plotly titles and trace names included)."""
    tree = ast.parse(path.read_text("utf-8"))
    offenders = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in _NOT_ON_SCREEN or (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                                      and func.value.id in _LOGGERS):
            continue
        texts = [(kw.arg, kw.value) for kw in node.keywords if kw.arg in _UI_KEYWORDS]
        if name in _UI_CALLS and node.args:
            texts.append(("arg0", node.args[0]))
        for where, value in texts:
            if _LETTER.search(_literal_text(value)):
                offenders.append(f"line {node.lineno}: {name}({where}={_literal_text(value)!r})")
    assert not offenders, f"{path.name}: user-facing text outside the catalogs: {offenders}"
