"""Neurons of the gated MLP: top activations, per-token activations, output tokens, and
the collapse of linear maps, each checked against a direct computation."""

import pytest
import torch
import torch.nn.functional as F

from lesson_model.analysis import neurons as N

TEXT = "The cat sat on the mat. The cat"
LAYER = 4


@pytest.fixture(scope="module")
def run(lm):
    return lm.run(TEXT, names=[f"blocks.{LAYER}.ln2.hook_normalized", f"blocks.{LAYER}.hook_resid_mid",
                               *N.neuron_names(LAYER), *N.mlp_names(LAYER), f"blocks.{LAYER}.hook_mlp_out"])


def direct_post(lm, run):
    """silu(x @ gate) * (x @ up) recomputed from the residual stream, by hand."""
    block = lm.decoder.blocks[LAYER]
    x = run.cache[f"blocks.{LAYER}.hook_resid_mid"][0]
    x = x / (x.pow(2).mean(-1, keepdim=True) + block.ln2.eps).sqrt() * block.ln2.weight
    with torch.inference_mode():
        return F.silu(x @ block.mlp.gate_proj) * (x @ block.mlp.up_proj)        # [pos, d_ff]


def test_top_activations_match_direct_computation(lm, run):
    post = direct_post(lm, run)
    for position in (0, 3, -1):
        top = N.neuron_top_activations(lm, run, LAYER, position, k=8)
        want = torch.topk(post[position].abs(), 8).indices.tolist()
        assert [a.neuron for a in top] == want
        for a in top:
            assert a.value == pytest.approx(float(post[position, a.neuron]), abs=1e-4)
        assert abs(top[0].value) >= abs(top[-1].value)


def test_top_activations_signed(lm, run):
    post = direct_post(lm, run)[-1]
    pos = N.neuron_top_activations(lm, run, LAYER, -1, k=5, by="positive")
    neg = N.neuron_top_activations(lm, run, LAYER, -1, k=5, by="negative")
    assert [a.neuron for a in pos] == torch.topk(post, 5).indices.tolist()
    assert [a.neuron for a in neg] == torch.topk(-post, 5).indices.tolist()
    assert all(a.value < 0 for a in neg) and all(a.value > 0 for a in pos)


def test_neuron_activations_over_tokens(lm, run):
    post = direct_post(lm, run)
    n = N.neuron_top_activations(lm, run, LAYER, 2, k=1)[0].neuron
    acts = N.neuron_activations(lm, run, LAYER, n)
    assert acts.shape == (len(lm.encode(TEXT)),)
    assert torch.allclose(acts, post[:, n], atol=1e-4)


def test_neurons_write_the_mlp_output(lm, run):
    """The MLP output is the sum over neurons of activation x row of down_proj."""
    post = run.cache[f"blocks.{LAYER}.mlp.hook_post"][0]
    with torch.inference_mode():
        rebuilt = post @ lm.decoder.blocks[LAYER].mlp.down_proj
    assert torch.allclose(rebuilt, run.cache[f"blocks.{LAYER}.hook_mlp_out"][0], atol=1e-4)


def test_output_tokens_match_direct_computation(lm):
    n = 123
    d = lm.decoder
    with torch.inference_mode():
        scores = (d.blocks[LAYER].mlp.down_proj[n] * d.ln_final.weight) @ d.W_E.T
        raw = d.blocks[LAYER].mlp.down_proj[n] @ d.W_E.T
    vocab = N.neuron_output_tokens(lm, LAYER, n, k=6)
    assert [i for i, _ in vocab.promoted] == torch.topk(scores, 6).indices.tolist()
    assert [i for i, _ in vocab.suppressed] == torch.topk(-scores, 6).indices.tolist()
    assert vocab.promoted[0][1] == pytest.approx(float(scores.max()), rel=1e-4)
    assert vocab.suppressed[0][1] == pytest.approx(float(scores.min()), rel=1e-4)
    plain = N.neuron_output_tokens(lm, LAYER, n, k=6, through_norm=False)
    assert [i for i, _ in plain.promoted] == torch.topk(raw, 6).indices.tolist()


def test_activation_functions_by_hand():
    x = torch.tensor([-2.0, 0.0, 1.0])
    assert N.relu(x).tolist() == [0.0, 0.0, 1.0]
    assert N.silu(torch.tensor([1.0])).item() == pytest.approx(1 / (1 + 2.718281828 ** -1), rel=1e-6)
    assert N.gelu(torch.tensor([1.0])).item() == pytest.approx(0.8413447, rel=1e-5)    # 1 * Phi(1)
    assert N.swiglu(torch.tensor([1.0]), torch.tensor([-3.0])).item() == pytest.approx(-3 * 0.7310586, rel=1e-5)


def test_linear_collapse(lm):
    c = N.linear_collapse(lm, LAYER)
    mlp = lm.decoder.blocks[LAYER].mlp
    with torch.inference_mode():
        want = mlp.up_proj.double() @ mlp.down_proj.double()
    assert c.product.shape == (576, 576)
    assert torch.allclose(c.product.double(), want, atol=1e-5)
    assert c.rank <= 576 and c.rank == int(torch.linalg.matrix_rank(want))
    assert c.params_two == 2 * 576 * 1536 and c.params_one == 576 * 576
    assert c.max_error < 1e-9
    assert torch.all(c.singular_values[:-1] >= c.singular_values[1:])


