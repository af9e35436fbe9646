"""What the pages say about the model is true of the input the model always gets: <bos> first on
Gemma, at every prompt length, a cut one included; and the model-dependent Try-this texts and
notices hold on the model they are shown for. Checked against transformers' own load of Gemma
(tests/_fixtures_model.py) and on the bundled models."""

from __future__ import annotations

import pytest
import torch

from course.notices import ffn as NF
from lesson_model.analysis import induction as I
from lesson_model.analysis import neurons as N
from tests._fixtures_model import gemma_lm, gemma_reference, torch_threads  # noqa: F401

pytestmark = pytest.mark.parity

CAP = 64          # the cap of attention, heads, ffn, residual and what-if (embeddings: 48)
PROMPTS = {
    "short": "The cat sat on the mat because it was tired.",
    "medium": ("Every morning the baker opens the shop at six, lights the ovens and sets out the bread "
               "that rose overnight, while the first customers wait outside in the cold."),
    "long": ("The river starts high in the mountains as a thin stream of melted snow. It runs past pine "
             "forests and small villages, where children throw stones into it and farmers water their "
             "fields. By the time it reaches the plain it is wide and slow, carrying boats loaded with "
             "grain and timber toward the sea. Near the coast it splits into many channels, and birds "
             "gather on the mud banks every spring before flying north again."),
}


def reference_ids(tokenizer, text: str, cap: int) -> list[int]:
    """transformers' tokenization (special tokens on: <bos> first), cut as the pages cut: <bos>
    and the last cap - 1 tokens."""
    ids = tokenizer(text)["input_ids"]
    return ids if len(ids) <= cap else [ids[0], *ids[-(cap - 1):]]


def page_numbers(logits: torch.Tensor, patterns: list[torch.Tensor], ids: list[int]) -> dict:
    """Numbers the pages print: the mean next-token loss (what-if), the top token and its
    probability at the last position (home, residual), and the heads resting on the first token
    (heads: mean attention from every later position over half)."""
    logprobs = logits[0].float().log_softmax(-1)
    target = torch.tensor(ids[1:])
    loss = float(-logprobs[:-1].gather(-1, target[:, None]).mean())
    probs = logprobs[-1].exp()
    on_first = torch.stack([p[0, :, 1:, 0].mean(-1) for p in patterns])             # [layers, heads]
    return dict(loss=loss, top=int(probs.argmax()), p_top=float(probs.max()),
                sink_heads=int((on_first > 0.5).sum()), best_sink=float(on_first.max()))


@pytest.mark.parametrize("length", list(PROMPTS))
def test_page_numbers_equal_transformers_at_three_lengths(gemma_lm, gemma_reference, length, torch_threads):
    hf, tokenizer = gemma_reference
    lm, cfg = gemma_lm, gemma_lm.cfg
    tokens = lm.tokenize(PROMPTS[length])
    kept, cut = lm.cut(tokens, CAP)
    ids = [t.id for t in kept]
    assert cut == (length == "long") and (len(tokens) > CAP) == cut
    assert ids == reference_ids(tokenizer, PROMPTS[length], CAP)
    assert ids[0] == lm.bos_id == tokenizer.bos_token_id and len(ids) == min(len(tokens), CAP)
    names = [f"blocks.{layer}.attn.hook_pattern" for layer in range(cfg.n_layers)]
    run = lm.run(ids, names=names)
    ours = page_numbers(run.logits, [run.cache[n] for n in names], ids)
    with torch.no_grad():
        out = hf(torch.tensor([ids]), output_attentions=True)
    theirs = page_numbers(out.logits, list(out.attentions), ids)
    assert ours["top"] == theirs["top"] and ours["sink_heads"] == theirs["sink_heads"]
    for key in ("loss", "p_top", "best_sink"):
        assert ours[key] == pytest.approx(theirs[key], abs=1e-3), key
    # With <bos> kept, the attention sink the heads lesson teaches is there on a cut prompt too.
    assert ours["sink_heads"] >= 10 and ours["best_sink"] > 0.8


