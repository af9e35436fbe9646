"""Logit lens: the last depth is the model's own output; every depth matches a direct decode."""

import pytest
import torch

from lesson_model.analysis.lens import decode_residual, first_depth_on_top, logit_lens, logit_lens_names

pytestmark = pytest.mark.parity

TEXT = "The capital of France is Paris. The capital of"


@pytest.fixture(scope="module")
def run(lm):
    return lm.run(TEXT, names=logit_lens_names(lm, include_embed=True))


def test_last_layer_is_the_model_prediction(lm, run):
    lens = logit_lens(lm, run, k=3)
    probs = run.logits[0].softmax(-1)                                    # [pos, vocab]
    assert torch.equal(lens.top_ids[-1, :, 0], run.logits[0].argmax(-1))
    assert torch.allclose(lens.top_probs[-1], torch.topk(probs, 3).values, atol=1e-5)
    assert torch.equal(lens.target_ids, run.logits[0].argmax(-1))
    assert torch.all(lens.target_ranks[-1] == 0)
    assert torch.allclose(decode_residual(lm, run.cache[f"blocks.{lm.cfg.n_layers - 1}.hook_resid_post"][0]), run.logits[0],
                          atol=1e-3)


def test_gemma_lens_reads_with_its_final_norm_and_tied_unembedding(gemma):
    """Gemma: the last depth is the model's own output (its final norm, W_U = W_E^T), and a
    middle depth decodes like a direct RMSNorm + W_E^T read-out, in slices of its 262,144 entries."""
    from lesson_model.analysis.lens import slice_width
    text = "日本的首都是東京，法國的首都是"
    run = gemma.run(text, names=logit_lens_names(gemma, include_embed=True))
    lens = logit_lens(gemma, run, k=2, include_embed=True)
    assert slice_width() < gemma.cfg.vocab_size   # really in slices
    assert torch.equal(lens.top_ids[-1, :, 0], run.logits[0].argmax(-1)) and torch.all(lens.target_ranks[-1] == 0)
    probs = run.logits[0].softmax(-1)
    assert torch.allclose(lens.top_probs[-1], torch.topk(probs, 2).values, atol=1e-5)
    d = gemma.decoder
    x = run.cache["blocks.8.hook_resid_post"][0]
    with torch.inference_mode():
        logits = (x / (x.pow(2).mean(-1, keepdim=True) + d.ln_final.eps).sqrt() * d.ln_final.weight) @ d.W_E.T
    assert torch.equal(lens.top_ids[lens.layers.index(8)], torch.topk(logits, 2).indices)


def test_middle_depth_matches_direct_decode(lm, run):
    lens = logit_lens(lm, run, positions=[2, -1], k=2, include_embed=True)
    assert lens.layers[0] == -1 and lens.layers[1] == 0 and len(lens.layers) == lm.cfg.n_layers + 1
    assert lens.positions == [2, len(lm.encode(TEXT)) - 1]
    d = lm.decoder
    for row, depth in [(1, 0), (13, 12)]:
        x = run.cache[f"blocks.{depth}.hook_resid_post"][0, [2, -1]]
        with torch.inference_mode():
            x = x / (x.pow(2).mean(-1, keepdim=True) + d.ln_final.eps).sqrt() * d.ln_final.weight
            logits = x @ d.W_E.T
        assert torch.equal(lens.top_ids[row, :, :], torch.topk(logits, 2).indices)
        target = lens.target_ids
        rank = (logits > logits.gather(-1, target[:, None])).sum(-1)
        assert torch.equal(lens.target_ranks[row], rank)
        p = logits.softmax(-1).gather(-1, target[:, None])[:, 0]
        assert torch.allclose(lens.target_probs[row], p, atol=1e-6)


def test_embedding_row_reads_back_the_input(lm, run):
    """Tied embeddings: decoding a token's own embedding mostly gives that token back."""
    lens = logit_lens(lm, run, include_embed=True)
    ids = run.ids[0]
    assert (lens.top_ids[0, :, 0] == ids).float().mean() > 0.5


def test_custom_targets_and_first_depth(lm, run):
    paris = lm.encode(" Paris")[0]
    lens = logit_lens(lm, run, positions=[4], targets=torch.tensor([paris]))
    assert int(lens.target_ids[0]) == paris
    assert lens.target_ranks.shape == (lm.cfg.n_layers, 1)
    first = first_depth_on_top(lens, 0)
    ranks = lens.target_ranks[:, 0].tolist()
    if first is None:
        assert ranks[-1] != 0
    else:
        assert all(r == 0 for r in ranks[first:]) and (first == 0 or ranks[first - 1] != 0)


def test_read_out_in_slices_matches_whole_logits(lm, run, monkeypatch):
    """read_out, forced into 1,024-entry slices, gives what the whole logits give: top-k ids and
    probabilities, and the probability and rank of targets that are the top token, sit on a
    slice's edge, or rank low."""
    from lesson_model.analysis import lens as LL
    monkeypatch.setattr(LL, "SLICE_COLUMNS", 1024)
    x = run.cache["blocks.12.hook_resid_post"][0]                     # [pos, d_model]
    logits = LL.decode_residual(lm, x)                                # [pos, vocab]
    assert LL.slice_width() == 1024 < logits.shape[1]
    targets = logits.argmax(-1).clone()                               # rank 0 ...
    targets[1], targets[2], targets[3] = 1023, 1024, int(logits[3].argmin())   # ... a slice's edges, the last
    top_i, top_p, t_p, t_rank = LL.read_out(lm, x, 3, targets)
    probs = logits.softmax(-1)
    assert torch.equal(top_i, logits.topk(3, -1).indices)
    assert torch.allclose(top_p, probs.topk(3, -1).values, atol=1e-5)
    assert torch.allclose(t_p, probs.gather(-1, targets[:, None])[:, 0], atol=1e-6)
    assert torch.equal(t_rank, (logits > logits.gather(-1, targets[:, None])).sum(-1))
    assert int(t_rank[0]) == 0 and int(t_rank[3]) == logits.shape[1] - 1
