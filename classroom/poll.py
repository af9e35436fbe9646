"""Predict, then see, in a class: the teacher asks the class the current question, following
students answer it on their own screens (each in their own language), the teacher's screen
counts the answers as they arrive, then reveals the model's answer beside a chart of the
class's. Registered with the lesson block (course/predict_view.py) when the classroom loads,
so every page's one-line block works in a class.

- Answers are anonymous (the student's follow id; an optional nickname) and live in the class
  store (classroom/poll_store.py), ending with the class; the teacher downloads them as CSV.
- A student sees the class's question only while following, and only on the question it was
  asked about (same lesson, model and prompt): a student who stopped following is not asked;
  one who joins late lands on the teacher's page and sees the open question.
- A student's block has no timer of its own: the student's follow poll (classroom/follow.py,
  every second) looks at the class's question too (``_look``) and reruns the block (a keyed
  fragment) only when what it drew is out of date: the teacher asked, revealed or closed. One
  poll a second per student instead of two, and a rerun of the block only when it changes.
- Nobody sees the others' answers before the reveal: a student's screen reads only the
  question and, once revealed, the teacher's summary.
"""

from __future__ import annotations

import time

import streamlit as st

from classroom import follow
from classroom import store as class_store
from classroom.poll_store import polls
from course import i18n, predict_view, theme
from course.figures.predict import class_answers_figure
from course.i18n import t
from course.predict import builders as B
from course.predict.core import Question
from course.tokens import plot_label
from server import session

COUNT_EVERY_S = 0.5       # the teacher's live count of answers (one fragment, on one screen: cheap), so it is
                          # up to date within a second of an answer (bench/bench_predict.py); a student looks
                          # on every follow poll (follow.FOLLOW_EVERY_S)
BLOCK = "class_poll"      # the key of a following student's block fragment (follow's poll reruns it)
_SENT = "_poll_sent"      # {(code, poll id): the value this student sent}
_DRAWN = "_poll_drawn"    # what the student's block last drew: mark(...)


def panel(question: Question, lm, text: str) -> bool:
    """The block in a class: the teacher's controls, or a following student's answer form while
    the class has this question open. False: not in a class (the block draws itself alone)."""
    teach = follow.teaching()
    if teach:
        _teacher(teach, question, lm, text)
        return True
    join = follow.joined()
    if join and join["following"]:
        st.fragment(_student, key=BLOCK)(join["code"], join["fid"], question, lm, text)
        return True
    return False


def mark(code: str, question_key: str, poll) -> tuple:
    """What a student's block shows of the class's question: the class, the block's question,
    and the class's poll (id and state) when it is about that question, else None."""
    if poll is None or poll.question.get("key") != question_key:
        return (code, question_key, None, None)
    return (code, question_key, poll.id, poll.state)


def _look(join: dict) -> None:
    """On every follow poll of a following student: rerun the block when the class's question
    is no longer what it drew (asked, revealed, closed, replaced)."""
    drawn = st.session_state.get(_DRAWN)
    if not drawn or drawn[0] != join["code"] or not session.in_fragment_run():
        return                       # (a full run draws the block anew)
    try:
        poll = polls().current(join["code"])
    except class_store.ClassStoreError:
        return                       # the follow poll's own line says so
    if mark(join["code"], drawn[1], poll) != drawn and not session.rerun_fragment(BLOCK):
        st.session_state.pop(_DRAWN, None)     # no block on this page: nothing to redraw


# --- teacher -----------------------------------------------------------------------------

def _ask(teach: dict, spec: dict) -> None:
    try:
        polls().ask(teach["code"], teach["secret"], spec)
    except class_store.ClassStoreError:
        pass                         # the class panel says what happened


def _reveal(teach: dict, poll_id: int, question: Question, lm, text: str) -> None:
    try:
        answers = polls().answers(teach["code"], teach["secret"], poll_id)
        polls().reveal(teach["code"], teach["secret"], poll_id, B.class_summary(question, answers, lm, text))
    except class_store.ClassStoreError:
        pass


def _close(teach: dict) -> None:
    try:
        polls().close(teach["code"], teach["secret"])
    except class_store.ClassStoreError:
        pass


def _count(code: str, poll_id: int) -> None:
    """The count of answers, live on the teacher's (projected) screen."""
    try:
        n = polls().count(code, poll_id)
    except class_store.StoreUnavailable:
        st.caption(t("predict.class.store_down"))
        return
    key = "predict.class.count_none" if n == 0 else "predict.class.count_one" if n == 1 else "predict.class.count_many"
    st.markdown(f"**{t(key, n=n)}**")


