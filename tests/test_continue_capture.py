"""A pass that continues from a KV cache, its captures joined to the earlier run's
(lesson_model.model.continue_capture), gives what one pass over the whole sequence gives, at
every hook point (fast suite: tiny random Llama and Gemma 3, the Gemma prompt well past its
sliding window)."""

from __future__ import annotations

import pytest
import torch

from lesson_model.analysis.kv_memory import kv_cache_names, kv_cache_of_run
from lesson_model.model import continue_capture
from tests._fixtures_model import TINY_GEMMA_WINDOW, tiny, tiny_gemma  # noqa: F401

N_POS = 3 * TINY_GEMMA_WINDOW


@pytest.fixture(params=["tiny", "tiny_gemma"])
def model(request):
    return request.getfixturevalue(request.param)[1]


@pytest.mark.parametrize("n_start", [1, TINY_GEMMA_WINDOW + 2, N_POS - 1])
def test_a_continued_pass_joined_to_its_start_equals_one_whole_pass(model, n_start):
    g = torch.Generator().manual_seed(n_start)
    ids = torch.randint(0, model.cfg.vocab_size, (1, N_POS), generator=g)
    whole = model.run(ids)                                  # every hook point, one pass
    # The start comes from a run over more tokens than it shares (a longer, different prompt),
    # as the app's run cache finds one.
    other = torch.cat([ids[:, :n_start], ids[:, :4] + 1], dim=1) % model.cfg.vocab_size
    start = model.run(other)
    kv = kv_cache_of_run(start, model.cfg.n_layers, n_start)
    assert len(kv) == n_start
    rest = model.run(ids[:, n_start:], kv_cache=kv)
    assert len(kv) == N_POS                                 # the pass appended its own keys and values
    torch.testing.assert_close(rest.logits, whole.logits[:, n_start:], rtol=1e-4, atol=1e-4)
    for name in whole.cache:
        joined = continue_capture(name, start.cache[name], rest.cache[name], n_start)
        expected = whole.cache[name]
        assert joined.shape == expected.shape, name
        if name.endswith(".hook_attn_scores"):              # -inf exactly where the mask hides a key
            assert torch.equal(torch.isinf(joined), torch.isinf(expected)), name
            joined, expected = joined.nan_to_num(neginf=0.0), expected.nan_to_num(neginf=0.0)
        if name.endswith(".hook_pattern"):                  # and zero weight there
            hidden = torch.isinf(whole.cache[name.replace(".hook_pattern", ".hook_attn_scores")])
            assert hidden.any() and torch.all(joined[hidden] == 0), name
        torch.testing.assert_close(joined, expected, rtol=1e-4, atol=1e-4, msg=lambda m: f"{name}: {m}")


def test_a_continued_pass_past_the_context_is_refused(model):
    ids = torch.zeros(1, 4, dtype=torch.long)
    kv = kv_cache_of_run(model.run(ids, names=kv_cache_names(model.cfg.n_layers)), model.cfg.n_layers)
    with pytest.raises(ValueError, match="context"):
        model.run(torch.zeros(1, model.cfg.max_position - 3, dtype=torch.long), names=[], kv_cache=kv)
