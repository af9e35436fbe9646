"""Follow the teacher: a teacher starts a class from the sidebar, students join by code or
link (``?class=CODE``) and see what the teacher shows, each in their own language.

- The teacher's session holds the class's secret (never in a URL); ``after_run`` publishes
  its view at the end of every run: the page, and every URL parameter of the run except
  ``lang`` (and ``class`` / ``present``, which describe the visitor, not the view), with the
  prompt and the model always included, and ``section`` when the teacher jumped to a part of
  the page (classroom/presenter.py: a follower's run scrolls there once). Only that session
  can change or end the class.
- A student's session polls in a fragment (``run_every=1``), its one timer: when the class's view has a
  newer version it opens it exactly as if the student had opened the teacher's link: the
  page's URL-bound controls forget their values (course.state.forget_values) and read the
  teacher's parameters, the prompt and the model are set, then ``st.switch_page`` (from the
  fragment run itself: one full run, of the teacher's page). The student keeps their
  language. "Stop following" leaves the view alone (and stops the
  heartbeat, so the teacher's count drops); "Follow again" applies the latest view at once.
  What else a follower's screen must keep up with (the class's question, classroom/poll.py)
  looks in on the same poll (``on_poll``) instead of a timer of its own: one poll a second
  per student, however many parts of the page follow the class.
- Which page a run is on is read from the run itself (``_run_page``), never from what an
  earlier run recorded: the browser's fragment timer keeps sending reruns with the page it
  knows, and Streamlit (1.67) folds such a rerun into a pending page switch keeping the
  newer request's page, or runs the fragment alone on the old page after the new one drew.
  So a follower's run (fragment or full) on another page than the class's is switched to
  the class's page at once; a full run does it before the page draws.
- The teacher can come back: starting a class keeps ``CODE.SECRET`` in a cookie of the teacher's
  browser (``TEACH_COOKIE``, same site only, for the browser session); a reload, a new tab or a
  laptop that slept opens a new Streamlit session, which reads the cookie and, if the store
  still knows that secret for that class, takes the class back with a note. Only the teacher's
  browser holds the secret; ending the class forgets the cookie. While the teacher's tab is
  open, its panel checks in (``store.touch``); students are told when the teacher has been away
  a minute or more, and the class ends after ``store.IDLE_TTL_S`` away.
- The join link is ``<base>/?class=CODE`` on every page, its base students can open
  (classroom/link.py: DECODER_LAB_PUBLIC_URL, else an address that is not loopback, else a
  warning with the fix).
- A published view's lesson is warmed in the background for the other languages and models
  (classroom/prewarm.py), so a follower in another language does not compute it in the follow.
- Limits (classroom/limits.py): wrong codes per session and per address, new classes per address.
- Classes live in classroom.store: in this process, or in Redis with DECODER_LAB_REDIS_URL.
"""

from __future__ import annotations

import json
import logging
import math
import os
import secrets
import sys
import time

import streamlit as st

from classroom import limits, prewarm
from classroom import link as class_link
from classroom import store as class_store
from classroom.qr import qr_data_uri
from course import i18n, nav, state
from course import model as models
from course.i18n import t
from course.text import code_span, shorten
from server import session

PARAM = class_link.PARAM
TEACH_COOKIE = "decoder_lab_teach"           # CODE.SECRET in the teacher's browser: a reload takes the class back
COOKIE_MAX_AGE_S = 12 * 3600
NOT_PUBLISHED = ("lang", PARAM, "present", "theme")   # the visitor's own settings, not the teacher's view
KEEP = (*state.SHELL_KEYS, PARAM, "present")  # canonical values a follow does not reset
FOLLOW_EVERY_S = 1                            # a student's poll; the view applies within about 2 s
COUNT_EVERY_S = 2                             # the teacher's follower count
HEARTBEAT_EVERY_S = 3                         # well inside class_store.HEARTBEAT_WINDOW_S