def test_real_mlp_is_not_additive(lm, run):
    check = N.nonlinearity_check(lm, run, LAYER, 1, 4)
    assert check.linear_gap < 1e-4            # the plain up-down map adds up
    assert check.mlp_gap > 0.05               # the real gated MLP does not
    # and the function it calls is the real MLP: it reproduces hook_mlp_out
    w = lm.decoder.blocks[LAYER].ln2.weight
    x = run.cache[f"blocks.{LAYER}.ln2.hook_normalized"][0] * w
    with torch.inference_mode():
        out = N.mlp_forward(lm, LAYER, x)
    assert torch.allclose(out, run.cache[f"blocks.{LAYER}.hook_mlp_out"][0], atol=1e-4)


@pytest.mark.parametrize("layer", [LAYER, 10, 26])
def test_gated_mlp_without_silu_is_quadratic_not_linear(lm, layer):
    """correctness review row 1: removing SiLU leaves ((x W_gate) * (x W_up)) W_down, which is
    bilinear (f(2a) = 4 f(a)) and not additive; only the two-matrix map x W_up W_down is linear.
    Computed here by hand from the layer's weights and real MLP inputs, then compared with
    nonlinearity_check."""
    run = lm.run(TEXT, names=N.mlp_names(layer))
    block = lm.decoder.blocks[layer]
    x = (run.cache[f"blocks.{layer}.ln2.hook_normalized"][0] * block.ln2.weight).double()
    G, U, D = (m.detach().double() for m in (block.mlp.gate_proj, block.mlp.up_proj, block.mlp.down_proj))
    maps = {"plain": lambda v: v @ U @ D, "bilinear": lambda v: ((v @ G) * (v @ U)) @ D,
            "real": lambda v: (F.silu(v @ G) * (v @ U)) @ D}
    a, b = x[1], x[4]
    check = N.nonlinearity_check(lm, run, layer, 1, 4)
    for name, f in maps.items():
        gap = float((f(a + b) - f(a) - f(b)).norm() / f(a + b).norm())
        doubling = float(f(2 * a).norm() / f(a).norm())
        assert check.gap[name] == pytest.approx(gap, abs=1e-4), name
        assert check.doubling[name] == pytest.approx(doubling, abs=1e-4), name
    assert check.gap["plain"] < 1e-5 and check.doubling["plain"] == pytest.approx(2, abs=1e-5)
    assert check.doubling["bilinear"] == pytest.approx(4, abs=1e-4)         # quadratic: 2^2
    assert torch.allclose(maps["bilinear"](2 * a), 4 * maps["bilinear"](a), rtol=1e-9, atol=1e-9)
    assert check.quadratic_error < 1e-5
    assert check.gap["bilinear"] > 0.05                                      # not additive: no single matrix
    assert check.gap["real"] > 0.05


def test_silu_minimum():
    assert N.SILU_MIN == pytest.approx(-0.27846, abs=1e-4)
    g = torch.linspace(-10, 10, 20001)
    assert float(N.silu(g).min()) >= N.SILU_MIN - 1e-6
    assert float(N.silu(torch.tensor(5.0))) == pytest.approx(5.0, rel=0.01)    # silu(g) ~ g for positive g


def test_strongest_pusher_is_the_top_neuron_pushing_the_token(lm):
    layer = 24
    run = lm.run("The Eiffel Tower is located in the city of", names=N.neuron_effect_names(lm, layer))
    token = int(run.logits[0, -1].argmax())
    best = N.strongest_pusher(lm, run, layer, token, -1, k=12)
    pushes = N.neuron_effects_on_token(lm, run, layer, token, -1)
    top = [a.neuron for a in N.neuron_top_activations(lm, run, layer, -1, k=12)]
    assert best.neuron in top
    assert best.push == pytest.approx(max(float(pushes[n]) for n in top), abs=1e-6)
    assert best.total == pytest.approx(float(pushes.sum()), abs=1e-5)
    assert best.scale == pytest.approx(float(run.cache["ln_final.hook_scale"][0, -1, 0]))


