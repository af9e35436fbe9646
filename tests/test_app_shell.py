"""The shell in AppTest: language choice, the shared prompt in the URL, URL-bound controls
with notes, the home lesson's demo, escaping, and a missing model package."""

from __future__ import annotations

import json

import pytest

from ui import i18n

pytestmark = pytest.mark.slow

XSS = "<img src=x onerror=alert(1)>"


def url_value(at, key):
    """The app's URL parameter after the last run (None when absent)."""
    value = at.query_params.get(key)
    return value[-1] if isinstance(value, list) else value


def chart(at, key: str) -> dict:
    """The plotly JSON of the chart drawn with ``key``."""
    return json.loads(next(c for c in at.get("plotly_chart") if c.key == key).proto.spec)


def texts(at) -> list[str]:
    return [m.value for m in at.markdown] + [w.value for w in at.warning] + [i.value for i in at.info]


@pytest.mark.parametrize("locale, lang", [("zh-TW", "zh-Hant"), ("zh-HK", "zh-Hant"), ("zh-CN", "zh-Hans"),
                                          ("en-US", "en"), ("de-DE", "en")])
def test_language_follows_browser_locale(open_page, locale, lang):
    at = open_page(lang=None, locale=locale)
    assert at.title[0].value == i18n.catalog(lang)["nav.home"]
    assert url_value(at, "lang") == lang


def test_url_language_beats_locale_and_bad_one_is_noted(open_page):
    at = open_page(lang="zh-Hans", locale="zh-TW")
    assert at.title[0].value == i18n.catalog("zh-Hans")["nav.home"]
    at = open_page(lang="xx", locale="zh-TW")
    assert at.title[0].value == i18n.catalog("zh-Hant")["nav.home"]
    assert any("lang=xx" in w.value for w in at.warning)
    assert url_value(at, "lang") == "zh-Hant"


def test_language_switch_in_sidebar(open_page):
    at = open_page(lang="en")
    at.selectbox(key="language").select("zh-Hant").run()
    assert not at.exception
    assert at.title[0].value == i18n.catalog("zh-Hant")["nav.home"]
    assert url_value(at, "lang") == "zh-Hant"


def test_default_prompt_follows_language_and_stays_out_of_url(open_page):
    at = open_page(lang="en")
    assert at.text_area(key="prompt").value == i18n.catalog("en")["prompt.default"]
    assert url_value(at, "prompt") is None


def test_prompt_from_url_is_used_and_kept(open_page):
    at = open_page(prompt="Hello there, general")
    assert at.text_area(key="prompt").value == "Hello there, general"
    assert url_value(at, "prompt") == "Hello there, general"
    assert any("`·there`" in text for text in texts(at))


def test_overlong_url_prompt_is_cut_with_a_note(open_page):
    at = open_page(prompt="word " * 1000)
    assert len(at.text_area(key="prompt").value) == 2000
    assert any("2000" in w.value for w in at.warning)
    assert any("256" in w.value for w in at.warning)          # the home page's token cap


def test_empty_prompt_shows_a_hint_and_examples(open_page):
    at = open_page(prompt="")
    assert not at.exception
    assert any(i.value == i18n.catalog("en")["lesson.empty_prompt"] for i in at.info)
    at.button(key="try_0").click().run()
    assert url_value(at, "prompt") == i18n.catalog("en")["home.try.1.prompt"]
    assert at.get("plotly_chart")


def test_typing_a_prompt_updates_url(open_page):
    at = open_page()
    at.text_area(key="prompt").input("Two plus two is").run()
    assert url_value(at, "prompt") == "Two plus two is"
    assert "`·two`" in " ".join(texts(at))


def test_sidebar_example_sets_prompt(open_page):
    at = open_page(lang="zh-Hans")
    at.button(key="example_1").click().run()
    assert url_value(at, "prompt") == i18n.catalog("zh-Hans")["prompt.example.1"]


@pytest.mark.parametrize("raw, shown, note", [("7", 7, None), ("99", 20, "top=99"), ("-4", 3, "top=-4"),
                                              ("abc", 10, "top=abc"), ("7.0", 7, None), ("7.5", 10, "top=7.5")])
