"""course.model.cached_run on the real models: what it keeps matches a plain lesson_model run, the
last position's logits are unembedded only when read, and each head's write is computed from
hook_z at each read without growing what the shared cache holds."""

from __future__ import annotations

import pytest
import torch

from server.models import cached_run, run_cache

pytestmark = pytest.mark.parity   # lm, gemma through request.getfixturevalue: the fixtures cannot show it

TEXT = "The quick brown fox jumps over the lazy dog because it"


@pytest.fixture(params=["lm", "gemma"])
def model(request):
    return request.getfixturevalue(request.param)


def test_last_logits_are_unembedded_when_read_and_match_the_model(model):
    ids = model.to_ids(TEXT)[0].tolist() + [7]          # a prompt no other test caches
    names = ["blocks.1.hook_resid_post"]
    cached = cached_run(model, ids, names)
    assert cached._last_logits is None                  # nothing read yet: no unembedding done
    size = cached.nbytes                                # counts the logits before they exist
    plain = model.run(ids, names=names)
    vocab = model.cfg.vocab_size
    assert cached.last_logits.shape == (vocab,)
    torch.testing.assert_close(cached.last_logits, plain.logits[0, -1], rtol=0, atol=1e-4)
    assert cached.nbytes == size
    torch.testing.assert_close(cached.cache[names[0]], plain.cache[names[0]], rtol=0, atol=0)
    assert cached_run(model, ids, names) is cached       # shared: the second ask is the same run


def test_all_logits_are_kept_and_the_last_one_among_them(model):
    ids = model.to_ids(TEXT)[0].tolist() + [8]
    cached = cached_run(model, ids, all_logits=True)
    plain = model.run(ids, names=[])
    assert cached.logits.shape == plain.logits.shape
    torch.testing.assert_close(cached.logits, plain.logits, rtol=0, atol=1e-4)
    assert torch.equal(cached.last_logits, cached.logits[0, -1])


def test_head_writes_come_from_hook_z_at_each_read_and_the_cache_does_not_grow(model):
    ids = model.to_ids(TEXT)[0].tolist() + [9]
    layers = (0, model.cfg.n_layers - 1)
    names = [f"blocks.{layer}.attn.hook_result" for layer in layers]
    cached = cached_run(model, ids, names)
    plain = model.run(ids, names=names)
    before, held = cached.nbytes, run_cache().nbytes
    for name in names:
        got = cached.cache[name]                        # [1, pos, n_heads, d_model]
        assert got.shape == (1, len(ids), model.cfg.n_heads, model.cfg.d_model)
        torch.testing.assert_close(got, plain.cache[name], rtol=0, atol=1e-5)
        z = cached.cache[name.replace(".hook_result", ".hook_z")]
        assert z.shape == (1, len(ids), model.cfg.n_heads, model.cfg.d_head)
    assert list(cached.cache) == sorted(names)
    assert cached.nbytes == before and run_cache().nbytes == held   # read twice, held never


def test_a_hook_that_changes_a_head_write_is_not_deferred(model):
    ids = model.to_ids(TEXT)[0].tolist() + [10]
    name = "blocks.0.attn.hook_result"
    double = {name: lambda r: r * 2}
    cached = cached_run(model, ids, [name], hooks=double, hooks_key=("double", name))
    plain = model.run(ids, names=[name], hooks=double)
    torch.testing.assert_close(cached.cache[name], plain.cache[name], rtol=0, atol=1e-5)
    torch.testing.assert_close(cached.last_logits, plain.logits[0, -1], rtol=0, atol=1e-4)


def _spy_run(model, monkeypatch) -> list[int]:
    """The number of tokens each forward pass of ``model`` is given from now on."""
    lengths, run = [], model.run

    def spy(x, *args, **kwargs):
        lengths.append(model.to_ids(x, continues=True).shape[-1])     # a count, whatever x continues
        return run(x, *args, **kwargs)
    monkeypatch.setattr(model, "run", spy)
    return lengths


def test_a_prompt_that_goes_on_continues_from_the_kept_run_and_matches_a_whole_pass(model, monkeypatch):
    first = model.to_ids(TEXT)[0].tolist() + [11]
    longer = first + model.encode(" was tired and slept")
    L = model.cfg.n_layers - 1
    names = [f"blocks.{L}.attn.hook_pattern", f"blocks.{L}.attn.hook_result", "blocks.0.hook_resid_post",
             "ln_final.hook_normalized"]
    cached_run(model, first, names)
    lengths = _spy_run(model, monkeypatch)
    cont = cached_run(model, longer, names)
    assert lengths == [len(longer) - len(first)]           # only the new tokens went through the model
    monkeypatch.undo()                                     # the reference pass: one whole pass
    whole = model.run(longer, names=names)
    for name in names:
        torch.testing.assert_close(cont.cache[name], whole.cache[name], rtol=1e-4, atol=1e-4, msg=lambda m: f"{name}: {m}")
    torch.testing.assert_close(cont.last_logits, whole.logits[0, -1], rtol=1e-4, atol=1e-3)
    pattern = cont.cache[names[0]][0]                       # [heads, q, k]: no query reads a later key
    assert torch.all(pattern.triu(1) == 0) and torch.allclose(pattern.sum(-1), torch.ones(()), atol=1e-5)


def test_all_logits_continue_too(model, monkeypatch):
    first = model.to_ids(TEXT)[0].tolist() + [12]
    longer = first + [13, 14]
    cached_run(model, first, all_logits=True)
    lengths = _spy_run(model, monkeypatch)
    cont = cached_run(model, longer, all_logits=True)
    assert lengths == [2]
    monkeypatch.undo()
    whole = model.run(longer, names=[])
    torch.testing.assert_close(cont.logits, whole.logits, rtol=1e-4, atol=1e-3)
    assert torch.equal(cont.last_logits, cont.logits[0, -1])


def test_an_edit_near_the_start_or_a_hook_runs_from_the_first_token(model, monkeypatch):
    first = model.to_ids(TEXT)[0].tolist() + [15]
    cached_run(model, first, ["blocks.0.hook_resid_post"])
    lengths = _spy_run(model, monkeypatch)
    edited = first[:2] + [16] + first[2:]                  # an edit near the start: little to reuse
    cached_run(model, edited, ["blocks.0.hook_resid_post"])
    hooked = first + [17]                                  # an intervention may read every position
    cached_run(model, hooked, ["blocks.0.hook_resid_post"], hooks={"blocks.0.hook_resid_post": lambda r: None},
               hooks_key=("nothing",))
    assert lengths == [len(edited), len(hooked)]
