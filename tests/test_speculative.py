"""Speculative decoding with an early-exit draft: exactness, bookkeeping, the sampling rule."""

from __future__ import annotations

import pytest
import torch

from lesson_model.sampling import next_token_distribution
from lesson_model.speculative import (
    accept_probability,
    emitted_token_distribution,
    partial_forward,
    residual_distribution,
    speculative_generate,
)
from tests._fixtures_model import (  # noqa: F401
    assert_close_f32,
    assert_greedy_has_margin,
    logits_depth,
    tiny,
    tiny_gemma,
    torch_threads,
)
from tests.test_generation import with_eos

PROMPT = "the cat sat on"


def plain_greedy(lm, prompt, n) -> list[int]:
    """Greedy tokens, one step at a time. The draft-and-verify passes compute the same logits in other
    shapes (several positions at once), so the prompt must have a margin for exact equality to be fair."""
    new_ids = [s.token_id for s in lm.generate_steps(prompt, n, temperature=0)]
    assert_greedy_has_margin(lm, lm.to_ids(prompt)[0].tolist(), new_ids, what=f"greedy from {prompt!r}")
    return new_ids


def check_bookkeeping(lm, result, max_new: int) -> None:
    """Counts that must agree with each other whatever the draft guessed."""
    assert result.ids == result.prompt_ids + result.new_ids
    assert [t for r in result.rounds for t in r.new_ids] == result.new_ids
    assert 1 <= len(result.new_ids) <= max_new
    for r in result.rounds:
        assert 0 <= r.accepted <= len(r.proposed) <= result.draft_len
        assert r.bonus == (r.accepted == len(r.proposed))
        full = r.proposed[: r.accepted] + [r.token]
        assert r.new_ids == full[: len(r.new_ids)] and len(r.new_ids) >= 1
        assert len(r.draft_probs) == len(r.target_probs) == len(r.proposed)
        assert len(r.target_choice) == len(r.proposed) + 1
        if result.greedy:   # a guess is kept exactly when it is the full model's own choice
            assert r.proposed[: r.accepted] == r.target_choice[: r.accepted]
            assert r.token == r.target_choice[r.accepted]
            if not r.bonus:
                assert r.proposed[r.accepted] != r.target_choice[r.accepted]
    assert result.accepted == sum(r.accepted for r in result.rounds)
    assert result.proposed == sum(len(r.proposed) for r in result.rounds)
    assert result.acceptance_rate == pytest.approx(result.accepted / max(result.proposed, 1))
    assert result.full_passes == len(result.rounds)
    assert result.draft_forwards == result.proposed
    # Every round adds its accepted guesses plus one token of the full model's own (unless an EOS cut it).
    assert len(result.new_ids) <= result.accepted + len(result.rounds)
    if result.stop == "length":
        assert len(result.new_ids) == max_new == result.accepted + len(result.rounds)
    else:
        assert result.new_ids[-1] in lm.eos_token_ids
        assert not any(t in lm.eos_token_ids for t in result.new_ids[:-1])


def test_partial_forward_with_all_layers_is_the_model(tiny, torch_threads):
    _, lm = tiny
    ids = torch.tensor([lm.encode(PROMPT)])
    with torch.inference_mode():
        full = lm.decoder(ids)
        ours = partial_forward(lm.decoder, ids, lm.cfg.n_layers, None, keep_last=ids.shape[1])
    assert_close_f32(ours, full, depth=logits_depth(lm.cfg, ids.shape[1]), what="partial_forward, all layers")


def test_partial_forward_is_the_logit_lens_of_the_first_layers(tiny, torch_threads):
    _, lm = tiny
    ids = torch.tensor([lm.encode(PROMPT)])
    run = lm.run(ids, names=["blocks.0.hook_resid_post"])
    resid = run.cache["blocks.0.hook_resid_post"]                                    # [1, pos, d_model]
    dec = lm.decoder
    scale = (resid.pow(2).mean(-1, keepdim=True) + lm.cfg.norm_eps).sqrt()
    expected = (resid / scale * dec.ln_final.weight) @ dec.W_U                          # [1, pos, vocab]
    with torch.inference_mode():
        ours = partial_forward(dec, ids, 1, None, keep_last=ids.shape[1])
    assert_close_f32(ours, expected, depth=logits_depth(lm.cfg, ids.shape[1], n_layers=1),
                     what="partial_forward, one layer = logit lens")
    assert not torch.allclose(ours, run.logits, atol=1e-2)      # one layer is not the whole model