_TEACH = "_class_teach"    # teacher: {"code", "secret"}
_JOIN = "_class_join"      # student: {"code", "following", "seen", "fid", "beat"}
_NOTES = "_class_notes"    # messages for the next run: [(catalog key, code)]
_LINK = "_class_link"      # the ?class= value this session has already acted on
_INPUT = "class_code_input"
_TRIED = "_class_resume_tried"   # the cookie value this session already tried to resume with
_FORGET = "_class_forget"        # forget the teacher cookie in this run's output
_CLIENT = "_class_client"        # this session's id for the limits
_NETWORK: list = [0.0, None]     # [checked at, this machine's network address]
_ON_POLL: list = []              # fn(join) run at the end of every poll of a following student (on_poll)
log = logging.getLogger(__name__)


def on_poll(fn) -> None:
    """Run ``fn(join)`` at the end of every poll of a following student (once per fn): what
    must follow the class besides the view. It may ask for a fragment's rerun
    (server.session.rerun_fragment), and must not raise."""
    if fn not in _ON_POLL:
        _ON_POLL.append(fn)


def store() -> class_store.ClassStore:
    return class_store.store()


def _note(key: str, code: str = "") -> None:
    st.session_state.setdefault(_NOTES, []).append((key, code))


def teaching() -> dict | None:
    return st.session_state.get(_TEACH)


def joined() -> dict | None:
    return st.session_state.get(_JOIN)


def _network_address() -> str | None:
    """This machine's network address, looked up at most once a minute (a laptop changes networks)."""
    if time.monotonic() - _NETWORK[0] > 60 or _NETWORK[0] == 0.0:
        _NETWORK[:] = [time.monotonic(), class_link.network_address()]
    return _NETWORK[1]


def student_base() -> class_link.StudentBase:
    """Where students open this server (classroom/link.py), from the teacher's browser URL and
    the server's own options."""
    return class_link.student_base(public_url=os.environ.get(class_link.PUBLIC_URL_ENV), browser_url=st.context.url,
                                   listen_address=st.get_option("server.address"),
                                   port=st.get_option("server.port"), network=_network_address())


def _client() -> tuple[str, str | None]:
    """(this session's id, the client's network address or None) for the limits."""
    sid = st.session_state.setdefault(_CLIENT, secrets.token_hex(8))
    try:
        address = st.context.ip_address
    except (RuntimeError, AttributeError, KeyError):    # no run context (bare calls in tests)
        address = None
    return sid, address if isinstance(address, str) else None


# Teacher -------------------------------------------------------------------------------

def _start() -> None:
    sid, address = _client()
    key = address or sid
    if limits.creates.blocked(key):
        _note("classroom.too_many_classes")
        log.warning("class creation refused: %s started %d classes in the last hour", key, limits.CREATES)
        return
    try:
        code, secret = store().create()
    except class_store.StoreUnavailable:
        _note("classroom.store_down")
        return
    limits.creates.add(key)
    st.session_state[_TEACH] = {"code": code, "secret": secret}
    st.session_state[_TRIED] = f"{code}.{secret}"


def _end() -> None:
    teach = st.session_state.pop(_TEACH, None)
    st.session_state[_FORGET] = True
    if teach:
        try:
            store().end(teach["code"], teach["secret"])
        except class_store.ClassStoreError:
            pass          # already gone: ending it is what was asked


def view_params() -> dict[str, str]:
    """What this run shows, as a teacher's view: the run's URL parameters except the
    visitor's own ones, with the prompt and model always there."""
    params = {k: v for k, v in state.url_values().items() if k not in NOT_PUBLISHED}
    params["prompt"] = state.prompt()
    params["model"] = models.model_key()
    return params


def after_run(page_id: str | None) -> None:
    """Publish the teacher's view (app.py, at the end of every run, before state.sync_url).
    Does nothing for anyone else, and never raises."""
    if session.cut_short_by_rerun(sys.exc_info()[1]):
        return                        # a run cut short by a newer one: that one publishes
    join = joined()
    if join and join["following"]:
        _heartbeat(join)              # a long run has passed since the poll's heartbeat
    teach = teaching()
    if not teach:
        return
    page = page_id if page_id in nav.PAGES else nav.HOME
    try:
        store().publish(teach["code"], teach["secret"], page, view_params())
    except (class_store.ClassGone, class_store.NotTeacher):
        st.session_state.pop(_TEACH, None)
        _note("classroom.expired_teacher", teach["code"])
        return
    except class_store.StoreUnavailable:
        _note("classroom.store_down")
        return
    try:
        prewarm.warm_view(page, models.model_key(), i18n.current_lang())   # the followers' other languages
    except Exception:  # noqa: BLE001 - never in the teacher's way; a follower's run computes it
        log.exception("warming the class's view failed")


