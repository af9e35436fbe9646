"""Logit lens (nostalgebraist, 2020): read the residual stream after every block as if it
were the last one.

The model turns its final residual vector into logits with
    logits = RMSNorm_final(resid) @ W_U
(on Gemma too: its final norm, and its unembedding tied to the embedding matrix; the √d_model
scale on the way in does not matter, the norm divides it out). The logit lens applies the
same read-out to the stream after block L (each vector
normalized by its own size, with the final norm's weight), which shows the prediction
taking shape layer by layer. After the last block it is exactly the model's output.

    from lesson_model.analysis.lens import logit_lens, logit_lens_names
    run = lm.run(text, names=logit_lens_names(lm))
    lens = logit_lens(lm, run)
    lens.top_ids[-1, -1]   # the model's own next-token prediction
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


CHUNK_FLOATS = 256 * 49_152   # logits per decoded chunk (50 MB of float32): 256 rows on SmolLM2, 48 on Gemma
# Vocabulary entries decoded at a time: 2,048 columns of the unembedding (5 MB on Gemma) stay in
# the CPU's caches while every vector reads them. Wider slices took 20-40% longer for 12 to 64
# vectors: a product with a few rows and a very wide matrix repacks the whole matrix first.
SLICE_COLUMNS = 2048


def chunk_rows(lm) -> int:
    """Vectors decoded per matrix product, so a chunk of logits stays at CHUNK_FLOATS."""
    return max(1, CHUNK_FLOATS // lm.cfg.vocab_size)


def slice_width() -> int:
    """Vocabulary entries decoded at a time (read_out, and the What-if lab's read_runs)."""
    return SLICE_COLUMNS


def logit_lens_names(lm, include_embed: bool = False) -> list[str]:
    """Hook points logit_lens reads."""
    names = [f"blocks.{L}.hook_resid_post" for L in range(lm.cfg.n_layers)]
    return (["hook_embed"] + names) if include_embed else names


def decode_residual(lm, resid: torch.Tensor) -> torch.Tensor:
    """The model's read-out applied to any residual vectors: [..., d_model] -> logits [..., vocab]
    (computed on the model's device, returned on resid's)."""
    return _decode(lm, resid).to(resid.device)


def _normed(lm, resid: torch.Tensor) -> torch.Tensor:
    """The final norm of the model applied to resid [..., d_model], on the model's device."""
    d = lm.decoder
    w = d.ln_final.weight.detach().float()
    resid = resid.float().to(w.device)
    return resid / (resid.pow(2).mean(-1, keepdim=True) + d.ln_final.eps).sqrt() * w      # [..., d_model]


def _decode(lm, resid: torch.Tensor) -> torch.Tensor:
    """decode_residual, leaving the logits on the model's device."""
    with torch.inference_mode():
        return _normed(lm, resid) @ lm.decoder.W_U.detach().float()                     # [..., vocab]


def read_out(lm, resid: torch.Tensor, k: int, targets: torch.Tensor | None = None):
    """What decode_residual's logits say about each of the vectors resid [rows, d_model], without
    holding them: the k most likely tokens and their probabilities ([rows, k] each), and with
    ``targets`` [rows] the probability of each row's target and its rank (the number of tokens
    with a larger logit; 0 = top), [rows] each (None without targets).

    The vocabulary is decoded one slice of columns at a time (slice_width), for every row at
    once: the unembedding is read once, and a slice of logits stays in the CPU's caches. The
    softmax is kept as it goes (the largest logit so far and the sum of exp(logit - largest)),
    so each probability is exp(logit - logsumexp) over the whole vocabulary."""
    W = lm.decoder.W_U.detach().float()                                    # [d_model, vocab]
    with torch.inference_mode():
        normed = _normed(lm, resid)                                        # [rows, d_model]
        rows, vocab = normed.shape[0], W.shape[1]
        largest = torch.full((rows,), -torch.inf, device=W.device)         # [rows] running max logit
        total = torch.zeros(rows, device=W.device)                         # [rows] sum of exp(logit - largest)
        top_v = torch.empty(rows, 0, device=W.device)                      # [rows, <=k] best logits so far
        top_i = torch.empty(rows, 0, dtype=torch.long, device=W.device)
        if targets is not None:
            targets = torch.as_tensor(targets).reshape(-1).to(W.device)
            # each row's target logit, by the same matrix product as the slices (an elementwise
            # sum rounds differently, and a near-tie would then count the wrong way)
            wanted, which = targets.unique(return_inverse=True)
            target_logit = (normed @ W[:, wanted]).gather(1, which[:, None])[:, 0]   # [rows]
            above = torch.zeros(rows, dtype=torch.long, device=W.device)   # [rows] tokens with a larger one
        width = slice_width()
        for start in range(0, vocab, width):
            logits = normed @ W[:, start:start + width]                    # [rows, width]
            new_largest = torch.maximum(largest, logits.amax(-1))
            total = total * torch.exp(largest - new_largest) + torch.exp(logits - new_largest[:, None]).sum(-1)
            largest = new_largest
            v, i = logits.topk(min(k, logits.shape[1]), dim=-1)
            top_v, best = torch.cat([top_v, v], 1).topk(min(k, top_v.shape[1] + v.shape[1]), dim=-1)
            top_i = torch.cat([top_i, i + start], 1).gather(1, best)
            if targets is not None:
                larger = logits > target_logit[:, None]                    # [rows, width]
                own = ((targets >= start) & (targets < start + width)).nonzero()[:, 0]
                larger[own, targets[own] - start] = False                  # a token is not larger than itself
                above += larger.sum(-1)
        logsumexp = largest + total.log()                                  # [rows]
        top_p = torch.exp(top_v - logsumexp[:, None])
        if targets is None:
            return top_i, top_p, None, None
        return top_i, top_p, torch.exp(target_logit - logsumexp), above


@dataclass
class LogitLens:
    """The lens over depths x positions.

    Depth rows follow ``layers``: -1 stands for the embedding (before block 0), L for the
    stream after block L.
    """
    layers: list[int]               # depth of each row
    positions: list[int]            # the positions read (columns)
    top_ids: torch.Tensor           # [depth, pos, k] the k most likely next tokens at each depth
    top_probs: torch.Tensor         # [depth, pos, k] their probabilities
    target_ids: torch.Tensor        # [pos] the model's final prediction at each position (argmax)
    target_probs: torch.Tensor      # [depth, pos] that token's probability at each depth
    target_ranks: torch.Tensor      # [depth, pos] its rank at each depth (0 = top)


def logit_lens(lm, run, positions: list[int] | None = None, k: int = 1, include_embed: bool = False,
               targets: torch.Tensor | None = None) -> LogitLens:
    """Decode the residual stream after every block at ``positions`` (default: all).

    Returns the top-k tokens with probabilities at each (depth, position), and for each
    position the probability and rank, at every depth, of ``targets`` (default: the token
    the model finally predicts there, the argmax of the last depth's logits).
    Every (depth, position) vector is read out together, a slice of the vocabulary at a time
    (read_out), so the logits are never held whole.
    """
    n_pos = run.cache[f"blocks.{lm.cfg.n_layers - 1}.hook_resid_post"].shape[1]
    positions = list(range(n_pos)) if positions is None else [p % n_pos for p in positions]
    layers = ([-1] if include_embed else []) + list(range(lm.cfg.n_layers))
    index = torch.tensor(positions)

    def stream(depth: int) -> torch.Tensor:                                    # [pos, d_model]
        name = "hook_embed" if depth == -1 else f"blocks.{depth}.hook_resid_post"
        return run.cache[name][0, index]

    streams = torch.stack([stream(depth) for depth in layers])                     # [depth, pos, d_model]
    if targets is None:       # the model's own prediction at each position: the last depth's top token
        last_i, last_p, _, _ = read_out(lm, streams[-1], k)
        targets = last_i[:, 0]
        ranks_last = torch.zeros_like(targets)                                     # the top token is rank 0
        earlier = read_out(lm, streams[:-1].reshape(-1, streams.shape[-1]), k,
                           targets.repeat(len(layers) - 1)) if len(layers) > 1 else None
        parts = ([] if earlier is None else [earlier]) + [(last_i, last_p, last_p[:, 0], ranks_last)]
    else:                     # every depth against the given targets
        targets = torch.as_tensor(targets).reshape(-1)
        parts = [read_out(lm, streams.reshape(-1, streams.shape[-1]), k, targets.repeat(len(layers)))]
    top_i, top_p, t_probs, t_ranks = (torch.cat([part[j] for part in parts]).cpu() for j in range(4))
    shape = (len(layers), len(positions))
    top_ids, top_probs = top_i.reshape(*shape, k), top_p.reshape(*shape, k)
    target_probs, target_ranks = t_probs.reshape(shape), t_ranks.reshape(shape)
    targets = targets.cpu()
    return LogitLens(layers=layers, positions=positions, top_ids=top_ids, top_probs=top_probs,
                     target_ids=targets, target_probs=target_probs, target_ranks=target_ranks)


def first_depth_on_top(lens: LogitLens, column: int) -> int | None:
    """The first depth (a value of lens.layers) from which the target stays the top token
    at that column to the end; None if it never does."""
    ranks = lens.target_ranks[:, column]
    if int(ranks[-1]) != 0:
        return None
    row = len(ranks) - 1
    while row > 0 and int(ranks[row - 1]) == 0:
        row -= 1
    return lens.layers[row]
