"""The What-if lab's switches: each breaks one thing in the model for one call, as hook functions.

    sw = Switches(no_mask=True, zero_head=(3, 1))
    run = lm.run(ids, names=[...], hooks=hooks_for(lm, sw))      # the broken model
    key = sw.key()                                                # hashable: a cache key

Nothing here changes the decoder: every switch is a function called at one of the decoder's
hook points (lesson_model/decoder.py), which returns a replacement tensor. Where a switch needs
a tensor from earlier in the same layer (the q before RoPE, the rotated q and k to recompute
the scores without the mask, the stream before a skipped block), a hook point captures it into
a small dict that lives inside the closures of ONE call: call ``hooks_for`` again for every
run (two runs at once, in two threads, must not share one dict).

These hooks are for a whole-prompt forward pass (``lm.run``), not for generation with a KV cache.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import astuple, dataclass, fields, replace

import torch

HookFn = Callable[[torch.Tensor], "torch.Tensor | None"]

BOOL_SWITCHES = ("no_rope", "no_scale", "no_mask", "no_norms", "shuffle", "no_qk_norm", "no_window")


@dataclass(frozen=True)
class Switches:
    """What to break. Several switches may be on at once."""
    no_rope: bool = False                    # q and k are not rotated: attention cannot see positions
    no_scale: bool = False                   # scores are q·k, not q·k / √d_head
    no_mask: bool = False                    # no causal mask: every position also sees the ones after it
    no_norms: bool = False                   # every RMSNorm of the stream divides by 1 (its weight stays)
    skip_block: int | None = None            # block L adds nothing: its output is its input
    zero_head: tuple[int, int] | None = None  # (L, H): head H of layer L writes nothing (its z is 0)
    zero_mlp: int | None = None              # the MLP of block L writes nothing
    shuffle: bool = False                    # the tokens in a random order (the first one stays first)
    seed: int = 0                            # ...drawn with this seed
    no_qk_norm: bool = False                 # Gemma: q and k are not divided by their RMS
    no_window: bool = False                  # Gemma: sliding layers see every earlier position

    def key(self) -> tuple:
        """A hashable description (the cache key of a run with these switches)."""
        return ("whatif",) + astuple(self)

    def on(self) -> list[str]:
        """The names of the switches that are on, in declaration order."""
        out = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != "seed" and value is not False and value is not None:
                out.append(f.name)
        return out

    def any(self) -> bool:
        return bool(self.on())

    def for_model(self, cfg) -> "Switches":
        """The same switches without the ones this model has nothing to switch off
        (no QK-norm on a model without it, no window on a model without sliding layers)."""
        return replace(self, no_qk_norm=self.no_qk_norm and cfg.qk_norm,
                       no_window=self.no_window and bool(cfg.sliding_layers))


def shuffle_order(n: int, seed: int) -> list[int]:
    """A fixed random order of n positions that keeps position 0 first (on Gemma that is <bos>,
    which the model's heads lean on) and moves at least one token when it can."""
    if n <= 2:
        return list(range(n))
    gen = torch.Generator().manual_seed(int(seed))
    rest = (torch.randperm(n - 1, generator=gen) + 1).tolist()
    if rest == list(range(1, n)):          # the identity: no change at all, roll by one instead
        rest = rest[1:] + rest[:1]
    return [0] + rest


# --------------------------------------------------------------------------- one hook per switch

def no_rope_hooks(decoder, layer: int, captured: dict) -> dict[str, HookFn]:
    """No RoPE: keep the q and k that go into the rotation and hand them back unrotated.
    ``decoder`` is a Decoder (``lm.decoder``; the training lab passes its own tiny one)."""
    attn = decoder.blocks[layer].attn
    a = f"blocks.{layer}.attn"

    def keep(key: str, norm=None) -> HookFn:
        def fn(x):
            captured[key] = x if norm is None else x * norm.weight   # what RMSNorm returns (x̂ × weight)
        return fn

    def give_back(key: str) -> HookFn:
        return lambda x: captured.pop(key)

    if decoder.cfg.qk_norm:      # q and k enter RoPE straight out of QK-norm
        hooks = {f"{a}.q_norm.hook_normalized": keep("q", attn.q_norm),
                 f"{a}.k_norm.hook_normalized": keep("k", attn.k_norm)}
    else:
        hooks = {f"{a}.hook_q": keep("q"), f"{a}.hook_k": keep("k")}
    return hooks | {f"{a}.hook_rot_q": give_back("q"), f"{a}.hook_rot_k": give_back("k")}


def no_scale_hook(lm) -> HookFn:
    """No 1/√d_head: the decoder divided the scores by √d_head; multiply it back."""
    root = math.sqrt(lm.cfg.d_head)
    return lambda scores: scores * root


def unmasked_scores_hooks(lm, layer: int, captured: dict, causal: bool, window: bool) -> dict[str, HookFn]:
    """No causal mask / no sliding window: keep the rotated q and k, then recompute the scores
    q·k / √d_head with only the masks that stay on (the decoder's scores have -inf there already)."""
    cfg = lm.cfg
    a = f"blocks.{layer}.attn"
    size = cfg.window(layer) if window else None

    def keep(key: str) -> HookFn:
        def fn(x):
            captured[key] = x
        return fn

    def scores_fn(_scores):
        q = captured.pop("rot_q").transpose(1, 2)                                # [batch, n_heads, q_pos, d_head]
        k = captured.pop("rot_k").transpose(1, 2).repeat_interleave(cfg.group_size, dim=1)   # K/V heads shared
        scores = q @ k.transpose(-1, -2) / math.sqrt(cfg.d_head)                 # [batch, n_heads, q_pos, k_pos]
        pos = torch.arange(scores.shape[-1], device=scores.device)
        allowed = torch.ones(len(pos), len(pos), dtype=torch.bool, device=scores.device)
        if causal:
            allowed &= pos[None, :] <= pos[:, None]
        if size is not None:
            allowed &= pos[None, :] > pos[:, None] - size
        return scores.masked_fill(~allowed, float("-inf"))

    return {f"{a}.hook_rot_q": keep("rot_q"), f"{a}.hook_rot_k": keep("rot_k"), f"{a}.hook_attn_scores": scores_fn}


def divide_by_one_hook(scale: torch.Tensor) -> torch.Tensor:
    """Norms off: an RMSNorm's divisor (hook_scale, [batch, pos, 1]) becomes 1."""
    return torch.ones_like(scale)


def skip_block_hooks(layer: int, captured: dict) -> dict[str, HookFn]:
    """Skip block L: what leaves the block is what entered it."""
    def keep(x):
        captured["resid_pre"] = x
    return {f"blocks.{layer}.hook_resid_pre": keep,
            f"blocks.{layer}.hook_resid_post": lambda x: captured.pop("resid_pre")}


def zero_head_hook(head: int) -> HookFn:
    """Zero head L.H: its output z (before W_O) is 0, so it writes nothing."""
    def fn(z):                          # [batch, pos, n_heads, d_head]
        z = z.clone()
        z[:, :, head] = 0
        return z
    return fn


def zero_mlp_hook(mlp_out: torch.Tensor) -> torch.Tensor:
    """Zero the MLP of block L: it adds nothing to the stream."""
    return torch.zeros_like(mlp_out)


def shuffle_hook(seed: int) -> HookFn:
    """Shuffle: the embedded tokens in another order (positions are counted afresh, so the
    model sees exactly the shuffled text)."""
    def fn(embedded):                   # [batch, pos, d_model]
        order = torch.tensor(shuffle_order(embedded.shape[1], seed), device=embedded.device)
        return embedded[:, order]
    return fn


# --------------------------------------------------------------------------- all of them

def _chain(fns: list[HookFn]) -> HookFn:
    """Several hook functions at one point, in order: each sees what the one before returned."""
    if len(fns) == 1:
        return fns[0]

    def fn(x):
        for f in fns:
            out = f(x)
            if out is not None:
                x = out
        return x
    return fn


def check(lm, sw: Switches) -> None:
    """ValueError when a switch does not fit the model (a layer or head out of range, a switch
    the model has nothing for)."""
    cfg = lm.cfg
    for name, layer in (("skip_block", sw.skip_block), ("zero_mlp", sw.zero_mlp),
                        ("zero_head", sw.zero_head[0] if sw.zero_head else None)):
        if layer is not None and not 0 <= layer < cfg.n_layers:
            raise ValueError(f"{name}: layer {layer} is not in 0..{cfg.n_layers - 1}")
    if sw.zero_head and not 0 <= sw.zero_head[1] < cfg.n_heads:
        raise ValueError(f"zero_head: head {sw.zero_head[1]} is not in 0..{cfg.n_heads - 1}")
    if sw.no_qk_norm and not cfg.qk_norm:
        raise ValueError("no_qk_norm: this model has no QK-norm")
    if sw.no_window and not cfg.sliding_layers:
        raise ValueError("no_window: this model has no sliding-window layers")


def hooks_for(lm, sw: Switches) -> dict[str, HookFn]:
    """The hook functions of one call with these switches: {hook name: fn}. Build a fresh dict
    for every run: the captures (q before RoPE, rotated q and k, the stream before a skipped
    block) live in these closures."""
    check(lm, sw)
    cfg = lm.cfg
    chains: dict[str, list[HookFn]] = {}

    def add(hooks: dict[str, HookFn]) -> None:
        for name, fn in hooks.items():
            chains.setdefault(name, []).append(fn)

    if sw.shuffle:
        add({"hook_embed": shuffle_hook(sw.seed)})
    for layer in range(cfg.n_layers):
        b, captured = f"blocks.{layer}", {}        # one small dict per layer and call
        norms = ["ln1", "ln2"] + (["ln1_post", "ln2_post"] if cfg.post_norms else [])
        if sw.no_norms:
            add({f"{b}.{n}.hook_scale": divide_by_one_hook for n in norms})
        if sw.no_qk_norm:
            add({f"{b}.attn.{n}.hook_scale": divide_by_one_hook for n in ("q_norm", "k_norm")})
        if sw.no_rope:
            add(no_rope_hooks(lm.decoder, layer, captured))
        # No mask / no window: recompute the scores where a mask that the decoder applied goes away.
        drop_window = sw.no_window and cfg.window(layer) is not None
        if sw.no_mask or drop_window:
            add(unmasked_scores_hooks(lm, layer, captured, causal=not sw.no_mask, window=not sw.no_window))
        if sw.no_scale:
            add({f"{b}.attn.hook_attn_scores": no_scale_hook(lm)})
        if sw.zero_head and sw.zero_head[0] == layer:
            add({f"{b}.attn.hook_z": zero_head_hook(sw.zero_head[1])})
        if sw.zero_mlp == layer:
            add({f"{b}.hook_mlp_out": zero_mlp_hook})
        if sw.skip_block == layer:
            add(skip_block_hooks(layer, captured))
    if sw.no_norms:
        add({"ln_final.hook_scale": divide_by_one_hook})
    return {name: _chain(fns) for name, fns in chains.items()}
