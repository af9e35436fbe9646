"""Every page (placeholder or lesson) runs without an exception, in every language, with
the default prompt, an empty one, a very long one, odd Unicode, and malformed URL values.

Generic over course.nav.PAGES, so lesson pages are covered as soon as they land.
"""

from __future__ import annotations

import pytest

from course import i18n, nav, theme
from tests._apptest import MODELS, charts, error_boxes, errors, subheaders, text_of, url_value
from tests.test_typography import problems

LANGS = list(i18n.LANGS)
LONG = "The quick brown fox jumps over the lazy dog, and then it naps. " * 40      # > 2000 chars
ODD = ("🐱‍👤 naïve café — 貓咪喜歡魚 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 e\u0301 \u200b\t\n  <img src=x onerror=alert(1)> "
       "**bold** [link](http://x) $x^2$ :red[red] `code` \\ 😀👍🏽")
REPEATED = "red green blue yellow purple orange red green blue yellow purple orange"
CODE = "def add(a, b):\n    return a + b\n\nprint(add(2, 3))"
PROMPTS = {
    "empty": "", "long": LONG, "odd": ODD, "whitespace": " \n\t ",
    "one_token": "Hello", "one_char": "a", "special_only": "<|im_start|><|im_end|>",
    "gemma_special": "<bos><start_of_turn>user\n<end_of_turn><eos>",
    "repeated": REPEATED, "code": CODE, "chinese": "我吃魚，魚吃我。",
    "longest": ("The cat sat on the mat. " * 84)[:2000],   # exactly the longest prompt the course accepts
}
EMPTY = {"empty", "whitespace"}     # no text: the empty-prompt hint, and the lesson stops there (course/lesson.py)
NO_PROMPT = {"train"}               # reads no prompt; its "What to notice" needs a training run (app_pages/train.py)
BAD_LANG = "klingon"
BAD_PARAMS = {
    "layer": "999", "head": "-5", "pos": "abc", "top": "1e9", "temperature": "nan",
    "top_k": "-1", "top_p": "2", "seed": "x", "mode": "<script>", "step": "99999", "neuron": "huge",
    "token": "", "steps": "inf", "unknown": "1", "model": "gpt-5",
}


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("page", nav.PAGES)
def test_page_runs_in_every_language(open_page, page, lang, model):
    at = open_page(page, lang=lang, model=model)
    assert not errors(at)
    assert not error_boxes(at)
    assert at.title[0].value == i18n.catalog(lang)[f"nav.{page}"]
    if page not in NO_PROMPT:        # the language's default prompt: the lesson goes on to its end
        assert i18n.catalog(lang)["lesson.notice"] in subheaders(at)
    # The course template keeps plotly_white's defaults only for the trace types it names.
    assert {trace["type"] for chart in charts(at).values() for trace in chart["data"]} <= set(theme.DRAWN_TRACES)
    if lang != "en":   # what the page wrote in code (lists, joined sentences) follows Chinese typography too
        bad = problems(text_of(at), lang)
        assert not bad, "\n".join(bad)


def odd_prompt_cases() -> list[tuple[str, str, str]]:
    """Every (page, prompt) once, the model alternating along both: every page meets every
    prompt, and every page and every prompt meets both models (test_odd_prompt_cases_cover_every_pair),
    in half the runs of the full page x prompt x model product."""
    return [(page, case, MODELS[(i + j) % len(MODELS)])
            for i, page in enumerate(nav.PAGES) for j, case in enumerate(PROMPTS)]


@pytest.mark.parametrize("page,case,model", odd_prompt_cases())
def test_page_survives_odd_prompts(open_page, page, case, model):
    """Not only no exception: a lesson goes on to its end ("What to notice" comes after the
    figures) with no error box, and only an empty prompt stops it, with the hint."""
    lang = {"odd": "zh-Hant", "chinese": "zh-Hant", "repeated": "zh-Hans"}.get(case, "en")
    at = open_page(page, lang=lang, prompt=PROMPTS[case], model=model)
    assert not errors(at)
    assert not error_boxes(at)
    cat = i18n.catalog(lang)
    assert at.title[0].value == cat[f"nav.{page}"]
    hint = cat["lesson.empty_prompt"] in [i.value for i in at.info]
    if page in NO_PROMPT:
        assert not hint and cat["lesson.try"] in subheaders(at), "the lab runs to its Try this whatever the prompt"
    elif case in EMPTY:
        assert hint and cat["lesson.notice"] not in subheaders(at)
    else:
        assert not hint and cat["lesson.notice"] in subheaders(at), f"{page} stopped before {cat['lesson.notice']!r}"


def test_odd_prompt_cases_cover_every_pair():
    cases = odd_prompt_cases()
    assert {(page, case) for page, case, _ in cases} == {(page, case) for page in nav.PAGES for case in PROMPTS}
    assert len(cases) == len(nav.PAGES) * len(PROMPTS)
    assert {(page, model) for page, _, model in cases} == {(page, model) for page in nav.PAGES for model in MODELS}
    assert {(case, model) for _, case, model in cases} == {(case, model) for case in PROMPTS for model in MODELS}


@pytest.mark.parametrize("page", nav.PAGES)
def test_page_survives_bad_url_values(open_page, page):
    at = open_page(page, lang=BAD_LANG, params=BAD_PARAMS)
    assert not errors(at)
    assert url_value(at, "lang") == "en"
    assert url_value(at, "model") == "smollm2-135m", "a bad model falls back to the default"
