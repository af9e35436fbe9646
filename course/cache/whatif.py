"""The What-if lab's shared computations: the intact model's run and the run with the switches on,
on the learner's prompt, and which switches a model has (its first view has one on)."""

from __future__ import annotations

from course.cache import default_tokens
from lesson_model import whatif as W
from lesson_model.analysis import whatif as A
from server.models import CachedRun, cached_run

CAP = 64             # tokens of the prompt this page runs (two runs, every position's loss)
DEFAULT_ON = "nomask"


def bool_switches(cfg) -> dict[str, str]:
    """The on/off switches the loaded model can have, URL key -> Switches field (decided from
    its config, not its name)."""
    switches = {"norope": "no_rope", "noscale": "no_scale", "nomask": "no_mask", "nonorms": "no_norms",
                "shuffle": "shuffle"}
    if cfg.qk_norm:
        switches["noqk"] = "no_qk_norm"
    if cfg.sliding_layers:
        switches["nowin"] = "no_window"
    return switches


def default_switches(cfg) -> W.Switches:
    """What the page's controls give before the learner touches them: DEFAULT_ON alone."""
    return W.Switches(**{field: key == DEFAULT_ON for key, field in bool_switches(cfg).items()})


def lesson_runs(lm, tokens, sw: W.Switches) -> tuple[CachedRun, CachedRun]:
    """(intact, switched) forward passes over ``tokens`` (Token objects), shared through the run
    cache; the same run twice when no switch is on."""
    ids = [tok.id for tok in tokens]
    before = cached_run(lm, ids, A.capture_names(lm.cfg, W.Switches()))
    if not sw.any():
        return before, before
    # A fresh dict of hook functions for this call (their captures live in its closures).
    return before, cached_run(lm, ids, A.capture_names(lm.cfg, sw), hooks=W.hooks_for(lm, sw), hooks_key=sw.key())


def warm(lm, lang: str) -> None:
    lesson_runs(lm, default_tokens(lm, lang, CAP), default_switches(lm.cfg))
