"""Residual decomposition and direct logit attribution: the parts add up exactly."""

import pytest
import torch

from lesson_model.analysis.attribution import (decomposition_names, direct_logit_attribution, dla_names,
                                               head_dla_names, head_logit_attribution, residual_decomposition)

pytestmark = pytest.mark.slow   # loads the real model (the session fixture lm)

TEXT = "When Mary and John went to the store, John gave a drink to"


@pytest.fixture(scope="module")
def run(lm):
    return lm.run(TEXT, names=sorted(set(dla_names(lm)) | set(head_dla_names(20)) | set(head_dla_names(3))))


def test_decomposition_sums_to_final_residual(lm, run):
    for position in (0, 5, -1):
        dec = residual_decomposition(lm, run, position)
        assert len(dec.labels) == 1 + 2 * lm.cfg.n_layers == dec.parts.shape[0]
        assert dec.labels[0] == ("embed", -1) and dec.labels[1] == ("attn", 0) and dec.labels[-1] == ("mlp", 29)
        final = run.cache["blocks.29.hook_resid_post"][0, position].double()
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
    s = run.cache["blocks.29.hook_resid_post"][0, -1].pow(2).mean().add(d.ln_final.eps).sqrt()
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