def _teacher(teach: dict, question: Question, lm, text: str) -> None:
    spec = question.public()
    if not predict_view.question_in_label():       # presenter mode's folded line says it already
        st.markdown(predict_view.phrase(*question.text))
    try:
        poll = polls().current(teach["code"])
    except class_store.StoreUnavailable:
        st.caption(t("predict.class.store_down"))
        return
    mine = poll is not None and poll.question.get("key") == question.key
    if not mine:
        st.button(t("predict.class.ask"), key=f"poll_ask_{question.id}", icon=":material/campaign:", type="primary",
                  on_click=_ask, args=(teach, spec), help=t("predict.class.ask_help"))
        return
    if poll.state == "open":
        if spec["kind"] == "choice":
            st.markdown("\n".join(f"- {predict_view.option_text(spec, i)}" for i in range(len(spec["options"]))))
        st.fragment(_count, run_every=COUNT_EVERY_S)(teach["code"], poll.id)
        left, right = st.columns(2)
        left.button(t("predict.class.reveal"), key=f"poll_reveal_{question.id}", icon=":material/visibility:",
                    type="primary", on_click=_reveal, args=(teach, poll.id, question, lm, text), width="stretch")
        right.button(t("predict.class.close"), key=f"poll_close_{question.id}", icon=":material/close:",
                     on_click=_close, args=(teach,), width="stretch")
        return
    _class_reveal(spec, poll.reveal or {}, question, key=f"poll_chart_{question.id}")
    try:
        answers = polls().answers(teach["code"], teach["secret"], poll.id)
    except class_store.ClassStoreError:
        answers = []
    left, right = st.columns(2)
    left.download_button(t("predict.class.csv"), B.answers_csv(question, answers, lm, text,
                                                                  option_text=lambda i: _bar_label(spec, {"value": i})),
                         file_name=f"answers-{question.id}.csv", mime="text/csv", key=f"poll_csv_{question.id}",
                         icon=":material/download:", width="stretch")
    right.button(t("predict.class.close"), key=f"poll_close_{question.id}", icon=":material/close:",
                 on_click=_close, args=(teach,), width="stretch")


def _class_reveal(spec: dict, summary: dict, question: Question | None, key: str) -> None:
    """The model's answer, the chart of the class's answers, and why (in this viewer's language)."""
    answer = predict_view.answer_text(question) if question is not None else \
        predict_view.value_text(spec, summary.get("answer_text") if spec["kind"] == "next_token" else summary.get("answer"))
    st.success(t("predict.class.revealed", n=summary.get("n", 0), answer=answer), icon=":material/psychology:")
    bars = summary.get("bars") or []
    n = max(1, summary.get("n", 0))
    if bars:
        labels = [plot_label(_bar_label(spec, b), 30) for b in bars]
        shares = [100 * b["count"] / n for b in bars]
        probs = [100 * b.get("p", 0.0) for b in bars] if spec["kind"] == "next_token" else None
        theme.plot(class_answers_figure(t, labels, shares, [b["right"] for b in bars], probs), key=key,
                   height=140 + 46 * len(bars) * (2 if probs else 1))
    if question is not None:
        st.markdown(t("predict.why", why=predict_view.phrase(*question.why)))


def _bar_label(spec: dict, bar: dict) -> str:
    """A bar's label as plain text (plot_label escapes it)."""
    if spec["kind"] == "choice":
        option = spec["options"][int(bar["value"])]
        fields = (spec.get("option_fields") or [{}] * len(spec["options"]))[int(bar["value"])]
        return t(option, **fields) if spec["option_keys"] else option
    if spec["kind"] == "number":
        return i18n.big_number(float(bar["value"])) if spec["log"] else str(bar["value"])
    return str(bar["value"])


# --- student -----------------------------------------------------------------------------

def _send(code: str, fid: str, poll_id: int, widget: str, nick_key: str, spec: dict) -> None:
    value = st.session_state.get(widget)
    if not predict_view.valid_guess(spec, value):
        st.session_state["_poll_pick"] = poll_id
        return
    if spec["kind"] == "next_token":
        value = str(value)
    elif spec["kind"] == "choice":
        value = int(value)
    try:
        sent = polls().answer(code, poll_id, fid, {"value": value, "nick": st.session_state.get(nick_key, ""),
                                                    "lang": i18n.current_lang(), "at": time.time()})
    except class_store.ClassStoreError:
        sent = False
    if sent:
        st.session_state.setdefault(_SENT, {})[(code, poll_id)] = value


def _student(code: str, fid: str, question: Question, lm, text: str) -> None:
    """A following student's block (a fragment that the follow poll reruns): the class's question while
    the teacher has it open, the teacher's reveal once there, else the block for one learner."""
    join = follow.joined()
    if not join or not join["following"]:
        st.session_state.pop(_DRAWN, None)
        predict_view.solo(question, lm, text)
        return
    try:
        poll = polls().current(code)
    except class_store.StoreUnavailable:
        poll = None
    st.session_state[_DRAWN] = mark(code, question.key, poll)
    if poll is None or poll.question.get("key") != question.key:
        predict_view.solo(question, lm, text)
        return
    spec = question.public()
    sent = st.session_state.get(_SENT, {}).get((code, poll.id))
    st.caption(t("predict.class.asked"))
    st.markdown(predict_view.phrase(*question.text))
    if poll.state == "revealed":
        if sent is not None:
            predict_view.reveal(question, sent, lm, text)
        _class_reveal(spec, poll.reveal or {}, question, key=f"poll_chart_{question.id}_{poll.id}")
        return
    if sent is not None:
        st.markdown(t("predict.yours", guess=predict_view.value_text(spec, sent)))
        st.info(t("predict.class.answered"), icon=":material/hourglass_top:")
        return
    widget, nick = f"poll_in_{poll.id}", "poll_nick"
    predict_view.guess_input(spec, widget)
    st.text_input(t("predict.class.nickname"), key=nick, max_chars=24, help=t("predict.class.nickname_help"))
    if st.session_state.pop("_poll_pick", None) == poll.id:
        st.caption(t("predict.pick_one"))
    st.button(t("predict.class.send"), key=f"poll_send_{poll.id}", icon=":material/send:", type="primary",
              on_click=_send, args=(code, fid, poll.id, widget, nick, spec))


predict_view.register_class_panel(panel)
follow.on_poll(_look)
