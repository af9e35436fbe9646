"""The feed-forward network (MLP) up close: its neurons, its non-linearity, and what a
neuron writes.

Both bundled models' MLPs are gated; the gate's activation is the model's own
(lm.cfg.activation: "silu" for SwiGLU, SmolLM2; "gelu_tanh" for GeGLU, Gemma):

    gate = x @ gate_proj                 [pos, d_ff]   hook_pre
    up   = x @ up_proj                   [pos, d_ff]   hook_pre_linear
    post = act(gate) * up                [pos, d_ff]   hook_post: the "neuron activations"
    out  = post @ down_proj              [pos, d_model]
    (with post_norms, Gemma: out = RMSNorm_ln2_post(out) before it is added to the stream)

Neuron n is column n of gate_proj and up_proj (what it reads) and row n of down_proj
(what it writes): the MLP's output is sum_n post[n] * down_proj[n]. A neuron's value in
hook_post can be negative as well as positive, and a negative value writes the opposite
direction; "most active" below means largest |value| unless asked otherwise.

    from lesson_model.analysis.neurons import neuron_top_activations, neuron_activations, neuron_output_tokens
    run = lm.run(text, names=neuron_names(5))
    neuron_top_activations(lm, run, layer=5, position=-1, k=10)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F


# --------------------------------------------------------------------------- activation functions

def relu(x: torch.Tensor) -> torch.Tensor:
    """max(0, x): the original Transformer's (2017) choice."""
    return torch.relu(x)


def gelu(x: torch.Tensor) -> torch.Tensor:
    """x * Phi(x) with Phi the standard normal CDF (GPT-2, BERT)."""
    return F.gelu(x)


def silu(x: torch.Tensor) -> torch.Tensor:
    """x * sigmoid(x), also called swish (the gate of SwiGLU: LLaMA, Mistral, PaLM, this model)."""
    return F.silu(x)


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GELU's tanh approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): the gate of
    GeGLU (Gemma)."""
    return F.gelu(x, approximate="tanh")


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up. For a positive gate silu(gate) is close to gate (no upper bound), so
    ``up`` is scaled by about gate; for a negative gate the factor lies in (-0.28, 0): a small,
    sign-flipped share of ``up``."""
    return F.silu(gate) * up


ACTIVATIONS = {"relu": relu, "gelu": gelu, "silu": silu}
GATES = {"silu": silu, "gelu_tanh": gelu_tanh}       # lm.cfg.activation -> the gate's function


def curves(lm) -> dict:
    """The activations to draw side by side (relu, gelu, silu), with the model's own form of
    each: on Gemma "gelu" is the tanh approximation its gate uses."""
    return dict(ACTIVATIONS, gelu=gelu_tanh) if lm.cfg.activation == "gelu_tanh" else dict(ACTIVATIONS)


def own_curve(lm) -> str:
    """Which of curves(lm) is the model's own gate: "silu" or "gelu"."""
    return {"silu": "silu", "gelu_tanh": "gelu"}[lm.cfg.activation]


def gate_fn(lm):
    """The activation the model's MLP puts on its gate (lm.cfg.activation)."""
    return GATES[lm.cfg.activation]


