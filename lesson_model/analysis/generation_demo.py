"""The numbers of the generation lesson: how big the KV cache is, how much work a step does
with and without it, and the same generation run both ways, step for step."""

from __future__ import annotations

from dataclasses import dataclass

from ..generation import Step


def kv_bytes_per_layer(cfg, n_positions: int, element_size: int = 4) -> int:
    """Bytes one layer's cache holds: keys + values, n_kv_heads x d_head numbers each per position."""
    return 2 * n_positions * cfg.n_kv_heads * cfg.d_head * element_size


def kv_bytes(cfg, n_positions: int, element_size: int = 4) -> int:
    """Bytes the whole cache holds (every layer)."""
    return cfg.n_layers * kv_bytes_per_layer(cfg, n_positions, element_size)


def kv_bytes_windowed(cfg, n_positions: int, element_size: int = 4) -> int:
    """Bytes a cache needs when each sliding-window layer keeps only the positions its window can
    still see (the last cfg.window(layer)) and the global layers keep everything. This lesson's
    KVCache keeps every position in every layer; on a model without windows the two are equal."""
    return sum(kv_bytes_per_layer(cfg, min(n_positions, cfg.window(L) or n_positions), element_size)
               for L in range(cfg.n_layers))


def multiply_adds(cfg, start: int, n_new: int) -> int:
    """Multiply-adds of one forward pass over positions start .. start+n_new-1 that keeps only the
    last position's logits (what a generation step does).

    Per position and layer: the Q, K, V, O projections and the gated MLP (weights x vector),
    plus attention's q.k scores and weighted sum over the positions it can see (on a
    sliding-window layer at most its window). The unembedding runs for the last position only.
    """
    per_token_weights = (cfg.d_model * cfg.n_heads * cfg.d_head                # W_Q
                         + 2 * cfg.d_model * cfg.n_kv_heads * cfg.d_head        # W_K, W_V
                         + cfg.n_heads * cfg.d_head * cfg.d_model               # W_O
                         + 3 * cfg.d_model * cfg.d_ff)                          # gate, up, down
    attention = 0
    for layer in range(cfg.n_layers):
        window = cfg.window(layer)
        seen = sum(min(p, window) if window else p for p in range(start + 1, start + n_new + 1))   # keys per new position
        attention += 2 * cfg.n_heads * cfg.d_head * seen                        # scores + weighted sum of values
    return cfg.n_layers * n_new * per_token_weights + attention + cfg.d_model * cfg.vocab_size


@dataclass(frozen=True)
class CacheComparison:
    with_cache: list[Step]
    without_cache: list[Step]

    @property
    def identical(self) -> bool:
        """Did both runs choose the same tokens?"""
        return [s.token_id for s in self.with_cache] == [s.token_id for s in self.without_cache]

    @property
    def first_difference(self) -> int | None:
        for i, (a, b) in enumerate(zip(self.with_cache, self.without_cache)):
            if a.token_id != b.token_id:
                return i
        return None if len(self.with_cache) == len(self.without_cache) else min(len(self.with_cache),
                                                                                   len(self.without_cache))


def compare_kv_cache(lm, prompt, max_new_tokens: int, **settings) -> CacheComparison:
    """Generate twice with the same settings and seed, with and without the KV cache.

    The two runs advance in turns, one step each, so anything else slowing the machine down
    at that moment slows both alike, and their per-step times can be compared.
    settings: temperature, top_k, top_p, seed (as lm.generate_steps takes them).
    """
    on = lm.generate_steps(prompt, max_new_tokens, use_kv_cache=True, **settings)
    off = lm.generate_steps(prompt, max_new_tokens, use_kv_cache=False, **settings)
    with_cache, without_cache = [], []
    for a in on:
        with_cache.append(a)
        b = next(off, None)
        if b is not None:
            without_cache.append(b)
    without_cache.extend(off)
    return CacheComparison(with_cache, without_cache)
