"""Controls that more than one page draws, and state a page keeps between runs: the sampling
settings bound to the URL (the sampling and generation pages share them) and the generation
page's steps (a running generator kept in the session, advanced one step per click)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import streamlit as st

from course import state
from course.i18n import t
from lesson_model.generation import Step

# The URL keys of the sampling settings (shared with the generation page).
TEMPERATURE, TOP_K, TOP_P, SEED = "temperature", "top_k", "top_p", "seed"
T_MAX, K_MAX, SEED_MAX = 2.0, 100, 9999
DEFAULT_T, DEFAULT_SEED = 1.0, 1


@dataclass(frozen=True)
class Settings:
    temperature: float
    top_k: int          # 0: off
    top_p: float        # 1.0: off
    seed: int

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def kwargs(self) -> dict:
        """Keyword arguments for next_token_distribution / generate_steps (off -> None)."""
        return dict(temperature=self.temperature, top_k=self.top_k or None,
                    top_p=self.top_p if self.top_p < 1.0 else None)

    @property
    def untouched(self) -> bool:
        """Temperature 1 and nothing cut: sampling from the model's own distribution."""
        return self.temperature == 1.0 and not self.top_k and self.top_p >= 1.0

    def describe(self, with_seed: bool = True) -> str:
        """One line for captions: 'temperature 0.8 · top-k 40 · top-p 0.9 · seed 1' (translated)."""
        if self.greedy:
            return t("sampling.settings.greedy_line")
        line = t("sampling.settings.line", t=f"{self.temperature:g}",
                 k=self.top_k if self.top_k else t("sampling.settings.off"),
                 p=f"{self.top_p:g}" if self.top_p < 1 else t("sampling.settings.off"))
        return t("sampling.settings.with_seed", line=line, seed=self.seed) if with_seed else line


def settings_controls(slots: Sequence | None = None, *, with_seed: bool = True) -> Settings:
    """Temperature, top-k, top-p (and seed) bound to the URL; the same widgets on both pages.

    slots: containers to draw the controls in, one each (default: all in the current one).
    """
    slots = list(slots) if slots is not None else [st] * 4
    temperature = state.url_float(TEMPERATURE, t("sampling.settings.temperature"), 0.0, T_MAX, DEFAULT_T, 0.05,
                                  help=t("sampling.settings.temperature_help"), container=slots[0])
    top_k = state.url_int(TOP_K, t("sampling.settings.top_k"), 0, K_MAX, 0,
                          help=t("sampling.settings.top_k_help"), container=slots[1])
    top_p = state.url_float(TOP_P, t("sampling.settings.top_p"), 0.05, 1.0, 1.0, 0.05,
                            help=t("sampling.settings.top_p_help"), container=slots[2])
    seed = seed_control(slots[3]) if with_seed else DEFAULT_SEED
    return Settings(temperature, top_k, top_p, seed)


def seed_control(container=None) -> int:
    return state.url_int(SEED, t("sampling.settings.seed"), 0, SEED_MAX, DEFAULT_SEED, widget="number",
                         help=t("sampling.settings.seed_help"), container=container)


STATE_KEY = "_generation_steps"


@dataclass
class StepState:
    signature: tuple                     # what the steps depend on (model, prompt ids, settings, limit)
    generator: object                    # lm.generate_steps(...) still running, or None when finished
    steps: list[Step] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.generator is None

    def ensure(self, n: int) -> None:
        """Advance until n steps exist or generation stopped (EOS or the limit)."""
        while len(self.steps) < n and self.generator is not None:
            step = next(self.generator, None)
            if step is None:
                self.generator = None
                break
            self.steps.append(step)
            if step.stop:
                self.generator = None


def step_state(lm, prompt_ids: Sequence[int], max_new: int, kwargs: dict, seed: int) -> StepState:
    """This session's steps for these inputs (a fresh generator when any input changed)."""
    signature = (lm.name, tuple(prompt_ids), max_new, tuple(sorted(kwargs.items())), seed)
    current = st.session_state.get(STATE_KEY)
    if current is None or current.signature != signature:
        generator = lm.generate_steps(list(prompt_ids), max_new, seed=seed, use_kv_cache=True, **kwargs)
        current = StepState(signature, generator)
        st.session_state[STATE_KEY] = current
    return current