@pytest.mark.parametrize("draft_layers", [1, 2])
@pytest.mark.parametrize("draft_len", [1, 3, 6])
def test_greedy_equals_plain_greedy_tiny(tiny, draft_layers, draft_len, torch_threads):
    _, lm = tiny
    lm = with_eos(lm, -1)
    result = speculative_generate(lm, PROMPT, 25, draft_layers=draft_layers, draft_len=draft_len)
    assert result.new_ids == plain_greedy(lm, PROMPT, 25)
    check_bookkeeping(lm, result, 25)


def test_full_depth_draft_is_always_accepted(tiny):
    _, lm = tiny
    lm = with_eos(lm, -1)
    plain = plain_greedy(lm, PROMPT, 21)          # with a margin: the draft's guesses are the verifier's choices
    result = speculative_generate(lm, PROMPT, 21, draft_layers=lm.cfg.n_layers, draft_len=4)
    assert result.acceptance_rate == 1.0
    # 4 guesses + 1 bonus per round: 21 tokens in 5 rounds (the last round proposes none).
    assert [len(r.new_ids) for r in result.rounds] == [5, 5, 5, 5, 1]
    assert result.full_passes == 5 and result.new_ids == plain


def test_stops_at_eos(tiny):
    _, lm = tiny
    free = plain_greedy(with_eos(lm, -1), PROMPT, 12)
    eos = free[6]
    first = free.index(eos)
    lm_eos = with_eos(lm, eos)
    for draft_len in (1, 4):
        result = speculative_generate(lm_eos, PROMPT, 12, draft_layers=1, draft_len=draft_len)
        assert result.stop == "eos" and result.new_ids == free[: first + 1]
        check_bookkeeping(lm_eos, result, 12)


def test_bad_arguments(tiny):
    _, lm = tiny
    with pytest.raises(ValueError):
        speculative_generate(lm, PROMPT, 5, draft_layers=0)
    with pytest.raises(ValueError):
        speculative_generate(lm, PROMPT, 5, draft_layers=lm.cfg.n_layers + 1)
    with pytest.raises(ValueError):
        speculative_generate(lm, PROMPT, 0, draft_layers=1)


def test_sampling_is_seeded_and_consistent(tiny):
    _, lm = tiny
    lm = with_eos(lm, -1)
    kwargs = dict(draft_layers=1, draft_len=3, temperature=1.2, top_k=20, seed=5)
    a = speculative_generate(lm, PROMPT, 20, **kwargs)
    torch.manual_seed(123)                       # the global generator must not matter
    b = speculative_generate(lm, PROMPT, 20, **kwargs)
    assert a.new_ids == b.new_ids and [r.accepted for r in a.rounds] == [r.accepted for r in b.rounds]
    check_bookkeeping(lm, a, 20)
    assert not a.greedy and 0 < a.acceptance_rate < 1


def test_rejection_rule_by_hand():
    """p = [.5, .3, .2], q = [.2, .2, .6]: guesses 0 and 1 are always kept, guess 2 a third of
    the time; the rejected mass 0.6 * 2/3 = 0.4 goes to the residual [.3, .1, 0] / .4."""
    p, q = torch.tensor([0.5, 0.3, 0.2]), torch.tensor([0.2, 0.2, 0.6])
    assert [accept_probability(p, q, d) for d in range(3)] == pytest.approx([1.0, 1.0, 1 / 3])
    assert residual_distribution(p, q).tolist() == pytest.approx([0.75, 0.25, 0.0])
    # kept: q * a = [.2, .2, .2]; rejected: 0.4 * [.75, .25, 0] = [.3, .1, 0]
    assert emitted_token_distribution(p, q).tolist() == pytest.approx([0.5, 0.3, 0.2], abs=1e-6)


def test_rejection_rule_where_the_supports_differ():
    # The draft proposes tokens 2 and 3, which p never emits: they are always rejected.
    p, q = torch.tensor([0.7, 0.3, 0.0, 0.0]), torch.tensor([0.1, 0.2, 0.3, 0.4])
    assert [accept_probability(p, q, d) for d in range(4)] == [1.0, 1.0, 0.0, 0.0]
    assert residual_distribution(p, q).tolist() == pytest.approx([6 / 7, 1 / 7, 0.0, 0.0])
    assert emitted_token_distribution(p, q).tolist() == pytest.approx(p.tolist(), abs=1e-6)
    # The full model has mass on a token the draft never proposes: only the residual reaches it.
    p, q = torch.tensor([0.5, 0.5, 0.0]), torch.tensor([1.0, 0.0, 0.0])
    assert accept_probability(p, q, 0) == 0.5
    assert residual_distribution(p, q).tolist() == [0.0, 1.0, 0.0]
    assert emitted_token_distribution(p, q).tolist() == pytest.approx([0.5, 0.5, 0.0], abs=1e-6)
    # p == q: nothing is rejected, and the residual falls back to p (still a distribution).
    assert accept_probability(p, p, 0) == 1.0 and residual_distribution(p, p).tolist() == p.tolist()


