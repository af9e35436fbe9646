"""Residual decomposition and direct logit attribution: the parts add up exactly."""

import pytest
import torch

from lesson_model.analysis.attribution import (
    decomposition_names,
    direct_logit_attribution,
    dla_names,
    head_dla_names,
    head_logit_attribution,
    head_writes,
    residual_decomposition,
)

pytestmark = pytest.mark.parity

TEXT = "When Mary and John went to the store, John gave a drink to"


@pytest.fixture(scope="module")
def run(lm):
    return lm.run(TEXT, names=sorted(set(dla_names(lm)) | set(head_dla_names(lm, 20)) | set(head_dla_names(lm, 3))))


def test_decomposition_sums_to_final_residual(lm, run):
    for position in (0, 5, -1):
        dec = residual_decomposition(lm, run, position)
        assert len(dec.labels) == 1 + 2 * lm.cfg.n_layers == dec.parts.shape[0]
        last = lm.cfg.n_layers - 1
        assert dec.labels[0] == ("embed", -1) and dec.labels[1] == ("attn", 0) and dec.labels[-1] == ("mlp", last)
        final = run.cache[f"blocks.{last}.hook_resid_post"][0, position].double()
        assert torch.allclose(dec.parts.sum(0), final, atol=1e-2, rtol=1e-5)
        assert dec.max_error < 1e-3 * float(final.abs().max()) + 1e-3
        assert float(dec.along_final.sum()) == pytest.approx(float(final.norm()), rel=1e-5)


def test_decomposition_names_are_enough(lm):
    run = lm.run("a b c", names=decomposition_names(lm))
    residual_decomposition(lm, run)


def test_attributions_sum_to_the_logit(lm, run):
    logits = run.logits[0, -1]
    for token in (int(logits.argmax()), lm.encode(" Mary")[0], lm.encode(" the")[0]):
        dla = direct_logit_attribution(lm, run, token)
        assert dla.logit == pytest.approx(float(logits[token]), abs=1e-3)
        assert dla.total == pytest.approx(float(logits[token]), abs=1e-3)
        assert dla.attn.shape == dla.mlp.shape == (lm.cfg.n_layers,)


def test_logit_difference(lm, run):
    mary, john = lm.encode(" Mary")[0], lm.encode(" John")[0]
    dla = direct_logit_attribution(lm, run, mary, other_token=john)
    logits = run.logits[0, -1]
    assert dla.total == pytest.approx(float(logits[mary] - logits[john]), abs=1e-3)
    a = direct_logit_attribution(lm, run, mary)
    b = direct_logit_attribution(lm, run, john)
    assert torch.allclose(dla.mlp, a.mlp - b.mlp, atol=1e-4)


def test_parts_by_hand(lm, run):
    """One part recomputed from scratch: (mlp_out[7] / s * w) . W_U[:, t]."""
    token = int(run.logits[0, -1].argmax())
    d = lm.decoder
    s = run.cache[f"blocks.{lm.cfg.n_layers - 1}.hook_resid_post"][0, -1].pow(2).mean().add(d.ln_final.eps).sqrt()
    assert float(s) == pytest.approx(float(run.cache["ln_final.hook_scale"][0, -1, 0]), rel=1e-5)
    with torch.inference_mode():
        want = float((run.cache["blocks.7.hook_mlp_out"][0, -1] / s * d.ln_final.weight) @ d.W_E[token])
    assert float(direct_logit_attribution(lm, run, token).mlp[7]) == pytest.approx(want, abs=1e-4)


def test_heads_sum_to_their_layer(lm, run):
    token = int(run.logits[0, -1].argmax())
    dla = direct_logit_attribution(lm, run, token)
    for layer in (3, 20):
        heads = head_logit_attribution(lm, run, token, layer)
        assert heads.shape == (lm.cfg.n_heads,)
        assert float(heads.sum()) == pytest.approx(float(dla.attn[layer]), abs=1e-4)
    # a position other than the last, with a logit difference
    mary, john = lm.encode(" Mary")[0], lm.encode(" John")[0]
    dla5 = direct_logit_attribution(lm, run, mary, position=5, other_token=john)
    heads5 = head_logit_attribution(lm, run, mary, 20, position=5, other_token=john)
    assert float(heads5.sum()) == pytest.approx(float(dla5.attn[20]), abs=1e-4)


