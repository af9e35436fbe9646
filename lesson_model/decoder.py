"""A decoder-only transformer, written to be read top to bottom.

    token ids -> embedding -> [block] x n_layers -> final norm -> unembedding -> logits
    block:  resid += attention(norm(resid))     tokens exchange information ("across")
            resid += mlp(norm(resid))           each token is processed alone ("within")

One design, a few choices. SmolLM2 (the Llama design) uses the defaults of DecoderConfig.
Gemma 3 switches on, each by its own config field: the embedding scaled by √d_model
(embed_scale), an RMSNorm over every head's q and k (qk_norm), a second norm after each
sub-layer (post_norms: "sandwich" norms), a GELU gate (activation="gelu_tanh"), and
sliding-window attention with its own RoPE base on most layers (sliding_window).

Every intermediate tensor passes through a named *hook point*, ``hooks(name, tensor)``.
A hook point does two things, and only when the caller asked for it in this call:
it may replace the tensor (an intervention such as zeroing a head) and it may keep a
reference to it (a capture for a figure). Nothing is registered on the module itself,
so one model object can serve many sessions at once, each with its own hooks. Each module
knows its own name from construction (``blocks.3.ln1``), so its hook points are
``blocks.3.ln1.hook_scale`` and so on.

Names and shapes follow TransformerLens (batch dimension first):
    hook_embed                                      [batch, pos, d_model]
    blocks.{L}.hook_resid_pre / _mid / _post        [batch, pos, d_model]
    blocks.{L}.ln1.hook_scale                       [batch, pos, 1]   (the divisor)
    blocks.{L}.ln1.hook_normalized                  [batch, pos, d_model]
    blocks.{L}.attn.hook_q / hook_rot_q             [batch, pos, n_heads, d_head]
    blocks.{L}.attn.hook_k / hook_rot_k / hook_v    [batch, pos, n_kv_heads, d_head]
    blocks.{L}.attn.q_norm.hook_scale / k_norm...   [batch, pos, heads, 1]       (qk_norm only)
    blocks.{L}.attn.q_norm.hook_normalized / ...    [batch, pos, heads, d_head]  (qk_norm only)
    blocks.{L}.attn.hook_attn_scores                [batch, n_heads, q_pos, k_pos]
                                                    (scaled, -inf where masked)
    blocks.{L}.attn.hook_pattern                    [batch, n_heads, q_pos, k_pos]
    blocks.{L}.attn.hook_z                          [batch, pos, n_heads, d_head]
    blocks.{L}.attn.hook_result                     [batch, pos, n_heads, d_model]
                                                    (each head's write, before any post-norm)
    blocks.{L}.ln1_post.hook_scale / hook_normalized, ln2_post...   (post_norms only)
    blocks.{L}.hook_attn_out / hook_mlp_out         [batch, pos, d_model]  (what is added)
    blocks.{L}.mlp.hook_pre (gate) / hook_pre_linear (up) / hook_post   [batch, pos, d_ff]
    ln_final.hook_scale / ln_final.hook_normalized

Weights are stored in the layout they are used in: ``x @ W_Q`` with
W_Q of shape [d_model, n_heads * d_head], so every line reads like the formula.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class DecoderConfig:
    vocab_size: int = 49152     # entries in the vocabulary
    d_model: int = 576          # width of the residual stream
    n_layers: int = 30          # number of blocks
    n_heads: int = 9            # query heads per attention layer
    n_kv_heads: int = 3         # key/value heads (grouped-query attention)
    d_head: int = 64            # width of one head
    d_ff: int = 1536            # width of the MLP's hidden layer
    # RoPE base: pair i turns at theta ** (-2i / d_head) radians per position
    rope_theta: float = 100000.0
    norm_eps: float = 1e-5      # added inside the RMSNorm square root
    max_position: int = 8192    # context length the model was trained for
    tie_embeddings: bool = True  # unembedding = embedding matrix (transposed)
    attn_bias: bool = False     # Qwen2 adds a bias to q, k and v
    activation: str = "silu"    # the MLP's gate: "silu" (SwiGLU) or "gelu_tanh" (GeGLU)
    embed_scale: bool = False   # multiply the embedding by √d_model before the first block
    qk_norm: bool = False       # RMSNorm each head's q and k (over d_head) before RoPE
    post_norms: bool = False    # also RMSNorm each sub-layer's output before it is added
    sliding_window: int | None = None     # a sliding layer's query sees only the last this-many
    sliding_layers: tuple[int, ...] = ()  # which layers slide (the others attend globally)
    rope_theta_sliding: float | None = None  # RoPE base of the sliding layers (None: rope_theta)

    def __post_init__(self):
        # JSON gives a list
        object.__setattr__(self, "sliding_layers", tuple(self.sliding_layers))

    @property
    def group_size(self) -> int:
        """How many query heads share one key/value head."""
        return self.n_heads // self.n_kv_heads

    def is_sliding(self, layer: int) -> bool:
        """Is this a sliding layer (its own window and RoPE base) rather than a global one?"""
        return layer in self.sliding_layers

    def window(self, layer: int) -> int | None:
        """The attention window of this layer: None means it sees every earlier position."""
        return self.sliding_window if self.is_sliding(layer) else None


# --------------------------------------------------------------------------- hooks

HookFn = Callable[[torch.Tensor], "torch.Tensor | None"]


class Hooks:
    """One call's captures and interventions. Made fresh for every call, never shared.

    names=None captures every hook point; a collection captures just those.
    fns maps a hook name to fn(tensor) -> replacement tensor (or None to keep it).
    """

    def __init__(self, names=None, fns: dict[str, HookFn] | None = None):
        self.capture_all = names is None
        self.names = frozenset(() if names is None else names)
        self.fns = dict(fns or {})
        self.cache: dict[str, torch.Tensor] = {}

    def wants(self, name: str) -> bool:
        """Does anyone in this call look at (or change) this hook point?"""
        return self.capture_all or name in self.names or name in self.fns

    def __call__(self, name: str, x: torch.Tensor) -> torch.Tensor:
        fn = self.fns.get(name)
        if fn is not None:
            replaced = fn(x)
            if replaced is not None:
                x = replaced
        if self.capture_all or name in self.names:
            self.cache[name] = x
        return x


# --------------------------------------------------------------------------- KV cache

class KVCache:
    """Keys (after RoPE) and values of every position seen so far, one pair per layer.

    During generation each step computes q, k, v for the new position only, appends
    k and v here, and attends over everything stored.
    """

    def __init__(self, n_layers: int):
        # one [batch, pos, n_kv_heads, d_head] tensor per layer, None until the first append
        self.keys: list[torch.Tensor | None] = [None] * n_layers
        self.values: list[torch.Tensor | None] = [None] * n_layers

    def __len__(self) -> int:
        """Number of positions cached."""
        return 0 if self.keys[0] is None else self.keys[0].shape[1]

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Store this step's k and v after the layer's earlier ones; return all of them."""
        if self.keys[layer] is not None:
            k = torch.cat([self.keys[layer], k], dim=1)
            v = torch.cat([self.values[layer], v], dim=1)
        self.keys[layer], self.values[layer] = k, v
        return k, v

    def crop(self, n_positions: int) -> None:
        """Forget everything after the first n_positions (used to roll back rejected drafts)."""
        for layer, (k, v) in enumerate(zip(self.keys, self.values)):
            if k is not None:
                self.keys[layer], self.values[layer] = k[:, :n_positions], v[:, :n_positions]

    def nbytes(self, layer: int) -> int:
        """Bytes held for one layer (keys + values)."""
        k, v = self.keys[layer], self.values[layer]
        return 0 if k is None else k.numel() * k.element_size() + v.numel() * v.element_size()


