"""Attention for one head, one query, step by step, from the tensors a run captured.

    names = attention_step_names(layer)
    run = lm.run("The cat that I saw yesterday was", names=names)
    steps = attention_steps(lm, run, layer=13, head=8, query=6)
    steps.weights          # [k_pos] softmax weights, equal to hook_pattern's row
    steps.z                # [d_head] weighted sum of values, equal to hook_z

Also: the softmax without the 1/sqrt(d_head) scale on the same scores, a search for
the heads that attend from one token to another, the work attention does as the
prompt grows compared with the parts that grow linearly, and (on a model with
sliding-window layers) a long run showing what a sliding and a global layer can see.

A "run" is anything with ``.cache`` (hook name -> tensor, batch dimension first) and
``.ids``; the functions read batch element 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..decoder import DecoderConfig


def attention_step_names(layer: int) -> list[str]:
    """The hook points attention_steps reads for one layer."""
    a = f"blocks.{layer}.attn"
    return [f"{a}.hook_rot_q", f"{a}.hook_rot_k", f"{a}.hook_v", f"{a}.hook_pattern", f"{a}.hook_z"]


def capture_names(n_layers: int) -> list[str]:
    """Every layer's attention tensors that the attention lessons draw (rotated q and k, v,
    pattern, z): one run serves any layer, head and query without running again."""
    return [name for layer in range(n_layers) for name in attention_step_names(layer)]


def pattern_names(n_layers: int) -> list[str]:
    """hook_pattern of every layer (what find_heads_attending and the head measures read)."""
    return [f"blocks.{layer}.attn.hook_pattern" for layer in range(n_layers)]


@dataclass(frozen=True)
class AttentionSteps:
    """One query's attention in one head, every intermediate value (float32, on the CPU).

    Positions after the query are kept in the vectors (so they line up with the tokens)
    and masked: ``masked`` is -inf there and ``weights`` 0.
    """

    layer: int
    head: int
    kv_head: int                 # the key/value head this query head reads (GQA)
    query: int                   # query position
    d_head: int
    q: torch.Tensor              # [d_head]          the query vector, after RoPE
    keys: torch.Tensor           # [k_pos, d_head]   every position's key, after RoPE
    values: torch.Tensor         # [k_pos, d_head]
    raw: torch.Tensor            # [k_pos]           q . k
    scaled: torch.Tensor         # [k_pos]           q . k / sqrt(d_head)
    masked: torch.Tensor         # [k_pos]           scaled, -inf after the query
    weights: torch.Tensor        # [k_pos]           softmax(masked), sums to 1
    weighted_values: torch.Tensor  # [k_pos, d_head] weights[:, None] * values
    z: torch.Tensor              # [d_head]          sum of weighted_values: the head's output here
    pattern_row: torch.Tensor    # [k_pos]           the model's own hook_pattern row, for the check
    z_hook: torch.Tensor         # [d_head]          the model's own hook_z, for the check

    @property
    def scale(self) -> float:
        return math.sqrt(self.d_head)

    @property
    def max_weight_error(self) -> float:
        """Largest |our softmax weight - the model's pattern| (float32 rounding only)."""
        return float((self.weights - self.pattern_row).abs().max())

    @property
    def max_z_error(self) -> float:
        return float((self.z - self.z_hook).abs().max())


