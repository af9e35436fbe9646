"""The article-tied sections' claims, on both bundled models: a word's vector in two contexts
(starts identical, moves apart), the temperature table's prompt, the decoder-only facts."""

from __future__ import annotations

import pytest
import torch

from course import i18n
from course.model import MODEL_TAGS
from course.notices import context as CN
from lesson_model.analysis import context as C
from lesson_model.analysis import decoder_only as D
from lesson_model.analysis import toys
from lesson_model.sampling import next_token_distribution
from tests._apptest import GEMMA, MODELS

LANGS = list(i18n.LANGS)


def defaults(lang: str, model: str = GEMMA) -> tuple[str, str, str]:
    """The section's default texts and word in ``lang`` on ``model`` (SmolLM2 keeps English ones)."""
    tag = MODEL_TAGS[model]
    return tuple(i18n.text_in(lang, i18n.lesson_key("embeddings", tag, f"context.{key}"))
                 for key in ("default_a", "default_b", "default_word"))


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("lang", LANGS)
def test_default_word_starts_identical_and_moves_apart(models, model, lang):
    lm = models[model]
    result = C.word_in_contexts(lm, *defaults(lang, model))
    assert result is not None
    assert result.same_token and result.embed_cosine == pytest.approx(1.0, abs=1e-6)
    assert len(result.centred) == lm.cfg.n_layers
    # What the section says: the centred cosine falls below APART (the "apart" notice), while the
    # plain cosine stays high at every block (the reason for centring).
    assert min(result.centred) < CN.APART
    assert min(result.raw) > 0.5 and min(result.raw) > min(result.centred)
    found = dict(CN.context_notices(word="w", pieces_a=result.a.n_pieces, pieces_b=result.b.n_pieces, last_a="a",
                                    last_b="b", same_token=True, embed_cos=1.0, centred=result.centred,
                                    raw=result.raw, top_a="x", p_a=0.1, top_b="y", p_b=0.1))
    assert "context.apart" in found


def test_gemma_apple_company_and_fruit(gemma):
    for lang in ("zh-Hant", "zh-Hans"):
        result = C.word_in_contexts(gemma, *defaults(lang))
        assert "iPhone" in gemma.token_text(result.top_a[0][0])
        assert gemma.token_text(result.top_b[0][0]) == "，"


def test_word_of_several_tokens_follows_its_last(lm):
    text_a, text_b, word = defaults("zh-Hant", GEMMA)   # 蘋果 is byte pieces on SmolLM2
    found = C.find_word(lm, text_a, word)
    assert found.n_pieces > 1 and found.position == found.pieces[-1] == len(found.ids) - 1
    assert lm.decode(found.ids[found.pieces[0]:found.position + 1]) == word
    result = C.word_in_contexts(lm, text_a, text_b, word)
    assert result.same_token and result.embed_cosine == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("model", MODELS)
def test_missing_word(models, model):
    lm = models[model]
    assert C.find_word(lm, "The river bank", "money") is None
    assert C.find_word(lm, "The river bank", "  ") is None
    assert C.word_in_contexts(lm, "The river bank", "no such word", "bank") is None


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("lang", LANGS)
def test_weather_probabilities_are_the_models(models, model, lang):
    lm = models[model]
    prompt = i18n.text_in(lang, "sampling.weather.prompt")
    words = [i18n.text_in(lang, f"sampling.four.{w}") for w in ("good", "hot", "cold", "bad")]
    table = toys.word_probabilities(lm, prompt, words, (0.5, 1.0, 2.0))
    logits = lm.run(prompt, [], last_only=True).logits[0, -1].float()
    for w in table.words:
        if len(w.pieces) == 1:
            for temp, p in zip(table.temperatures, w.probs):
                assert p == pytest.approx(float(next_token_distribution(logits, temperature=temp)[w.pieces[0]]),
                                          rel=1e-4, abs=1e-9)
        else:        # chain rule, checked by one run over the word's pieces
            full = lm.run(lm.encode(prompt) + w.pieces[:-1], []).logits[0].float()
            n = len(lm.encode(prompt))
            expected = 1.0
            for k, piece in enumerate(w.pieces):
                expected *= float(full[n - 1 + k].softmax(-1)[piece])
            assert w.probs[1] == pytest.approx(expected, rel=1e-3)
    top_id, top_probs = table.top[0]
    assert top_id == int(logits.argmax()) and top_probs[1] == pytest.approx(float(logits.softmax(-1).max()), rel=1e-4)


def test_gemma_weather_numbers(gemma):
    """The review's numbers, live: after 今天天氣很, 熱 about 56% and 冷 about 26%; 很好 is one token."""
    words = ["好", "熱", "冷", "壞"]
    table = toys.word_probabilities(gemma, "今天天氣很", words, (1.0,))
    p = {w.word: w.probs[0] for w in table.words}
    assert 0.45 < p["熱"] < 0.65 and 0.18 < p["冷"] < 0.35
    assert gemma.token_text(table.top[0][0]) == "熱"
    assert table.words[0].merged


@pytest.mark.parametrize("model", MODELS)
def test_decoder_only_facts(models, model):
    lm = models[model]
    facts = D.decoder_only_facts(lm)
    assert facts.n_blocks == lm.cfg.n_layers and facts.attention_per_block == [1] * lm.cfg.n_layers
    assert facts.encoder_modules == [] and facts.causal and facts.embedding_tables == 1
    # Causal, by a run: a different last token leaves every earlier position's stream unchanged.
    ids = lm.encode("The cat sat on the mat")
    name = f"blocks.{lm.cfg.n_layers - 1}.hook_resid_post"
    a = lm.run(ids, [name], last_only=True).cache[name][0]
    b = lm.run(ids[:-1] + [ids[-1] + 1], [name], last_only=True).cache[name][0]
    torch.testing.assert_close(a[:-1], b[:-1], atol=1e-4, rtol=1e-4)
    assert not torch.allclose(a[-1], b[-1])