def _cookie() -> str | None:
    """The teacher cookie this browser sent with this session's connection, or None."""
    try:
        value = st.context.cookies.get(TEACH_COOKIE)
    except (RuntimeError, AttributeError, KeyError):    # no run context
        return None
    return value if isinstance(value, str) else None      # AppTest has no client cookies


def _resume() -> None:
    """A new session of the teacher's browser (reload, new tab, after a sleep) takes the class
    back when its cookie holds the class's secret; once per cookie value per session."""
    if teaching() or joined():
        return
    raw = _cookie()
    if not raw or st.session_state.get(_TRIED) == raw:
        return
    st.session_state[_TRIED] = raw
    code, _, secret = raw.partition(".")
    code = class_store.normalize_code(code)
    if code is None or not secret:
        st.session_state[_FORGET] = True
        return
    try:
        store().touch(code, secret)             # checks the secret, and the teacher is here again
    except (class_store.ClassGone, class_store.NotTeacher):
        st.session_state[_FORGET] = True
        _note("classroom.expired_teacher", code)
    except class_store.StoreUnavailable:
        st.session_state.pop(_TRIED, None)      # try again on the next run
        _note("classroom.store_down")
    else:
        st.session_state[_TEACH] = {"code": code, "secret": secret}
        _note("classroom.resumed", code)
        log.info("class %s resumed by its teacher in a new session", code)


def cookie_script(teach: dict | None, forget: bool) -> str | None:
    """The script that keeps (or forgets) the teacher cookie in the browser; None for nobody."""
    if teach:
        value = json.dumps(f"{TEACH_COOKIE}={teach['code']}.{teach['secret']}; path=/; max-age={COOKIE_MAX_AGE_S}; "
                           "samesite=strict")
    elif forget:
        value = json.dumps(f"{TEACH_COOKIE}=; path=/; max-age=0; samesite=strict")
    else:
        return None
    return ("<script>document.cookie = " + value
            + ' + (location.protocol === "https:" ? "; secure" : "");</script>')


def away_minutes(away_s: float) -> int | None:
    """Whole minutes the teacher has been away, to tell students (None under store.AWAY_S)."""
    if away_s < class_store.AWAY_S:
        return None
    return max(1, math.floor(away_s / 60))


def _heartbeat(join: dict) -> None:
    try:
        store().heartbeat(join["code"], join["fid"])
        join["beat"] = time.time()
    except class_store.ClassStoreError:
        pass                          # the next poll tells the student


def _follower_count(teach: dict) -> None:
    """The teacher's follower count, every COUNT_EVERY_S; and the teacher's check-in: their tab is open."""
    code = teach["code"]
    try:
        store().touch(code, teach["secret"])
    except class_store.StoreUnavailable:
        st.caption(t("classroom.store_down"))
        return
    except (class_store.ClassGone, class_store.NotTeacher):
        pass                              # the next full run tells the teacher
    try:
        n = store().followers(code)
    except class_store.StoreUnavailable:
        st.caption(t("classroom.store_down"))
        return
    key = "classroom.followers_none" if n == 0 else "classroom.followers_one" if n == 1 else "classroom.followers_many"
    st.markdown(t(key, n=n))


def _big_qr(url: str) -> None:
    """The join QR code large, in a dialog: to show on the projector."""
    def body():
        st.image(qr_data_uri(url, scale=16, border=3), width=560)
        st.code(url, language=None, wrap_lines=True)
    st.dialog(t("classroom.qr_title"), width="large")(body)()


def _teacher_panel(teach: dict) -> None:
    code = teach["code"]
    base = student_base()
    url = class_link.join_url(base.url, code)
    st.markdown(t("classroom.teaching", code=code_span(code)))
    st.caption(t("classroom.link"))
    st.code(url, language=None, wrap_lines=True)
    if base.warning:
        st.warning(t(base.warning, port=st.get_option("server.port")), icon=":material/wifi_off:")
    st.image(qr_data_uri(url), caption=t("classroom.qr_caption"), width=220)
    if st.button(t("classroom.qr_big"), key="class_qr_big", icon=":material/qr_code_2:", width="stretch"):
        _big_qr(url)
    st.fragment(_follower_count, run_every=COUNT_EVERY_S)(teach)
    st.button(t("classroom.end"), key="class_end", icon=":material/stop_circle:", width="stretch",
              on_click=_end, help=t("classroom.end_help"))


