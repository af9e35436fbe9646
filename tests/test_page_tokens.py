"""The tokens lesson: chips, counts, cost charts, strawberry, chat template, vocabulary facts."""

from __future__ import annotations


import pytest

from lesson_model.analysis import tokenization as T
from ui import i18n
from ui.figures_tokens import PARALLEL
from tests._apptest import chart

pytestmark = pytest.mark.slow

CHINESE = "我喜歡貓，因為牠們很可愛。"
EMOJI = "I love pizza 🍕👍🏽"


def metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def markdown(at) -> str:
    return "\n".join(m.value for m in at.markdown)


@pytest.mark.parametrize("lang", list(i18n.LANGS))
@pytest.mark.parametrize("prompt", [None, CHINESE, EMOJI])
def test_counts_and_ids_match_the_tokenizer(open_page, lm, lang, prompt):
    at = open_page("tokens", lang=lang, prompt=prompt)
    assert not at.exception, [e.value for e in at.exception]
    text = prompt if prompt is not None else i18n.catalog(lang)["prompt.default"]
    ids = lm.encode(text)
    cat = i18n.catalog(lang)
    assert metric(at, cat["tokens.count.tokens"]) == f"{len(ids):,}"
    assert metric(at, cat["tokens.count.bytes"]) == f"{len(text.encode('utf-8')):,}"
    assert metric(at, cat["tokens.count.chars"]) == f"{len(text):,}"
    assert chart(at, "token_ids")["data"][0]["customdata"] == ids[:64]
    # The parallel-sentence chart shows the tokenizer's own counts.
    spec = chart(at, "cost_parallel")
    assert [trace["x"] for trace in spec["data"]] == [[len(lm.encode(row[s])) for row in PARALLEL] for s in range(3)]
    assert at.title[0].value == cat["nav.tokens"]


def test_chinese_prompt_lists_split_characters(open_page, lm):
    at = open_page("tokens", lang="zh-Hant", prompt=CHINESE)
    text = markdown(at)
    groups = T.split_characters(lm.tokenize(CHINESE), CHINESE)
    assert groups, "this prompt should contain characters split over byte tokens"
    first = groups[0]
    assert f"`{first.text}` = " + " + ".join(f"`{t.text}`" for t in first.tokens) in text
    assert ":gray-background[" in text               # byte pieces drawn as grey chips


def test_emoji_prompt_and_ids_toggle(open_page, lm):
    at = open_page("tokens", lang="en", prompt=EMOJI, params={"ids": "1"})
    assert at.toggle(key="ids").value is True
    ids = lm.encode(EMOJI)
    chips = markdown(at)
    for token_id in ids:
        assert f":gray[{token_id}]" in chips          # ids printed inside the chips


def test_empty_prompt_stops_with_a_hint(open_page):
    at = open_page("tokens", lang="zh-Hans", prompt="")
    assert not at.exception
    assert at.info and not at.get("plotly_chart")


def test_strawberry_controls_from_the_url(open_page, lm):
    at = open_page("tokens", lang="en", params={"word": "blueberry", "letter": "b", "compare": "你好"})
    assert not at.exception
    assert at.text_input(key="word").value == "blueberry"
    text = markdown(at)
    pieces = lm.tokenize(" blueberry")
    assert "ids " + ", ".join(str(t.id) for t in pieces) in text
    assert f"**×{'blueberry'.count('b')}**" in text or "**×1**" in text
    second = chart(at, "cost_mine")
    tokens_trace = second["data"][2]                  # characters, bytes, tokens
    assert tokens_trace["x"][1] == len(lm.encode("你好"))


def test_bad_url_values_are_cut_with_a_note(open_page):
    at = open_page("tokens", lang="en", params={"letter": "xyz", "ids": "maybe", "word": "w" * 100})
    assert not at.exception
    assert at.text_input(key="letter").value == "x"
    assert len(at.text_input(key="word").value) == 40
    assert at.toggle(key="ids").value is False
    notes = " ".join(w.value for w in at.warning)
    assert "letter=xyz" in notes and "ids=maybe" in notes


def test_chat_template_and_vocabulary(open_page, lm):
    at = open_page("tokens", lang="en", prompt="Hi")
    codes = [c.value for c in at.code]
    rendered, _ = T.chat_tokens(lm, "Hi")
    assert rendered.strip() in [c.strip() for c in codes]
    facts = T.vocabulary_facts(lm)
    assert metric(at, "Entries") == f"{facts.size:,}"
    assert metric(at, "Merge rules") == f"{facts.n_merges:,}"
    hist = chart(at, "vocab_lengths")["data"][0]
    assert sum(hist["y"]) == facts.size - len(facts.special)
    # The math expander's worked example ends in the tokenizer's own pieces for " strawberry".
    assert "rule 34,947" in markdown(at)


def test_try_button_sets_the_prompt(open_page, lm):
    at = open_page("tokens", lang="en")
    at.button(key="try_0").click().run()
    assert not at.exception
    prompt = i18n.catalog("en")["tokens.try.1.prompt"]
    assert metric(at, "Tokens") == f"{len(lm.encode(prompt)):,}"


@pytest.mark.parametrize("lang", list(i18n.LANGS))
def test_characters_the_tokenizer_drops_are_named(open_page, lang):
    at = open_page("tokens", lang=lang, prompt="tab\x04here")
    assert not at.exception, [e.value for e in at.exception]
    warnings = [w.value for w in at.warning]
    assert any("U+0004" in w for w in warnings), warnings
    at = open_page("tokens", lang=lang, prompt=CHINESE)
    assert not any("U+" in w.value for w in at.warning)