# --------------------------------------------------------------------------- RMSNorm

class RMSNorm(nn.Module):
    """Divide each vector by its root-mean-square, then scale each dimension by a learned weight.

    Unlike LayerNorm it does not subtract the mean. (Gemma checkpoints store the weight as
    w with the formula's factor 1 + w; the loader stores 1 + w here, so this stays one line.)
    """

    def __init__(self, d_model: int, eps: float, name: str):
        super().__init__()
        self.name = name                                  # e.g. "blocks.3.ln1", "ln_final"
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))   # [d_model]

    def forward(self, x: torch.Tensor, hooks: Hooks) -> torch.Tensor:
        # x: [batch, pos, d_model]
        rms = (x.pow(2).mean(-1, keepdim=True) + self.eps).sqrt()           # [batch, pos, 1]
        scale = hooks(f"{self.name}.hook_scale", rms)                       # the divisor
        normalized = hooks(f"{self.name}.hook_normalized", x / scale)       # [batch, pos, d_model]
        return normalized * self.weight


# --------------------------------------------------------------------------- RoPE

class RotaryEmbedding(nn.Module):
    """Rotary position embedding, rotate-half layout (as Hugging Face Llama checkpoints use).

    A head's d_head numbers form d_head/2 pairs: number i goes with number i + d_head/2.
    Pair i is rotated by the angle  position * theta_i,  theta_i = base ** (-2i / d_head).
    Early pairs turn fast, late pairs slowly. No learned parameters.
    """

    def __init__(self, d_head: int, base: float):
        super().__init__()
        # [d_head/2]: theta_i of each pair
        inv_freq = 1.0 / (base ** (torch.arange(0, d_head, 2, dtype=torch.float32) / d_head))
        self.register_buffer("inv_freq", inv_freq, persistent=False)   # moves with .to(device)

    def angles(self, positions: torch.Tensor, dtype: torch.dtype = torch.float32
               ) -> tuple[torch.Tensor, torch.Tensor]:
        # positions: [pos] -> cos, sin: [pos, d_head] (each pair's angle twice: rotate-half layout)
        # Angles are computed in float32 even for a bfloat16 model: there, position 1000
        # would be off by whole turns.
        freqs = positions[:, None].float() * self.inv_freq.float()[None, :]   # [pos, d_head/2]
        angle = torch.cat([freqs, freqs], dim=-1)                              # [pos, d_head]
        return angle.cos().to(dtype), angle.sin().to(dtype)

    @staticmethod
    def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        # x: [batch, pos, heads, d_head]; each pair (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin)
        x1, x2 = x.chunk(2, dim=-1)                       # [batch, pos, heads, d_head/2] each
        rotated_half = torch.cat([-x2, x1], dim=-1)       # [batch, pos, heads, d_head]
        return x * cos[None, :, None, :] + rotated_half * sin[None, :, None, :]


