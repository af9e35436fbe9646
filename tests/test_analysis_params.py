"""Parameter counts: the formulas against the real tensors and the published totals."""

import pytest

from lesson_model.analysis.params import (
    PRESETS,
    PUBLISHED_ACTIVE,
    PUBLISHED_TOTALS,
    ArchConfig,
    config_of,
    count_params,
    kind_of,
    model_breakdown,
    with_experts,
)


@pytest.mark.parity
def test_breakdown_reads_the_real_tensors(lm):
    b = model_breakdown(lm)
    assert b.total == sum(p.numel() for p in lm.decoder.parameters())
    assert b.total == lm.param_counts()["total"]
    block = lm.decoder.blocks[0]
    assert b.per_layer["attention"] == sum(p.numel() for p in block.attn.parameters())
    assert b.per_layer["mlp"] == sum(p.numel() for p in block.mlp.parameters())
    assert b.parts["embedding"] == lm.decoder.W_E.numel()


@pytest.mark.parity
def test_gemma_breakdown_equals_its_tensors(gemma):
    """Gemma: every part equals the real tensors of that kind; the norms include q_norm/k_norm
    and the post-norms; the 262,144 x 640 embedding is most of the model."""
    b = model_breakdown(gemma)
    d = gemma.decoder
    cfg = gemma.cfg
    assert b.total == sum(p.numel() for p in d.parameters()) == gemma.param_counts()["total"]
    block = d.blocks[0]
    assert b.per_layer["attention"] == sum(p.numel() for n, p in block.attn.named_parameters() if "norm" not in n)
    assert b.per_layer["attention"] == 2 * 640 * 4 * 256 + 2 * 640 * 256 == 1_638_400
    assert b.per_layer["mlp"] == sum(p.numel() for p in block.mlp.parameters()) == 3 * 640 * 2048
    norms = [block.ln1, block.ln2, block.ln1_post, block.ln2_post, block.attn.q_norm, block.attn.k_norm]
    assert b.per_layer["norms"] == sum(n.weight.numel() for n in norms) == 4 * 640 + 2 * 256
    assert b.parts["norms"] == cfg.n_layers * (4 * cfg.d_model + 2 * cfg.d_head) + cfg.d_model
    assert b.parts["embedding"] == d.W_E.numel() == 262_144 * 640
    assert b.parts["embedding"] / b.total > 0.6 and b.unembedding == 0
    by_kind = {}
    for name, p in d.named_parameters():
        by_kind[kind_of(name)] = by_kind.get(kind_of(name), 0) + p.numel()
    assert by_kind == b.parts
    c = count_params(config_of(gemma))                   # the formula, from the config alone
    assert c.parts == b.parts and c.per_layer == b.per_layer


@pytest.mark.parity
def test_formula_matches_this_model(lm):
    c = count_params(config_of(lm))
    b = model_breakdown(lm)
    assert c.parts == b.parts and c.total == b.total
    cfg = lm.cfg
    # by hand: Q and O are d x d, K and V are d x (kv heads * d_head); 3 MLP matrices
    assert c.per_layer["attention"] == 2 * 576 * 576 + 2 * 576 * 3 * 64 == 884_736
    assert c.per_layer["mlp"] == 3 * 576 * 1536 == 2_654_208
    assert cfg.tie_embeddings and c.unembedding == 0


def test_gpt3_per_layer_and_total():
    c = count_params(PRESETS["gpt3-175b"])
    d = 12288
    assert c.per_layer["attention"] - 4 * d * d == 4 * d          # 4 d^2 weights + biases
    assert c.per_layer["mlp"] - 8 * d * d == 4 * d + d             # 8 d^2 weights + biases
    assert round(c.per_layer["attention"] / 1e9, 1) == 0.6
    assert round(c.per_layer["mlp"] / 1e9, 1) == 1.2
    assert abs(c.total - 175e9) / 175e9 < 0.005                     # 174.6B, published as 175B


@pytest.mark.parametrize("key", ["gpt2-small", "llama2-70b", "mistral-7b"])
def test_exact_published_counts(key):
    assert count_params(PRESETS[key]).total == PUBLISHED_TOTALS[key]


def test_mixtral_total_and_active():
    c = count_params(PRESETS["mixtral-8x7b"])
    assert round(c.total / 1e9, 1) == 46.7 == PUBLISHED_TOTALS["mixtral-8x7b"] / 1e9
    assert round(c.active / 1e9, 1) == 12.9 == PUBLISHED_ACTIVE["mixtral-8x7b"] / 1e9
    assert c.total == 46_702_792_704
    # one expert per layer, one used: exactly Mistral 7B plus nothing (no router)
    dense = count_params(with_experts(PRESETS["mixtral-8x7b"], 1, 1))
    assert dense.total == count_params(PRESETS["mistral-7b"]).total
    # the 6 unused experts per layer are the whole gap
    expert = 3 * 4096 * 14336
    assert c.total - c.active == 32 * 6 * expert


def test_with_experts_rejects_bad_counts():
    with pytest.raises(ValueError):
        with_experts(PRESETS["mixtral-8x7b"], 4, 5)
    with pytest.raises(ValueError):
        with_experts(PRESETS["mixtral-8x7b"], 4, 0)


def test_tiny_config_by_hand():
    cfg = ArchConfig("tiny", n_layers=2, d_model=4, n_heads=2, n_kv_heads=1, d_head=2, d_ff=8,
                     vocab_size=10, n_experts=3, experts_per_token=1)
    c = count_params(cfg)
    attention = 4 * 4 + 2 * 4 * 2 + 4 * 4       # Q 4x4, K and V 4x2, O 4x4
    expert = 3 * 4 * 8
    assert c.per_layer == {"attention": attention, "mlp": 3 * expert, "router": 4 * 3, "norms": 8}
    assert c.total == 2 * (attention + 3 * expert + 12 + 8) + 4 + 2 * 40
    assert c.active == c.total - 2 * 2 * expert
