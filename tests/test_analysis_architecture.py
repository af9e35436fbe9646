"""Lesson 11's analyses on the real models: the card is read from the models, the counts equal
their tensors, the calculator refuses bad configurations, and every claim the page and its
Try-this texts make holds on the run it describes."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from lesson_model.analysis import architecture as AR
from lesson_model.analysis.params import PRESETS, config_of, count_params, model_breakdown

ROOT = Path(__file__).resolve().parent.parent


def catalog(lang):
    return json.loads((ROOT / "assets" / "i18n" / lang / "architecture.json").read_text(encoding="utf-8"))


# --- the card -------------------------------------------------------------------------------

@pytest.mark.parity
def test_card_rows_equal_the_configs(models):
    for key, lm in models.items():
        cfg = lm.cfg
        rows = {r.key: r for r in AR.model_card(lm)}
        assert tuple(rows) == AR.CARD_KEYS
        assert rows["tokenizer"].facts["vocab"] == cfg.vocab_size == lm.tokenizer.vocab_size
        assert rows["tokenizer"].variant == ("byte_bpe" if lm.tokenizer.byte_level else "sentencepiece")
        assert rows["d_model"].facts["d"] == cfg.d_model
        assert rows["layers"].facts["n"] == cfg.n_layers
        assert rows["heads"].facts["q"] == cfg.n_heads and rows["heads"].facts["kv"] == cfg.n_kv_heads
        assert rows["d_head"].facts["dh"] == cfg.d_head
        assert rows["d_ff"].facts["f"] == cfg.d_ff
        assert rows["activation"].variant == cfg.activation
        assert rows["norms"].variant == ("sandwich" if cfg.post_norms else "pre")
        assert rows["qk_norm"].variant == ("on" if cfg.qk_norm else "off")
        assert rows["position"].facts["base"] == cfg.rope_theta
        assert rows["window"].facts["n_sliding"] == len(cfg.sliding_layers)
        assert rows["tied"].variant == ("on" if cfg.tie_embeddings else "off")
        assert rows["embed_scale"].variant == ("on" if cfg.embed_scale else "off")
        assert rows["context"].facts["n"] == cfg.max_position
        assert rows["training"].variant == ("instruct" if lm.bundled.instruct else "base")
        assert rows["params"].facts["total"] == sum(p.numel() for p in lm.decoder.parameters())


@pytest.mark.parity
def test_card_facts_of_the_two_models(lm, gemma):
    s = {r.key: r for r in AR.model_card(lm)}
    g = {r.key: r for r in AR.model_card(gemma)}
    assert s["heads"].variant == "gqa" and g["heads"].variant == "mqa"
    assert g["d_head"].variant == "wider" and g["d_head"].facts["width"] == 1024
    assert s["position"].variant == "one_base"
    assert g["position"].variant == "two_bases" and g["position"].facts["local"] == gemma.cfg.rope_theta_sliding
    full = [i for i in range(gemma.cfg.n_layers) if gemma.cfg.window(i) is None]
    assert g["window"].facts["full"] == ", ".join(map(str, full)) and g["window"].facts["window"] == 512
    assert s["training"].variant == "instruct" and g["training"].variant == "base"
    differ = AR.differing(AR.model_card(lm), AR.model_card(gemma))
    assert "tied" not in differ and {"heads", "norms", "qk_norm", "window", "training"} <= differ


# --- the counts -----------------------------------------------------------------------------

@pytest.mark.parity
def test_counts_equal_the_tensors_and_the_embedding_fractions(lm, gemma):
    shares = {}
    for m in (lm, gemma):
        b = model_breakdown(m)
        assert b.total == sum(p.numel() for p in m.decoder.parameters())
        assert count_params(config_of(m)).parts == b.parts
        assert AR.calculate(config_of(m))["total"] == b.total
        shares[m.name] = b.parts["embedding"] / b.total
    # "about a fifth of SmolLM2 but most of Gemma"
    assert 0.18 < shares[lm.name] < 0.24
    assert shares[gemma.name] > 0.6
    assert model_breakdown(gemma).parts["embedding"] == 262_144 * 640


def test_presets_against_published_totals():
    total = {k: AR.calculate(c)["total"] for k, c in PRESETS.items()}
    assert abs(total["gpt2-small"] - 124.4e6) < 0.05e6
    assert abs(total["gpt3-175b"] - 175e9) / 175e9 < 0.005
    assert round(total["llama2-70b"] / 1e9) == 69
    assert round(total["mistral-7b"] / 1e9, 2) == 7.24
    mix = AR.calculate(PRESETS["mixtral-8x7b"])
    assert round(mix["total"] / 1e9, 1) == 46.7 and round(mix["active"] / 1e9, 1) == 12.9


def test_memory_and_kv_cache():
    c = AR.calculate(PRESETS["llama2-70b"])
    assert c["memory"]["bf16"] == 2 * c["total"] and c["memory"]["int4"] == c["total"] / 2
    assert c["kv_values"] == 2 * 80 * 8 * 128
    assert c["kv_bytes"]["bf16"] == 2 * 2 * 80 * 8 * 128            # 320 KiB per token


@pytest.mark.parametrize("change, reason", [
    (dict(n_layers=0), "range"), (dict(d_model=-5), "range"), (dict(vocab_size=10**9), "range"),
    (dict(n_kv_heads=16, n_heads=8), "kv_gt_heads"), (dict(n_heads=32, n_kv_heads=5), "heads_divide"),
    (dict(n_experts=4, experts_per_token=5), "experts"),
])
def test_bad_values_rejected_with_a_reason(change, reason):
    cfg = replace(PRESETS["mistral-7b"], **change)
    found = AR.problems(cfg)
    assert found and found[0][0] == reason
    with pytest.raises(ValueError):
        AR.calculate(cfg)
    assert AR.problems(PRESETS["mistral-7b"]) == []


# --- training: the loss at every position ----------------------------------------------------

def _losses(m, text):
    ids = m.encode(text)
    return AR.position_losses(ids, m.run(ids, names=[]).logits)


@pytest.mark.parity
def test_position_losses_are_the_training_loss(lm):
    ids = lm.encode("The cat sat on the mat because it was tired.")
    logits = lm.run(ids, names=[]).logits
    loss = AR.position_losses(ids, logits)
    assert loss.shape == (len(ids) - 1,)
    assert torch.allclose(loss.mean(), F.cross_entropy(logits[0, :-1], torch.tensor(ids[1:])), atol=1e-5)
    assert AR.position_losses(ids[:1], logits[:, :1]).numel() == 0


CASES = [("en", "smollm2-135m"), ("en", "gemma-3-270m"), ("zh-Hant", "gemma-3-270m"), ("zh-Hans", "gemma-3-270m"),
         ("zh-Hant", "smollm2-135m")]


@pytest.mark.parity
@pytest.mark.parametrize("lang, key", CASES)
def test_try_this_claims(models, lang, key):
    m = models[key]
    tries = catalog(lang)["try"]
    repeat = _losses(m, tries["1"]["prompt"])            # "the second half's mean loss < half the first's"
    h = len(repeat) // 2
    assert repeat[h:].mean() < 0.5 * repeat[:h].mean()
    default = json.loads((ROOT / "assets" / "i18n" / f"{lang}.json").read_text(encoding="utf-8"))["prompt"]["default"]
    counting = _losses(m, tries["2"]["prompt"])           # "less than a third of the default sentence's"
    assert counting.mean() < _losses(m, default).mean() / 3
    assert (counting[len(counting) // 3:] < 1.0).float().mean() > 0.75     # "almost every loss near 0" after the start


# --- post-training ------------------------------------------------------------------------------

@pytest.mark.parity
def test_post_training_english(lm, gemma):
    q = catalog("en")["post"]["question"]
    chat = AR.post_training(lm, q, 36)
    base = AR.post_training(gemma, q, 36)
    assert chat.chat and chat.prompt != q and chat.prompt.endswith("assistant\n")
    assert chat.stop == "eos" and chat.end_token == "<|im_end|>" and "Paris" in chat.answer
    assert not chat.writes_question
    assert not base.chat and base.prompt == q
    assert base.stop == "length" and base.end_token is None and len(base.ids) == 36
    assert base.writes_question                    # "it even wrote a question of its own"
    assert chat.partial == 0 and base.partial == 0


@pytest.mark.parity
@pytest.mark.parametrize("lang", ["zh-Hant", "zh-Hans"])
def test_post_training_chinese(lm, gemma, lang):
    q = catalog(lang)["post"]["question"]
    chat = AR.post_training(lm, q, 36)
    base = AR.post_training(gemma, q, 36)
    assert base.stop == "length" and base.partial * 4 < len(base.ids)     # Gemma writes Chinese characters
    if lang == "zh-Hant":
        assert "巴黎" in base.text and not base.writes_question     # it continues with an answer
    else:
        assert base.writes_question                # it writes questions of its own
    assert chat.partial * 4 >= len(chat.ids)       # SmolLM2: byte pieces, "it reads this language poorly"
