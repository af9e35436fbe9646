"""Every page (placeholder or lesson) runs without an exception, in every language, with
the default prompt, an empty one, a very long one, odd Unicode, and malformed URL values.

Generic over ui.nav.PAGES, so lesson pages are covered as soon as they land.
"""

from __future__ import annotations

import pytest

from ui import i18n, nav, theme
from tests._apptest import charts, errors, text_of
from tests.test_typography import problems

pytestmark = pytest.mark.slow

LANGS = list(i18n.LANGS)
MODELS = ["smollm2-135m", "gemma-3-270m"]
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
BAD_LANG = "klingon"
BAD_PARAMS = {
    "layer": "999", "head": "-5", "pos": "abc", "top": "1e9", "temperature": "nan",
    "top_k": "-1", "top_p": "2", "seed": "x", "mode": "<script>", "step": "99999", "neuron": "huge",
    "token": "", "steps": "inf", "unknown": "1", "model": "gpt-5",
}


def url_value(at, key: str) -> str | None:
    """The app's URL parameter after the run (AppTest keeps a str or a list of them)."""
    value = at.query_params.get(key)
    return value[-1] if isinstance(value, list) else value


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("page", nav.PAGES)
def test_page_runs_in_every_language(open_page, page, lang, model):
    at = open_page(page, lang=lang, model=model)
    assert not errors(at)
    assert at.title[0].value == i18n.catalog(lang)[f"nav.{page}"]
    # The course template keeps plotly_white's defaults only for the trace types it names.
    assert {trace["type"] for chart in charts(at).values() for trace in chart["data"]} <= set(theme.DRAWN_TRACES)
    if lang != "en":   # what the page wrote in code (lists, joined sentences) follows Chinese typography too
        bad = problems(text_of(at), lang)
        assert not bad, "\n".join(bad)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("case", list(PROMPTS))
@pytest.mark.parametrize("page", nav.PAGES)
def test_page_survives_odd_prompts(open_page, page, case, model):
    lang = {"odd": "zh-Hant", "chinese": "zh-Hant", "repeated": "zh-Hans"}.get(case, "en")
    at = open_page(page, lang=lang, prompt=PROMPTS[case], model=model)
    assert not errors(at)
    assert at.title[0].value == i18n.catalog(lang)[f"nav.{page}"]


@pytest.mark.parametrize("page", nav.PAGES)
def test_page_survives_bad_url_values(open_page, page):
    at = open_page(page, lang=BAD_LANG, params=BAD_PARAMS)
    assert not errors(at)
    assert url_value(at, "lang") == "en"
    assert url_value(at, "model") == "smollm2-135m", "a bad model falls back to the default"