def test_url_control_is_clamped_or_ignored_with_a_note(open_page, raw, shown, note):
    at = open_page(params={"top": raw})
    assert not at.exception
    assert at.slider(key="top").value == shown
    warnings = [w.value for w in at.warning]
    assert (note is None and not warnings) or any(note in w for w in warnings)
    assert url_value(at, "top") == (None if shown == 10 else str(shown))


def test_control_change_goes_to_url_and_default_leaves_it(open_page):
    at = open_page()
    at.slider(key="top").set_value(5).run()
    assert url_value(at, "top") == "5" and len(chart(at, "candidates_chart")["data"][0]["y"]) == 5
    at.slider(key="top").set_value(10).run()
    assert url_value(at, "top") is None


def test_append_candidate_extends_prompt(open_page, lm):
    at = open_page(prompt="The capital of France is")
    spec = chart(at, "candidates_chart")
    assert spec["data"][0]["orientation"] == "h" and len(spec["data"][0]["y"]) == 10
    at.button(key="append_0").click().run()
    new_prompt = url_value(at, "prompt")
    assert new_prompt.startswith("The capital of France is") and len(new_prompt) > len("The capital of France is")
    assert "\ufffd" not in new_prompt


def test_append_completes_a_split_character(open_page, lm):
    at = open_page(prompt="我喜歡")
    for n in range(5):
        at.button(key=f"append_{n}").click().run()
        assert "\ufffd" not in url_value(at, "prompt")
        at = open_page(prompt="我喜歡")


def test_other_pages_drop_params_they_do_not_use(open_page):
    at = open_page("tokens", params={"top": "5", "nonsense": "1"})
    assert url_value(at, "top") is None and url_value(at, "nonsense") is None
    assert url_value(at, "lang") == "en"


def test_prompt_and_language_survive_page_switches(open_page):
    at = open_page("tokens", lang="zh-Hans", prompt="Shared text")
    at.switch_page("app_pages/home.py").run()
    assert at.title[0].value == i18n.catalog("zh-Hans")["nav.home"]
    assert at.text_area(key="prompt").value == "Shared text"
    assert url_value(at, "prompt") == "Shared text" and url_value(at, "lang") == "zh-Hans"


def test_model_card_is_computed_from_the_model(open_page, lm):
    at = open_page()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Layers"] == "30" and metrics["KV heads"] == "3" and metrics["Vocabulary"] == "49,152"
    spec = chart(at, "param_chart")
    total = sum(trace["x"][0] for trace in spec["data"]) * 1e6
    assert total == pytest.approx(lm.param_counts()["total"], rel=1e-6)


def test_injected_html_prompt_is_shown_as_text(open_page):
    at = open_page(prompt=XSS)
    assert not at.exception
    for text in texts(at) + [b.label for b in at.button]:
        assert "<img" not in text or "`" in text or "\\<img" in text, text
    for chart in at.get("plotly_chart"):
        assert "<img" not in chart.proto.spec


def test_sessions_do_not_share_state(open_page):
    first = open_page(prompt="First student's text", lang="zh-Hant")
    second = open_page(prompt="Second student's text", lang="en")
    first.run()
    assert first.session_state["_lang"] == "zh-Hant" and second.session_state["_lang"] == "en"
    assert url_value(first, "prompt") == "First student's text"
    assert url_value(second, "prompt") == "Second student's text"


def test_missing_model_package_shows_install_command(open_page, monkeypatch):
    import lesson_model
    from ui import model

    def missing(*args, **kwargs):
        raise lesson_model.ModelNotInstalledError()

    monkeypatch.setattr(lesson_model, "load_model", missing)
    model._shared_model.clear()
    try:
        at = open_page(lang="zh-Hant")
        assert not at.exception
        assert any(e.value == i18n.catalog("zh-Hant")["model.missing"] for e in at.error)
        assert any(lesson_model.INSTALL_COMMAND in c.value for c in at.code)
    finally:
        model._shared_model.clear()
