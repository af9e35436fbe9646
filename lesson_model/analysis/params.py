"""Where the parameters are: counts by part, for the loaded model (from its real tensors)
and for published architectures (from their configurations).

    from lesson_model.analysis.params import PRESETS, count_params, model_breakdown
    count_params(PRESETS["gpt3-175b"]).per_layer["attention"]   # 603,979,776 + biases
    count_params(PRESETS["mixtral-8x7b"]).total / 1e9            # 46.70
    model_breakdown(lm).total == lm.param_counts()["total"]

A transformer's weights are matrices whose sizes follow from a handful of numbers
(layers, widths, heads, vocabulary), so the counts below are exact for each config:

    attention per layer   d_model x (n_heads + 2 n_kv_heads) d_head  (Q, K, V)
                        + n_heads d_head x d_model                     (O)
    MLP per expert        2 d_model d_ff (up, down) + d_model d_ff if gated (SwiGLU)
    MoE per layer         n_experts experts + a router d_model x n_experts; a token uses
                          experts_per_token of them
    embedding             vocab x d_model (+ an unembedding of the same size unless tied)
    norms per layer       one weight of d_model per norm: 2 (pre-norm), 4 with post-norms
                          (Gemma's sandwich), plus 2 of d_head with QK-norm (q_norm, k_norm)

The loaded model's breakdown is read from its tensors by name: ``W_E`` embedding, the
attention's and the MLP's matrices, and every norm weight (ln1, ln2, ln1_post, ln2_post,
attn.q_norm, attn.k_norm, ln_final) under "norms".
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class ArchConfig:
    """The numbers that fix a decoder's parameter count."""
    name: str
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    d_ff: int
    vocab_size: int
    gated_mlp: bool = True        # SwiGLU/GeGLU: gate, up and down matrices (GPT-2/3: up and down only)
    n_experts: int = 1            # MLPs per layer (mixture of experts when > 1)
    experts_per_token: int = 1    # how many of them one token goes through
    tied_embeddings: bool = False  # unembedding = embedding matrix (counted once)
    learned_positions: int = 0    # rows of a learned absolute position table (GPT-2/3); 0 for RoPE
    biases: bool = False          # GPT-2/3 style biases on every linear layer
    layer_norm: bool = False      # LayerNorm (weight + bias) instead of RMSNorm (weight only)
    post_norms: bool = False      # a norm after each sub-layer too (Gemma's "sandwich"): 4 per block
    qk_norm: bool = False         # an RMSNorm of width d_head over every head's q and k (2 per block)


@dataclass
class ParamCount:
    """Parameter counts of one architecture, by part. ``per_layer`` is one block's."""
    config: ArchConfig
    per_layer: dict[str, int]          # attention, mlp (all experts), router, norms
    per_layer_active: dict[str, int]   # the same, counting only the experts one token uses
    embedding: int                     # token (+ position) embedding table(s)
    unembedding: int                   # 0 when tied to the embedding
    final_norm: int
    parts: dict[str, int] = field(default_factory=dict)   # whole-model totals by part
    total: int = 0
    active: int = 0                    # parameters one token actually goes through


def count_params(cfg: ArchConfig) -> ParamCount:
    """Exact parameter counts of a decoder-only transformer with this configuration."""
    d, dh = cfg.d_model, cfg.d_head
    q_width, kv_width = cfg.n_heads * dh, cfg.n_kv_heads * dh
    attention = d * q_width + 2 * d * kv_width + q_width * d                 # W_Q, W_K, W_V, W_O
    if cfg.biases:
        attention += q_width + 2 * kv_width + d
    expert = (3 if cfg.gated_mlp else 2) * d * cfg.d_ff                     # (gate,) up, down
    if cfg.biases:
        expert += (cfg.d_ff if not cfg.gated_mlp else 2 * cfg.d_ff) + d
    router = d * cfg.n_experts if cfg.n_experts > 1 else 0
    norm = 2 * d if cfg.layer_norm else d                                   # one norm's weight (+ bias)
    norms = (4 if cfg.post_norms else 2) * norm + (2 * dh if cfg.qk_norm else 0)
    per_layer = {"attention": attention, "mlp": expert * cfg.n_experts, "router": router, "norms": norms}
    per_layer_active = dict(per_layer, mlp=expert * cfg.experts_per_token)

    embedding = cfg.vocab_size * d + cfg.learned_positions * d
    unembedding = 0 if cfg.tied_embeddings else cfg.vocab_size * d
    final_norm = norm
    L = cfg.n_layers
    parts = {
        "embedding": embedding + unembedding,
        "attention": L * per_layer["attention"],
        "mlp": L * (per_layer["mlp"] + per_layer["router"]),
        "norms": L * per_layer["norms"] + final_norm,
    }
    total = sum(parts.values())
    active = total - L * (per_layer["mlp"] - per_layer_active["mlp"])
    return ParamCount(cfg, per_layer, per_layer_active, embedding, unembedding, final_norm, parts, total, active)


