"""Normalization and the size of the residual stream.

    LayerNorm(x) = (x - mean(x)) / sqrt(var(x) + eps) * w + b     center, then scale
    RMSNorm(x)   = x / sqrt(mean(x^2) + eps) * w                  scale only (this model)

Both divide a vector by a measure of its size, so a block reads a vector of a steady
size however large the residual stream has grown. RMSNorm skips the centering (and the
bias), which saves work and, in practice, costs no quality (Zhang & Sennrich 2019).

    from lesson_model.analysis.norms import compare_norms, residual_norms
    cmp = compare_norms(run.cache["blocks.5.hook_resid_pre"][0, 3])
    norms = residual_norms(lm, run)          # [n_layers + 1, pos]
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def layer_norm(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm without its learned weight and bias: center, then divide by the std. x: [..., d]."""
    centered = x - x.mean(-1, keepdim=True)                        # [..., d]
    return centered / (centered.pow(2).mean(-1, keepdim=True) + eps).sqrt()


def rms_norm(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """RMSNorm without its learned weight: divide by the root-mean-square. x: [..., d]."""
    return x / (x.pow(2).mean(-1, keepdim=True) + eps).sqrt()


@dataclass
class NormComparison:
    """One vector before and after the two normalizations (learned weights left out)."""
    x: torch.Tensor              # [d] the input
    layer_normed: torch.Tensor   # [d] centered and scaled
    rms_normed: torch.Tensor     # [d] scaled only
    mean: float                  # mean of x
    std: float                   # standard deviation of x (population)
    rms: float                   # root-mean-square of x
    ln_mean: float               # mean after LayerNorm (0)
    ln_std: float                # std after LayerNorm (1)
    rms_mean: float              # mean after RMSNorm (= mean / rms: not 0)
    rms_rms: float               # RMS after RMSNorm (1)
    max_gap: float               # largest |LayerNorm - RMSNorm| over the dimensions


def compare_norms(x: torch.Tensor, eps: float = 1e-5) -> NormComparison:
    """LayerNorm vs RMSNorm on one vector x [d]. When mean(x) is small next to its RMS the
    two give almost the same vector; the difference is exactly the centering."""
    x = x.detach().float().reshape(-1)                             # [d]
    ln, rn = layer_norm(x, eps), rms_norm(x, eps)                  # [d] each
    return NormComparison(
        x=x, layer_normed=ln, rms_normed=rn,
        mean=float(x.mean()), std=float(x.std(correction=0)), rms=float(x.pow(2).mean().sqrt()),
        ln_mean=float(ln.mean()), ln_std=float(ln.std(correction=0)),
        rms_mean=float(rn.mean()), rms_rms=float(rn.pow(2).mean().sqrt()),
        max_gap=float((ln - rn).abs().max()),
    )


def residual_names(lm) -> list[str]:
    """Hook points that residual_norms and massive_activations read."""
    return ["hook_embed"] + [f"blocks.{L}.hook_resid_post" for L in range(lm.cfg.n_layers)]


def residual_stack(lm, run) -> torch.Tensor:
    """The residual stream at every depth: [n_layers + 1, pos, d_model]; row 0 is the
    embedding (before block 0), row L+1 the stream after block L."""
    rows = [run.cache["hook_embed"][0]] + [run.cache[f"blocks.{L}.hook_resid_post"][0] for L in range(lm.cfg.n_layers)]
    return torch.stack(rows).float()                               # [n_layers + 1, pos, d_model]


def residual_norms(lm, run) -> torch.Tensor:
    """Length (L2 norm) of the residual vector at each depth and position: [n_layers + 1, pos]."""
    return residual_stack(lm, run).norm(dim=-1)


@dataclass
class MassiveActivation:
    """A residual vector far longer than the others at the same depth."""
    depth: int          # row of residual_norms: 0 = embedding, L + 1 = after block L
    position: int
    norm: float
    median_norm: float  # median over positions at this depth
    ratio: float        # norm / median_norm
    dim: int            # the dimension holding the largest |value|
    value: float        # that value
    dim_share: float    # fraction of the squared norm in that one dimension


def massive_activations(lm, run, ratio: float = 10.0) -> list[MassiveActivation]:
    """Every (depth, position) whose residual norm is at least ``ratio`` times the median
    norm at that depth (needs at least 3 positions for a meaningful median)."""
    stack = residual_stack(lm, run)                                # [depth, pos, d_model]
    norms = stack.norm(dim=-1)                                     # [depth, pos]
    if norms.shape[1] < 3:
        return []
    medians = norms.median(dim=1).values                           # [depth]
    found = []
    for depth, pos in (norms >= ratio * medians[:, None]).nonzero().tolist():
        vec = stack[depth, pos]
        dim = int(vec.abs().argmax())
        found.append(MassiveActivation(
            depth=depth, position=pos, norm=float(norms[depth, pos]), median_norm=float(medians[depth]),
            ratio=float(norms[depth, pos] / medians[depth]), dim=dim, value=float(vec[dim]),
            dim_share=float(vec[dim] ** 2 / vec.pow(2).sum())))
    return found
