"""The big-picture page: its Try-this claims hold on the model, the model card says what the
weights really are, and every candidate shown can be appended (byte pieces finish their
character, and the page says so)."""

from __future__ import annotations

import pytest

from lesson_model.analysis.tokenization import finish_characters
from lesson_model.sampling import next_token_distribution
from ui import i18n
from tests._apptest import errors, text_of

pytestmark = pytest.mark.slow


def try_prompt(n: int) -> str:
    """The Try-this prompt n, which every language offers unchanged."""
    prompts = {i18n.catalog(lang)[f"home.try.{n}.prompt"] for lang in i18n.LANGS}
    assert len(prompts) == 1, prompts
    return prompts.pop()


def top(lm, text: str, k: int = 5) -> list[tuple[int, float]]:
    probs = next_token_distribution(lm.run(text, names=()).logits[0, -1])
    values, ids = probs.topk(k)
    return [(int(i), float(p)) for i, p in zip(ids, values)]


def test_try_this_claims_hold_on_the_model(lm):
    # 1. "A fact: one candidate stands far above the rest."
    (_, p1), (_, p2) = top(lm, try_prompt(1))[:2]
    assert p1 > 5 * p2 and p1 > 0.5
    # 2. "An opinion: the probability spreads over many candidates."
    assert top(lm, try_prompt(2))[0][1] < 0.3
    # 3. "A pattern in the prompt: the model continues it with ·Friday."
    assert lm.token_text(top(lm, try_prompt(3))[0][0]) == " Friday"
    # 4. Chinese weekdays: the top guess is the first bytes of 星, but the greedy
    #    continuation writes 星期二, not 星期五.
    prompt = try_prompt(4)
    first = top(lm, prompt)[0][0]
    assert "星".encode().startswith(lm.tokenizer.token_bytes(first)) and len(lm.tokenizer.token_bytes(first)) < 3
    steps = list(lm.generate_steps(prompt, 6, temperature=0))
    written = lm.decode(steps[-1].ids[len(lm.encode(prompt)):])
    assert written.startswith("星期二") and not written.startswith("星期五")


def test_a_byte_piece_is_finished_by_the_model(lm):
    ids = lm.encode(try_prompt(4))
    first = top(lm, try_prompt(4))[0][0]
    done = finish_characters(lm, ids, [first, lm.encode("、")[0]])
    assert lm.decode(done[first]) == "星" and done[first][0] == first
    assert done[lm.encode("、")[0]] == lm.encode("、")           # a whole character is appended alone
    # The KV-cached completion picks what a full forward pass picks.
    assert done[first][1] == int(lm.run(ids + [first], names=()).logits[0, -1].argmax())


@pytest.mark.parametrize("lang", list(i18n.LANGS))
def test_model_card_says_the_weights_are_a_quantized_copy(open_page, lm, lang):
    at = open_page("home", lang=lang)
    assert not errors(at)
    text = text_of(at)
    assert lm.weight_formats and lm.embedding_format
    for fmt in lm.weight_formats:
        assert fmt in text
    assert "float32" in text
    low = min({"Q4_1": 4, "Q8_0": 8}.get(f, 99) for f in lm.weight_formats)
    assert i18n.catalog(lang)["home.card.bits"].format(bits=low) in text


def test_every_candidate_shown_has_an_append_button(open_page):
    at = open_page("home", lang="en", prompt="The capital of France is", params={"top": 15})
    assert not errors(at)
    appends = [b for b in at.button if b.key and b.key.startswith("append_")]
    assert len(appends) == 15
    assert "Paris" in appends[0].label


def test_appending_a_byte_piece_appends_the_whole_character(open_page, lm):
    prompt = try_prompt(4)
    at = open_page("home", lang="zh-Hant", prompt=prompt)
    assert "<E6 98>…" in at.button(key="append_0").label.replace("\\", "")
    at.button(key="append_0").click().run()
    assert not errors(at)
    assert at.text_area(key="prompt").value == prompt + "星"
    assert any("星" in info.value and "<9F>" in info.value for info in at.info)
    # What to notice reads the prompt as characters, not bytes.
    assert "`星¹` `星²`" in text_of(at)


def test_one_token_prompt(open_page, lm):
    at = open_page("home", lang="en", prompt="Hello")
    assert not errors(at)
    assert "Your prompt is a single token" in text_of(at)