GEMMA_TEXT = "貓坐在墊子上，因為它累了。The cat sat on the mat because it was tired."


@pytest.fixture(scope="module")
def gemma_run(gemma):
    L = gemma.cfg.n_layers
    names = set(dla_names(gemma)) | {n for layer in range(L) for n in head_dla_names(gemma, layer)}
    return gemma.run(GEMMA_TEXT, names=sorted(names | {f"blocks.{layer}.ln1_post.hook_normalized" for layer in range(L)}))


def test_gemma_embedding_plus_writes_is_the_final_residual(gemma, gemma_run):
    """hook_embed is after the √d_model scale and hook_attn_out / hook_mlp_out after the post-norms,
    so the decomposition still adds up exactly on Gemma."""
    import math
    run = gemma_run
    ids = run.ids[0]
    with torch.inference_mode():
        scaled = gemma.decoder.W_E[ids] * math.sqrt(gemma.cfg.d_model)
    assert torch.allclose(run.cache["hook_embed"][0], scaled, rtol=1e-6, atol=1e-6)
    last = gemma.cfg.n_layers - 1
    for position in (0, 3, -1):
        dec = residual_decomposition(gemma, run, position)
        final = run.cache[f"blocks.{last}.hook_resid_post"][0, position].double()
        assert dec.max_error < 1e-6 * float(final.abs().max()) + 1e-3
        assert float(dec.along_final.sum()) == pytest.approx(float(final.norm()), rel=1e-5)


def test_heads_sum_to_hook_attn_out_on_both_models(lm, run, gemma, gemma_run):
    """head_writes: on SmolLM2 the heads' hook_result; on Gemma each head through ln1_post with
    this run's scale. Either way the heads add up to what the block adds, hook_attn_out."""
    for model, r, layers in ((lm, run, (3, 20)), (gemma, gemma_run, range(gemma.cfg.n_layers))):
        for layer in layers:
            for position in (0, -1):
                writes = head_writes(model, r, layer, position)
                assert writes.shape == (model.cfg.n_heads, model.cfg.d_model)
                out = r.cache[f"blocks.{layer}.hook_attn_out"][0, position].double()
                assert torch.allclose(writes.sum(0), out, rtol=1e-5, atol=1e-5 * float(out.abs().max()) + 1e-6)
    # on Gemma the raw heads (before ln1_post) do NOT add up to hook_attn_out: the post-norm matters
    raw = gemma_run.cache["blocks.5.attn.hook_result"][0, -1].double().sum(0)
    assert not torch.allclose(raw, gemma_run.cache["blocks.5.hook_attn_out"][0, -1].double(), atol=1.0)
    # by hand: head 2's share is result_2 / s_post * w_post
    s_post = float(gemma_run.cache["blocks.5.ln1_post.hook_scale"][0, -1, 0])
    with torch.inference_mode():
        want = gemma_run.cache["blocks.5.attn.hook_result"][0, -1, 2].double() / s_post * \
            gemma.decoder.blocks[5].ln1_post.weight.double()
    assert torch.allclose(head_writes(gemma, gemma_run, 5)[2], want)


def test_gemma_head_attributions_sum_to_their_layer(gemma, gemma_run):
    logits = gemma_run.logits[0, -1]
    token = int(logits.argmax())
    dla = direct_logit_attribution(gemma, gemma_run, token)
    assert dla.total == pytest.approx(float(logits[token]), abs=1e-3)
    other = int(torch.topk(logits, 4).indices[-1])
    diff = direct_logit_attribution(gemma, gemma_run, token, position=4, other_token=other)
    for layer in range(gemma.cfg.n_layers):
        heads = head_logit_attribution(gemma, gemma_run, token, layer)
        assert heads.shape == (gemma.cfg.n_heads,)
        assert float(heads.sum()) == pytest.approx(float(dla.attn[layer]), abs=1e-3)
        heads4 = head_logit_attribution(gemma, gemma_run, token, layer, position=4, other_token=other)
        assert float(heads4.sum()) == pytest.approx(float(diff.attn[layer]), abs=1e-3)
