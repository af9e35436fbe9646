"""How much memory the KV cache takes.

For every token in the context, each layer keeps one key and one value vector per
key/value head:

    bytes per token = 2 (K and V) * n_layers * n_kv_heads * d_head * bytes per value

Multi-head attention (MHA) has as many K/V heads as query heads; grouped-query attention
(GQA) shares each K/V head among a group of query heads; multi-query attention (MQA)
has one K/V head for all of them.

A sliding-window layer (Gemma 3's local layers) only attends to the last ``window``
positions, so a cache that knows it needs only those there:

    window-aware bytes = 2 * n_kv_heads * d_head * bytes per value
                         * (global layers * context + window layers * min(context, window))

lesson_model's KVCache does not do this: it stores every position in every layer and the
sliding layers mask the older ones out (kv_bytes, not kv_bytes_windowed, is what it holds).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from lesson_model.decoder import KVCache

BYTES_PER_VALUE: dict[str, float] = {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1, "int4": 0.5}


@dataclass(frozen=True)
class KVShape:
    """What the KV cache's size depends on."""

    name: str
    n_layers: int
    n_heads: int          # query heads
    n_kv_heads: int       # key/value heads
    d_head: int
    window: int | None = None   # sliding window of the window layers (None: every layer is global)
    n_window_layers: int = 0    # how many of the n_layers use it

    @property
    def n_global_layers(self) -> int:
        return self.n_layers - (self.n_window_layers if self.window else 0)

    @property
    def kind(self) -> str:
        """"MHA", "GQA" or "MQA"."""
        if self.n_kv_heads == self.n_heads:
            return "MHA"
        return "MQA" if self.n_kv_heads == 1 else "GQA"

    @property
    def group_size(self) -> int:
        return self.n_heads // self.n_kv_heads

    def with_kv_heads(self, n_kv_heads: int, name: str | None = None) -> "KVShape":
        """The same model with another number of K/V heads (a what-if: MHA or MQA)."""
        return replace(self, n_kv_heads=n_kv_heads, name=name or self.name)


# Published configurations (papers / released config files).
PRESETS: dict[str, KVShape] = {
    "gpt3": KVShape("GPT-3 175B", n_layers=96, n_heads=96, n_kv_heads=96, d_head=128),
    "llama2_70b": KVShape("LLaMA-2-70B", n_layers=80, n_heads=64, n_kv_heads=8, d_head=128),
    "mistral_7b": KVShape("Mistral 7B", n_layers=32, n_heads=32, n_kv_heads=8, d_head=128),
}


def shape_of(cfg, name: str) -> KVShape:
    """A loaded model's KVShape, from its DecoderConfig (with its sliding window, if any)."""
    window_layers = tuple(getattr(cfg, "sliding_layers", ()) or ())
    window = getattr(cfg, "sliding_window", None) if window_layers else None
    return KVShape(name, n_layers=cfg.n_layers, n_heads=cfg.n_heads, n_kv_heads=cfg.n_kv_heads, d_head=cfg.d_head,
                   window=window, n_window_layers=len(window_layers) if window else 0)


def bytes_per_value(dtype: str) -> float:
    if dtype not in BYTES_PER_VALUE:
        raise ValueError(f"unknown dtype {dtype!r}; one of {sorted(BYTES_PER_VALUE)}")
    return BYTES_PER_VALUE[dtype]


def kv_bytes_per_token(shape: KVShape, dtype: str = "fp16") -> float:
    """2 * n_layers * n_kv_heads * d_head * bytes per value."""
    return 2 * shape.n_layers * shape.n_kv_heads * shape.d_head * bytes_per_value(dtype)


def kv_bytes(shape: KVShape, context: int, dtype: str = "fp16", batch: int = 1) -> float:
    """Bytes of the KV cache holding ``context`` tokens for each of ``batch`` sequences."""
    return kv_bytes_per_token(shape, dtype) * context * batch


def kv_bytes_per_layer_position(shape: KVShape, dtype: str = "fp16") -> float:
    """One layer's K and V for one position: 2 * n_kv_heads * d_head * bytes per value."""
    return 2 * shape.n_kv_heads * shape.d_head * bytes_per_value(dtype)


def positions_kept(shape: KVShape, context: int) -> tuple[int, int]:
    """(positions a global layer needs, positions a window layer needs) for ``context`` tokens."""
    return context, min(context, shape.window) if shape.window else context


def kv_bytes_windowed(shape: KVShape, context: int, dtype: str = "fp16", batch: int = 1) -> float:
    """Bytes of a window-aware KV cache: the global layers keep every position, the window
    layers only the last ``window`` (equal to kv_bytes when the model has no window, or
    when the context fits inside it)."""
    full, windowed = positions_kept(shape, context)
    per = kv_bytes_per_layer_position(shape, dtype)
    return per * (shape.n_global_layers * full + (shape.n_window_layers if shape.window else 0) * windowed) * batch


def positions_needed_by_layer(cfg, context: int) -> list[int]:
    """For each layer of a DecoderConfig, how many past positions its attention can still
    see after ``context`` tokens: all of them on a global layer, at most the window on a
    sliding one. (lesson_model's KVCache stores ``context`` positions in every layer.)"""
    window = getattr(cfg, "window", None)
    out = []
    for layer in range(cfg.n_layers):
        w = window(layer) if callable(window) else None
        out.append(min(context, w) if w else context)
    return out


def variants(shape: KVShape) -> dict[str, KVShape]:
    """The model as it is, and as MHA (a K/V head per query head) and MQA (one K/V head)."""
    return {"actual": shape, "MHA": shape.with_kv_heads(shape.n_heads), "MQA": shape.with_kv_heads(1)}


def human_bytes(n: float) -> tuple[float, str]:
    """(value, unit) in binary units: 327,680 -> (320.0, "KiB")."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return n, unit
        n /= 1024
    return n, "TiB"


def kv_cache_names(n_layers: int) -> list[str]:
    """Hook points kv_cache_of_run reads: every layer's keys after RoPE and its values."""
    return [f"blocks.{layer}.attn.{h}" for layer in range(n_layers) for h in ("hook_rot_k", "hook_v")]


def kv_cache_of_run(run, n_layers: int, n_positions: int | None = None) -> KVCache:
    """The KV cache a pass over the run's tokens leaves: each layer's keys after RoPE and its
    values, appended as Attention.forward appends them when it is given a cache (what a
    generation step holds after reading the prompt). Reads kv_cache_names(n_layers).

    n_positions: only the first that many positions, the cache a pass over just those tokens
    leaves (a causal pass: no position's keys or values depend on a later token)."""
    cache = KVCache(n_layers)
    for layer in range(n_layers):
        a = f"blocks.{layer}.attn"
        k, v = run.cache[f"{a}.hook_rot_k"], run.cache[f"{a}.hook_v"]                  # [batch, pos, n_kv_heads, d_head]
        cache.append(layer, k[:, :n_positions], v[:, :n_positions])
    return cache