def attention_steps(lm, run, layer: int, head: int, query: int) -> AttentionSteps:
    """Recompute head ``head`` of layer ``layer`` at position ``query`` from the captured
    q and k as the scores use them (hook_rot_q/hook_rot_k: after QK-norm, on a model that has
    it, and after RoPE) and v, one step at a time, and keep the model's own pattern row and z
    to compare against. The mask is the layer's own (causal, and its window on a sliding
    layer). Needs attention_step_names(layer)."""
    cfg: DecoderConfig = lm.cfg
    a = f"blocks.{layer}.attn"
    n_pos = run.cache[f"{a}.hook_rot_q"].shape[1]
    if not 0 <= query < n_pos:
        raise IndexError(f"query position {query} outside 0..{n_pos - 1}")
    kv_head = head // cfg.group_size
    q = run.cache[f"{a}.hook_rot_q"][0, query, head].float()          # [d_head]
    keys = run.cache[f"{a}.hook_rot_k"][0, :, kv_head].float()        # [k_pos, d_head]
    values = run.cache[f"{a}.hook_v"][0, :, kv_head].float()          # [k_pos, d_head]

    raw = keys @ q                                                     # [k_pos]  q . k_j
    scaled = raw / math.sqrt(cfg.d_head)                               # [k_pos]
    attn = lm.decoder.blocks[layer].attn
    future = ~attn.allowed(torch.tensor([query]), torch.arange(n_pos))[0].cpu()   # [k_pos]  causal (+ window) mask
    masked = scaled.masked_fill(future, float("-inf"))                 # [k_pos]
    weights = masked.softmax(dim=-1)                                   # [k_pos]  sums to 1
    weighted_values = weights[:, None] * values                        # [k_pos, d_head]
    z = weighted_values.sum(dim=0)                                     # [d_head]

    return AttentionSteps(
        layer=layer, head=head, kv_head=kv_head, query=query, d_head=cfg.d_head,
        q=q, keys=keys, values=values, raw=raw, scaled=scaled, masked=masked, weights=weights,
        weighted_values=weighted_values, z=z,
        pattern_row=run.cache[f"{a}.hook_pattern"][0, head, query].float(),
        z_hook=run.cache[f"{a}.hook_z"][0, query, head].float(),
    )


def entropy_bits(weights: torch.Tensor) -> float:
    """Entropy of a probability vector in bits (0 when all weight is on one token)."""
    p = weights[weights > 0].double()
    return max(0.0, float(-(p * p.log2()).sum()))      # never -0.0 (all weight on one token)


@dataclass(frozen=True)
class UnscaledWhatIf:
    """The same scores through softmax with and without the 1/sqrt(d_head) division."""

    weights_scaled: torch.Tensor     # [k_pos] what the model does
    weights_unscaled: torch.Tensor   # [k_pos] softmax(q . k) with no division
    entropy_scaled: float            # bits
    entropy_unscaled: float          # bits
    max_scaled: float                # largest weight, with the scale
    max_unscaled: float              # largest weight, without it


def unscaled_what_if(steps: AttentionSteps) -> UnscaledWhatIf:
    """Drop the scale: softmax over the raw dot products (same mask). Equivalent to
    multiplying every score by sqrt(d_head) (8 for d_head 64, 16 for 256), which sharpens
    the softmax."""
    future = torch.isinf(steps.masked)
    unscaled = steps.raw.masked_fill(future, float("-inf")).softmax(dim=-1)   # [k_pos]
    return UnscaledWhatIf(
        weights_scaled=steps.weights, weights_unscaled=unscaled,
        entropy_scaled=entropy_bits(steps.weights), entropy_unscaled=entropy_bits(unscaled),
        max_scaled=float(steps.weights.max()), max_unscaled=float(unscaled.max()),
    )


@dataclass(frozen=True)
class HeadHit:
    layer: int
    head: int
    weight: float      # attention from the query position to the key position


def attention_between(run, n_layers: int, query: int, key: int) -> torch.Tensor:
    """[n_layers, n_heads]: every head's attention weight from position ``query`` to
    position ``key`` (0 when key > query). Needs pattern_names(n_layers)."""
    rows = [run.cache[f"blocks.{layer}.attn.hook_pattern"][0, :, query, key].float()   # [n_heads]
            for layer in range(n_layers)]
    return torch.stack(rows)                                                         # [n_layers, n_heads]


