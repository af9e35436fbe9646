"""Normalization and the size of the residual stream.

    LayerNorm(x) = (x - mean(x)) / sqrt(var(x) + eps) * w + b     center, then scale
    RMSNorm(x)   = x / sqrt(mean(x^2) + eps) * w                  scale only (this model)

Both divide a vector by a measure of its size, so a block reads a vector of a steady
size however large the residual stream has grown. Where a block uses them: before each
sub-layer (pre-norm: ln1, ln2, both models), and on a model with post_norms (Gemma's
"sandwich") also after each sub-layer, before its output is added (ln1_post, ln2_post),
plus, with qk_norm, over every head's q and k (q_norm, k_norm); see block_norms and
sublayer_writes. RMSNorm skips the centering (and the
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


def block_norms(lm) -> list[str]:
    """The norms inside one block, in the order a vector meets them (names as in the hooks):
    ["ln1", "ln2"] pre-norm only; with qk_norm and post_norms
    ["ln1", "attn.q_norm", "attn.k_norm", "ln1_post", "ln2", "ln2_post"]."""
    cfg = lm.cfg
    return (["ln1"] + (["attn.q_norm", "attn.k_norm"] if cfg.qk_norm else []) + (["ln1_post"] if cfg.post_norms else [])
            + ["ln2"] + (["ln2_post"] if cfg.post_norms else []))


def sublayer_write_names(lm) -> list[str]:
    """Hook points sublayer_writes reads."""
    names = []
    for L in range(lm.cfg.n_layers):
        names += [f"blocks.{L}.hook_attn_out", f"blocks.{L}.hook_mlp_out"]
        if lm.cfg.post_norms:
            names += [f"blocks.{L}.ln1_post.hook_scale", f"blocks.{L}.ln2_post.hook_scale"]
    return names


@dataclass
class SublayerWrites:
    """How long the vector each sub-layer computes is, and how long what it adds to the stream is,
    at one position. Column 0 is attention, column 1 the MLP."""
    computed: torch.Tensor   # [n_layers, 2] |output| before any post-norm (attention: the heads' sum; MLP: down_proj's output)
    written: torch.Tensor    # [n_layers, 2] |hook_attn_out|, |hook_mlp_out|: what is added to the stream
    post_norms: bool         # False: nothing between the two, computed == written


def sublayer_writes(lm, run, position: int = -1) -> SublayerWrites:
    """The size of each sub-layer's output before and after its post-norm.

    With post_norms, hook_attn_out = ln1_post(o) = o / s * w with s = sqrt(mean(o^2) + eps)
    (ln1_post.hook_scale), so the output's own length is |o| = sqrt(d_model (s^2 - eps)),
    read from the scale without keeping o; likewise for the MLP and ln2_post. Without post
    norms the sub-layer's output is what is added.
    """
    d, L = lm.cfg.d_model, lm.cfg.n_layers
    written = torch.tensor([[float(run.cache[f"blocks.{i}.hook_{k}_out"][0, position].double().norm())
                             for k in ("attn", "mlp")] for i in range(L)], dtype=torch.float64)
    if not lm.cfg.post_norms:
        return SublayerWrites(computed=written.clone(), written=written, post_norms=False)
    computed = torch.zeros(L, 2, dtype=torch.float64)
    for i in range(L):
        for j, norm in enumerate(("ln1_post", "ln2_post")):
            s = float(run.cache[f"blocks.{i}.{norm}.hook_scale"][0, position, 0])
            eps = getattr(lm.decoder.blocks[i], norm).eps
            computed[i, j] = (d * max(s * s - eps, 0.0)) ** 0.5
    return SublayerWrites(computed=computed, written=written, post_norms=True)


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


# --------------------------------------------------------------------------- the gradient's path back

@dataclass
class GradientFlow:
    """How the gradient of one logit reaches each depth of the residual stream."""
    token: int
    position: int
    grad_norms: torch.Tensor    # [n_layers + 1]: |d logit / d resid| entering block 0..n-1, then after the last block
    branch_ratio: torch.Tensor  # [n_layers, 2]: per block, |gradient through attn| / |gradient through the skip|, same for the MLP


def gradient_names(lm) -> list[str]:
    """Hook points residual_gradients differentiates with respect to."""
    names = [f"blocks.{L}.hook_resid_pre" for L in range(lm.cfg.n_layers)]
    names += [f"blocks.{L}.hook_resid_mid" for L in range(lm.cfg.n_layers)]
    return names + [f"blocks.{lm.cfg.n_layers - 1}.hook_resid_post"]


def residual_gradients(lm, x, token: int | None = None, position: int = -1) -> GradientFlow:
    """Backpropagate one logit (``token`` at ``position``; default the model's top prediction
    there) to the residual stream at every depth, as training would.

    Each block computes  mid = pre + attn(pre),  post = mid + mlp(mid),  so the gradient
    arriving at ``pre`` is the one at ``mid`` (the skip path, multiplied by exactly 1) plus
    what flows back through the attention branch; likewise for the MLP. ``grad_norms`` are
    the gradient's lengths over all positions; ``branch_ratio`` compares, per block, the
    part that came back through a branch with the part that came through the skip.

    Runs its own forward and backward pass (no parameter gradients are kept, and nothing is
    stored on the shared model).
    """
    from lesson_model.decoder import Hooks

    ids = lm.to_ids(x)
    n_pos = ids.shape[1]
    position = position % n_pos
    # Causal attention: the logit at ``position`` never sees a later token, so the gradient at
    # later positions is zero; the pass stops at ``position``, and only the one logit followed
    # is unembedded (one column of W_U, not the whole vocabulary, forward and back).
    ids = ids[:, :position + 1]                                                # [1, position + 1]
    names = gradient_names(lm)
    hooks = Hooks(names=names, fns={"hook_embed": lambda e: e.detach().requires_grad_(True)})
    W_U = lm.decoder.W_U.detach()                                              # [d_model, vocab]
    with torch.enable_grad():
        final = lm.decoder(ids, hooks, last_only=True, unembed=False)[0, -1]   # [d_model] at position
        if token is None:
            token = int((final.detach() @ W_U).argmax())
        logit = final @ W_U[:, token]                                          # [] that token's logit
        grads = torch.autograd.grad(logit, [hooks.cache[n] for n in names])
    g = {n: gr[0].detach().float().cpu() for n, gr in zip(names, grads)}      # each [position + 1, d_model]
    L = lm.cfg.n_layers
    after = [g[f"blocks.{i + 1}.hook_resid_pre"] if i + 1 < L else g[f"blocks.{L - 1}.hook_resid_post"] for i in range(L)]
    norms = torch.stack([g[f"blocks.{i}.hook_resid_pre"].norm() for i in range(L)] + [after[-1].norm()])
    ratio = torch.zeros(L, 2)
    for i in range(L):
        pre, mid = g[f"blocks.{i}.hook_resid_pre"], g[f"blocks.{i}.hook_resid_mid"]
        ratio[i, 0] = (pre - mid).norm() / mid.norm().clamp_min(1e-12)         # attention branch vs skip
        ratio[i, 1] = (mid - after[i]).norm() / after[i].norm().clamp_min(1e-12)   # MLP branch vs skip
    return GradientFlow(token=int(token), position=position, grad_norms=norms, branch_ratio=ratio)


def sink_names(lm, layers=None) -> list[str]:
    """Hook points first_token_attention reads (default: every layer)."""
    layers = range(lm.cfg.n_layers) if layers is None else layers
    return [f"blocks.{L}.attn.hook_pattern" for L in layers]


def first_token_attention(lm, run, skip: int = 1, layers=None) -> torch.Tensor:
    """Per layer (default: every layer), the average share of attention that goes to
    position 0: [len(layers)].

    Averaged over every head and over the query positions from ``skip`` on (position 0 can
    only attend to itself). Large values mean the first token works as an attention sink.
    """
    shares = []
    for L in (range(lm.cfg.n_layers) if layers is None else layers):
        pattern = run.cache[f"blocks.{L}.attn.hook_pattern"][0]                 # [n_heads, q, k]
        shares.append(pattern[:, skip:, 0].float().mean() if pattern.shape[1] > skip else torch.tensor(float("nan")))
    return torch.stack(shares)
