"""Follow the teacher, in AppTest: a teacher's session starts a class, students' sessions join
by link or code and follow the page, prompt, model and URL-bound controls, each keeping their
language; a student cannot change the class; bad, ended and expired codes get a clear message;
"Stop following" / "Follow again".

AppTest runs no timers, so a student's poll (a fragment with run_every=1 in the browser) is
what each ``student.run()`` does here; tests/browser/test_follow.py checks the timing in Chromium.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from classroom import follow, limits
from classroom import link as class_link
from classroom import store as class_store
from course import i18n, nav
from tests.conftest import APP, APP_TIMEOUT

pytestmark = pytest.mark.page

PROMPT = "Follow me: the cat sat on the mat."


@pytest.fixture(autouse=True)
def fresh_store():
    """Every test gets its own in-process store (and the default one back afterwards)."""
    store = class_store.MemoryStore()
    class_store.reset_store(store)
    yield store
    class_store.reset_store()


@pytest.fixture(autouse=True)
def fresh_limits(monkeypatch):
    """Every test counts wrong codes and new classes from zero."""
    for name, (limit, window) in {"join_fails_session": (limits.JOIN_FAILS, limits.JOIN_WINDOW_S),
                                  "join_fails_address": (limits.JOIN_FAILS_PER_ADDRESS, limits.JOIN_WINDOW_S),
                                  "creates": (limits.CREATES, limits.CREATE_WINDOW_S)}.items():
        monkeypatch.setattr(limits, name, limits.Limiter(limit, window))


def new_session(warm_app, lang: str = "en", **params):
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_file(str(APP), default_timeout=APP_TIMEOUT)
    at.query_params["lang"] = lang
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


def no_errors(at):
    assert not at.exception, [e.value for e in at.exception]


def warnings(at) -> str:
    return "\n".join(w.value for w in at.warning)


def markdown(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def on_page(at) -> str:
    """The page id a session shows, read from its title."""
    titles = {i18n.catalog(lang)[f"nav.{p}"]: p for lang in i18n.LANGS for p in nav.PAGES}
    return titles[at.title[0].value]


def start_class(teacher) -> tuple[str, str]:
    teacher.button(key="class_start").click().run()
    no_errors(teacher)
    teach = teacher.session_state["_class_teach"]
    return teach["code"], teach["secret"]


def test_teacher_starts_a_class_and_a_student_follows_by_link(warm_app, fresh_store):
    teacher = new_session(warm_app, "en", prompt=PROMPT)
    code, secret = start_class(teacher)
    assert class_store.normalize_code(code) == code
    assert f"`{code}`" in markdown(teacher)
    assert any(f"?class={code}" in c.value for c in teacher.code)    # the join link
    qr = [c for image in teacher.get("image") for c in image.captions]
    assert i18n.catalog("en")["classroom.qr_caption"] in qr, "no QR code drawn"
    assert "class" not in teacher.query_params and secret not in str(dict(teacher.query_params))

    teacher.switch_page(nav.page_file("attention"))
    teacher.query_params["layer"] = "2"
    teacher.query_params["head"] = "1"
    teacher.run()
    no_errors(teacher)
    view = fresh_store.view(code)
    assert view.page == "attention"
    assert view.params["layer"] == "2" and view.params["head"] == "1" and view.params["prompt"] == PROMPT
    assert view.params["model"] == "smollm2-135m" and "lang" not in view.params

    # A Chinese student starts on Gemma, on home; joining moves them to the teacher's view.
    student = new_session(warm_app, "zh-Hans", **{"class": code.lower()})
    no_errors(student)
    assert on_page(student) == "attention"
    assert student.session_state["_lang"] == "zh-Hans"
    assert student.session_state["_model"] == "smollm2-135m"
    assert student.session_state["_url.prompt"] == PROMPT
    assert (student.session_state["_url.layer"], student.session_state["_url.head"]) == (2, 1)
    assert student.query_params["lang"] == "zh-Hans" and student.query_params["class"] == code
    assert i18n.catalog("zh-Hans")["classroom.following"].split("{")[0] in markdown(student)

    teacher.run()
    assert "**1**" in markdown(teacher)        # "1 student follows"


def test_student_follows_prompt_page_and_controls(warm_app, fresh_store):
    teacher = new_session(warm_app, "en")
    code, _ = start_class(teacher)
    student = new_session(warm_app, "zh-Hant")
    student.text_input(key="class_code_input").input(f" {code[:3]}-{code[3:]} ")
    student.button(key="class_join").click().run()
    no_errors(student)
    assert on_page(student) == "home" and student.session_state["_class_join"]["following"]

    # The prompt.
    teacher.text_area(key="prompt").input(PROMPT).run()
    student.run()
    no_errors(student)
    assert student.session_state["_url.prompt"] == PROMPT

    # The page and a control (the temperature on sampling), then the model.
    teacher.switch_page(nav.page_file("sampling"))
    teacher.query_params["temperature"] = "1.5"
    teacher.run()
    no_errors(teacher)
    student.run()
    no_errors(student)
    assert on_page(student) == "sampling"
    assert student.session_state["_url.temperature"] == 1.5

    teacher.slider(key="temperature").set_value(0.4).run()
    assert fresh_store.view(code).params["temperature"] == "0.4"
    student.run()
    assert student.session_state["_url.temperature"] == 0.4

    teacher.selectbox(key="model_choice").set_value("gemma-3-270m").run()
    no_errors(teacher)
    student.run()
    no_errors(student)
    assert student.session_state["_model"] == "gemma-3-270m" and on_page(student) == "sampling"
    assert student.session_state["_lang"] == "zh-Hant"

    # The student moves a control of their own; at the teacher's next change the student's view
    # is the teacher's again, and the teacher left that control at its default.
    student.slider(key="top_k").set_value(5).run()
    assert student.query_params["top_k"] == "5"
    teacher.slider(key="temperature").set_value(0.8).run()
    student.run()
    no_errors(student)
    assert student.session_state["_url.temperature"] == 0.8
    assert student.session_state["_url.top_k"] == 0 and "top_k" not in student.query_params

    # The generation step, a control the teacher moves one step at a time.
    teacher.switch_page(nav.page_file("generation"))
    teacher.query_params["step"] = "2"
    teacher.run()
    no_errors(teacher)
    student.run()
    no_errors(student)
    assert on_page(student) == "generation" and student.session_state["_url.step"] == 2


def class_on_tokens(warm_app, store):
    """A teacher who started a class and went to the tokens page: (code, secret, view version)."""
    teacher = new_session(warm_app, "en")
    code, secret = start_class(teacher)
    teacher.switch_page(nav.page_file("tokens")).run()
    return code, secret, store.view(code).version


def test_a_student_cannot_change_the_class(warm_app, fresh_store):
    code, secret, version = class_on_tokens(warm_app, fresh_store)
    student = new_session(warm_app, "en", **{"class": code})
    assert on_page(student) == "tokens"
    # The student's own changes stay theirs: the class's view does not move.
    student.text_area(key="prompt").input("The student's own prompt").run()
    student.switch_page(nav.page_file("attention")).run()
    no_errors(student)
    assert fresh_store.view(code).version == version and fresh_store.view(code).page == "tokens"
    # Nothing of the teacher's secret reaches a student: not in their session, not in their URL,
    # no "End the class" button; the code alone cannot publish or end the class.
    assert "_class_teach" not in student.session_state
    assert all(secret not in str(student.session_state[k]) for k in student.session_state)
    assert secret not in str(dict(student.query_params))
    assert not [b for b in student.button if b.key == "class_end"]
    with pytest.raises(class_store.NotTeacher):
        fresh_store.publish(code, code, "home", {})
    with pytest.raises(class_store.NotTeacher):
        fresh_store.end(code, "")
    # A second student on the same class still sees the teacher's page.
    other = new_session(warm_app, "en", **{"class": code})
    assert on_page(other) == "tokens"


def test_a_run_on_another_page_is_brought_back_at_once(warm_app, fresh_store):
    """A follower's run that lands on another page than the class's, with no newer view (in
    the browser: a page switch that the fragment timer's rerun turned back into a run of the
    old page, or the student's own click), switches to the class's page in that same run,
    before the other page draws; the run's page is read from the run, not from bookkeeping."""
    code, _, version = class_on_tokens(warm_app, fresh_store)
    student = new_session(warm_app, "zh-Hans", **{"class": code})
    assert on_page(student) == "tokens"
    assert student.session_state["_class_join"]["seen"] == version
    student.switch_page(nav.page_file("attention")).run()
    no_errors(student)
    assert on_page(student) == "tokens" and student.session_state["_lang"] == "zh-Hans"
    assert i18n.catalog("zh-Hans")["classroom.pulled_back"][:12] in warnings(student), "told why they are back"
    assert fresh_store.view(code).version == version
    # Stepped out, the same run stays where the student went.
    student.button(key="class_stop").click().run()
    student.switch_page(nav.page_file("attention")).run()
    no_errors(student)
    assert on_page(student) == "attention"


@pytest.mark.parametrize("lang", ["en", "zh-Hant", "zh-Hans"])
def test_bad_and_unknown_codes_get_a_clear_message(warm_app, lang):
    catalog = i18n.catalog(lang)
    student = new_session(warm_app, lang, **{"class": "<b>nope</b>"})
    no_errors(student)
    assert catalog["classroom.bad_code"].split("{code}")[1][:8] in warnings(student)
    assert "<b>" not in warnings(student) or "`<b>nope</b>`" in warnings(student)
    assert "_class_join" not in student.session_state
    student.text_input(key="class_code_input").input("ABC234")
    student.button(key="class_join").click().run()
    no_errors(student)
    assert catalog["classroom.not_found"].split("{code}")[1][:8] in warnings(student)
    assert "_class_join" not in student.session_state
    student.text_input(key="class_code_input").input("12")
    student.button(key="class_join").click().run()
    assert catalog["classroom.bad_code"].split("{code}")[1][:8] in warnings(student)


def test_expired_and_ended_classes(warm_app):
    now = [1000.0]
    store = class_store.MemoryStore(idle_ttl_s=3600, clock=lambda: now[0])
    class_store.reset_store(store)
    teacher = new_session(warm_app, "en")
    code, _ = start_class(teacher)
    student = new_session(warm_app, "en", **{"class": code})
    assert student.session_state["_class_join"]["code"] == code
    now[0] += 3601                                   # idle for over an hour (the test's TTL)
    student.run()
    no_errors(student)
    assert i18n.catalog("en")["classroom.ended"].split("{code}")[1][:10] in warnings(student)
    assert "_class_join" not in student.session_state
    late = new_session(warm_app, "en", **{"class": code})   # the old link
    assert i18n.catalog("en")["classroom.not_found"].split("{code}")[1][:10] in warnings(late)
    teacher.run()
    no_errors(teacher)
    assert "_class_teach" not in teacher.session_state
    assert i18n.catalog("en")["classroom.expired_teacher"].split("{code}")[1][:10] in warnings(teacher)

    # The teacher ends a class: its followers are told and keep their page.
    code, _ = start_class(teacher)
    teacher.switch_page(nav.page_file("tokens")).run()
    student = new_session(warm_app, "en", **{"class": code})
    assert on_page(student) == "tokens"
    teacher.button(key="class_end").click().run()
    assert store.get(code) is None and "_class_teach" not in teacher.session_state
    student.run()
    assert on_page(student) == "tokens"
    assert i18n.catalog("en")["classroom.ended"].split("{code}")[1][:10] in warnings(student)


def test_stop_following_and_follow_again(warm_app, fresh_store):
    teacher = new_session(warm_app, "en")
    code, _ = start_class(teacher)
    student = new_session(warm_app, "en", **{"class": code})
    teacher.run()
    assert "**1**" in markdown(teacher)
    student.button(key="class_stop").click().run()
    no_errors(student)
    assert not student.session_state["_class_join"]["following"]
    assert fresh_store.followers(code) == 0
    teacher.switch_page(nav.page_file("tokens")).run()
    assert i18n.catalog("en")["classroom.followers_none"] in markdown(teacher)
    student.switch_page(nav.page_file("embeddings")).run()       # exploring on their own
    student.run()
    assert on_page(student) == "embeddings"
    student.button(key="class_again").click().run()
    no_errors(student)
    assert on_page(student) == "tokens" and student.session_state["_class_join"]["following"]
    assert fresh_store.followers(code) == 1
    student.button(key="class_leave").click().run()
    assert "_class_join" not in student.session_state and "class" not in student.query_params


def test_the_join_link_is_the_home_page_whatever_page_the_teacher_is_on(warm_app, fresh_store):
    teacher = new_session(warm_app, "en")
    code, _ = start_class(teacher)
    teacher.switch_page(nav.page_file("attention")).run()
    links = [c.value for c in teacher.code if f"?class={code}" in c.value]
    assert len(links) == 1 and links[0].endswith(f"/?class={code}") and "attention" not in links[0], links
    # The app listens on every interface here (no server.address): never a loopback link when
    # this machine has a network address, else the warning with the fix.
    host = urlsplit(links[0]).hostname
    if class_link.network_address() is not None:
        assert not class_link.is_loopback(host), links[0]
    else:
        assert i18n.catalog("en")["classroom.link_no_network"][:30] in warnings(teacher)


def html_of(at) -> str:
    return "\n".join(e.value for e in at.get("html"))


def test_the_teacher_takes_the_class_back_after_a_reload(warm_app, fresh_store, monkeypatch):
    """A reload, a new tab or a laptop that slept is a new session: the teacher's browser sends
    the cookie its class start set (the real cookie: tests/browser/test_follow.py), and the new
    session teaches the class again, with a note. A wrong secret or an ended class takes nothing."""
    teacher = new_session(warm_app, "en", prompt=PROMPT)
    code, secret = start_class(teacher)
    assert f"{follow.TEACH_COOKIE}={code}.{secret}" in html_of(teacher), "the cookie is set in the teacher's browser"
    student = new_session(warm_app, "en", **{"class": code})
    assert follow.TEACH_COOKIE not in html_of(student)

    sent = {"value": f"{code}.{secret}"}
    monkeypatch.setattr(follow, "_cookie", lambda: sent["value"])
    again = new_session(warm_app, "zh-Hant")
    no_errors(again)
    assert again.session_state["_class_teach"] == {"code": code, "secret": secret}
    assert i18n.catalog("zh-Hant")["classroom.resumed"].split("{code}")[0] in warnings(again)
    again.switch_page(nav.page_file("attention")).run()
    assert fresh_store.view(code).page == "attention", "the resumed session changes the class"
    student.run()
    assert on_page(student) == "attention"

    sent["value"] = f"{code}.not-the-secret"                  # someone else's browser with a forged cookie
    forged = new_session(warm_app, "en")
    assert "_class_teach" not in forged.session_state
    assert f"{follow.TEACH_COOKIE}=;" in html_of(forged), "a cookie that does not resume is forgotten"
    assert fresh_store.view(code).page == "attention"

    again.button(key="class_end").click().run()
    assert f"{follow.TEACH_COOKIE}=;" in html_of(again), "ending the class forgets the cookie"
    sent["value"] = f"{code}.{secret}"
    late = new_session(warm_app, "en")
    assert "_class_teach" not in late.session_state
    assert i18n.catalog("en")["classroom.expired_teacher"].split("{code}")[1][:12] in warnings(late)


def test_students_are_told_when_the_teacher_is_away_and_an_abandoned_class_ends(warm_app):
    now = [1000.0]
    store = class_store.MemoryStore(clock=lambda: now[0])
    class_store.reset_store(store)
    teacher = new_session(warm_app, "en")
    code, _ = start_class(teacher)
    student = new_session(warm_app, "zh-Hans", **{"class": code})
    captions = lambda: "\n".join(c.value for c in student.caption)      # noqa: E731
    assert i18n.catalog("zh-Hans")["classroom.teacher_away"].split("{n}")[1] not in captions()
    now[0] += 150                                         # the teacher's laptop sleeps
    student.run()
    assert i18n.catalog("zh-Hans")["classroom.teacher_away"].format(n=2) in captions()
    teacher.run()                                         # back: the teacher's run checks in
    student.run()
    assert i18n.catalog("zh-Hans")["classroom.teacher_away"].split("{n}")[1] not in captions()
    now[0] += class_store.IDLE_TTL_S                      # away half an hour: the class ends
    student.run()
    no_errors(student)
    assert "_class_join" not in student.session_state
    assert i18n.catalog("zh-Hans")["classroom.ended"].split("{code}")[1][:8] in warnings(student)


def test_a_session_guessing_codes_is_stopped_and_a_session_starting_classes_too(warm_app, fresh_store, monkeypatch):
    student = new_session(warm_app, "en")
    for i in range(limits.JOIN_FAILS):
        student.text_input(key="class_code_input").input(f"ABC{i:03d}".replace("0", "2").replace("1", "3"))
        student.button(key="class_join").click().run()
        assert i18n.catalog("en")["classroom.not_found"].split("{code}")[1][:10] in warnings(student)
    code, _ = fresh_store.create()
    student.text_input(key="class_code_input").input(code)
    student.button(key="class_join").click().run()
    no_errors(student)
    assert "_class_join" not in student.session_state, "even the right code waits for the window"
    assert i18n.catalog("en")["classroom.too_many_tries"][:20] in warnings(student)
    assert "_class_join" in new_session(warm_app, "en", **{"class": code}).session_state, "others are not blocked"

    monkeypatch.setattr(limits, "creates", limits.Limiter(3, limits.CREATE_WINDOW_S))   # 3, not 20: quicker
    teacher = new_session(warm_app, "en")
    for _ in range(3):
        start_class(teacher)
        teacher.button(key="class_end").click().run()
    teacher.button(key="class_start").click().run()
    assert "_class_teach" not in teacher.session_state
    assert i18n.catalog("en")["classroom.too_many_classes"][:20] in warnings(teacher)


def test_the_teachers_section_reaches_the_followers(warm_app, fresh_store):
    """A presenting teacher jumps to a section (the header's list): the section is part of the
    class's view in the store (``section``, with page, prompt, model), and a follower opens it:
    their run claims it and scrolls their browser there (classroom/presenter.py)."""
    from classroom import presenter
    teacher = new_session(warm_app, "en", present="1")
    code, _ = start_class(teacher)
    teacher.switch_page(nav.page_file("attention")).run()
    no_errors(teacher)
    student = new_session(warm_app, "zh-Hant", **{"class": code})
    assert on_page(student) == "attention" and student.query_params.get("section") is None

    teacher.selectbox(key=presenter.PICK).select("scale").run()
    no_errors(teacher)
    view = fresh_store.view(code)
    assert view.page == "attention" and view.params["section"] == "scale"
    student.run()
    no_errors(student)
    assert on_page(student) == "attention" and student.session_state["_lang"] == "zh-Hant"
    assert student.session_state["_url.section"] == ("attention", "scale")
    assert student.query_params["section"] in ("scale", ["scale"])
    assert 'const id = "section-scale"' in html_of(student)           # the student's browser is taken there
    assert "present" not in student.query_params                     # the student's own layout stays

    # The teacher moves on: the next page starts at its top, for the class too.
    teacher.button(key="present_next").click().run()
    assert "section" not in fresh_store.view(code).params
    student.run()
    no_errors(student)
    assert on_page(student) == "heads" and "section" not in student.query_params
    assert 'const id = "section-' not in html_of(student)


def test_a_followed_view_is_computed_once_for_all_its_followers(fresh_store, monkeypatch):
    """Three students, one per language, follow a teacher onto a view no one has opened: the
    teacher's run computes it (one forward pass, the temperature numbers once), the followers'
    runs find it all in the shared caches: no forward pass and no temperature sweep of their
    own. The lesson's per-language parts (the Try-this lines, the weather table) are warm, as the server's warm-up
    leaves them."""
    from course import cache
    from lesson_model.analysis import sampling_demo as sd
    from server.models import run_cache, shelf

    for lang in i18n.LANGS:
        cache.warm("sampling", shelf("smollm2-135m"), lang)
    sweeps = []
    real_sweep = sd.temperature_sweep
    monkeypatch.setattr(sd, "temperature_sweep", lambda *a, **k: sweeps.append(1) or real_sweep(*a, **k))
    calls: list[str] = []            # the view's other numbers: the logits' histogram, the settings' view, the draws
    for name in ("logit_histogram", "distribution_view", "sample_histogram"):
        real = getattr(sd, name)
        monkeypatch.setattr(sd, name, lambda *a, _real=real, _name=name, **k: calls.append(_name) or _real(*a, **k))
    teacher = new_session(None, "en", model="smollm2-135m")
    code, _ = start_class(teacher)
    teacher.switch_page(nav.page_file("sampling"))
    teacher.run()
    before, sweeps[:], calls[:] = run_cache().computed, [], []
    teacher.text_area(key="prompt").input(f"{PROMPT} Once for the class {code}.").run()
    no_errors(teacher)
    assert run_cache().computed == before + 1 and len(sweeps) == 1, "the teacher's run computes the new view"
    assert sorted(calls) == ["distribution_view", "logit_histogram", "sample_histogram"], calls

    students = [new_session(None, lang, **{"class": code}) for lang in i18n.LANGS]
    for student in students:
        no_errors(student)
        assert on_page(student) == "sampling"
        assert student.session_state["_url.prompt"] == teacher.session_state["_url.prompt"]
    assert run_cache().computed == before + 1, "a follower ran the model again"
    assert len(sweeps) == 1, "a follower computed the temperature numbers again"
    assert len(calls) == 3, f"a follower computed the view's numbers again: {calls}"
    # The teacher moves the temperature: only what depends on it is computed, once for the class.
    calls[:] = []
    teacher.slider(key="temperature").set_value(0.6).run()
    no_errors(teacher)
    assert sorted(calls) == ["distribution_view", "sample_histogram"], calls
    for student in students:
        student.run()                                       # the follow poll's tick
        no_errors(student)
        assert student.session_state["_url.temperature"] == teacher.session_state["_url.temperature"]
    assert sorted(calls) == ["distribution_view", "sample_histogram"], f"a follower computed it again: {calls}"
    assert len(sweeps) == 1 and run_cache().computed == before + 1