SAMPLING = dict(temperature=1.0, top_k=6)


def first_position_distributions(lm):
    """(p, q) for the first generated token: the full model's and the 1-layer draft's, warped."""
    ids = torch.tensor([lm.encode(PROMPT)])
    with torch.inference_mode():
        p = next_token_distribution(lm.decoder(ids)[0, -1], **SAMPLING)
        q = next_token_distribution(partial_forward(lm.decoder, ids, 1, None)[0, -1], **SAMPLING)
    return p, q


def test_speculative_sampling_keeps_the_full_models_distribution(tiny):
    """The rejection rule makes the first token follow p exactly, although the draft's q differs."""
    _, lm = tiny
    p, q = first_position_distributions(lm)
    assert (p - q).abs().sum() > 0.3             # the draft really disagrees
    assert ((p > 0) != (q > 0)).any()             # even on which tokens are possible
    emitted = emitted_token_distribution(p, q)
    support = (p > 0) | (q > 0)
    assert (emitted[support] - p[support].double()).abs().max() < 1e-6
    assert emitted[~support].abs().max() == 0
    assert emitted.sum() == pytest.approx(1.0, abs=1e-6)


def test_speculative_sampling_first_token_wiring(tiny):
    """A short seeded run of speculative_generate: each first token is the kept guess or a draw
    from the residual, so it is always one p can emit. (The exact test above checks the odds.)"""
    _, lm = tiny
    lm = with_eos(lm, -1)
    p, q = first_position_distributions(lm)
    residual = residual_distribution(p, q)
    kept = 0
    for seed in range(100):
        result = speculative_generate(lm, PROMPT, 2, draft_layers=1, draft_len=1, seed=seed,
                                      **SAMPLING)
        first = result.rounds[0]
        (guess,) = first.proposed
        assert q[guess] > 0 and first.draft_probs[0] == pytest.approx(float(q[guess]))
        assert first.target_probs[0] == pytest.approx(float(p[guess]))
        token = result.new_ids[0]
        assert p[token] > 0                                        # in p's support
        if first.accepted:                                         # the guess, then a bonus token
            assert token == guess and first.bonus and len(first.new_ids) == 2
            kept += 1
        else:                                                      # a token q under-proposed
            assert token == first.token and residual[token] > 0 and first.new_ids == [token]
        assert len(result.new_ids) == 2
        check_bookkeeping(lm, result, 2)
    assert 0 < kept < 100                        # both branches ran


@pytest.mark.parity
@pytest.mark.parametrize("prompt", ["The cat sat on the mat because it was tired. The cat", "1, 2, 3, 4, 5,"])
def test_smollm2_greedy_equals_plain_greedy(lm, prompt):
    plain = plain_greedy(lm, prompt, 16)
    for draft_layers in (22, 27):
        result = speculative_generate(lm, prompt, 16, draft_layers=draft_layers, draft_len=4)
        assert result.new_ids == plain
        check_bookkeeping(lm, result, 16)


@pytest.mark.parity
def test_smollm2_chat_prompt_stops_at_eos(lm):
    prompt = lm.chat_template([{"role": "user", "content": "What is 2+2?"}])
    plain = plain_greedy(lm, prompt, 30)
    result = speculative_generate(lm, prompt, 30, draft_layers=26, draft_len=3)
    assert result.new_ids == plain and result.stop == "eos"
    check_bookkeeping(lm, result, 30)


def test_greedy_equals_plain_greedy_on_a_sliding_window_model(tiny_gemma, torch_threads):
    """A tiny Gemma 3 (window 5): drafts and verification read the cache through the window too,
    on a text longer than the window."""
    _, lm = tiny_gemma
    lm = with_eos(lm, -1)
    prompt = PROMPT * 3
    assert len(lm.encode(prompt)) > lm.cfg.sliding_window
    plain = [s.token_id for s in lm.generate_steps(prompt, 12, temperature=0)]
    for draft_layers in (1, 2):
        result = speculative_generate(lm, prompt, 12, draft_layers=draft_layers, draft_len=3)
        assert result.new_ids == plain
        check_bookkeeping(lm, result, 12)


@pytest.mark.parity
@pytest.mark.parametrize("prompt", ["春、夏、秋、冬、春、夏、秋、冬、春、", "1, 2, 3, 4, 5,"])
def test_gemma_greedy_equals_plain_greedy(gemma, prompt):
    plain = plain_greedy(gemma, prompt, 12)
    for draft_layers in (9, 15):
        result = speculative_generate(gemma, prompt, 12, draft_layers=draft_layers, draft_len=4)
        assert result.new_ids == plain
        check_bookkeeping(gemma, result, 12)