def config_of(lm) -> ArchConfig:
    """The loaded model's architecture as an ArchConfig (RoPE, RMSNorm, a gated MLP; post-norms
    and QK-norm as its config says)."""
    c = lm.cfg
    return ArchConfig(name=lm.name, n_layers=c.n_layers, d_model=c.d_model, n_heads=c.n_heads,
                      n_kv_heads=c.n_kv_heads, d_head=c.d_head, d_ff=c.d_ff, vocab_size=c.vocab_size,
                      tied_embeddings=c.tie_embeddings, biases=c.attn_bias, post_norms=c.post_norms,
                      qk_norm=c.qk_norm)


def kind_of(name: str) -> str:
    """The part a parameter of the decoder belongs to, from its name: "embedding",
    "unembedding", "attention", "mlp" or "norms" (every norm weight, the QK-norm's included)."""
    if name == "W_E":
        return "embedding"
    if name == "W_U_untied":
        return "unembedding"
    if name.endswith("norm.weight") or ".ln" in name or name.startswith("ln_final"):
        return "norms"
    if ".attn." in name:
        return "attention"
    if ".mlp." in name:
        return "mlp"
    return "norms"


def model_breakdown(lm) -> ParamCount:
    """Counts of the loaded model by part, read from its real tensors (not from its config).

    Parameters are grouped by name (kind_of): ``W_E`` (+ ``W_U_untied``) is the embedding part,
    the attention's matrices (and biases) attention, the MLP's matrices MLP, and every norm
    weight, including the QK-norm's and the post-norms', norms.
    """
    layer: dict[int, dict[str, int]] = {}
    embedding = unembedding = final_norm = 0
    for name, p in lm.decoder.named_parameters():
        n = p.numel()
        kind = kind_of(name)
        if kind == "embedding":
            embedding += n
        elif kind == "unembedding":
            unembedding += n
        elif name.startswith("blocks."):
            index = int(name.split(".")[1])
            row = layer.setdefault(index, {"attention": 0, "mlp": 0, "router": 0, "norms": 0})
            row[kind] += n
        else:
            final_norm += n
    first = layer[0]
    if any(row != first for row in layer.values()):
        raise ValueError("blocks differ in size; per-layer counts would be misleading")
    L = len(layer)
    parts = {
        "embedding": embedding + unembedding,
        "attention": L * first["attention"],
        "mlp": L * first["mlp"],
        "norms": L * first["norms"] + final_norm,
    }
    total = sum(parts.values())
    return ParamCount(config_of(lm), dict(first), dict(first), embedding, unembedding, final_norm,
                      parts, total, total)


# Published configurations (from each model's config file / paper).
PRESETS: dict[str, ArchConfig] = {
    # Radford et al. 2019; the 124M checkpoint: 12 x 768, 12 heads, context 1024, tied, biases, LayerNorm.
    "gpt2-small": ArchConfig("GPT-2 small", n_layers=12, d_model=768, n_heads=12, n_kv_heads=12, d_head=64,
                             d_ff=3072, vocab_size=50257, gated_mlp=False, tied_embeddings=True,
                             learned_positions=1024, biases=True, layer_norm=True),
    # Brown et al. 2020, Table 2.1: 96 layers, d_model 12288, 96 heads of 128, context 2048, d_ff = 4 d_model.
    "gpt3-175b": ArchConfig("GPT-3 175B", n_layers=96, d_model=12288, n_heads=96, n_kv_heads=96, d_head=128,
                            d_ff=49152, vocab_size=50257, gated_mlp=False, tied_embeddings=True,
                            learned_positions=2048, biases=True, layer_norm=True),
    # Touvron et al. 2023 (config.json): 80 x 8192, 64 query / 8 KV heads, d_ff 28672, vocab 32000.
    "llama2-70b": ArchConfig("Llama 2 70B", n_layers=80, d_model=8192, n_heads=64, n_kv_heads=8, d_head=128,
                             d_ff=28672, vocab_size=32000),
    # Mistral 7B v0.1 (config.json): 32 x 4096, 32 query / 8 KV heads, d_ff 14336, vocab 32000.
    "mistral-7b": ArchConfig("Mistral 7B", n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8, d_head=128,
                             d_ff=14336, vocab_size=32000),
    # Mixtral 8x7B (config.json): Mistral 7B's shape with 8 expert MLPs per layer, 2 used per token.
    "mixtral-8x7b": ArchConfig("Mixtral 8x7B", n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8, d_head=128,
                               d_ff=14336, vocab_size=32000, n_experts=8, experts_per_token=2),
}

# The totals those models are known by, for checking the arithmetic above.
PUBLISHED_TOTALS: dict[str, float] = {
    "gpt2-small": 124_439_808,       # the checkpoint's exact count
    "gpt3-175b": 175e9,              # "175B", rounded
    "llama2-70b": 68_976_648_192,    # the checkpoint's exact count ("70B")
    "mistral-7b": 7_241_732_096,     # the checkpoint's exact count ("7B")
    "mixtral-8x7b": 46.7e9,          # Mixtral paper: 46.7B total, 12.9B active
}
PUBLISHED_ACTIVE: dict[str, float] = {"mixtral-8x7b": 12.9e9}


def with_experts(cfg: ArchConfig, n_experts: int, experts_per_token: int) -> ArchConfig:
    """The same architecture with another expert count (the MoE calculator)."""
    if not 1 <= experts_per_token <= n_experts:
        raise ValueError("experts_per_token must be between 1 and n_experts")
    return replace(cfg, n_experts=n_experts, experts_per_token=experts_per_token)
