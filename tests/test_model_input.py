"""The one rule for what a model reads (LessonModel.with_bos / cut / check_input): every input
begins with the model's <bos> when it has one, whoever builds it. On a tiny Gemma-shaped model
whose tokenizer puts a <bos> first (as Gemma's does), every path that builds an input by hand
is run with the decoder's entries instrumented, and each fresh input must begin with <bos>."""

from __future__ import annotations

import pytest
import torch

from lesson_model import LessonModel
from lesson_model import speculative as S
from lesson_model.analysis import induction as I
from lesson_model.analysis import whatif as WA
from lesson_model.analysis.tokenization import finish_characters
from lesson_model.generation import generate_steps
from lesson_model.tokens import TokenizerView
from lesson_model.whatif import Switches
from tests._fixtures_model import _tiny_gemma, tiny, tiny_tokenizer_view  # noqa: F401
from tests._inputs import record_fresh_inputs, without_bos

pytestmark = pytest.mark.unit

TEXT = "the cat sat on the mat and the dog sat on the log"


@pytest.fixture(scope="module")
def with_bos():
    """The tiny Gemma's decoder behind a tokenizer that puts a <bos> first (its <|endoftext|>
    plays the part), as Gemma's does."""
    _, lm = _tiny_gemma()
    view = tiny_tokenizer_view()
    bos_view = TokenizerView(view.tokenizer, bos_token="<|endoftext|>", add_bos=True, eos_token="<|endoftext|>")
    return LessonModel(lm.decoder, bos_view, name="tiny-gemma3-bos")


def byte_piece(lm) -> int:
    """An id that is part of a character (a byte piece): finish_characters runs the model for it."""
    return next(i for i in range(lm.cfg.vocab_size) if lm.tokenizer.tokens([i])[0].is_partial)


@pytest.fixture
def inputs(monkeypatch):
    """Every fresh input (no KV cache before it) the decoder's two entries see (tests/_inputs.py)."""
    return record_fresh_inputs(monkeypatch)


def test_encode_puts_bos_first_and_with_bos_adds_it_once(with_bos):
    bos = with_bos.bos_id
    assert bos is not None and with_bos.encode(TEXT)[0] == bos
    ids = with_bos.encode(TEXT)
    assert with_bos.with_bos(ids[1:]) == ids and with_bos.with_bos(ids) == ids


def test_an_input_without_bos_is_refused(with_bos):
    ids = with_bos.encode(TEXT)
    with pytest.raises(ValueError, match="<bos>"):
        with_bos.run(ids[1:], names=[])
    with pytest.raises(ValueError, match="<bos>"):
        list(generate_steps(with_bos, ids[1:], 2))
    with pytest.raises(ValueError, match="<bos>"):
        finish_characters(with_bos, ids[1:], [byte_piece(with_bos)])
    with_bos.run(ids, names=[])                               # with it: runs


def test_a_cut_keeps_bos_and_the_end(with_bos):
    tokens = with_bos.tokenize(TEXT)
    assert len(tokens) > 8
    kept, cut = with_bos.cut(tokens, 6)
    assert cut and len(kept) == 6
    assert kept[0].id == with_bos.bos_id and kept[0].added
    assert [t.id for t in kept[1:]] == [t.id for t in tokens[-5:]]
    ids = [t.id for t in tokens]
    assert with_bos.cut(ids, 6) == ([ids[0], *ids[-5:]], True)
    assert with_bos.cut(ids, len(ids)) == (ids, False)


def test_a_model_without_bos_cuts_its_last_tokens(tiny):
    _, lm = tiny
    assert lm.bos_id is None
    ids = lm.encode(TEXT)
    assert lm.cut(ids, 4) == (ids[-4:], True)
    assert lm.with_bos(ids) == ids
    lm.run(ids[1:], names=[])                                 # nothing to begin with: any start is fine


def test_induction_sequences_begin_with_bos(with_bos, inputs):
    exp = I.induction_experiment(with_bos, seq_len=6, n_seqs=3, seed=0, n_examples=2, batch=2)
    assert exp.start == 1 and exp.tokens.shape == (3, 13)
    assert bool((exp.tokens[:, 0] == with_bos.bos_id).all())
    assert torch.equal(exp.copies[:, :6], exp.copies[:, 6:])
    for pattern in exp.example_patterns.values():
        assert pattern.shape == (12, 12)                       # the copies' positions
    I.ablate(with_bos, exp.tokens, exp.scores, k=2, seed=0, n_random=1)
    assert inputs and not without_bos(inputs, with_bos)


def test_induction_losses_count_from_the_first_copy(with_bos):
    """loss_first[i] predicts the first copy's token i+1 (after <bos>), loss_second the same
    token of the second copy: by hand from one run."""
    exp = I.induction_experiment(with_bos, seq_len=6, n_seqs=2, seed=3, n_examples=0)
    run = with_bos.run(exp.tokens, names=[])
    lp = run.logits.float().log_softmax(-1)                     # [n, 13, vocab]
    t = exp.tokens
    first = -lp[:, 1:6].gather(-1, t[:, 2:7, None])[..., 0].mean(0)        # tokens 1..5 of the first copy
    second = -lp[:, 7:12].gather(-1, t[:, 8:13, None])[..., 0].mean(0)     # tokens 1..5 of the second
    torch.testing.assert_close(exp.loss_first, first, rtol=0, atol=1e-4)
    torch.testing.assert_close(exp.loss_second, second, rtol=0, atol=1e-4)
    assert I.second_copy_loss(with_bos, exp.tokens) == pytest.approx(float(second.mean()), abs=1e-4)
    queries, keys = I.second_copy_positions(6, exp.start)
    assert int(queries[0]) == 7 and int(keys[0]) == 2           # token 0 of the second copy -> token 1 of the first


def test_every_path_that_builds_an_input_begins_with_bos(with_bos, inputs):
    ids = with_bos.encode(TEXT)
    list(generate_steps(with_bos, ids, 3, temperature=0, use_kv_cache=True))
    list(generate_steps(with_bos, ids, 3, temperature=0, use_kv_cache=False))
    list(generate_steps(with_bos, TEXT, 2, temperature=0))
    S.speculative_generate(with_bos, ids, 4, draft_layers=1, draft_len=2)
    finish_characters(with_bos, ids, [3, byte_piece(with_bos)])
    for sw in (Switches(), Switches(shuffle=True, seed=1), Switches(no_rope=True)):
        WA.run_comparison(with_bos, WA.read_ids(ids, Switches()), sw, layer=0, head=0)
    kept, _ = with_bos.cut(with_bos.tokenize(TEXT), 5)
    with_bos.run([t.id for t in kept], names=[])
    assert len(inputs) > 8
    assert not without_bos(inputs, with_bos), "an input without <bos>"
