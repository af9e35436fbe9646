"""LayerNorm vs RMSNorm, and residual norms, checked by hand and against the model."""

import pytest
import torch

from lesson_model.analysis import norms as NO


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


def full_pass_gradients(lm, text, position, names):
    """The reference: a pass over every position, the top logit at ``position`` backpropagated
    to the hook points ``names``: (token, {name: gradient [1, pos, d_model]})."""
    from lesson_model.decoder import Hooks
    hooks = Hooks(names=names, fns={"hook_embed": lambda e: e.detach().requires_grad_(True)})
    with torch.enable_grad():
        logits = lm.decoder(lm.to_ids(text), hooks)                             # [1, pos, vocab]
        token = int(logits[0, position].argmax())
        grads = torch.autograd.grad(logits[0, position, token], [hooks.cache[n] for n in names])
    return token, dict(zip(names, grads))


def test_residual_gradients_match_finite_differences(lm):
    """Nudge the residual stream entering block 20 along a direction; the logit moves by
    gradient . direction (to first order)."""
    text = "The cat sat on the mat. It was"
    flow = NO.residual_gradients(lm, text)
    run = lm.run(text, names=[])
    token = int(run.logits[0, -1].argmax())
    assert flow.token == token and flow.position == len(lm.encode(text)) - 1
    assert flow.grad_norms.shape == (lm.cfg.n_layers + 1,) and torch.all(flow.grad_norms > 0)
    assert flow.branch_ratio.shape == (lm.cfg.n_layers, 2)

    # the gradient itself, at block 20's input, recomputed for the check
    grad = full_pass_gradients(lm, text, -1, ["blocks.20.hook_resid_pre"])[1]["blocks.20.hook_resid_pre"]
    assert float(grad.norm()) == pytest.approx(float(flow.grad_norms[20]), rel=1e-4)
    direction = torch.zeros_like(grad)
    direction[0, -2] = grad[0, -2] / grad[0, -2].norm()       # an earlier position: the effect goes through attention
    eps = 0.05
    shifted = lm.run(text, names=[], hooks={"blocks.20.hook_resid_pre": lambda x: x + eps * direction})
    change = float(shifted.logits[0, -1, token] - run.logits[0, -1, token])
    assert change == pytest.approx(eps * float((grad * direction).sum()), rel=0.1)
    assert lm.decoder.W_E.grad is None                        # nothing left on the shared model


def test_residual_gradients_at_an_earlier_position_match_the_full_pass(lm):
    """residual_gradients stops its pass at the chosen position (later tokens cannot change
    that logit): its gradient lengths equal a full pass's over every position."""
    text = "The cat sat on the mat. It was tired, so it slept"
    position = 5
    flow = NO.residual_gradients(lm, text, position=position)
    token, full = full_pass_gradients(lm, text, position, NO.gradient_names(lm))
    assert flow.token == token and flow.position == position
    assert torch.all(full["blocks.3.hook_resid_pre"][0, position + 1:] == 0)  # later positions get nothing
    for layer in range(lm.cfg.n_layers):
        assert float(flow.grad_norms[layer]) == pytest.approx(float(full[f"blocks.{layer}.hook_resid_pre"].norm()), rel=1e-4)
    assert NO.residual_gradients(lm, text, position=position - len(lm.encode(text))).position == position


def test_first_token_attention(lm):
    text = "The cat sat on the mat. It was tired"
    run = lm.run(text, names=NO.sink_names(lm))
    share = NO.first_token_attention(lm, run)
    assert share.shape == (lm.cfg.n_layers,)
    p = run.cache["blocks.17.attn.hook_pattern"][0]
    assert float(share[17]) == pytest.approx(float(sum(p[h, q, 0] for h in range(9) for q in range(1, p.shape[1]))
                                                 / (9 * (p.shape[1] - 1))), abs=1e-5)
    assert torch.all((share >= 0) & (share <= 1))
    some = NO.first_token_attention(lm, run, layers=[17, 3])
    assert torch.allclose(some, share[[17, 3]])
    assert NO.sink_names(lm, [17, 3]) == ["blocks.17.attn.hook_pattern", "blocks.3.attn.hook_pattern"]


def test_sublayer_writes_before_and_after_the_post_norms(lm, gemma):
    """Gemma: computed = |heads' sum| before ln1_post and |down_proj output| before ln2_post (from
    the scales), written = |hook_attn_out|, |hook_mlp_out|. SmolLM2 (no post-norms): the same."""
    assert NO.block_norms(gemma) == ["ln1", "attn.q_norm", "attn.k_norm", "ln1_post", "ln2", "ln2_post"]
    assert NO.block_norms(lm) == ["ln1", "ln2"]
    text = "The cat sat on the mat. It was tired"
    extra = [f"blocks.{L}.{h}" for L in (2, 11) for h in ("attn.hook_result", "ln2_post.hook_normalized")]
    run = gemma.run(text, names=sorted(set(NO.sublayer_write_names(gemma)) | set(extra)))
    w = NO.sublayer_writes(gemma, run, -1)
    assert w.post_norms and w.computed.shape == w.written.shape == (gemma.cfg.n_layers, 2)
    for L in (2, 11):
        heads = run.cache[f"blocks.{L}.attn.hook_result"][0, -1].double().sum(0)
        assert float(w.computed[L, 0]) == pytest.approx(float(heads.norm()), rel=1e-3)
        raw_mlp = run.cache[f"blocks.{L}.ln2_post.hook_normalized"][0, -1].double() * \
            run.cache[f"blocks.{L}.ln2_post.hook_scale"][0, -1, 0].double()
        assert float(w.computed[L, 1]) == pytest.approx(float(raw_mlp.norm()), rel=1e-3)
        assert float(w.written[L, 1]) == pytest.approx(float(run.cache[f"blocks.{L}.hook_mlp_out"][0, -1].norm()), rel=1e-5)
    run_s = lm.run(text, names=NO.sublayer_write_names(lm))
    ws = NO.sublayer_writes(lm, run_s, 3)
    assert not ws.post_norms and torch.equal(ws.computed, ws.written)
    assert float(ws.written[7, 0]) == pytest.approx(float(run_s.cache["blocks.7.hook_attn_out"][0, 3].norm()), rel=1e-5)