# --------------------------------------------------------------------------- attention

class Attention(nn.Module):
    """Grouped-query self-attention with a causal mask.

    Every head projects the *whole* d_model vector into its own query, key and value.
    Query heads come in groups of cfg.group_size that share one key/value head.
    """

    def __init__(self, cfg: DecoderConfig, layer: int):
        super().__init__()
        self.cfg = cfg
        self.layer = layer                          # its slot in the KV cache
        self.name = f"blocks.{layer}.attn"          # prefix of its hook points
        self.sliding_window = cfg.window(layer)     # None: a global layer
        # SmolLM2 W_Q [576, 9*64], W_K and W_V [576, 3*64]; Gemma W_Q [640, 4*256], W_K [640, 1*256]
        self.W_Q = nn.Parameter(torch.empty(cfg.d_model, cfg.n_heads * cfg.d_head))
        self.W_K = nn.Parameter(torch.empty(cfg.d_model, cfg.n_kv_heads * cfg.d_head))
        self.W_V = nn.Parameter(torch.empty(cfg.d_model, cfg.n_kv_heads * cfg.d_head))
        # SmolLM2 [9*64, 576], Gemma [4*256, 640]
        self.W_O = nn.Parameter(torch.empty(cfg.n_heads * cfg.d_head, cfg.d_model))
        if cfg.attn_bias:
            self.b_Q = nn.Parameter(torch.zeros(cfg.n_heads * cfg.d_head))
            self.b_K = nn.Parameter(torch.zeros(cfg.n_kv_heads * cfg.d_head))
            self.b_V = nn.Parameter(torch.zeros(cfg.n_kv_heads * cfg.d_head))
        if cfg.qk_norm:     # one weight [d_head] shared by all query heads, one by all key heads
            self.q_norm = RMSNorm(cfg.d_head, cfg.norm_eps, f"{self.name}.q_norm")
            self.k_norm = RMSNorm(cfg.d_head, cfg.norm_eps, f"{self.name}.k_norm")

    def forward(self, x, rope: RotaryEmbedding, positions, hooks: Hooks,
                kv_cache: KVCache | None = None) -> torch.Tensor:
        cfg, name = self.cfg, self.name
        batch, n_new, _ = x.shape                               # x: [batch, pos, d_model]

        # 1. Project the whole vector into queries, keys and values.
        q, k, v = x @ self.W_Q, x @ self.W_K, x @ self.W_V
        if cfg.attn_bias:
            q, k, v = q + self.b_Q, k + self.b_K, v + self.b_V
        # q: [batch, pos, n_heads, d_head];  k, v: [batch, pos, n_kv_heads, d_head]
        q = hooks(f"{name}.hook_q", q.view(batch, n_new, cfg.n_heads, cfg.d_head))
        k = hooks(f"{name}.hook_k", k.view(batch, n_new, cfg.n_kv_heads, cfg.d_head))
        v = hooks(f"{name}.hook_v", v.view(batch, n_new, cfg.n_kv_heads, cfg.d_head))
        if cfg.qk_norm:
            # 1b. QK-norm: every head's q and k divided by its own RMS, so scores cannot blow up.
            q = self.q_norm(q, hooks)                           # [batch, pos, n_heads, d_head]
            k = self.k_norm(k, hooks)                           # [batch, pos, n_kv_heads, d_head]

        # 2. RoPE: rotate q and k by their positions (v is not rotated).
        cos, sin = rope.angles(positions, q.dtype)              # [pos, d_head] each
        q = hooks(f"{name}.hook_rot_q", rope.rotate(q, cos, sin))
        k = hooks(f"{name}.hook_rot_k", rope.rotate(k, cos, sin))

        # 3. With a KV cache, attend over the stored keys/values plus the new ones.
        if kv_cache is not None:
            # [batch, k_pos, n_kv_heads, d_head]: every position so far
            k, v = kv_cache.append(self.layer, k, v)
        q_pos = positions                                       # [q_pos] absolute positions
        k_pos = torch.arange(k.shape[1], device=x.device)       # [k_pos]

        # Heads first: [batch, heads, pos, d_head].
        q_h, k_h, v_h = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

        if hooks.wants(f"{name}.hook_attn_scores") or hooks.wants(f"{name}.hook_pattern"):
            # 4. The formula, step by step. GQA: query head h reads key/value head h // group_size.
            # [batch, n_heads, k_pos, d_head]
            k_h = k_h.repeat_interleave(cfg.group_size, dim=1)
            v_h = v_h.repeat_interleave(cfg.group_size, dim=1)
            # [batch, n_heads, q_pos, k_pos]
            scores = q_h @ k_h.transpose(-1, -2) / math.sqrt(cfg.d_head)
            hidden = ~self.allowed(q_pos, k_pos)                # [q_pos, k_pos] causal (+ window)
            scores = hooks(f"{name}.hook_attn_scores", scores.masked_fill(hidden, float("-inf")))
            pattern = hooks(f"{name}.hook_pattern", scores.softmax(dim=-1))   # rows sum to 1
            z = pattern @ v_h                                   # [batch, n_heads, q_pos, d_head]
        else:   # 4'. Nobody looks at the scores: the same z from PyTorch's fused kernel.
            z = self._fast_z(q_h, k_h, v_h, q_pos, k_pos)
        z = hooks(f"{name}.hook_z", z.transpose(1, 2))          # [batch, pos, n_heads, d_head]

        # 5. Each head writes back through its slice of W_O; the writes add up.
        if hooks.wants(f"{name}.hook_result"):      # asked for each head's write: keep them apart
            return hooks(f"{name}.hook_result", self.head_results(z)).sum(dim=2)
        # [batch, pos, n_heads * d_head] @ [n_heads * d_head, d_model] -> [batch, pos, d_model]
        return z.reshape(batch, n_new, cfg.n_heads * cfg.d_head) @ self.W_O

    def allowed(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        """Which keys each query may read: [q_pos, k_pos] booleans. Causal: no key after the query.
        On a sliding layer also no key sliding_window or more positions back (a query sees itself
        and the sliding_window - 1 positions before it)."""
        allowed = k_pos[None, :] <= q_pos[:, None]                  # [q_pos, k_pos]
        if self.sliding_window is not None:
            allowed = allowed & (k_pos[None, :] > q_pos[:, None] - self.sliding_window)
        return allowed

    def head_results(self, z: torch.Tensor) -> torch.Tensor:
        """What each head writes into the residual stream:
        z [batch, pos, n_heads, d_head] -> [batch, pos, n_heads, d_model].

        Summed over heads this is z @ W_O; kept apart it is n_heads times as big, so it is only
        computed when someone asks for hook_result.
        """
        cfg = self.cfg
        # [n_heads, d_head, d_model]
        W_O_per_head = self.W_O.view(cfg.n_heads, cfg.d_head, cfg.d_model)
        return torch.einsum("bphd,hdm->bphm", z, W_O_per_head)

    def _fast_z(self, q_h, k_h, v_h, q_pos, k_pos) -> torch.Tensor:
        """Step 4 in one call to PyTorch's fused kernel, scaled_dot_product_attention: the same
        z [batch, n_heads, q_pos, d_head], without keeping the scores. It repeats the key/value
        heads itself (enable_gqa)."""
        n_keys = k_h.shape[2]
        window_hides_nothing = self.sliding_window is None or n_keys <= self.sliding_window
        if q_h.shape[2] == n_keys and window_hides_nothing:       # plain causal: the fastest kernel
            return F.scaled_dot_product_attention(q_h, k_h, v_h, is_causal=True, enable_gqa=True)
        mask = self.allowed(q_pos, k_pos)                           # [q_pos, k_pos]
        return F.scaled_dot_product_attention(q_h, k_h, v_h, attn_mask=mask, enable_gqa=True)


# --------------------------------------------------------------------------- MLP

class MLP(nn.Module):
    """Gated feed-forward network: down( act(gate(x)) * up(x) ).

    act is SiLU (SwiGLU, as Llama and SmolLM2) or the tanh approximation of GELU
    (GeGLU, as Gemma).
    """

    def __init__(self, cfg: DecoderConfig, layer: int):
        super().__init__()
        self.name = f"blocks.{layer}.mlp"           # prefix of its hook points
        gelu_tanh = lambda x: F.gelu(x, approximate="tanh")   # noqa: E731
        self.act = {"silu": F.silu, "gelu_tanh": gelu_tanh}[cfg.activation]
        # SmolLM2 gate_proj and up_proj [576, 1536], down_proj [1536, 576]; Gemma 640 and 2048
        self.gate_proj = nn.Parameter(torch.empty(cfg.d_model, cfg.d_ff))
        self.up_proj = nn.Parameter(torch.empty(cfg.d_model, cfg.d_ff))
        self.down_proj = nn.Parameter(torch.empty(cfg.d_ff, cfg.d_model))

    def forward(self, x: torch.Tensor, hooks: Hooks) -> torch.Tensor:
        # x: [batch, pos, d_model]
        gate = hooks(f"{self.name}.hook_pre", x @ self.gate_proj)           # [batch, pos, d_ff]
        up = hooks(f"{self.name}.hook_pre_linear", x @ self.up_proj)        # [batch, pos, d_ff]
        post = hooks(f"{self.name}.hook_post", self.act(gate) * up)         # [batch, pos, d_ff]
        return post @ self.down_proj                                        # [batch, pos, d_model]


# --------------------------------------------------------------------------- block

class Block(nn.Module):
    """Pre-norm block: each sub-layer reads a normalized copy and adds its output to the stream.

    With post_norms (Gemma's "sandwich") each sub-layer's output is normalized once more
    before it is added, so no single block can write an arbitrarily large vector.
    """

    def __init__(self, cfg: DecoderConfig, layer: int):
        super().__init__()
        self.cfg = cfg
        self.name = name = f"blocks.{layer}"        # prefix of its hook points
        self.ln1 = RMSNorm(cfg.d_model, cfg.norm_eps, f"{name}.ln1")
        self.attn = Attention(cfg, layer)
        self.ln2 = RMSNorm(cfg.d_model, cfg.norm_eps, f"{name}.ln2")
        self.mlp = MLP(cfg, layer)
        if cfg.post_norms:
            self.ln1_post = RMSNorm(cfg.d_model, cfg.norm_eps, f"{name}.ln1_post")
            self.ln2_post = RMSNorm(cfg.d_model, cfg.norm_eps, f"{name}.ln2_post")

    def forward(self, resid, rope, positions, hooks: Hooks,
                kv_cache: KVCache | None = None) -> torch.Tensor:
        name = self.name
        resid_pre = hooks(f"{name}.hook_resid_pre", resid)                  # [batch, pos, d_model]
        attn_out = self.attn(self.ln1(resid_pre, hooks), rope, positions, hooks, kv_cache)
        if self.cfg.post_norms:
            attn_out = self.ln1_post(attn_out, hooks)
        attn_out = hooks(f"{name}.hook_attn_out", attn_out)                 # what is added
        resid_mid = hooks(f"{name}.hook_resid_mid", resid_pre + attn_out)   # residual add
        mlp_out = self.mlp(self.ln2(resid_mid, hooks), hooks)               # [batch, pos, d_model]
        if self.cfg.post_norms:
            mlp_out = self.ln2_post(mlp_out, hooks)
        mlp_out = hooks(f"{name}.hook_mlp_out", mlp_out)                    # what is added
        return hooks(f"{name}.hook_resid_post", resid_mid + mlp_out)        # residual add


# --------------------------------------------------------------------------- decoder

class Decoder(nn.Module):
    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.cfg = cfg
        self.W_E = nn.Parameter(torch.empty(cfg.vocab_size, cfg.d_model))   # [vocab, d_model]
        self.rope = RotaryEmbedding(cfg.d_head, cfg.rope_theta)
        if cfg.sliding_layers:      # sliding layers turn their pairs with a base of their own
            base = cfg.rope_theta_sliding or cfg.rope_theta
            self.rope_sliding = RotaryEmbedding(cfg.d_head, base)
        self.blocks = nn.ModuleList(Block(cfg, layer) for layer in range(cfg.n_layers))
        self.ln_final = RMSNorm(cfg.d_model, cfg.norm_eps, "ln_final")
        if not cfg.tie_embeddings:
            self.W_U_untied = nn.Parameter(torch.empty(cfg.d_model, cfg.vocab_size))

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """ids [batch, pos] -> the vectors the first block reads [batch, pos, d_model]: one row
        of W_E each, times √d_model with embed_scale (Gemma keeps its embedding rows small and
        scales them up here)."""
        embedded = self.W_E[ids]                                            # [batch, pos, d_model]
        return embedded * math.sqrt(self.cfg.d_model) if self.cfg.embed_scale else embedded

    def rope_for(self, layer: int) -> RotaryEmbedding:
        """The rotary embedding this layer's attention uses."""
        return self.rope_sliding if self.cfg.is_sliding(layer) else self.rope

    @property
    def W_U(self) -> torch.Tensor:
        """Unembedding [d_model, vocab]: one column per vocabulary entry."""
        return self.W_E.T if self.cfg.tie_embeddings else self.W_U_untied

    def forward(self, ids: torch.Tensor, hooks: Hooks | None = None,
                kv_cache: KVCache | None = None, last_only: bool = False,
                unembed: bool = True) -> torch.Tensor:
        """ids: [batch, pos] -> logits [batch, pos, vocab] (or [batch, 1, vocab] if last_only).
        unembed=False stops before the unembedding and returns the final-normed stream
        [batch, pos, d_model], for a caller that reads only some of the logits, or none."""
        hooks = hooks if hooks is not None else Hooks(names=())
        start = len(kv_cache) if kv_cache is not None else 0
        positions = torch.arange(start, start + ids.shape[1], device=ids.device)   # [pos]

        resid = hooks("hook_embed", self.embed(ids))                        # [batch, pos, d_model]
        for layer, block in enumerate(self.blocks):
            resid = block(resid, self.rope_for(layer), positions, hooks, kv_cache)
        final = self.ln_final(resid, hooks)                                 # [batch, pos, d_model]
        if last_only:       # the unembedding is the costly part with a big vocabulary: skip it
            final = final[:, -1:]                                           # [batch, 1, d_model]
        if not unembed:
            return final                                                    # [batch, pos, d_model]
        return final @ self.W_U                                             # [batch, pos, vocab]

    def hook_names(self) -> list[str]:
        """Every hook point, in the order a forward pass reaches them."""
        cfg = self.cfg
        norm = lambda n: [f"{n}.hook_scale", f"{n}.hook_normalized"]   # noqa: E731
        names = ["hook_embed"]
        for layer in range(cfg.n_layers):
            b = f"blocks.{layer}"
            names += [f"{b}.hook_resid_pre", *norm(f"{b}.ln1")]
            names += [f"{b}.attn.{h}" for h in ("hook_q", "hook_k", "hook_v")]
            if cfg.qk_norm:
                names += [*norm(f"{b}.attn.q_norm"), *norm(f"{b}.attn.k_norm")]
            names += [f"{b}.attn.{h}" for h in ("hook_rot_q", "hook_rot_k", "hook_attn_scores",
                                                "hook_pattern", "hook_z", "hook_result")]
            names += norm(f"{b}.ln1_post") if cfg.post_norms else []
            names += [f"{b}.hook_attn_out", f"{b}.hook_resid_mid", *norm(f"{b}.ln2"),
                      f"{b}.mlp.hook_pre", f"{b}.mlp.hook_pre_linear", f"{b}.mlp.hook_post"]
            names += norm(f"{b}.ln2_post") if cfg.post_norms else []
            names += [f"{b}.hook_mlp_out", f"{b}.hook_resid_post"]
        return names + ["ln_final.hook_scale", "ln_final.hook_normalized"]
