"""The course map's counts (course/nav.py): eleven lessons, then two labs; every footer and
the presenter header count from nav.place, and home's prose names the same counts in every
language."""

from __future__ import annotations

import pytest

from course import i18n, nav

pytestmark = pytest.mark.unit

# How each language writes the counts home's "How long" line names (nav.LESSONS, nav.LABS).
NUMBER_WORDS = {
    "en": {11: "eleven lessons", 2: "two labs"},
    "zh-Hant": {11: "共十一課", 2: "兩個實驗室"},
    "zh-Hans": {11: "共十一课", 2: "两个实验室"},
}


def test_lessons_then_labs_cover_every_page_once():
    assert nav.LESSONS[0] == "tokens" and nav.LESSONS[-1] == "architecture"
    assert [nav.HOME, *nav.LESSONS, *nav.LABS] == nav.PAGES
    assert len(nav.LESSONS) == 11 and len(nav.LABS) == 2


def test_place_counts_lessons_and_labs_apart():
    assert nav.place(nav.HOME) is None and nav.place("nowhere") is None
    assert nav.place("tokens") == ("lesson", 1, 11)
    assert nav.place("attention") == ("lesson", 4, 11)
    assert nav.place("architecture") == ("lesson", 11, 11)
    assert nav.place("whatif") == ("lab", 1, 2)
    assert nav.place("train") == ("lab", 2, 2)
    assert [nav.place(p)[1] for p in nav.LESSONS] == list(range(1, len(nav.LESSONS) + 1))


@pytest.mark.parametrize("lang", list(i18n.LANGS))
def test_home_names_the_counts_of_the_course_map(lang):
    """Home's prose says how many lessons and labs there are: the words match nav's counts."""
    start = i18n.lesson_sections("home", lang)["start"]
    words = NUMBER_WORDS[lang]
    assert words[len(nav.LESSONS)] in start, start[:400]
    assert words[len(nav.LABS)] in start, start[:400]


@pytest.mark.parametrize("lang, lesson, lab", [("en", "Lesson 4 of 11", "Lab 2 of 2"),
                                               ("zh-Hant", "第 4 課，共 11 課", "第 2 個實驗室，共 2 個"),
                                               ("zh-Hans", "第 4 课，共 11 课", "第 2 个实验室，共 2 个")])
def test_progress_labels_in_three_languages(lang, lesson, lab):
    catalog = i18n.catalog(lang)
    kind, n, total = nav.place("attention")
    assert catalog[f"lesson.{'progress' if kind == 'lesson' else 'lab_progress'}"].format(n=n, total=total) == lesson
    kind, n, total = nav.place("train")
    assert catalog[f"lesson.{'progress' if kind == 'lesson' else 'lab_progress'}"].format(n=n, total=total) == lab

