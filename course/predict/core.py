"""The question and its scoring: pure functions, unit-tested without a model or a page.

A question's words are catalog keys (``predict.<lesson>.*`` in assets/i18n/<lang>.json) with
their fields, so the same question reads in each learner's language (a class's students each
see it in their own). Its answer is computed from the run it was built on (builders.py); its
``why`` is one sentence true of that run.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Callable

KINDS = ("choice", "number", "next_token")
Phrase = tuple[str, dict]          # (catalog key, fields)


@dataclass(frozen=True)
class Score:
    """How a guess did: ``value`` 1.0 is exactly right, 0.0 nowhere near."""
    value: float
    right: bool
    off: Phrase | None = None      # how far off, in words: (catalog key, fields); None when right
    note: Phrase | None = None     # e.g. "your guess is 3 tokens: scored by its first"


@dataclass(frozen=True)
class Question:
    """One question on one run.

    id        stable per lesson question ("tokens.count"); ``key`` adds the run it was built on
    kind      "choice" (options, answer = the right option's index), "number" (answer = the
              value; ``low``/``high`` the range asked, ``log`` a log scale), or "next_token"
              (answer = the model's top next token id; ``probs`` its next-token distribution)
    text      the question, (catalog key, fields)
    why       one sentence on why the answer is what it is, true of this run
    options   choice: the options as shown (token text, or catalog keys when ``option_keys``,
              with their fields in ``option_fields`` when they have any)
    answer    None while the run it asks about is still to come (``pending``: the training lab
              asks before it trains; the learner's guess waits for the run)
    unit      number: a catalog key naming the unit, or ""
    """
    id: str
    run: str                       # digest of (model, token ids, anything else the answer depends on)
    kind: str
    text: Phrase
    why: Phrase
    answer: float | int | None
    options: tuple[str, ...] = ()
    option_keys: bool = False
    option_fields: tuple[dict, ...] = ()
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    integer: bool = True
    unit: str = ""
    top: tuple[tuple[int, str, float], ...] = ()   # next_token: the model's top choices (id, text, p)
    probs: object = field(default=None, compare=False, repr=False)   # next_token: [vocab] tensor
    answer_text: str = ""          # the answer as shown (a token's text, an option, a number)
    intro: str = "predict.intro"   # the line under the question before a guess (catalog key)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown kind {self.kind!r}")
        if self.kind == "choice" and self.answer is not None and not 0 <= int(self.answer) < len(self.options):
            raise ValueError("the answer is not one of the options")
        if self.option_fields and len(self.option_fields) != len(self.options):
            raise ValueError("option_fields: one dict per option")

    @property
    def pending(self) -> bool:
        """The run this question asks about is not there yet: a guess is taken, the reveal waits."""
        return self.answer is None

    @property
    def key(self) -> str:
        """The question on this run: a new prompt (or model) gives a new key, so a fresh question."""
        return f"{self.id}:{self.run}"

    def public(self) -> dict:
        """What a class's students need to draw it (JSON; no answer, no why)."""
        return {"id": self.id, "key": self.key, "kind": self.kind, "text": [self.text[0], dict(self.text[1])],
                "options": list(self.options), "option_keys": self.option_keys,
                "option_fields": [dict(f) for f in self.option_fields], "low": self.low,
                "high": self.high, "log": self.log, "integer": self.integer, "unit": self.unit}


def run_digest(*parts) -> str:
    """A short digest of what a question's answer depends on (model name, ids, settings)."""
    return hashlib.sha256(repr(parts).encode("utf-8")).hexdigest()[:12]


# --- scoring ------------------------------------------------------------------------------

def score_choice(answer: int, guess: int) -> Score:
    right = int(guess) == int(answer)
    return Score(1.0 if right else 0.0, right, None if right else ("predict.off.choice", {}))


NUMBER_TOLERANCE = 0.5     # linear scale: a guess off by half the answer (or half the range) scores 0
LOG_DECADES = 1.0          # log scale: a guess off by a factor of 10 scores 0


def score_number(answer: float, guess: float, *, log: bool = False, low: float = 0.0, high: float = 0.0,
                 integer: bool = True) -> Score:
    """Closeness of a number: 1 exactly right, falling linearly to 0 at a factor of 10 (``log``)
    or at NUMBER_TOLERANCE of the answer's size (at least of the range's, for answers near 0).
    Off: by how much (linear) or by what factor (log)."""
    answer, guess = float(answer), float(guess)
    if log:
        if answer <= 0 or guess <= 0:
            raise ValueError("a log-scale number is positive")
        ratio = max(answer, guess) / min(answer, guess)
        value = max(0.0, 1.0 - math.log10(ratio) / LOG_DECADES)
        right = ratio < 1.1                                   # within 10%
        off = None if right else ("predict.off.factor_high" if guess > answer else "predict.off.factor_low",
                                  {"x": f"{ratio:.1f}"})
        return Score(value, right, off)
    diff = guess - answer
    exact = round(diff) == 0 if integer else abs(diff) < 1e-9
    scale = max(abs(answer), (high - low) / 4, 1.0) * NUMBER_TOLERANCE * 2
    value = 1.0 if exact else max(0.0, 1.0 - abs(diff) / scale)
    amount = f"{abs(diff):.0f}" if integer else f"{abs(diff):.1f}"
    off = None if exact else ("predict.off.more" if diff > 0 else "predict.off.fewer", {"n": amount})
    return Score(value, exact, off)


def score_token(answer: int, guess_ids: list[int], probs, top_p: float) -> Score:
    """A typed next token, tokenized by the model (``guess_ids``): right when it is exactly the
    model's top token; otherwise scored by the model's probability of the guess's first token
    relative to its top token's (``top_p``). A guess of several tokens is scored by its first,
    and the note says so."""
    if not guess_ids:
        return Score(0.0, False, ("predict.off.empty", {}))
    first = int(guess_ids[0])
    p = float(probs[first])
    note = ("predict.note.first_token", {"n": len(guess_ids)}) if len(guess_ids) > 1 else None
    right = first == int(answer) and len(guess_ids) == 1
    if right:
        return Score(1.0, True, None, note)
    value = min(1.0, p / top_p) if top_p > 0 else 0.0
    return Score(value, False, ("predict.off.token", {"p": percent(p)}), note)


def percent(p: float) -> str:
    """A probability as a short percent: 42%, 3.1%, 0.04%, <0.01%."""
    p = 100 * float(p)
    if p >= 10:
        return f"{p:.0f}%"
    if p >= 1:
        return f"{p:.1f}%"
    if p >= 0.01:
        return f"{p:.2f}%"
    return "<0.01%"


def guess_candidates(guess: str, prompt_ends_with_space: bool) -> list[str]:
    """The texts a typed guess may stand for as a continuation: as typed, and (when the learner
    typed no leading space after a prompt that does not end in one) with the space a next word
    usually carries in the model's vocabulary."""
    guess = guess.replace("\r", "")
    if not guess.strip():
        return []
    out = [guess]
    if not guess[0].isspace() and not prompt_ends_with_space:
        out.append(" " + guess)
    return out


def best_guess(candidates: list[list[int]], probs) -> list[int]:
    """Of a guess's tokenizations (guess_candidates, each tokenized), the one whose first token
    the model finds most likely."""
    candidates = [c for c in candidates if c]
    if not candidates:
        return []
    return max(candidates, key=lambda ids: float(probs[int(ids[0])]))


Score_fn = Callable[[Question, object], Score]
