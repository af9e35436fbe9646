"""The lesson-page scaffold: every lesson follows one pattern (docs/DESIGN.md, "A lesson page").

    page = Lesson("attention")
    page.header()                              # title + the "intro" section
    lm = page.model()
    tokens = page.tokens(lm, cap=64)           # the shared prompt, capped; stops on empty
    ...controls (course.state), page.run(...), figures (course.theme.plot)...
    page.notice([...])                         # What to notice: observations from this run
    page.try_this()                            # Try this: example prompts from the catalog
    page.math()                                # The math: the "math" section (+ worked example)
    page.code(lesson_model.decoder.Attention.forward)   # In the code

A page's parts are its sections: ``page.part("pattern", title)`` draws the part's heading with
an anchor (``section-pattern``) and lists it for this run, as ``header``, ``notice`` and
``try_this`` do for theirs. Presenter mode (classroom/presenter.py) offers the list to jump
to, a jump is the URL's ``?section=``, and a teacher's jump is shared with the class. In
presenter mode a part's prose is folded under its heading, so the part's chart is on screen.

See docs/PAGES.md.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Hashable, Iterable, Sequence

import streamlit as st

from course import i18n, state
from course.i18n import t
from course.model import get_model, model_tag
from course.text import md_escape, shorten
from server.models import CachedRun, cached_run


_SECTIONS = "_lesson_sections"    # this run's parts: [(section id, title as plain text)]
_FOLD = "_lesson_fold"            # fold prose under its heading (presenter mode, set by classroom/presenter.py)
INTRO, NOTICE, TRY = "intro", "notice", "try"    # the sections every lesson has


def begin_sections(fold_prose: bool = False) -> None:
    """Start this run's list of sections (classroom/presenter.py, before the page runs);
    ``fold_prose``: a part's prose is drawn folded (presenter mode)."""
    st.session_state[_SECTIONS] = []
    st.session_state[_FOLD] = bool(fold_prose)


def sections() -> list[tuple[str, str]]:
    """The sections this run drew so far, in page order: (id, title as plain text)."""
    return list(st.session_state.get(_SECTIONS, []))


def anchor(section_id: str) -> str:
    """The HTML id of a section's heading."""
    return f"section-{section_id}"


_MARKUP = re.compile(r"\\(?=[^\sA-Za-z0-9])|`|\*\*")


def plain(title: str) -> str:
    """A Markdown heading as plain text for a list of sections (no backticks, bold or escapes)."""
    return _MARKUP.sub("", title)


def _add_section(section_id: str, title: str) -> str:
    if not section_id.replace("_", "").isalnum() or not section_id.isascii():
        raise ValueError(f"section id {section_id!r}: letters, digits and _ only")
    found = st.session_state.setdefault(_SECTIONS, [])
    if all(known != section_id for known, _ in found):
        found.append((section_id, plain(title)))
    return anchor(section_id)