# Student -------------------------------------------------------------------------------

def _join(code: str) -> bool:
    """Join class ``code`` (already normalized) if it exists; notes why not."""
    teach = teaching()
    if teach and teach["code"] == code:
        return False                  # the teacher's own link in the teacher's session
    sid, address = _client()
    if limits.join_fails_session.blocked(sid) or limits.join_fails_address.blocked(address):
        _note("classroom.too_many_tries")
        return False
    try:
        info = store().get(code)
    except class_store.StoreUnavailable:
        _note("classroom.store_down")
        return False
    if info is None:
        limits.join_fails_session.add(sid)
        limits.join_fails_address.add(address)
        if limits.join_fails_session.blocked(sid) or limits.join_fails_address.blocked(address):
            log.warning("class joins paused for session %s (address %s): too many wrong codes", sid, address)
        _note("classroom.not_found", code)
        return False
    st.session_state[_JOIN] = {"code": code, "following": True, "seen": 0,
                               "fid": secrets.token_hex(8), "beat": 0.0}
    return True


def _join_typed() -> None:
    raw = st.session_state.get(_INPUT, "")
    code = class_store.normalize_code(raw)
    if code is None:
        _note("classroom.bad_code", shorten(raw.strip(), 20))
        return
    if _join(code):
        st.session_state[_INPUT] = ""


def _stop() -> None:
    join = joined()
    if join:
        join["following"] = False
        try:
            store().leave(join["code"], join["fid"])
        except class_store.ClassStoreError:
            pass


def _again() -> None:
    join = joined()
    if join:
        join["following"] = True
        join["seen"] = 0              # apply the latest view at once
        join["beat"] = 0.0


def _leave() -> None:
    _stop()
    st.session_state.pop(_JOIN, None)


def _page(page_id: str) -> str:
    return page_id if page_id in nav.PAGES else nav.HOME


def _apply(join: dict, view: class_store.View) -> None:
    """Open the teacher's view as if this student had opened the teacher's link (keeping
    their language); ends the run with st.switch_page."""
    params = dict(view.params)
    prompt = params.pop("prompt", None)
    model = params.pop("model", None)
    state.forget_values(keep=KEEP)
    if prompt is not None:
        state.set_prompt(prompt[:state.PROMPT_MAX_CHARS])
    if model in models.MODELS:
        models.set_model_key(model)
    join["seen"] = view.version
    query = {k: v for k, v in params.items() if k.isidentifier() and k not in KEEP}
    query.update({"lang": i18n.current_lang(), "model": models.model_key(), PARAM: join["code"]})
    # This run's claims are the old view's: start them again, so the URL written when the run
    # stops (state.sync_url in app.py) is the new view's, not a mix.
    state.begin_run()
    for key, value in query.items():
        state.claim(key, value)
    state.claim_prompt()
    st.switch_page(nav.page_file(_page(view.page)), query_params=state.url_values())


def _run_page() -> str | None:
    """The page this script run is on: the run context's page hash (in a fragment run, the
    one the browser's rerun request carried) looked up in the pages st.navigation registered.
    None when it cannot be told (no run context, pages not registered yet)."""
    path = session.running_page_path()
    if path is None:
        return None
    return path if path in nav.PAGES else nav.HOME      # the default page's url_pathname is ""


