"""Generation as inspectable steps: greedy parity with transformers, KV cache, stopping, seeds."""

from __future__ import annotations

import pytest
import torch

from lesson_model import LessonModel
from lesson_model.generation import Step
from tests._fixtures_model import (  # noqa: F401
    assert_close_f32,
    assert_greedy_has_margin,
    greedy_step_logits,
    logits_depth,
    reference,
    smollm2,
    tiny,
    tiny_eos_id,
    tiny_tokenizer_view,
    torch_threads,
)

PROMPT = "the cat sat on"


def generate(lm, prompt, n, **kwargs) -> list[Step]:
    return list(lm.generate_steps(prompt, n, **kwargs))


def hf_greedy(hf, ids: list[int], n: int, eos_token_id) -> list[int]:
    with torch.no_grad():
        out = hf.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False, eos_token_id=eos_token_id,
                          pad_token_id=eos_token_id if eos_token_id is not None else 0,
                          attention_mask=torch.ones(1, len(ids), dtype=torch.long))
    return out[0, len(ids):].tolist()


def with_eos(lm, eos_token_id: int) -> LessonModel:
    """The same decoder with a different end-of-sequence token (to make generation stop early)."""
    view = lm.tokenizer
    clone = type(view).__new__(type(view))
    clone.__dict__ = dict(view.__dict__, eos_ids={eos_token_id})
    return LessonModel(lm.decoder, clone, name="tiny-eos")


# --------------------------------------------------------------------------- tiny model

@pytest.mark.parametrize("use_kv_cache", [True, False], ids=["kv", "no-kv"])
def test_greedy_equals_transformers_generate(tiny, use_kv_cache, torch_threads):
    hf, lm = tiny
    ids = lm.encode(PROMPT)
    steps = generate(lm, PROMPT, 30, temperature=0, use_kv_cache=use_kv_cache)
    # Exact equality is fair: at every step the best token leads by more than twice the float32 bound.
    assert_greedy_has_margin(lm, ids, [s.token_id for s in steps], what=f"tiny greedy from {PROMPT!r}")
    expected = hf_greedy(hf, ids, 30, eos_token_id=None)
    assert [s.token_id for s in steps] == expected
    assert steps[-1].ids == ids + expected


def test_greedy_with_and_without_kv_cache_identical(tiny, torch_threads):
    _, lm = tiny
    with_kv = generate(lm, PROMPT, 40, temperature=0, use_kv_cache=True)
    without = generate(lm, PROMPT, 40, temperature=0, use_kv_cache=False)
    prompt_ids = lm.encode(PROMPT)
    assert_greedy_has_margin(lm, prompt_ids, [s.token_id for s in without], what=f"tiny greedy from {PROMPT!r}")
    assert [s.token_id for s in with_kv] == [s.token_id for s in without]
    assert [a.candidates[0].id for a in with_kv] == [b.candidates[0].id for b in without]
    step_logits = greedy_step_logits(lm, without[-1].ids, len(prompt_ids))
    assert_close_f32(torch.tensor([a.candidates[0].logit for a in with_kv]),
                     torch.tensor([b.candidates[0].logit for b in without]),
                     depth=logits_depth(lm.cfg, len(without[-1].ids)), scale=step_logits.abs().max().item(),
                     what="best logit with and without the KV cache")


def test_stops_at_eos_like_transformers(tiny):
    hf, lm = tiny
    free = generate(lm, PROMPT, 12, temperature=0)
    assert_greedy_has_margin(lm, lm.encode(PROMPT), [s.token_id for s in free], what=f"tiny greedy from {PROMPT!r}")
    eos = free[5].token_id
    first = next(i for i, s in enumerate(free) if s.token_id == eos)   # it may appear earlier
    lm_eos = with_eos(lm, eos)
    for use_kv_cache in (True, False):
        steps = generate(lm_eos, PROMPT, 12, temperature=0, use_kv_cache=use_kv_cache)
        assert len(steps) == first + 1
        assert steps[-1].token_id == eos and steps[-1].stop == "eos"
        assert all(s.stop is None for s in steps[:-1])
    assert [s.token_id for s in steps] == hf_greedy(hf, lm.encode(PROMPT), 12, eos_token_id=eos)