class Lesson:
    def __init__(self, page: str):
        self.page = page
        self._prose_slot = None          # presenter mode: beside the last heading, for its prose

    # --- text ---------------------------------------------------------------------------
    def t(self, key: str, **fields) -> str:
        """This lesson's string ``<page>.<key>`` (from assets/i18n/<lang>/<page>.json), or its
        variant for the session's model, ``<page>.<tag>.<key>`` (tag "gemma" or "smollm2", see
        course.model.MODEL_TAGS), when the catalog has one."""
        return t(i18n.lesson_key(self.page, model_tag(), key), **fields)

    def section(self, section_id: str) -> str:
        """A prose section of assets/lessons/<lang>/<page>.md, or its variant for the session's
        model, ``## <id>-<tag>``, when the file has one."""
        variant = f"{section_id}-{model_tag()}"
        if variant in i18n.lesson_sections(self.page, i18n.DEFAULT_LANG):
            return i18n.section(self.page, variant)
        return i18n.section(self.page, section_id)

    def prose(self, section_id: str, more: str | None = None) -> None:
        """A prose section, and ``more`` Markdown of this run that goes with it (drawn after
        it). In presenter mode they are folded (the teacher tells them, the part's chart comes
        first on the screen): a button beside the part's heading that opens the text, or an
        expander where no heading was just drawn."""
        text = self.section(section_id)
        if not st.session_state.get(_FOLD):
            st.markdown(text)
            if more:
                st.markdown(more)
            return
        if more:
            text = text + "\n\n" + more
        slot, self._prose_slot = getattr(self, "_prose_slot", None), None
        if slot is not None:
            with slot.popover(t("lesson.prose_folded"), icon=":material/notes:", width="stretch"):
                st.markdown(text)
        else:
            with st.expander(t("lesson.prose_folded"), icon=":material/notes:"):
                st.markdown(text)

    def _heading(self, draw) -> None:
        """Draw a heading; in presenter mode beside it the place for the next prose's button."""
        if st.session_state.get(_FOLD):
            left, right = st.columns([4, 1.25], vertical_alignment="center")
            with left:
                draw()
            self._prose_slot = right.empty()
        else:
            draw()

    def part(self, section_id: str, title: str) -> None:
        """A part of the lesson: its heading (Markdown), with an anchor and listed among the
        page's sections (presenter mode jumps to it, and shares a teacher's jump)."""
        anchor_id = _add_section(section_id, title)
        self._heading(lambda: st.subheader(title, anchor=anchor_id))

    # --- the pattern ----------------------------------------------------------------------
    def header(self) -> None:
        """Title and the "intro" section: what this step of the model does."""
        title = t(f"nav.{self.page}")
        anchor_id = _add_section(INTRO, title)
        self._heading(lambda: st.title(title, anchor=anchor_id))
        self.prose("intro")

    def model(self):
        return get_model()

    def tokens(self, lm, cap: int) -> list:
        """The shared prompt's tokens, at most ``cap`` of them (with a visible notice when
        cut: LessonModel.cut keeps the model's <bos> and the last tokens after it, so the page
        continues from the end of the text and the model reads what it always reads first).
        An empty prompt shows a friendly hint with the Try-this prompts and stops the page."""
        text = state.prompt()
        if not text.strip():
            st.info(t("lesson.empty_prompt"), icon=":material/edit_note:")
            self.try_this()
            st.stop()
        tokens = lm.tokenize(text)
        self.prompt_tokens = len(tokens)       # before the cut: pages say how long the whole prompt is
        self.prompt_added = sum(1 for tok in tokens if tok.added)   # put there by the tokenizer (<bos>), not by the text
        kept, cut = lm.cut(tokens, cap)
        if cut:
            key, last = ("lesson.prompt_cut_bos", cap - 1) if lm.bos_id is not None else ("lesson.prompt_cut", cap)
            st.warning(t(key, n=len(tokens), cap=cap, last=last), icon=":material/content_cut:")
        return kept

    def predict(self, lm, question=None) -> None:
        """Predict, then see: this lesson's question on the session's prompt, before the figure
        that answers it (course/predict_view.py; nothing when the prompt gives no question), or
        ``question``, one the page built (the training lab's, of the run about to be trained). In
        presenter mode the block is folded to its question, one line above the first figure."""
        from course import predict_view
        if st.session_state.get(_FOLD):         # presenter mode: one line, the question, that opens
            predict_view.ask(self.page, lm, fold=lambda title: _add_section("predict", title), question=question)
        else:
            predict_view.ask(self.page, lm, heading=lambda title: self.part("predict", title), question=question)

    def run(self, lm, tokens: Sequence, names: Iterable[str] = (), *, all_logits: bool = False,
            hooks: dict | None = None, hooks_key: Hashable = None) -> CachedRun:
        """A cached, shared forward pass over ``tokens`` (Token objects or ids) keeping only
        the hook tensors in ``names``; see server.models.cached_run."""
        ids = [tok if isinstance(tok, int) else tok.id for tok in tokens]
        return cached_run(lm, ids, names, all_logits=all_logits, hooks=hooks, hooks_key=hooks_key)

    def columns(self):
        """The figure area with a narrow controls column beside it: (figure, controls)."""
        return st.columns([3, 1], gap="medium")

    def notices(self, found: Sequence) -> None:
        """What to notice from a pure function's (key, fields) pairs (course/notices/): each key
        is this lesson's (``self.t``); a field that is itself a (key, fields) pair is translated
        first; an item that is a list of pairs is one bullet, its sentences run together
        (i18n.join_sentences)."""
        def text(key: str, fields: dict) -> str:
            return self.t(key, **{name: text(*value) if _is_notice(value) else value
                                  for name, value in fields.items()})
        self.notice([i18n.join_sentences([text(*pair) for pair in item]) if isinstance(item, list)
                     else text(*item) for item in found])

    def notice(self, observations: Sequence[str]) -> None:
        """What to notice: Markdown sentences computed from this run (escape token text with
        course.tokens.md_label)."""
        st.subheader(t("lesson.notice"), anchor=_add_section(NOTICE, t("lesson.notice")))
        st.markdown("\n".join(f"- {line}" for line in observations))

    def try_this(self, examples: Sequence[tuple] | None = None, *, set_prompt: bool = True) -> None:
        """Try this: one-click prompts. By default the catalog's ``try.<n>.prompt`` and
        ``try.<n>.why`` keys of this lesson, in order of n. An example may carry a third item,
        the URL-bound control values its "why" relies on (e.g. ``{"temperature": 0.0}``), which
        the button sets along with the prompt. With ``set_prompt=False`` the first item is only
        the button's label and a click sets the values alone (a lab page that reads no prompt)."""
        if examples is None:
            examples = [(self.t(f"try.{n}.prompt"), self.t(f"try.{n}.why")) for n in self.try_numbers()]
        st.subheader(t("lesson.try"), anchor=_add_section(TRY, t("lesson.try")))
        for n, (label, why, *values) in enumerate(examples):
            left, right = st.columns([2, 3], vertical_alignment="center")
            left.button(md_escape(shorten(label, 60)), key=f"try_{n}", on_click=_start_example,
                        args=(label if set_prompt else None, values[0] if values else {}),
                        icon=":material/play_arrow:", width="stretch")
            right.markdown(why)

    def try_numbers(self) -> list[int]:
        """The n of this lesson's ``try.<n>.prompt`` keys (i18n.try_numbers) on the session's model."""
        return i18n.try_numbers(self.page, model_tag())

    def math(self, worked_example: str | None = None) -> None:
        """The math: the lesson's "math" section, then an optional worked example (Markdown
        computed from this run)."""
        with st.expander(t("lesson.math"), icon=":material/functions:"):
            st.markdown(self.section("math"))
            if worked_example:
                st.markdown(worked_example)

    def code(self, *objects) -> None:
        """In the code: the lesson_model source of each object, via inspect.getsource."""
        with st.expander(t("lesson.code"), icon=":material/code:"):
            st.caption(t("lesson.code_caption"))
            for obj in objects:
                st.markdown(f"`{obj.__module__}.{obj.__qualname__}`")
                st.code(source(obj), language="python", line_numbers=True, wrap_lines=True)


def _is_notice(value) -> bool:
    return isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], dict)


@functools.cache
def source(obj) -> str:
    """inspect.getsource, read once per object (it reads and tokenizes the module's file: a few
    ms a page, on every rerun of every session)."""
    return inspect.getsource(obj)


def _start_example(prompt: str | None, values: dict) -> None:
    """A Try-this button's callback: its prompt (None: leave the prompt), and the control
    values it relies on."""
    if prompt is not None:
        state.set_prompt(prompt)
    for key, value in values.items():
        state.set_value(key, value)


def coming_soon(page: str) -> None:
    """Placeholder body for a lesson not written yet (the browser test skips its charts)."""
    st.title(t(f"nav.{page}"))
    with st.container(border=True, key="coming_soon"):
        st.markdown(t(f"about.{page}"))
        st.info(t("lesson.coming_soon"), icon=":material/construction:")
