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


def chunk_rows(lm) -> int:
    """Vectors decoded per matrix product, so a chunk of logits stays at CHUNK_FLOATS."""
    return max(1, CHUNK_FLOATS // lm.cfg.vocab_size)


def logit_lens_names(lm, include_embed: bool = False) -> list[str]:
    """Hook points logit_lens reads."""
    names = [f"blocks.{L}.hook_resid_post" for L in range(lm.cfg.n_layers)]
    return (["hook_embed"] + names) if include_embed else names


def decode_residual(lm, resid: torch.Tensor) -> torch.Tensor:
    """The model's read-out applied to any residual vectors: [..., d_model] -> logits [..., vocab]
    (computed on the model's device, returned on resid's)."""
    return _decode(lm, resid).to(resid.device)


def _decode(lm, resid: torch.Tensor) -> torch.Tensor:
    """decode_residual, leaving the logits on the model's device."""
    d = lm.decoder
    w = d.ln_final.weight.detach().float()
    eps = d.ln_final.eps
    resid = resid.float().to(w.device)
    with torch.inference_mode():
        normed = resid / (resid.pow(2).mean(-1, keepdim=True) + eps).sqrt() * w    # [..., d_model]
        return normed @ d.W_U.detach().float()                                     # [..., vocab]


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
    Decodes at most chunk_rows(lm) vectors at a time, so memory stays at CHUNK_FLOATS logits.
    """
    n_pos = run.cache[f"blocks.{lm.cfg.n_layers - 1}.hook_resid_post"].shape[1]
    positions = list(range(n_pos)) if positions is None else [p % n_pos for p in positions]
    layers = ([-1] if include_embed else []) + list(range(lm.cfg.n_layers))
    index = torch.tensor(positions)

    def stream(depth: int) -> torch.Tensor:                                    # [pos, d_model]
        name = "hook_embed" if depth == -1 else f"blocks.{depth}.hook_resid_post"
        return run.cache[name][0, index]

    with torch.inference_mode():
        if targets is None:
            targets = _decode(lm, stream(lm.cfg.n_layers - 1)).argmax(-1)          # [pos]
        targets = torch.as_tensor(targets).reshape(-1).to(lm.decoder.W_E.device)
        # Every (depth, position) vector in one batch, decoded in chunks of rows: the
        # unembedding (vocab x d_model) is read once per chunk instead of once per depth.
        streams = torch.stack([stream(depth) for depth in layers])                 # [depth, pos, d_model]
        flat = streams.reshape(-1, streams.shape[-1])                               # [depth * pos, d_model]
        flat_targets = targets.repeat(len(layers))                                  # [depth * pos]
        tops_i, tops_p, t_probs, t_ranks = [], [], [], []
        rows = chunk_rows(lm)
        for start in range(0, flat.shape[0], rows):
            logits = _decode(lm, flat[start:start + rows])                          # [rows, vocab]
            probs = logits.softmax(-1)
            top = torch.topk(probs, k, dim=-1)
            tops_i.append(top.indices)
            tops_p.append(top.values)
            tgt = flat_targets[start:start + rows, None]                            # [rows, 1]
            t_probs.append(probs.gather(-1, tgt)[:, 0])
            t_ranks.append((logits > logits.gather(-1, tgt)).sum(-1))
        shape = (len(layers), len(positions))
        top_ids, top_probs = torch.cat(tops_i).reshape(*shape, k).cpu(), torch.cat(tops_p).reshape(*shape, k).cpu()
        target_probs, target_ranks = torch.cat(t_probs).reshape(shape).cpu(), torch.cat(t_ranks).reshape(shape).cpu()
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