def test_stops_at_the_length_limit(tiny):
    _, lm = tiny
    lm_no_eos = with_eos(lm, -1)
    steps = generate(lm_no_eos, PROMPT, 7, temperature=1.0, seed=0)
    assert len(steps) == 7 and steps[-1].stop == "length"
    assert generate(lm_no_eos, PROMPT, 0) == []


def test_step_fields(tiny):
    _, lm = tiny
    prompt_len = len(lm.encode(PROMPT))
    steps = generate(lm, PROMPT, 5, temperature=0.8, top_k=4, seed=1, use_kv_cache=True)
    for i, s in enumerate(steps):
        assert s.index == i
        assert s.text == lm.token_text(s.token_id)
        assert s.seconds > 0
        assert s.positions_computed == (prompt_len if i == 0 else 1)
        assert s.kv_positions == prompt_len + i           # the chosen token enters the cache on the next step
        assert s.kv_bytes == 2 * lm.cfg.n_layers * (prompt_len + i) * lm.cfg.n_kv_heads * lm.cfg.d_head * 4
        assert 1 <= len(s.candidates) <= 4                       # top-k 4: no other token has probability
        probs = [c.prob for c in s.candidates]
        assert probs == sorted(probs, reverse=True) and sum(probs) == pytest.approx(1.0, abs=1e-5)
        assert s.token_id in {c.id for c in s.candidates}
        assert s.prob == pytest.approx(next(c.prob for c in s.candidates if c.id == s.token_id))
        assert len(s.ids) == prompt_len + i + 1
    no_kv = generate(lm, PROMPT, 3, temperature=0, use_kv_cache=False)
    assert [s.positions_computed for s in no_kv] == [prompt_len, prompt_len + 1, prompt_len + 2]
    assert all(s.kv_positions == 0 and s.kv_bytes == 0 for s in no_kv)


def test_seeded_sampling_is_reproducible(tiny):
    _, lm = tiny
    lm = with_eos(lm, -1)
    a = [s.token_id for s in generate(lm, PROMPT, 20, temperature=1.5, seed=7)]
    torch.manual_seed(99)                                          # the global RNG must not matter
    b = [s.token_id for s in generate(lm, PROMPT, 20, temperature=1.5, seed=7)]
    c = [s.token_id for s in generate(lm, PROMPT, 20, temperature=1.5, seed=8)]
    d = [s.token_id for s in generate(lm, PROMPT, 20, temperature=1.5, seed=7, use_kv_cache=False)]
    assert a == b == d
    assert a != c


def test_temperature_zero_candidates_are_one_hot(tiny):
    _, lm = tiny
    steps = generate(lm, PROMPT, 3, temperature=0)
    for s in steps:
        assert len(s.candidates) == 1 and s.prob == 1.0 and s.candidates[0].id == s.token_id


def test_tiny_eos_is_the_tokenizer_eos(tiny):
    _, lm = tiny
    assert lm.eos_token_ids == {tiny_eos_id()}


# --------------------------------------------------------------------------- the real model

@pytest.mark.parity
def test_smollm2_greedy_equals_transformers_generate(smollm2, reference, torch_threads):
    hf, _ = reference
    prompt = smollm2.chat_template([{"role": "user", "content": "What is the capital of France?"}])
    ids = smollm2.encode(prompt)
    expected = hf_greedy(hf, ids, 24, eos_token_id=smollm2.eos_token_id)
    with_kv = [s.token_id for s in generate(smollm2, prompt, 24, temperature=0, use_kv_cache=True)]
    without = [s.token_id for s in generate(smollm2, prompt, 24, temperature=0, use_kv_cache=False)]
    assert_greedy_has_margin(smollm2, ids, without, what="SmolLM2 greedy answer to the capital of France")
    assert with_kv == without == expected
    assert "Paris" in smollm2.decode(with_kv)
