"""The "Predict, then see" block every lesson draws near its top (Lesson.predict): the
question (course/predict), the learner's guess, then the model's answer, how far off the
guess was, and why. Answers live in the session, keyed by the question's key (question id +
the run), so a new prompt or model gives a fresh question.

In a class, classroom/poll.py registers a panel (``register_class_panel``) that takes the
block over: the teacher asks the class and reveals, a following student answers into the
class store. The course layer knows nothing of the classroom beyond that hook.
"""

from __future__ import annotations

import contextvars
import threading
from collections import OrderedDict
from collections.abc import Callable

import streamlit as st

from course import i18n, state
from course.i18n import t
from course.predict import builders as B
from course.predict.core import Question, percent
from course.text import code_span, md_escape
from course.tokens import label
from server.models import cached_run

_ANSWERS = "_predict_answers"        # {question key: the guess}
_CACHE: OrderedDict = OrderedDict()  # (model, lesson, text) -> Question | None: shared by every session
_CACHE_MAX = 48
_LOCK = threading.Lock()
_PANELS: list[Callable] = []         # classroom/poll.py: panel(question, lm, text) -> True when it drew the block
TOKEN_FIELDS = {"token", "answer", "other", "second", "copy", "head", "guess_token", "key_token"}
LOG_STEPS = [m * 10 ** e for e in range(6, 11) for m in (1, 2, 5)][:-2]   # 1 M ... 10 B


def register_class_panel(panel: Callable) -> None:
    """The classroom's panel (one): called first; when it returns True it drew the block."""
    _PANELS[:] = [panel]


def shared_runner(lm):
    """Forward passes through the process's run cache (server.models.cached_run): a question on
    the same tokens and captures as its page's pass reads that pass, computed once."""
    def run(ids, names=(), all_logits: bool = False, hooks: dict | None = None, hooks_key=None):
        return cached_run(lm, ids, names, all_logits=all_logits, hooks=hooks, hooks_key=hooks_key)
    return run


def question_for(lesson: str, lm, text: str) -> Question | None:
    """The lesson's question on ``text`` (course.predict.builders.build), built once per
    model, lesson and prompt for the whole process: a class on one prompt builds it once."""
    key = (lm.name, lesson, text)
    with _LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    question = B.build(lesson, lm, text, shared_runner(lm))
    with _LOCK:
        _CACHE[key] = question
        while len(_CACHE) > _CACHE_MAX:
            _CACHE.popitem(last=False)
    return question


# --- words -------------------------------------------------------------------------------

def field_text(name: str, value, lang: str | None = None) -> str:
    """One field of a question's sentence, as Markdown: token text as a code span with its
    whitespace visible; a parameter count in words (i18n.big_number); anything else escaped."""
    if name in TOKEN_FIELDS and isinstance(value, str):
        return code_span(label(value, 40))
    if name == "total":
        return i18n.big_number(int(value), lang=lang)
    return md_escape(str(value))


def phrase(key: str, fields: dict, lang: str | None = None) -> str:
    """A question's (catalog key, fields) as Markdown in ``lang`` (default: the session's)."""
    shown = {name: field_text(name, value, lang) for name, value in fields.items()}
    return i18n.text_in(lang, key, **shown) if lang else t(key, **shown)


def option_text(spec: dict, i: int, lang: str | None = None) -> str:
    """Option ``i`` of a question (its public dict) as Markdown."""
    option = spec["options"][i]
    if spec["option_keys"]:
        fields = spec.get("option_fields") or [{}] * len(spec["options"])
        return phrase(option, fields[i], lang)
    return code_span(label(option, 40))


def value_text(spec: dict, value, lang: str | None = None) -> str:
    """A guess or an answer as Markdown: an option, a number (a parameter count in words), a token."""
    if spec["kind"] == "choice":
        return option_text(spec, int(value), lang)
    if spec["kind"] == "number":
        number = float(value)
        shown = i18n.big_number(number, lang=lang) if spec["log"] else (f"{number:.0f}" if spec["integer"] else f"{number:.1f}")
        unit = spec.get("unit") or ""
        if not unit:
            return shown
        unit_text = i18n.text_in(lang, unit) if lang else t(unit)
        return f"{shown}{unit_text}" if unit_text == "%" else f"{shown} {unit_text}"
    return code_span(label(str(value), 40))


# --- the input ---------------------------------------------------------------------------