def find_heads_attending(lm, run, query: int, key: int, top: int = 5) -> list[HeadHit]:
    """The heads that put the most attention from position ``query`` onto position
    ``key`` (e.g. from "was" to "cat"), strongest first. A search over every layer and
    head of this run; nothing is hard-coded. Needs pattern_names(lm.cfg.n_layers)."""
    grid = attention_between(run, lm.cfg.n_layers, query, key)         # [n_layers, n_heads]
    flat = grid.flatten()
    order = torch.argsort(flat, descending=True)[:top]
    n_heads = grid.shape[1]
    return [HeadHit(int(i) // n_heads, int(i) % n_heads, float(flat[i])) for i in order]


def heads_tied_for_most(run, n_layers: int, query: int, key: int, tol: float = 1e-4) -> int:
    """How many heads put the largest weight from ``query`` onto ``key`` (within ``tol``):
    1 when one head stands out; every head when the query is the first token (each gives
    it 100%, having nothing else to look at). Needs pattern_names(n_layers)."""
    grid = attention_between(run, n_layers, query, key)                # [n_layers, n_heads]
    return int((grid >= grid.max() - tol).sum())


def strongest_link(lm, run, query: int) -> tuple[int, HeadHit] | None:
    """The earlier position (not the first token, not the previous token, not the query
    itself) that some head attends to most from ``query``: a reasonable default target
    for find_heads_attending. None when the query has no such position (query < 3)."""
    if query < 3:
        return None
    best: tuple[int, HeadHit] | None = None
    for key in range(1, query - 1):
        hit = find_heads_attending(lm, run, query, key, top=1)[0]
        if best is None or hit.weight > best[1].weight:
            best = (key, hit)
    return best


# --------------------------------------------------------------------------- cost

@dataclass(frozen=True)
class BlockCost:
    """Multiply-adds of one block's forward pass over a prompt of ``n`` tokens."""

    n: int
    attention: int      # q . k for every allowed pair, and the weighted sum of values
    linear: int         # W_Q, W_K, W_V, W_O and the MLP: the same work for every token

    @property
    def attention_share(self) -> float:
        return self.attention / (self.attention + self.linear)


def causal_pairs(n: int, window: int | None = None) -> int:
    """(query, key) pairs a causal mask allows in n tokens: 1 + 2 + ... + n; with a sliding
    window w, query i sees min(i + 1, w) keys."""
    if window is None or n <= window:
        return n * (n + 1) // 2
    return window * (window + 1) // 2 + (n - window) * window


def linear_macs_per_token(cfg: DecoderConfig) -> int:
    """Multiply-adds per token of one block's matrices: Q, K, V and O projections and the
    gated MLP (gate, up and down)."""
    qkv = cfg.d_model * (cfg.n_heads + 2 * cfg.n_kv_heads) * cfg.d_head
    out = cfg.n_heads * cfg.d_head * cfg.d_model
    mlp = 3 * cfg.d_model * cfg.d_ff
    return qkv + out + mlp


def attention_macs_per_pair(cfg: DecoderConfig) -> int:
    """Multiply-adds per allowed (query, key) pair in one block: q . k (d_head) and
    weight * v (d_head), in every query head."""
    return 2 * cfg.n_heads * cfg.d_head


def block_cost(cfg: DecoderConfig, n: int, layer: int | None = None) -> BlockCost:
    """Work of one block on n tokens (the softmax and norms, which are small, left out).
    ``layer``: count that layer's window (None: a global layer, every earlier key)."""
    window = cfg.window(layer) if layer is not None else None
    return BlockCost(n=n, attention=attention_macs_per_pair(cfg) * causal_pairs(n, window),
                     linear=linear_macs_per_token(cfg) * n)


def sliding_attention_per_token(cfg: DecoderConfig) -> int | None:
    """Multiply-adds of attention per token on a sliding-window layer once the prompt is longer
    than the window (it stops growing there); None for a model without sliding layers."""
    if cfg.sliding_window is None or not cfg.sliding_layers:
        return None
    return attention_macs_per_pair(cfg) * cfg.sliding_window


def crossover_length(cfg: DecoderConfig) -> int:
    """The smallest prompt length at which attention's work passes the linear parts'."""
    # attention = a * n (n + 1) / 2 > b * n  <=>  n + 1 > 2 b / a
    a, b = attention_macs_per_pair(cfg), linear_macs_per_token(cfg)
    n = max(1, 2 * b // a - 1)
    while block_cost(cfg, n).attention <= block_cost(cfg, n).linear:
        n += 1
    return n


# --------------------------------------------------------------------------- sliding window on a long prompt

def window_layers(cfg: DecoderConfig) -> tuple[int, int] | None:
    """A sliding-window layer and a global layer next to it, (sliding, global): the first
    global layer with a sliding layer before it, and that sliding layer. None when the model
    has no sliding layers (every layer attends globally) or no global one."""
    sliding = set(cfg.sliding_layers)
    if not sliding or cfg.sliding_window is None:
        return None
    for layer in range(1, cfg.n_layers):
        if layer not in sliding and layer - 1 in sliding:
            return layer - 1, layer
    return None


def repeat_to_length(ids, n: int, n_special: int = 0) -> list[int]:
    """The prompt's ids repeated until there are ``n``: its first ``n_special`` ids (``<bos>``)
    once, then the rest over and over (cut at n)."""
    ids = [int(i) for i in ids]
    head, body = ids[:n_special], ids[n_special:] or ids
    out = head + body * (n // max(1, len(body)) + 1)
    return out[:n]


@dataclass(frozen=True)
class WindowDemo:
    """What a sliding-window layer and a global layer attend to on one long prompt."""

    n: int                          # tokens of the long prompt
    window: int                     # the sliding layers' window
    layers: tuple[int, int]         # (sliding layer, global layer)
    pool: int                       # positions per cell of ``pooled``
    pooled: dict                    # layer -> [n/pool, n/pool] largest head-mean weight in each pool x pool block
    last_row: dict                  # layer -> [n_heads, n] the last query's weights, per head
    outside_zero: dict              # layer -> every weight the layer's allowed() forbids is exactly 0
    outside_count: dict             # layer -> (query, key) pairs allowed() forbids beyond the causal mask

    def beyond(self, layer: int) -> torch.Tensor:
        """[n_heads] the last query's total weight on keys ``window`` or more positions back."""
        row = self.last_row[layer]
        far = self.n - self.window            # keys 0 .. n - window - 1 are window+ positions back from n - 1
        return row[:, :far].sum(-1) if far > 0 else torch.zeros(row.shape[0])


def window_demo(lm, ids, pool: int = 16) -> WindowDemo | None:
    """Run the model's first blocks on ``ids`` (longer than the window) up to the global layer
    of window_layers(lm.cfg), keeping those two layers' patterns; the rest of the model (and
    that layer's MLP) is not needed for them. None on a model without sliding layers."""
    cfg = lm.cfg
    pair = window_layers(cfg)
    if pair is None:
        return None
    from ..decoder import Hooks
    names = [f"blocks.{layer}.attn.hook_pattern" for layer in pair]
    hooks = Hooks(names=names)
    x = torch.as_tensor([list(ids)], dtype=torch.long, device=lm.device)            # [1, n]
    n = x.shape[1]
    positions = torch.arange(n, device=lm.device)
    top_layer = max(pair)
    with torch.inference_mode():
        resid = lm.decoder.embed(x)                                                   # [1, n, d_model]
        for layer in range(top_layer):                                                # the model's own blocks
            resid = lm.decoder.blocks[layer](resid, lm.decoder.rope_for(layer), positions, hooks)
        block = lm.decoder.blocks[top_layer]  # the last one: only its attention pattern is read, so no MLP
        block.attn(block.ln1(resid, hooks), lm.decoder.rope_for(top_layer), positions, hooks)
    cells = -(-n // pool)
    pooled, last, zero, count = {}, {}, {}, {}
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    for layer, name in zip(pair, names):
        pattern = hooks.cache[name][0].float().cpu()                                  # [n_heads, n, n]
        allowed = lm.decoder.blocks[layer].attn.allowed(positions, positions).cpu()   # [n, n]
        zero[layer] = bool((pattern[:, ~allowed] == 0).all())
        count[layer] = int((causal & ~allowed).sum())
        mean = pattern.mean(0)                                                        # [n, n]
        padded = torch.zeros(cells * pool, cells * pool)
        padded[:n, :n] = mean
        pooled[layer] = padded.reshape(cells, pool, cells, pool).amax(dim=(1, 3))     # [cells, cells]
        last[layer] = pattern[:, -1].clone()                                          # [n_heads, n]
    return WindowDemo(n, cfg.sliding_window, pair, pool, pooled, last, zero, count)
