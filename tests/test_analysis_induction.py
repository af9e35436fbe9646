"""lesson_model.analysis.induction: repeated random tokens, the induction score, the loss
on each copy, zeroing heads through per-call hooks, and repeats in the learner's text."""

from __future__ import annotations

import pytest
import torch

from lesson_model.analysis import induction as I

SEQ, N = 20, 3


@pytest.fixture(scope="module")
def exp(lm):
    return I.induction_experiment(lm, seq_len=SEQ, n_seqs=N, seed=1, n_examples=2, batch=2)


def test_repeated_tokens(lm):
    t = I.random_repeated_tokens(lm, seq_len=12, n_seqs=4, seed=7)
    assert t.shape == (4, 24) and t.dtype == torch.long
    assert torch.equal(t[:, :12], t[:, 12:])
    for row in t[:, :12]:
        assert len(set(row.tolist())) == 12                     # no repeats inside a copy
    special = lm.tokenizer.special_ids
    assert not set(t.flatten().tolist()) & special
    assert int(t.min()) >= 0 and int(t.max()) < lm.cfg.vocab_size
    assert torch.equal(t, I.random_repeated_tokens(lm, 12, 4, seed=7))        # seeded
    assert not torch.equal(t, I.random_repeated_tokens(lm, 12, 4, seed=8))
    with pytest.raises(ValueError):
        I.random_repeated_tokens(lm, seq_len=1)


def test_stripe_positions():
    q, k = I.second_copy_positions(4)
    assert q.tolist() == [4, 5, 6, 7] and k.tolist() == [1, 2, 3, 4]
    assert ((q - k) == 3).all()
    p = torch.zeros(8, 8)
    p[q, k] = torch.tensor([1.0, 0.5, 0.0, 0.5])
    assert float(I.induction_score_grid(p, 4)) == pytest.approx(0.5)


def test_scores_match_a_direct_computation(lm, exp):
    assert exp.scores.shape == (30, 9)
    # By hand from the patterns of every sequence, as issue 2 defines the score.
    tokens = exp.tokens
    assert torch.equal(tokens, I.random_repeated_tokens(lm, SEQ, N, seed=1))
    run = lm.run(tokens, names=["blocks.17.attn.hook_pattern", "blocks.2.attn.hook_pattern"])
    for layer, head in ((17, 3), (2, 5)):
        p = run.cache[f"blocks.{layer}.attn.hook_pattern"][:, head]          # [N, 2L, 2L]
        by_hand = sum(float(p[s, SEQ + i, i + 1]) for s in range(N) for i in range(SEQ)) / (N * SEQ)
        assert float(exp.scores[layer, head]) == pytest.approx(by_hand, abs=1e-5)
    # induction_scores is the same map.
    torch.testing.assert_close(I.induction_scores(lm, SEQ, N, seed=1), exp.scores)


def test_the_model_has_induction_heads_in_its_middle_layers(exp):
    best = I.top_k_heads(exp.scores, 3)
    assert best[0][2] > 0.5                                 # a head puts most of its attention on the stripe
    assert all(12 <= layer <= 25 for layer, _, _ in best)   # not in the first or last layers
    assert float(exp.scores[:3].max()) < 0.2                # early layers cannot do it yet
    assert [s for *_, s in best] == sorted([s for *_, s in best], reverse=True)


def test_loss_drops_on_the_second_copy(lm, exp):
    assert exp.loss_first.shape == (SEQ - 1,) and exp.loss_second.shape == (SEQ - 1,)
    assert exp.mean_loss_first > 8                          # random tokens: nearly unpredictable
    assert exp.mean_loss_second < exp.mean_loss_first / 2   # the repeat is predicted
    # By hand for sequence-mean of token i=5 in the second copy.
    run = lm.run(exp.tokens, names=[])
    lp = run.logits.log_softmax(-1)
    i = 5
    by_hand = -float(lp[:, SEQ + i - 1].gather(-1, exp.tokens[:, SEQ + i, None]).mean())
    assert float(exp.loss_second[i - 1]) == pytest.approx(by_hand, abs=1e-4)
    by_hand_first = -float(lp[:, i - 1].gather(-1, exp.tokens[:, i, None]).mean())
    assert float(exp.loss_first[i - 1]) == pytest.approx(by_hand_first, abs=1e-4)
    assert I.second_copy_loss(lm, exp.tokens) == pytest.approx(exp.mean_loss_second, abs=1e-4)


def test_example_patterns_are_the_top_heads(exp):
    top = [(layer, head) for layer, head, _ in I.top_k_heads(exp.scores, 2)]
    assert list(exp.example_patterns) == top
    for pattern in exp.example_patterns.values():
        assert pattern.shape == (2 * SEQ, 2 * SEQ)
        # its own storage, not a view of every layer's patterns: st.cache_data pickles the whole
        # storage behind a view (10.8 MB a head on SmolLM2 at the page's length, not 40 KB)
        assert pattern.untyped_storage().nbytes() == pattern.numel() * pattern.element_size()