def test_neuron_logit_effects_add_up_to_the_mlp_attribution(lm):
    """Summed over every neuron, the per-neuron direct effects are the MLP's DLA part."""
    from lesson_model.analysis.attribution import direct_logit_attribution, dla_names
    layer = 20
    run = lm.run(TEXT, names=sorted(set(dla_names(lm)) | set(N.neuron_effect_names(lm, layer))))
    token = int(run.logits[0, -1].argmax())
    post = run.cache[f"blocks.{layer}.mlp.hook_post"][0, -1]
    d = lm.decoder
    with torch.inference_mode():
        per_neuron = (d.blocks[layer].mlp.down_proj * d.ln_final.weight) @ d.W_E[token]     # [d_ff]
    for n in (0, 77, 1535):
        assert float(N.neuron_output_direction(lm, layer, n)[token]) == pytest.approx(float(per_neuron[n]), abs=1e-5)
    total = float(post @ per_neuron) / float(run.cache["ln_final.hook_scale"][0, -1, 0])
    assert total == pytest.approx(float(direct_logit_attribution(lm, run, token).mlp[layer]), abs=2e-3)
    per_neuron_effect = N.neuron_effects_on_token(lm, run, layer, token)
    assert per_neuron_effect.shape == (lm.cfg.d_ff,)
    assert float(per_neuron_effect.sum()) == pytest.approx(total, abs=2e-3)
    # one neuron: its lists are its per-unit lists, flipped when it fires negative
    top = N.neuron_top_activations(lm, run, layer, -1, k=1)[0]
    effect = N.neuron_logit_effect(lm, run, layer, top.neuron, -1, k=5)
    per_unit = N.neuron_output_tokens(lm, layer, top.neuron, k=5)
    same, flipped = (per_unit.promoted, per_unit.suppressed) if top.value > 0 else (per_unit.suppressed, per_unit.promoted)
    assert [i for i, _ in effect.promoted] == [i for i, _ in same]
    assert [i for i, _ in effect.suppressed] == [i for i, _ in flipped]
    assert all(v > 0 for _, v in effect.promoted) and all(v < 0 for _, v in effect.suppressed)


def test_gate_activations():
    """GELU-tanh (Gemma's gate) by hand; its minimum; the model's own gate function."""
    import math
    g = torch.tensor([-1.0, 0.5, 2.0], dtype=torch.float64)
    want = 0.5 * g * (1 + torch.tanh(math.sqrt(2 / math.pi) * (g + 0.044715 * g ** 3)))
    assert torch.allclose(N.gelu_tanh(g), want)
    assert N.activation_min("gelu_tanh") == pytest.approx(-0.17004, abs=1e-4)
    assert N.activation_min("silu") == pytest.approx(N.SILU_MIN)
    assert float((N.gelu(g) - N.gelu_tanh(g)).abs().max()) < 1e-3


def test_gemma_mlp_uses_its_own_activation(gemma):
    """On Gemma the neuron functions use GELU-tanh and pass the MLP's write through ln2_post:
    mlp_forward then ln2_post reproduces hook_mlp_out, the 'real' map of the collapse table is
    the GeGLU MLP, and the per-neuron effects add up to the MLP's direct logit attribution."""
    from lesson_model.analysis.attribution import direct_logit_attribution, dla_names
    layer = 9
    assert gemma.cfg.activation == "gelu_tanh" and N.gate_fn(gemma) is N.gelu_tanh and N.own_curve(gemma) == "gelu"
    names = sorted(set(dla_names(gemma)) | set(N.neuron_effect_names(gemma, layer)) | set(N.mlp_names(layer))
                   | {f"blocks.{layer}.mlp.hook_pre", f"blocks.{layer}.mlp.hook_pre_linear"})
    run = gemma.run("貓坐在墊子上，因為它累了。", names=names)
    block = gemma.decoder.blocks[layer]
    gate, up = run.cache[f"blocks.{layer}.mlp.hook_pre"][0], run.cache[f"blocks.{layer}.mlp.hook_pre_linear"][0]
    assert torch.allclose(N.gated(gemma, gate, up), run.cache[f"blocks.{layer}.mlp.hook_post"][0], atol=1e-5)
    x = run.cache[f"blocks.{layer}.ln2.hook_normalized"][0] * block.ln2.weight
    with torch.inference_mode():
        out = N.mlp_forward(gemma, layer, x)
        post_normed = out / (out.pow(2).mean(-1, keepdim=True) + block.ln2_post.eps).sqrt() * block.ln2_post.weight
    mlp_out = run.cache[f"blocks.{layer}.hook_mlp_out"][0]
    assert torch.allclose(post_normed, mlp_out, rtol=1e-4, atol=1e-3 * float(mlp_out.abs().max()))
    check = N.nonlinearity_check(gemma, run, layer, 1, 4)
    assert check.doubling["bilinear"] == pytest.approx(4, abs=1e-4) and check.gap["plain"] < 1e-5
    G, U, D = (m.detach().double() for m in (block.mlp.gate_proj, block.mlp.up_proj, block.mlp.down_proj))
    a, b = x[1].double(), x[4].double()
    real = lambda v: (F.gelu(v @ G, approximate="tanh") * (v @ U)) @ D            # noqa: E731
    assert check.gap["real"] == pytest.approx(float((real(a + b) - real(a) - real(b)).norm() / real(a + b).norm()), abs=1e-4)
    token = int(run.logits[0, -1].argmax())
    effects = N.neuron_effects_on_token(gemma, run, layer, token)
    mlp_dla = float(direct_logit_attribution(gemma, run, token).mlp[layer])
    assert float(effects.sum()) == pytest.approx(mlp_dla, abs=2e-3)
    best = N.strongest_pusher(gemma, run, layer, token, -1, k=12)
    assert best.total == pytest.approx(mlp_dla, abs=2e-3)