def test_induction_sequences_equal_transformers(gemma_lm, gemma_reference, torch_threads):
    """The induction test reads <bos> first; its losses and top-guess share are transformers'
    on the same sequences, and Gemma copies well: the page's "copied" sentence."""
    hf, _ = gemma_reference
    seq = 20
    exp = I.induction_experiment(gemma_lm, seq_len=seq, n_seqs=3, seed=1, n_examples=0)
    assert bool((exp.tokens[:, 0] == gemma_lm.bos_id).all()) and exp.tokens.shape[1] == 2 * seq + 1
    with torch.no_grad():
        logits = hf(exp.tokens).logits.float()                        # [3, 41, vocab]
    lp = logits[:, :-1].log_softmax(-1)
    loss = -lp.gather(-1, exp.tokens[:, 1:, None])[..., 0].mean(0)   # loss[p] predicts position p + 1
    torch.testing.assert_close(exp.loss_first, loss[1:seq], rtol=0, atol=2e-3)
    torch.testing.assert_close(exp.loss_second, loss[seq + 1:2 * seq], rtol=0, atol=2e-3)
    hit = (logits[:, :-1].argmax(-1) == exp.tokens[:, 1:]).float()
    assert exp.top1_second == pytest.approx(float(hit[:, seq + 1:2 * seq].mean()), abs=1e-6)
    assert exp.mean_loss_second < exp.mean_loss_first - 1.0 and exp.top1_second >= 0.5


def test_induction_try3_why_holds_per_model(lm, gemma_lm):
    """A7 B3 K9 Q2 A7 B3: SmolLM2's top guess is K, with well under half of the probability;
    Gemma's is K with more than half (the texts of each model's Try this 3)."""
    from course import i18n
    for model, smollm2 in ((lm, True), (gemma_lm, False)):
        key = "induction.try.3" if smollm2 else "induction.gemma.try.3"
        prompt = i18n.catalog("en")[f"{key}.prompt"]
        probs = model.run(prompt, names=[], last_only=True).logits[0, -1].float().softmax(-1)
        top = int(probs.argmax())
        assert model.token_text(top).strip() == "K", model.name
        assert (float(probs[top]) < 0.45) if smollm2 else (float(probs[top]) > 0.5), (model.name, float(probs[top]))
        for lang in ("en", "zh-Hant", "zh-Hans"):
            cat = i18n.catalog(lang)
            if cat.get(f"{key}.prompt") == prompt:
                assert "**K**" in cat[f"{key}.why"], (lang, key)


def test_embeddings_try5_byte_pieces_on_smollm2(lm):
    """狗咬人。人咬狗。 on SmolLM2: 狗 and 咬 are cut into byte pieces, 人 and 。 are one token each,
    and the second sentence has the first's tokens in another order (Try this 5's text)."""
    from course import i18n
    prompt = i18n.catalog("en")["embeddings.try.5.prompt"]
    assert prompt == "狗咬人。人咬狗。"
    for ch, pieces in (("狗", True), ("咬", True), ("人", False), ("。", False)):
        toks = lm.tokenize(ch)
        assert (len(toks) > 1 and all(t.is_partial for t in toks)) if pieces else len(toks) == 1, ch
    ids = lm.encode(prompt)
    half = len(ids) // 2
    assert sorted(ids[:half]) == sorted(ids[half:]) and ids[:half] != ids[half:]
    for lang in ("en", "zh-Hant", "zh-Hans"):
        why = i18n.catalog(lang)["embeddings.try.5.why"]
        assert all(ch in why for ch in "狗咬人。"), lang


def test_ffn_collapse_rank_is_full_on_gemma(lm, gemma_lm):
    """Gemma's layer 15: up_proj @ down_proj has full rank 640 (one direction squeezed, not lost:
    the notice says so); SmolLM2's last layer is well-conditioned and full rank, no such notice."""
    from course.cache.ffn import default_layer
    for model, squeezed in ((gemma_lm, True), (lm, False)):
        layer = default_layer(model.cfg)
        c = N.linear_collapse(model, layer)
        assert c.rank == model.cfg.d_model, (model.name, c.rank)
        s = c.singular_values
        found = NF.collapse_notices(rank=c.rank, d_model=model.cfg.d_model, quadratic=False, gap_bilinear=0.0,
                                    gap_real=0.0, doubling=4.0, same=False, a="a", b="b", act={},
                                    singular=(float(s.min()), float(s.max())))
        assert ("notice.collapse_squeezed" in [k for k, _ in found]) == squeezed, model.name
