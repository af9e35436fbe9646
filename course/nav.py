"""The course map: sections and pages in course order (docs/SYLLABUS.md), with fixed url_paths.

A page's url_path is also its id everywhere else: its file ``app_pages/<id>.py``, its catalog
``assets/i18n/<lang>/<id>.json`` (keys ``<id>.*``), its prose ``assets/lessons/<lang>/<id>.md``.
Titles come from the catalog keys ``nav.<id>`` and section names from ``nav.section.<name>``.
"""

from __future__ import annotations

HOME = "home"

SECTIONS: list[tuple[str, list[tuple[str, str]]]] = [
    ("start", [(HOME, ":material/home:")]),
    ("input", [
        ("tokens", ":material/text_fields:"),
        ("embeddings", ":material/scatter_plot:"),
        ("position", ":material/format_list_numbered:"),
    ]),
    ("block", [
        ("attention", ":material/visibility:"),
        ("heads", ":material/view_column:"),
        ("induction", ":material/repeat:"),
        ("ffn", ":material/hub:"),
        ("residual", ":material/add_road:"),
    ]),
    ("output", [
        ("sampling", ":material/casino:"),
        ("generation", ":material/autorenew:"),
    ]),
    ("lab", [
        ("architecture", ":material/account_tree:"),
        ("whatif", ":material/science:"),
        ("train", ":material/model_training:"),
    ]),
]

# Pages that run no bundled model (the training lab trains its own tiny one): the shell does not load one for them.
NO_MODEL = frozenset({"train"})

PAGES: list[str] = [page for _, pages in SECTIONS for page, _ in pages]
ICONS: dict[str, str] = {page: icon for _, pages in SECTIONS for page, icon in pages}

# The two labs close the course; every page between home and them is a lesson. Footers, the
# presenter header and home's "eleven lessons, then two labs" count from these
# (tests/test_nav.py checks home's prose against them in every language).
LABS: tuple[str, ...] = ("whatif", "train")
LESSONS: list[str] = [page for page in PAGES if page != HOME and page not in LABS]


def place(page: str) -> tuple[str, int, int] | None:
    """Where ``page`` sits in the course: ("lesson", n, len(LESSONS)) or ("lab", n, len(LABS)),
    counted from 1; None for home and for a page the course does not list."""
    if page in LESSONS:
        return "lesson", LESSONS.index(page) + 1, len(LESSONS)
    if page in LABS:
        return "lab", LABS.index(page) + 1, len(LABS)
    return None


def page_file(page: str) -> str:
    """Path of a page's script, relative to the repository root (where app.py is)."""
    return f"app_pages/{page}.py"