def guess_input(spec: dict, key: str):
    """The widget for a question's guess (its public dict, so a class's students draw the same
    one from the store); returns the current value (None: nothing chosen yet)."""
    kind = spec["kind"]
    if kind == "choice":
        return st.radio(t("predict.choose"), range(len(spec["options"])), index=None, key=key,
                        format_func=lambda i: option_text(spec, i))
    if kind == "number":
        if spec["log"]:
            return st.select_slider(t("predict.number"), options=LOG_STEPS, value=LOG_STEPS[len(LOG_STEPS) // 2],
                                    key=key, format_func=lambda v: i18n.big_number(v))
        low, high = int(spec["low"]), int(spec["high"])
        return st.slider(t("predict.number"), low, high, value=(low + high) // 2, step=1, key=key)
    return st.text_input(t("predict.token"), key=key, max_chars=40, help=t("predict.token_help"))


def valid_guess(spec: dict, value) -> bool:
    if value is None:
        return False
    if spec["kind"] == "next_token":
        return bool(str(value).strip())
    return True


# --- the block ---------------------------------------------------------------------------

# True while a folded block's panels draw: its one line already says the question.
_IN_LABEL: contextvars.ContextVar[bool] = contextvars.ContextVar("predict_question_in_label", default=False)


def question_in_label() -> bool:
    """Whether the block's folded line already says the question (presenter mode): a class panel
    drawn inside it leaves the question out rather than say it twice."""
    return _IN_LABEL.get()


def ask(lesson: str, lm, heading: Callable[[str], None] | None = None,
        fold: Callable[[str], str] | None = None, question: Question | None = None) -> Question | None:
    """Draw the lesson's block (nothing when this prompt has no question); returns the question.
    ``heading(title)`` draws its title (Lesson.predict: a page part, so presenter mode lists it).
    ``fold(title)``, given instead in presenter mode, lists the part and returns its anchor: the
    block is then one line, the question, that opens to the guess and the answer (folded, so the
    figure that answers it is on the projected screen too, under the question).
    ``question``: one the page built itself (the training lab's, of its settings, not of the
    prompt); else the lesson's question on the shared prompt."""
    if question is None:
        text = state.prompt()
        question = question_for(lesson, lm, text)
    else:
        text = ""
    if question is None:
        return None
    if fold is not None:
        anchor = fold(t("predict.title"))
        # the anchor is the container's class (st-key-<anchor>): presenter mode's jump finds it there
        with st.container(key=f"predict_{lesson}"), st.container(key=anchor):
            with st.expander(t("predict.folded", title=t("predict.title"), question=phrase(*question.text)),
                             icon=":material/quiz:"):
                said = _IN_LABEL.set(True)
                try:
                    for panel in _PANELS if not question.pending else ():
                        if panel(question, lm, text):
                            return question
                finally:
                    _IN_LABEL.reset(said)
                solo(question, lm, text, asked=True)
        return question
    with st.container(border=True, key=f"predict_{lesson}"):
        (heading or (lambda title: st.subheader(title, anchor=False)))(t("predict.title"))
        for panel in _PANELS if not question.pending else ():     # a class is asked once the answer exists
            if panel(question, lm, text):
                return question
        solo(question, lm, text)
    return question


def _submit(question_key: str, widget_key: str, spec: dict) -> None:
    value = st.session_state.get(widget_key)
    if not valid_guess(spec, value):
        st.session_state["_predict_pick"] = question_key
        return
    st.session_state.setdefault(_ANSWERS, {})[question_key] = value


def _again(question_key: str) -> None:
    st.session_state.setdefault(_ANSWERS, {}).pop(question_key, None)


def solo(question: Question, lm, text: str, asked: bool = False) -> None:
    """The block for one learner: the question (unless ``asked``: the folded block's line
    says it), a guess, then the reveal."""
    spec = question.public()
    if not asked:
        st.markdown(phrase(*question.text))
    guess = st.session_state.get(_ANSWERS, {}).get(question.key)
    widget = f"predict_in_{question.id}"
    seen = st.session_state.setdefault("_predict_seen", {})
    if seen.get(question.id) != question.key:        # a new run's question: its input starts afresh
        seen[question.id] = question.key
        st.session_state.pop(widget, None)
    if guess is None:
        st.caption(t(question.intro))
        guess_input(spec, widget)
        if st.session_state.pop("_predict_pick", None) == question.key:
            st.caption(t("predict.pick_one"))
        st.button(t("predict.check"), key=f"predict_check_{question.id}", icon=":material/visibility:",
                  on_click=_submit, args=(question.key, widget, spec), type="primary")
        return
    if question.pending:                            # the run it asks about is still to come
        st.markdown(t("predict.yours", guess=value_text(spec, guess)))
        st.info(t("predict.waiting"), icon=":material/hourglass_top:")
    else:
        reveal(question, guess, lm, text)
    st.button(t("predict.again"), key=f"predict_again_{question.id}", icon=":material/replay:",
              on_click=_again, args=(question.key,))


def reveal(question: Question, guess, lm, text: str) -> None:
    """The model's answer beside the guess, the score, how far off, and why."""
    spec = question.public()
    result = B.score(question, guess, lm, text)
    left, right = st.columns(2)
    left.markdown(t("predict.yours", guess=value_text(spec, guess)))
    right.markdown(t("predict.model", answer=answer_text(question)))
    lines = [t("predict.right") if result.right else phrase(*result.off) if result.off else ""]
    if result.note:
        lines.append(phrase(*result.note))
    if not result.right:
        lines.append(t("predict.score", score=round(100 * result.value)))
    (st.success if result.right else st.info)(i18n.join_sentences([x for x in lines if x]),
                                              icon=":material/check_circle:" if result.right else ":material/info:")
    if question.kind == "next_token":
        st.caption(t("predict.class.top_choices", tokens=i18n.join_list(
            f"{code_span(label(tok, 30))} {percent(p)}" for _, tok, p in question.top)))
    st.markdown(t("predict.why", why=phrase(*question.why)))


def answer_text(question: Question) -> str:
    """The model's answer as Markdown."""
    spec = question.public()
    if question.kind == "next_token":
        return value_text(spec, question.answer_text)
    return value_text(spec, question.answer)
