"""The position lesson's shared computation: its forward pass, keeping the chosen layer's
queries and keys before and after RoPE, shared through the run cache."""

from __future__ import annotations

from course.cache import default_tokens
from lesson_model.analysis import rope as R
from server.models import CachedRun, cached_run

CAP = 128                      # prompt tokens the lesson runs
DEFAULT_LAYER_FRACTION = 0.55  # default layer: this fraction of the stack (16 of 30, 9 of 18)


def default_layer(cfg) -> int:
    return int(cfg.n_layers * DEFAULT_LAYER_FRACTION)


def lesson_run(lm, tokens, layer: int) -> CachedRun:
    """The page's forward pass over ``tokens`` (Token objects): ``layer``'s q and k, before and after RoPE."""
    return cached_run(lm, [tok.id for tok in tokens], R.rope_hook_names(layer))


def warm(lm, lang: str) -> None:
    lesson_run(lm, default_tokens(lm, lang, CAP), default_layer(lm.cfg))
