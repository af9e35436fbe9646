"""The residual lesson's shared computations: its forward pass (every part's write, the stream
at each depth, the lens and the attribution tensors), the logit lens kept per position, the
gradient through the stream, and each Try-this example's claims, computed on its own prompt
once per model and language."""

from __future__ import annotations

import hashlib
from typing import NamedTuple

import streamlit as st
import torch

from course.cache import default_tokens, lesson_t
from course.i18n import with_paren
from course.notices import residual as NR
from course.text import num
from course.tokens import md_label
from lesson_model.analysis import attribution as A
from lesson_model.analysis import lens as LL
from lesson_model.analysis import norms as NO
from server.models import CachedRun, cached_run, shared_lru

CAP = 64            # tokens of the prompt the lesson runs
LENS_COLUMNS = 12   # most positions shown in the logit-lens grid (ending at the chosen one)
LENS_CACHE_COLUMNS = 4096   # lens columns kept for every session (a few kilobytes each)
CANDIDATES = 10     # next-token candidates offered for attribution
TRY_EXAMPLES = (1, 2, 3, 4)
TRY_VERSUS = {4: 3}     # example 4 explains the answer against the model's 4th candidate
PAGE = "residual"


def sink_layers(cfg) -> list[int]:
    """The second half of the layers: where the attention sink is measured."""
    return list(range(cfg.n_layers // 2, cfg.n_layers))


def lesson_names(lm) -> list[str]:
    """Every capture the page reads of its pass."""
    cfg = lm.cfg
    return sorted(set(A.dla_names(lm)) | set(NO.residual_names(lm)) | set(LL.logit_lens_names(lm))
                  | set(NO.sink_names(lm, sink_layers(cfg))) | set(NO.sublayer_write_names(lm))
                  | {name for layer in range(cfg.n_layers) for name in A.head_dla_names(lm, layer)})


def lesson_run(lm, ids) -> CachedRun:
    """The page's forward pass over ``ids`` (token ids), shared through the run cache."""
    return cached_run(lm, list(ids), lesson_names(lm))


class LensColumn(NamedTuple):
    """The lens at one position, one entry per depth (LogitLens.layers)."""
    top_ids: list[int]
    top_probs: list[float]
    target_id: int              # the model's final prediction there
    target_ranks: list[int]
    target_probs: list[float]
    layers: list[int]


def lens_window(pos: int, columns: int) -> tuple[int, ...]:
    """The positions of the lens grid: ``columns`` of them at most, ending at ``pos``."""
    return tuple(range(max(0, pos - columns + 1), pos + 1))


def lens_table(lm, ids: tuple[int, ...], window: tuple[int, ...]):
    """The lens at the positions in window, as rows of depths. Under the causal mask the column
    at position p depends only on the tokens up to p, so each column is kept (for every session)
    under that prefix: a prompt edited at its end recomputes only the columns after the edit."""
    kept = shared_lru("residual.lens_columns", LENS_CACHE_COLUMNS)
    as_bytes = b"".join(i.to_bytes(4, "little") for i in ids)
    keys = {p: (lm.name, hashlib.blake2b(as_bytes[:4 * (p + 1)]).digest()) for p in window}   # the prefix's digest
    found = {p: kept.get(keys[p]) for p in window}
    missing = [p for p in window if found[p] is None]
    if missing:
        lens = LL.logit_lens(lm, lesson_run(lm, ids), positions=missing, k=1, include_embed=True)
        for j, p in enumerate(missing):
            found[p] = LensColumn(lens.top_ids[:, j, 0].tolist(), lens.top_probs[:, j, 0].tolist(),
                                  int(lens.target_ids[j]), lens.target_ranks[:, j].tolist(),
                                  lens.target_probs[:, j].tolist(), lens.layers)
            kept.put(keys[p], found[p])
    cols = [found[p] for p in window]

    def rows(field: str) -> list[list]:          # [depth][position]
        return [list(depth) for depth in zip(*(getattr(c, field) for c in cols))]

    return (rows("top_ids"), rows("top_probs"), [c.target_id for c in cols], rows("target_ranks"),
            rows("target_probs"), cols[0].layers)


def candidates(lm, run, pos: int) -> tuple[list[int], list[float]]:
    """The model's CANDIDATES likeliest next tokens at ``pos`` (ids, probabilities): what the
    attribution can explain (the first is the default)."""
    final_logits = LL.decode_residual(lm, run.cache[f"blocks.{lm.cfg.n_layers - 1}.hook_resid_post"][0, pos])
    cand = torch.topk(final_logits.softmax(-1), CANDIDATES)
    return [int(i) for i in cand.indices], [float(p) for p in cand.values]


@st.cache_data(max_entries=16, show_spinner=False)
def gradient_table(model_name: str, ids: tuple[int, ...], token: int, position: int, _lm=None):
    """The gradient of ``token``'s logit at ``position`` through the stream (keyed on the model's name)."""
    flow = NO.residual_gradients(_lm, list(ids), token, position)
    return flow.grad_norms.tolist(), flow.branch_ratio.tolist()


def part_label(t, kind: str, layer: int) -> str:
    """A part of the stream's sum in the lesson's words (``t`` its translator)."""
    return t("part.embed") if kind == "embed" else t(f"part.{kind}", n=layer)


def depth_label(t, depth: int) -> str:
    """Row d of residual_norms / the lens with the embedding: 0 = embedding, d = after block d-1."""
    return t("depth.embed") if depth == 0 else t("depth.after", n=depth - 1)


def try_names(lm) -> list[str]:
    return sorted(set(A.dla_names(lm)) | set(LL.logit_lens_names(lm, include_embed=True)))


@st.cache_data(max_entries=64, show_spinner=False)   # the same for every visitor: once per model and language
def try_detail(model_name: str, lang: str, n: int, _lm=None) -> str:
    """What example n's claim is on its own prompt: where the lens first has the answer on top
    and which parts push it most (against another candidate for TRY_VERSUS) (a model run)."""
    lm, t = _lm, lesson_t(PAGE, _lm, lang)
    cfg = lm.cfg
    ids_n = [tok.id for tok in lm.tokenize(t(f"try.{n}.prompt"))]
    try_run = cached_run(lm, ids_n, try_names(lm))
    lens_n = LL.logit_lens(lm, try_run, positions=[-1], k=1, include_embed=True)
    answer = int(lens_n.target_ids[0])
    start = LL.first_depth_on_top(lens_n, 0)                          # -1: embedding, L: after block L
    if n in TRY_VERSUS:
        other = int(torch.topk(try_run.last_logits, TRY_VERSUS[n] + 1).indices[-1])
        diff = A.direct_logit_attribution(lm, try_run, answer, -1, other_token=other)
        for_i, against_i = int(diff.attn.argmax()), int(diff.mlp.argmin())
        if float(diff.attn[for_i]) <= 0 or float(diff.mlp[against_i]) >= 0:
            return t("try_detail.versus_plain", answer=md_label(lm.token_text(answer)), rank=TRY_VERSUS[n] + 1,
                     other=md_label(lm.token_text(other)), total=num(diff.total, "+.2f"))
        return t("try_detail.versus", answer=md_label(lm.token_text(answer)), other=md_label(lm.token_text(other)),
                 rank=TRY_VERSUS[n] + 1,
                 best=with_paren(part_label(t, "attn", for_i), num(diff.attn[for_i], "+.2f"), lang),
                 worst=with_paren(part_label(t, "mlp", against_i), num(diff.mlp[against_i], "+.2f"), lang))
    dla_n = A.direct_logit_attribution(lm, try_run, answer, -1)
    parts_n = torch.cat([dla_n.attn, dla_n.mlp])
    order_n = torch.argsort(parts_n.abs(), descending=True)[:3].tolist()
    key, fields = NR.dla_parts(layer_parts=parts_n.tolist(), order=order_n, n_layers=cfg.n_layers,
                               part_label=lambda kind, layer: part_label(t, kind, layer), lang=lang)
    parts = t(key, **fields)
    return t("try_detail.lens_embed" if start is not None and start < 0
             else "try_detail.lens_last" if start == cfg.n_layers - 1 else "try_detail.lens",
             answer=md_label(lm.token_text(answer)),
             depth=depth_label(t, start + 1 if start is not None else cfg.n_layers), parts=parts)


def warm(lm, lang: str) -> None:
    ids = tuple(tok.id for tok in default_tokens(lm, lang, CAP))
    run = lesson_run(lm, ids)
    pos = len(ids) - 1                                   # the first view: the last token, every lens column
    lens_table(lm, ids, lens_window(pos, LENS_COLUMNS))
    cand_ids, _ = candidates(lm, run, pos)
    gradient_table(lm.name, ids, cand_ids[0], pos, _lm=lm)
    for n in TRY_EXAMPLES:
        try_detail(lm.name, lang, n, _lm=lm)