def _sync(join: dict, full_run: bool = False) -> class_store.ClassInfo | None:
    """Heartbeat and look for a newer view, or a run on another page than the class's (a
    stale rerun of the poll's timer, or the student's own click), and apply the view
    (st.switch_page; in a full run, before the page draws). Returns the class (None when
    the store is unreachable)."""
    code = join["code"]
    try:
        info = store().get(code)
        if info is not None and join["following"] and time.time() - join["beat"] >= HEARTBEAT_EVERY_S:
            store().heartbeat(code, join["fid"])
            join["beat"] = time.time()
    except class_store.ClassGone:
        info = None
    except class_store.StoreUnavailable:
        return None
    if info is None:
        st.session_state.pop(_JOIN, None)
        _note("classroom.ended", code)
        st.rerun()
    view = info.view
    here = _run_page()
    behind = view is not None and (view.version > join["seen"]
                                   or (here is not None and here != _page(view.page)))
    if join["following"] and behind:
        if full_run and view.version <= join["seen"]:
            _note("classroom.pulled_back")        # the student clicked away: say why they are back
        _apply(join, view)
    return info


def _follow() -> None:
    """A student's poll (a fragment, every second while following) and their status line."""
    join = joined()
    if not join:
        return
    info = _sync(join)
    if info is None:
        st.caption(t("classroom.store_down"))
        return
    where = _page(info.view.page) if info.view is not None else nav.HOME
    key = "classroom.following" if join["following"] else "classroom.paused"
    st.markdown(t(key, code=code_span(join["code"]), page=t(f"nav.{where}")))
    minutes = away_minutes(store().away_s(info))
    if minutes is not None:
        st.caption(t("classroom.teacher_away_one" if minutes == 1 else "classroom.teacher_away", n=minutes))
    if join["following"]:
        for fn in _ON_POLL:          # last: a fragment rerun it asks for starts when this run ends
            fn(join)


def _student_panel(join: dict) -> None:
    st.fragment(_follow, run_every=FOLLOW_EVERY_S if join["following"] else None)()
    if join["following"]:
        st.button(t("classroom.stop"), key="class_stop", icon=":material/pause_circle:", width="stretch",
                  on_click=_stop, help=t("classroom.stop_help"))
    else:
        st.button(t("classroom.again"), key="class_again", icon=":material/play_circle:", width="stretch",
                  on_click=_again, type="primary")
    st.button(t("classroom.leave"), key="class_leave", icon=":material/logout:", width="stretch", on_click=_leave)


def _join_form() -> None:
    st.button(t("classroom.start"), key="class_start", icon=":material/co_present:", width="stretch",
              on_click=_start, help=t("classroom.start_help"))
    st.text_input(t("classroom.join_label"), key=_INPUT, max_chars=20,
                  placeholder=t("classroom.join_placeholder"), help=t("classroom.join_help"))
    st.button(t("classroom.join"), key="class_join", icon=":material/login:", width="stretch", on_click=_join_typed)


def _from_link() -> None:
    """Act on ``?class=`` once per value this session meets."""
    raw = st.query_params.get(PARAM)
    if raw is None or st.session_state.get(_LINK) == raw:
        return
    st.session_state[_LINK] = raw
    code = class_store.normalize_code(raw)
    join = joined()
    if join and join["code"] == code:
        return
    if code is None:
        _note("classroom.bad_code", shorten(raw.strip(), 20))
    elif not teaching():
        _join(code)


def panel() -> None:
    """The class panel in the sidebar, and its notes at the top of the page (app.py, before the
    page runs: a student who follows is switched to the teacher's page here)."""
    _from_link()
    _resume()
    join = joined()
    if join:
        _sync(join, full_run=True)         # a newer view: switch to it now, before the page draws
        join = joined()
    if join:
        state.claim(PARAM, join["code"])   # a reload of the student's tab joins again
    teach = teaching()
    if teach:
        try:
            if store().get(teach["code"]) is None:       # ended elsewhere, or idle for hours
                st.session_state.pop(_TEACH, None)
                _note("classroom.expired_teacher", teach["code"])
        except class_store.StoreUnavailable:
            _note("classroom.store_down")
    for key, code in st.session_state.pop(_NOTES, []):
        st.warning(t(key, code=code_span(code) if code else ""), icon=":material/groups:")
    teach = teaching()
    script = cookie_script(teach, st.session_state.pop(_FORGET, False))
    with st.sidebar:
        if script:
            with st.container(key="class_cookie"):
                st.html(script, unsafe_allow_javascript=True)
        with st.expander(t("classroom.title"), icon=":material/groups:", expanded=bool(teach or join)):
            if teach:
                _teacher_panel(teach)
            elif join:
                _student_panel(join)
            else:
                _join_form()