def test_zero_heads_hooks_zero_only_those_heads(lm):
    hooks = I.zero_heads_hooks([(3, 1), (3, 4), (5, 0, 0.9)])
    assert set(hooks) == {"blocks.3.attn.hook_z", "blocks.5.attn.hook_z"}
    z = torch.randn(1, 4, 9, 64)
    before = z.clone()
    out = hooks["blocks.3.attn.hook_z"](z)
    assert torch.equal(z, before)                            # never in place
    assert (out[:, :, [1, 4]] == 0).all()
    assert torch.equal(out[:, :, [0, 2, 3, 5, 6, 7, 8]], z[:, :, [0, 2, 3, 5, 6, 7, 8]])
    # Through the model: the zeroed head writes nothing, the others are untouched.
    names = ["blocks.3.attn.hook_result", "blocks.3.attn.hook_z"]
    plain = lm.run("The cat sat on the mat", names=names)
    ablated = lm.run("The cat sat on the mat", names=names, hooks=hooks)
    assert (ablated.cache["blocks.3.attn.hook_result"][0, :, 1] == 0).all()
    torch.testing.assert_close(ablated.cache["blocks.3.attn.hook_result"][0, :, 0],
                               plain.cache["blocks.3.attn.hook_result"][0, :, 0])
    assert not torch.equal(plain.logits, ablated.logits)
    # The plain run after an ablated one is unchanged (hooks are per call).
    again = lm.run("The cat sat on the mat", names=[])
    torch.testing.assert_close(again.logits, plain.logits, atol=2e-4, rtol=1e-4)


def test_random_heads():
    picked = I.random_heads(30, 9, 5, seed=3, exclude={(17, 3)})
    assert len(set(picked)) == 5 and (17, 3) not in picked
    assert picked == I.random_heads(30, 9, 5, seed=3, exclude={(17, 3)})
    assert all(0 <= layer < 30 and 0 <= head < 9 for layer, head in picked)


def test_ablating_top_heads_raises_the_loss_more_than_random(lm, exp):
    ab = I.ablate(lm, exp.tokens, exp.scores, k=5, seed=0, n_random=2)
    assert ab.baseline == pytest.approx(exp.mean_loss_second, abs=1e-4)
    assert ab.top_heads == [(layer, head) for layer, head, _ in I.top_k_heads(exp.scores, 5)]
    for heads in ab.random_sets:
        assert len(heads) == 5 and not set(heads) & set(ab.top_heads)
    assert ab.top_loss > ab.baseline + 2.0                   # the repeat is much harder to predict
    assert ab.top_loss > max(ab.random_losses)
    assert ab.random_mean == pytest.approx(sum(ab.random_losses) / 2)


def test_repeat_sites_on_text(lm):
    text = "Mr Dursley went to work. Mr Dursley"
    run = lm.run(text, names=[f"blocks.{layer}.attn.hook_pattern" for layer in range(30)])
    ids = run.ids[0].tolist()
    sites = I.repeat_sites(lm, run)
    assert sites, "the text repeats a name"
    last = sites[-1]
    assert last.query == len(ids) - 1
    assert all(ids[e] == ids[last.query] for e in last.earlier)
    assert last.targets == [e + 1 for e in last.earlier]
    p = run.cache["blocks.17.attn.hook_pattern"][0, 3]
    assert float(last.grid[17, 3]) == pytest.approx(float(p[last.query, last.targets].sum()), abs=1e-6)


def test_gemma_induction_experiment(gemma):
    """Gemma 3 270M: 18 layers x 4 heads scored; random tokens avoid its 6,000+ special ids
    (<unusedN>, ...); the best heads copy, and zeroing them hurts more than random heads."""
    t = I.random_repeated_tokens(gemma, seq_len=12, n_seqs=3, seed=2)
    assert t.shape == (3, 25) and bool((t[:, 0] == gemma.bos_id).all())      # <bos> first, as every input
    assert not set(t[:, 1:].flatten().tolist()) & gemma.tokenizer.special_ids
    e = I.induction_experiment(gemma, seq_len=SEQ, n_seqs=N, seed=1, n_examples=2, batch=3)
    assert e.scores.shape == (gemma.cfg.n_layers, gemma.cfg.n_heads)
    best = I.top_k_heads(e.scores, 3)
    assert best[0][2] > 0.5
    assert e.mean_loss_second < e.mean_loss_first - 1.0
    assert 0 <= e.top1_first <= e.top1_second <= 1
    ab = I.ablate(gemma, e.tokens, e.scores, 3, seed=1, n_random=2, baseline=e.mean_loss_second)
    assert ab.top_loss > ab.baseline + 1.0 and ab.top_loss > max(ab.random_losses)
    assert all(h not in ab.top_heads for s in ab.random_sets for h in s)


def test_top1_by_hand(lm, exp):
    run = lm.run(exp.tokens, names=[])
    hit = (run.logits[:, :-1].argmax(-1) == exp.tokens[:, 1:]).float()
    assert exp.top1_second == pytest.approx(float(hit[:, SEQ:].mean()), abs=1e-6)
    assert exp.top1_first == pytest.approx(float(hit[:, :SEQ - 1].mean()), abs=1e-6)