def gated(lm, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """act(gate) * up with the model's own activation: SwiGLU on SmolLM2, GeGLU on Gemma."""
    return gate_fn(lm)(gate) * up


def activation_min(name: str) -> float:
    """The lowest value an activation reaches (for a negative input): SiLU -0.2785 at -1.278,
    GELU-tanh -0.1700 at -0.752."""
    return float(GATES[name](torch.linspace(-4.0, 0.0, 40_001, dtype=torch.float64)).min())


# --------------------------------------------------------------------------- neurons on a run

def neuron_names(layer: int) -> list[str]:
    """Hook points the neuron functions read for one layer."""
    return [f"blocks.{layer}.mlp.hook_post"]


@dataclass(frozen=True)
class NeuronActivation:
    neuron: int       # index in 0 .. d_ff-1
    value: float      # its hook_post value (act(gate) * up) at the position


def neuron_top_activations(lm, run, layer: int, position: int = -1, k: int = 10,
                           by: Literal["abs", "positive", "negative"] = "abs") -> list[NeuronActivation]:
    """The k neurons of ``layer`` with the largest activation at ``position``.

    by="abs" ranks by |value| (a negative value writes its direction with the sign flipped,
    just as strongly); "positive"/"negative" rank by the signed value.
    """
    post = run.cache[f"blocks.{layer}.mlp.hook_post"][0, position].float()     # [d_ff]
    key = {"abs": post.abs(), "positive": post, "negative": -post}[by]
    top = torch.topk(key, min(k, post.numel())).indices                        # [k]
    return [NeuronActivation(int(n), float(post[n])) for n in top]


def neuron_activations(lm, run, layer: int, neuron: int) -> torch.Tensor:
    """One neuron's activation at every position of the run: [pos]."""
    return run.cache[f"blocks.{layer}.mlp.hook_post"][0, :, neuron].float()


@dataclass
class NeuronVocab:
    """The vocabulary entries whose logits one unit of this neuron raises or lowers most,
    directly (through the unembedding, ignoring every later layer)."""
    promoted: list[tuple[int, float]]     # (token id, logit change per unit of activation), largest first
    suppressed: list[tuple[int, float]]   # most negative first


def neuron_write(lm, layer: int, neuron: int) -> torch.Tensor:
    """The direction one neuron writes into the residual stream per unit of activation: [d_model].

    down_proj[neuron]; with post_norms (Gemma) times ln2_post's weight, since the MLP's output
    passes that norm before it is added (its division by the output's size depends on the run
    and scales every neuron alike, so it is left out here; see neuron_effects_on_token)."""
    block = lm.decoder.blocks[layer]
    direction = block.mlp.down_proj[neuron].detach().float()                    # [d_model]
    if hasattr(block, "ln2_post"):
        direction = direction * block.ln2_post.weight.detach().float()
    return direction


def neuron_output_direction(lm, layer: int, neuron: int, through_norm: bool = True) -> torch.Tensor:
    """The neuron's effect on every logit per unit of activation: [vocab].

    neuron_write is what the neuron adds to the residual stream. Read straight out
    through the unembedding (optionally times the final norm's weight, as the real read-out
    does; the norms' divisions by the vector's size are left out, they scale all logits alike).
    """
    d = lm.decoder
    direction = neuron_write(lm, layer, neuron)                                 # [d_model]
    if through_norm:
        direction = direction * d.ln_final.weight.detach().float()              # [d_model]
    return direction @ d.W_U.detach().float()                                   # [vocab]


def neuron_output_tokens(lm, layer: int, neuron: int, k: int = 10, through_norm: bool = True) -> NeuronVocab:
    """Top-k tokens this neuron's output direction promotes (and suppresses) through the unembedding."""
    with torch.inference_mode():
        scores = neuron_output_direction(lm, layer, neuron, through_norm)       # [vocab]
        up, down = torch.topk(scores, k), torch.topk(-scores, k)
    return NeuronVocab(promoted=[(int(i), float(v)) for v, i in zip(up.values, up.indices)],
                       suppressed=[(int(i), -float(v)) for v, i in zip(down.values, down.indices)])


def neuron_effect_names(lm, layer: int) -> list[str]:
    """Hook points neuron_logit_effect, neuron_effects_on_token and strongest_pusher read
    (with post_norms also ln2_post's scale, which every neuron's write is divided by)."""
    names = [f"blocks.{layer}.mlp.hook_post", "ln_final.hook_scale"]
    return names + ([f"blocks.{layer}.ln2_post.hook_scale"] if lm.cfg.post_norms else [])


def _write_scale(lm, run, layer: int, position: int) -> float:
    """What every neuron's write is divided by before it reaches the stream: the final norm's
    scale, times ln2_post's scale with post_norms (both frozen at this run's values)."""
    scale = float(run.cache["ln_final.hook_scale"][0, position, 0])
    if lm.cfg.post_norms:
        scale *= float(run.cache[f"blocks.{layer}.ln2_post.hook_scale"][0, position, 0])
    return scale


def neuron_logit_effect(lm, run, layer: int, neuron: int, position: int = -1, k: int = 10) -> NeuronVocab:
    """What this neuron, at this position, adds directly to each next-token logit there.

    effect[t] = post[neuron] * (neuron_write / s * w_ln) . W_U[:, t], with s the final
    norm's scale at the position (times ln2_post's scale on a model with post_norms), frozen
    as in direct logit attribution. Summed over all neurons of the layer it is that MLP's
    direct logit attribution. A negative activation flips the neuron's per-unit lists
    (neuron_output_tokens): what it suppresses per unit, it pushes up here.
    """
    act = float(run.cache[f"blocks.{layer}.mlp.hook_post"][0, position, neuron])
    scale = _write_scale(lm, run, layer, position)
    with torch.inference_mode():
        effect = neuron_output_direction(lm, layer, neuron, through_norm=True) * (act / scale)   # [vocab]
        up, down = torch.topk(effect, k), torch.topk(-effect, k)
    return NeuronVocab(promoted=[(int(i), float(v)) for v, i in zip(up.values, up.indices)],
                       suppressed=[(int(i), -float(v)) for v, i in zip(down.values, down.indices)])


def neuron_effects_on_token(lm, run, layer: int, token: int, position: int = -1) -> torch.Tensor:
    """Every neuron's direct effect, at ``position``, on the logit of one token: [d_ff].

    effect[n] = post[n] * (down_proj[n] (* w_post) / s * w_ln) . W_U[:, token] (s frozen, as
    in direct logit attribution; with post_norms s includes ln2_post's scale and w_post is its
    weight); the sum over n is that MLP's direct logit attribution for the token.
    """
    d = lm.decoder
    block = d.blocks[layer]
    post = run.cache[f"blocks.{layer}.mlp.hook_post"][0, position].float()            # [d_ff]
    scale = _write_scale(lm, run, layer, position)
    with torch.inference_mode():
        column = d.W_U[:, token].detach().float() * d.ln_final.weight.detach().float()   # [d_model]
        if hasattr(block, "ln2_post"):
            column = column * block.ln2_post.weight.detach().float()
        per_unit = block.mlp.down_proj.detach().float() @ column                          # [d_ff]
    return post * per_unit.to(post.device) / scale


# --------------------------------------------------------------------------- the neuron that pushes a token most

@dataclass(frozen=True)
class Pusher:
    """Of the k most active neurons at a position, the one whose direct effect raises one
    token's logit the most."""
    neuron: int
    value: float      # its activation (hook_post) at the position
    push: float       # its direct effect on the token's logit there (final-norm scale frozen)
    total: float      # every neuron of the layer together (the MLP's direct logit attribution)
    scale: float      # the final norm's divisor s at the position


def strongest_pusher(lm, run, layer: int, token: int, position: int = -1, k: int = 12) -> Pusher:
    """Among the ``k`` neurons with the largest |activation| at ``position``, the one that
    pushes ``token`` up the most, directly (reads neuron_effect_names(lm, layer))."""
    top = neuron_top_activations(lm, run, layer, position, k=k)
    pushes = neuron_effects_on_token(lm, run, layer, token, position)              # [d_ff]
    best = max(top, key=lambda a: float(pushes[a.neuron]))
    return Pusher(neuron=best.neuron, value=best.value, push=float(pushes[best.neuron]),
                  total=float(pushes.sum()), scale=float(run.cache["ln_final.hook_scale"][0, position, 0]))


# --------------------------------------------------------------------------- why the non-linearity

SILU_MIN = activation_min("silu")   # -0.2785, at g = -1.278


@dataclass
class LinearCollapse:
    """A plain two-matrix MLP with its activation taken out is one matrix. Built here from
    this layer's up_proj (as W_in) and down_proj (as W_out); the real gated MLP also has
    gate_proj, and does not collapse (see nonlinearity_check)."""
    product: torch.Tensor            # [d_model, d_model] = up_proj @ down_proj
    singular_values: torch.Tensor    # [d_model], largest first
    rank: int                        # numerical rank of the product
    params_two: int                  # numbers in up_proj and down_proj together
    params_one: int                  # numbers in the product
    max_error: float                 # largest |x @ up @ down - x @ product| on a test vector


def linear_collapse(lm, layer: int, x: torch.Tensor | None = None) -> LinearCollapse:
    """Two linear maps in a row are one linear map: (x @ W_in) @ W_out == x @ (W_in @ W_out).

    A plain MLP (the 2017 Transformer's, GPT-2's) is act(x W_in) W_out. Without ``act``,
    take W_in = this layer's up_proj [d_model, d_ff] and W_out = its down_proj
    [d_ff, d_model]: their product is a single [d_model, d_model] matrix whose rank is at
    most d_model, however wide d_ff is. ``x`` [d_model] (default: a fixed random vector)
    checks the two ways agree. (This leaves gate_proj out: it is the plain MLP's story,
    not the bundled models' gated one.)
    """
    mlp = lm.decoder.blocks[layer].mlp
    with torch.inference_mode():
        up = mlp.up_proj.detach().double()                                      # [d_model, d_ff]
        down = mlp.down_proj.detach().double()                                  # [d_ff, d_model]
        product = up @ down                                                     # [d_model, d_model]
        s = torch.linalg.svdvals(product)                                       # [d_model]
        # The rank at float64's precision: the product is computed in float64 from float32
        # weights, so a singular value far below float32's epsilon times the largest is still a
        # direction the map keeps (Gemma's layer 15 has one at 1.85e-4 against 2.87: squeezed, not lost).
        tol = s.max() * max(product.shape) * torch.finfo(torch.float64).eps
        if x is None:
            x = torch.randn(up.shape[0], generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        x = x.detach().double().reshape(-1).to(up.device)
        err = float(((x @ up) @ down - x @ product).abs().max())
    return LinearCollapse(product=product.float().cpu(), singular_values=s.float().cpu(), rank=int((s > tol).sum()),
                          params_two=up.numel() + down.numel(), params_one=product.numel(), max_error=err)


def mlp_names(layer: int) -> list[str]:
    """Hook points nonlinearity_check reads (the MLP's real input: ln2's output before its weight)."""
    return [f"blocks.{layer}.ln2.hook_normalized"]


MAPS = ("plain", "bilinear", "real")


@dataclass
class Additivity:
    """How far three maps made of one layer's MLP weights are from linear, on two real MLP
    inputs a and b:

        plain      x -> (x W_up) W_down                    a two-matrix MLP, activation taken out
        bilinear   x -> ((x W_gate) * (x W_up)) W_down     the gated MLP, its activation taken out
        real       x -> (act(x W_gate) * (x W_up)) W_down  the MLP itself (act: the model's own,
                                                           lm.cfg.activation; before any post-norm)

    A linear map has gap 0 and doubling 2. The bilinear map is a product of two linear
    maps, so it is quadratic: f(2a) = 4 f(a) exactly, and f(a + b) picks up the cross terms
    (a W_gate * b W_up + b W_gate * a W_up) W_down.
    """
    gap: dict[str, float]       # |f(a+b) - f(a) - f(b)| / |f(a+b)|
    doubling: dict[str, float]  # |f(2a)| / |f(a)|
    quadratic_error: float      # |f(2a) - 4 f(a)| / |f(2a)| for the bilinear map (0 up to rounding)

    # the names the page and older callers use
    @property
    def mlp_gap(self) -> float:
        return self.gap["real"]

    @property
    def linear_gap(self) -> float:
        return self.gap["plain"]


def mlp_forward(lm, layer: int, x: torch.Tensor) -> torch.Tensor:
    """The layer's MLP on MLP inputs x [..., d_model] (already normalized, weight applied),
    with the model's own activation, computed on the model's device and returned on x's.
    (Its output before any post-norm: on a model with post_norms, hook_mlp_out is
    ln2_post of this.)"""
    mlp = lm.decoder.blocks[layer].mlp
    v = x.to(mlp.down_proj.device)
    return (gated(lm, v @ mlp.gate_proj, v @ mlp.up_proj) @ mlp.down_proj).to(x.device)


def mlp_maps(lm, layer: int) -> dict:
    """The three maps of Additivity for one layer, each x [..., d_model] -> [..., d_model]."""
    mlp = lm.decoder.blocks[layer].mlp
    return {
        "plain": lambda v: (v @ mlp.up_proj) @ mlp.down_proj,
        "bilinear": lambda v: ((v @ mlp.gate_proj) * (v @ mlp.up_proj)) @ mlp.down_proj,
        "real": lambda v: mlp_forward(lm, layer, v),
    }


def nonlinearity_check(lm, run, layer: int, pos_a: int, pos_b: int) -> Additivity:
    """Feed three maps built from the MLP of ``layer`` the real inputs of two positions,
    their sum, and twice the first (see Additivity).

    Only the plain map adds up: the gated MLP is not linear even with its activation taken out,
    which is why stacking MLPs builds functions no single matrix can.
    """
    w = lm.decoder.blocks[layer].ln2.weight.detach().float()
    normalized = run.cache[f"blocks.{layer}.ln2.hook_normalized"][0].float().to(w.device)   # [pos, d_model]
    a, b = (normalized[pos_a] * w).double(), (normalized[pos_b] * w).double()   # [d_model] each: what the MLP reads

    def rel(whole: torch.Tensor, parts: torch.Tensor) -> float:
        return float((whole - parts).norm() / whole.norm().clamp_min(1e-30))

    gap, doubling = {}, {}
    with torch.inference_mode():
        maps = mlp_maps(lm, layer)
        for name in MAPS:
            f = lambda v, m=maps[name]: m(v.to(w.dtype)).double()             # noqa: E731
            fa, fb, fab, f2a = f(a), f(b), f(a + b), f(2 * a)
            gap[name] = rel(fab, fa + fb)
            doubling[name] = float(f2a.norm() / fa.norm().clamp_min(1e-30))
            if name == "bilinear":
                quadratic = rel(f2a, 4 * fa)
    return Additivity(gap=gap, doubling=doubling, quadratic_error=quadratic)
