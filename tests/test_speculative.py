"""Speculative decoding with an early-exit draft: exactness, bookkeeping, the sampling rule."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from lesson_model.sampling import next_token_distribution
from lesson_model.speculative import partial_forward, speculative_generate
from tests._fixtures_model import (assert_close_f32, assert_greedy_has_margin, logits_depth, tiny, tiny_gemma,  # noqa: F401
                                   torch_threads)
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


def test_speculative_sampling_keeps_the_full_models_distribution(tiny):
    """The rejection rule makes the first token follow p exactly, although the draft's q differs."""
    _, lm = tiny
    lm = with_eos(lm, -1)
    settings = dict(temperature=1.0, top_k=6)
    with torch.inference_mode():
        p = next_token_distribution(lm.decoder(torch.tensor([lm.encode(PROMPT)]))[0, -1], **settings)
        q = next_token_distribution(partial_forward(lm.decoder, torch.tensor([lm.encode(PROMPT)]), 1, None)[0, -1],
                                    **settings)
    assert (p - q).abs().sum() > 0.3             # the draft really disagrees
    n = 1500
    counts = Counter(speculative_generate(lm, PROMPT, 2, draft_layers=1, draft_len=1, seed=s,
                                          **settings).new_ids[0] for s in range(n))
    empirical = torch.zeros_like(p)
    for token, c in counts.items():
        empirical[token] = c / n
    assert (empirical - p).abs().max() < 0.045               # ~4 standard errors at n=1500
    assert (empirical - q).abs().max() > 0.08                # and not the draft's distribution


@pytest.mark.slow
@pytest.mark.parametrize("prompt", ["The cat sat on the mat because it was tired. The cat", "1, 2, 3, 4, 5,"])
def test_smollm2_greedy_equals_plain_greedy(lm, prompt):
    plain = plain_greedy(lm, prompt, 16)
    for draft_layers in (22, 27):
        result = speculative_generate(lm, prompt, 16, draft_layers=draft_layers, draft_len=4)
        assert result.new_ids == plain
        check_bookkeeping(lm, result, 16)


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.parametrize("prompt", ["春、夏、秋、冬、春、夏、秋、冬、春、", "1, 2, 3, 4, 5,"])
def test_gemma_greedy_equals_plain_greedy(gemma, prompt):
    plain = plain_greedy(gemma, prompt, 12)
    for draft_layers in (9, 15):
        result = speculative_generate(gemma, prompt, 12, draft_layers=draft_layers, draft_len=4)
        assert result.new_ids == plain
        check_bookkeeping(gemma, result, 12)
