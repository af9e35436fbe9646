"""LayerNorm vs RMSNorm, and residual norms, checked by hand and against the model."""

import pytest
import torch

from lesson_model.analysis import norms as NO

pytestmark = pytest.mark.slow   # loads the real model (the session fixture lm)


def test_norms_by_hand():
    x = torch.tensor([1.0, 2.0, 3.0, 6.0])          # mean 3, var (4+1+0+9)/4 = 3.5, ms (1+4+9+36)/4 = 12.5
    cmp = NO.compare_norms(x, eps=0.0)
    assert cmp.mean == pytest.approx(3.0) and cmp.std == pytest.approx(3.5 ** 0.5)
    assert cmp.rms == pytest.approx(12.5 ** 0.5)
    assert torch.allclose(cmp.layer_normed, (x - 3) / 3.5 ** 0.5)
    assert torch.allclose(cmp.rms_normed, x / 12.5 ** 0.5)
    assert cmp.ln_mean == pytest.approx(0, abs=1e-6) and cmp.ln_std == pytest.approx(1)
    assert cmp.rms_rms == pytest.approx(1) and cmp.rms_mean == pytest.approx(3 / 12.5 ** 0.5)


def test_rms_norm_is_what_the_model_does(lm):
    run = lm.run("Hello there, world", names=["blocks.3.hook_resid_pre", "blocks.3.ln1.hook_normalized"])
    x = run.cache["blocks.3.hook_resid_pre"][0]
    assert torch.allclose(NO.rms_norm(x, lm.decoder.blocks[3].ln1.eps), run.cache["blocks.3.ln1.hook_normalized"][0],
                          atol=1e-5)
    ln = NO.layer_norm(x)
    assert torch.allclose(ln.mean(-1), torch.zeros(x.shape[0]), atol=1e-5)


def test_residual_norms_and_massive_activations(lm):
    text = "The cat sat on the mat. It was tired"
    run = lm.run(text, names=NO.residual_names(lm))
    norms = NO.residual_norms(lm, run)
    n_pos = len(lm.encode(text))
    assert norms.shape == (lm.cfg.n_layers + 1, n_pos)
    assert torch.allclose(norms[0], run.cache["hook_embed"][0].norm(dim=-1))
    assert torch.allclose(norms[7], run.cache["blocks.6.hook_resid_post"][0].norm(dim=-1))
    found = NO.massive_activations(lm, run, ratio=10)
    for m in found:
        assert norms[m.depth, m.position] == pytest.approx(m.norm)
        assert m.ratio >= 10
        stack = NO.residual_stack(lm, run)
        assert m.dim == int(stack[m.depth, m.position].abs().argmax())
    # every flagged vector is really >= 10x its depth's median, and nothing else is
    medians = norms.median(dim=1).values
    flagged = {(m.depth, m.position) for m in found}
    assert flagged == {tuple(ix) for ix in (norms >= 10 * medians[:, None]).nonzero().tolist()}
