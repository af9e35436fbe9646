"""The tokens lesson: chips, counts, cost charts, strawberry, chat template, vocabulary facts."""

from __future__ import annotations

import pytest

from course import i18n
from course.figures.tokens import PARALLEL, PARTS
from course.notices import tokens as N
from lesson_model.analysis import tokenization as T
from tests._apptest import chart, direction_leaks

CHINESE = "我喜歡貓，因為牠們很可愛。"
EMOJI = "I love pizza 🍕👍🏽"
SMOL, GEMMA = "smollm2-135m", "gemma-3-270m"
MODELS = [SMOL, GEMMA]


def metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def markdown(at) -> str:
    return "\n".join(m.value for m in at.markdown)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("lang", list(i18n.LANGS))
@pytest.mark.parametrize("prompt", [None, CHINESE, EMOJI])
def test_counts_and_ids_match_the_tokenizer(open_page, models, model, lang, prompt):
    lm = models[model]
    at = open_page("tokens", lang=lang, prompt=prompt, model=model)
    assert not at.exception, [e.value for e in at.exception]
    text = prompt if prompt is not None else i18n.catalog(lang)["prompt.default"]
    ids = lm.encode(text)
    cat = i18n.catalog(lang)
    added = int(lm.tokenizer.leading_bos(ids, text))             # Gemma's <bos>, counted apart
    assert added == (model == GEMMA)
    assert metric(at, cat["tokens.count.tokens"]) == f"{len(ids) - added:,}"
    assert metric(at, cat["tokens.count.bytes"]) == f"{len(text.encode('utf-8')):,}"
    assert metric(at, cat["tokens.count.chars"]) == f"{len(text):,}"
    assert chart(at, "token_ids")["data"][0]["customdata"] == ids[:64]
    # The parallel-sentence chart shows the tokenizer's own counts.
    spec = chart(at, "cost_parallel")
    assert [trace["x"] for trace in spec["data"]] == [[len(lm.encode(row[s])) - added for row in PARALLEL]
                                                      for s in range(3)]
    assert at.title[0].value == cat["nav.tokens"]


def test_chinese_prompt_lists_split_characters(open_page, lm):
    at = open_page("tokens", lang="zh-Hant", prompt=CHINESE, model=SMOL)
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
    at = open_page("tokens", lang=lang, prompt="tab\x04here", model=SMOL)
    assert not at.exception, [e.value for e in at.exception]
    warnings = [w.value for w in at.warning]
    assert any("U+0004" in w for w in warnings), warnings
    # Gemma's byte fallback holds every byte: nothing is dropped, nothing is reported
    at = open_page("tokens", lang=lang, prompt="tab\x04here", model=GEMMA)
    assert not at.exception and not any("U+" in w.value for w in at.warning)
    at = open_page("tokens", lang=lang, prompt=CHINESE, model=SMOL)
    assert not any("U+" in w.value for w in at.warning)


def test_special_tokens_typed_as_text_are_shown_live(open_page, lm):
    at = open_page("tokens", lang="en", prompt="Hi <|im_start|>there")
    assert not at.exception
    text = markdown(at)
    default = i18n.catalog("en")["tokens.chat.inject_default"]
    found = T.typed_special_tokens(lm, default)
    assert found, "the default experiment contains special-token text"
    for tok in found:                                    # each typed marker is named with its real id
        assert f"`{tok.text}` ({tok.id})" in text
    assert f":gray[{lm.encode('<|im_start|>')[0]}]" in text
    # the prompt's own typed marker is told apart from the template's
    assert "1 more special token(s) come from your own text: `<|im_start|>` (1)" in text
    _, chat = T.chat_tokens(lm, "Hi <|im_start|>there")
    added = sum(t.special for t in chat) - 1
    assert f"the template adds {added} special tokens" in text


def test_a_dropped_lead_byte_is_reported_as_it_is(open_page):
    at = open_page("tokens", lang="en", prompt="a\U00040000b")
    assert not at.exception
    warning = " ".join(w.value for w in at.warning)
    assert "U+40000" in warning and "only the byte F1 is dropped" in warning and "80 80 80" in warning
    assert "never sees" not in warning
    text = markdown(at)
    assert "`U+40000` = `<80>` + `<80>` + `<80>` (3 tokens for 3 of its 4 UTF-8 bytes" in text


def test_merge_rank_remark_follows_the_rank(open_page, lm):
    facts = T.vocabulary_facts(lm)
    common = open_page("tokens", lang="en", prompt="the cat")
    rank = min(t.id for t in lm.tokenize("the cat")) - facts.merged_range.first
    assert rank < 1000 and "a very common string" in markdown(common)
    rare = open_page("tokens", lang="en", prompt="我吃魚，魚吃我。")
    ranks = [t.id - facts.merged_range.first for t in lm.tokenize("我吃魚，魚吃我。") if t.id >= facts.merged_range.first]
    assert min(ranks) >= 1000 and "a very common string" not in markdown(rare)
    assert f"merge rule {min(ranks):,} of {facts.n_merges:,}" in markdown(rare)


def test_cost_notice_gives_both_ratios(open_page, lm):
    at = open_page("tokens", lang="en", model=SMOL)
    en, hant, hans = (sum(len(lm.encode(row[s])) for row in PARALLEL) for s in range(3))
    assert f"about {hant / en:.2f}× and {hans / en:.2f}× as many" in markdown(at)
    spec = chart(at, "cost_parallel")
    assert [trace["name"] for trace in spec["data"]] == ["English", "Traditional Chinese", "Simplified Chinese"]
    assert list(spec["data"][0]["y"]) == [row[0] for row in PARALLEL]
    zh = chart(open_page("tokens", lang="zh-Hant"), "cost_parallel")
    assert [trace["name"] for trace in zh["data"]] == ["英文", "繁體中文", "簡體中文"]
    # The rows are named in the page's language, never a cut English sentence.
    assert list(zh["data"][0]["y"]) == [row[1] for row in PARALLEL]
    hans = chart(open_page("tokens", lang="zh-Hans"), "cost_parallel")
    assert list(hans["data"][0]["y"]) == [row[2] for row in PARALLEL]


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("lang", list(i18n.LANGS))
def test_chinese_strawberry_comes_from_the_tokenizer(open_page, models, model, lang):
    """How many 木 in 森: the page shows the ids the tokenizer gives (one token on Gemma, byte
    pieces on SmolLM2) and says which, with the ids; the parts are never among them."""
    lm = models[model]
    at = open_page("tokens", lang=lang, model=model)
    assert not at.exception
    text = markdown(at)
    cat = i18n.catalog(lang)
    for char, part, count in PARTS:
        ids = [t.id for t in lm.tokenize(char) if not t.added]
        part_ids = [t.id for t in lm.tokenize(part) if not t.added]
        if model == GEMMA:
            assert len(ids) == 1 and len(part_ids) == 1           # whole characters on Gemma
        else:
            assert len(ids) > 1                                    # byte pieces on SmolLM2
    char, part, count = PARTS[0]
    ids = [t.id for t in lm.tokenize(char) if not t.added]
    assert not set(ids) & {t.id for t in lm.tokenize(part) if not t.added}     # 森 and 木 share no id on either model
    key, fields = N.parts_notice(char=char, part=part, count=count, char_ids=ids,
                                 part_ids=[t.id for t in lm.tokenize(part) if not t.added],
                                 join=lambda items: i18n.join_list(items, lang))
    assert key == ("parts.one" if model == GEMMA else "parts.pieces")
    assert cat[f"tokens.{key}"].format(**fields).replace("**", "") in text.replace("**", "")
    # Another character from the URL.
    n = next(i for i, (c, _, _) in enumerate(PARTS) if c == "晶")
    at = open_page("tokens", lang=lang, model=model, params={"char": n})
    ids = [t.id for t in lm.tokenize("晶") if not t.added]
    assert f"{ids[0]:,}" in markdown(at) and "日" in markdown(at)
    # 淼 and 水 share their lead byte's piece on SmolLM2: the page says so instead of claiming none.
    n = next(i for i, (c, _, _) in enumerate(PARTS) if c == "淼")
    at = open_page("tokens", lang=lang, model=model, params={"char": n})
    key, fields = N.parts_notice(char="淼", part="水", count=3, char_ids=[t.id for t in lm.tokenize("淼") if not t.added],
                                 part_ids=[t.id for t in lm.tokenize("水") if not t.added],
                                 join=lambda items: i18n.join_list(items, lang))
    assert key == ("parts.one" if model == GEMMA else "parts.shared")
    assert cat[f"tokens.{key}"].format(**fields).replace("**", "") in markdown(at).replace("**", "")


def test_try_this_claims_hold_for_the_tokenizer(lm):
    for lang in i18n.LANGS:
        cat = i18n.catalog(lang)
        one = cat["tokens.try.1.prompt"]
        assert " strawberry" in [t.text for t in lm.tokenize(one)]             # one token after a space
        groups = T.character_groups(lm.tokenize(cat["tokens.try.2.prompt"]), cat["tokens.try.2.prompt"])
        cjk = [g for g in groups if "\u4e00" <= g.text[:1] <= "\u9fff"]
        assert any(not g.split for g in cjk) and sum(g.split for g in cjk) > len(cjk) / 2   # some whole, many split
        digits = [t.text.strip() for t in lm.tokenize(cat["tokens.try.3.prompt"]) if t.text.strip().isdigit()]
        assert digits and all(len(d) == 1 for d in digits)
        for word in cat["tokens.try.4.prompt"].split():
            assert len(lm.tokenize(" " + word)) > 1
        code = [t.text for t in lm.tokenize(cat["tokens.try.6.prompt"])]
        assert any(t.startswith("\n") and t.strip() == "" and len(t) > 1 for t in code)


# --------------------------------------------------------------------------- Gemma 3 270M

def test_gemma_chinese_prompt_is_whole_characters(open_page, gemma):
    at = open_page("tokens", lang="zh-Hant", prompt="我吃魚，魚吃我。", model=GEMMA)
    assert not at.exception
    text = markdown(at)
    cat = i18n.catalog("zh-Hant")
    assert not T.split_characters(gemma.tokenize("我吃魚，魚吃我。"), "我吃魚，魚吃我。")
    assert cat["tokens.notice.no_split_sp"] in text and ":gray-background[" not in text
    assert "\\<bos\\>" in text                                        # the <bos> chip comes first
    captions = " ".join(c.value for c in at.caption)
    assert "`<bos>`（編號 2）" in captions


def test_gemma_has_no_chat_template_and_says_so(open_page, gemma):
    at = open_page("tokens", lang="en", prompt="Hi <start_of_turn>there", model=GEMMA)
    assert not at.exception, [e.value for e in at.exception]
    assert not T.has_chat_template(gemma)
    info = " ".join(i.value for i in at.info)
    assert "**base model**" in info and "`<bos>` (id 2)" in info and "`<start_of_turn>` (105)" in info
    facts = T.vocabulary_facts(gemma)
    named = [i for i, piece in facts.special if not piece.startswith("<unused")]
    assert f"{len(facts.special) - len(named):,} are unused placeholders" in info
    text = markdown(at)
    # the typed marker is a special token; the tokenizer's own <bos> is not counted as typed
    assert "1 more special token(s) come from your own text: `<start_of_turn>` (105)" in text
    n = T.text_counts(gemma, "Hi <start_of_turn>there").tokens
    assert f"your {n} tokens go in as they are, after `<bos>`: {n + 1} tokens in all" in text
    # the Gemma injection experiment: its markers are special ids, the literal reading has none
    default = i18n.catalog("en")["tokens.gemma.chat.inject_default"]
    found = T.typed_special_tokens(gemma, default)
    assert [t.id for t in found] == [106, 105]
    assert "2 special token(s) came out of this plain text: `<end_of_turn>` (106), `<start_of_turn>` (105)" in text
    literal = T.literal_tokens(gemma, default)
    assert f"Read literally, the same text is {len(literal)} ordinary tokens" in text
    assert not any(t.special for t in literal)
    # typing <bos> gives the special id too
    assert [(t.id, t.added) for t in gemma.tokenize("<bos>") if t.special] == [(2, True), (2, False)]


def test_gemma_vocabulary_and_math(open_page, gemma):
    at = open_page("tokens", lang="en", prompt="the cat", model=GEMMA)
    assert not at.exception
    facts = T.vocabulary_facts(gemma)
    assert metric(at, "Entries") == f"{gemma.cfg.vocab_size:,}"
    assert metric(at, "Merge rules") == f"{facts.n_merges:,}" and metric(at, "Single bytes") == "256"
    assert metric(at, "Single characters") == f"{facts.n_chars:,}"
    hist = chart(at, "vocab_lengths")["data"][0]
    assert sum(hist["y"]) == facts.size - len(facts.special)
    text = markdown(at)
    assert f"+ {facts.n_merged:,} merged pieces = **{facts.size:,}** entries" in text
    steps = T.bpe_merge_steps(gemma, " strawberry")
    assert steps[-1].pieces == (" strawberry",)
    assert f"(makes id {gemma.encode(' strawberry')[1]:,})" in text       # the last step makes the token
    # merge-order remark: lower id first, no "rule n" claim (ranks are not id offsets here)
    assert not facts.rank_is_id_offset and facts.merges_follow_ids
    ids = [t.id for t in gemma.tokenize("the cat")[1:]]
    assert f"has the lowest id ({min(ids):,})" in text and f"id {min(ids):,}: merge rule" not in text
    captions = " ".join(c.value for c in at.caption)
    assert f"{facts.byte_range.first}–{facts.byte_range.last} are the byte-fallback pieces" in captions


def test_gemma_cost_is_about_a_character_a_token(open_page, gemma, lm):
    at = open_page("tokens", lang="en", model=GEMMA)
    en, hant, hans = (sum(T.text_counts(gemma, row[s]).tokens for row in PARALLEL) for s in range(3))
    zh_chars = sum(len(row[1]) for row in PARALLEL), sum(len(row[2]) for row in PARALLEL)
    assert hant <= en and hans <= en            # the prose: no more tokens in Chinese than in English
    assert zh_chars[0] / hant >= 1 and zh_chars[1] / hans >= 1      # a character a token, or better
    assert f"with {zh_chars[0] / hant:.2f} and {zh_chars[1] / hans:.2f} Chinese characters per token" in markdown(at)
    smol = [sum(T.text_counts(lm, row[s]).tokens for row in PARALLEL) for s in range(3)]
    assert smol[1] > 2 * smol[0] * 0.9 and sum(len(row[1]) for row in PARALLEL) / smol[1] < 1   # SmolLM2: bytes


def test_gemma_bad_input_is_handled(open_page):
    for prompt in ["x", "▁▁ ▁", "\U00040000\x00\u200b", "貓" * 3000]:
        at = open_page("tokens", lang="zh-Hans", prompt=prompt, model=GEMMA)
        assert not at.exception, (prompt[:10], [e.value for e in at.exception])
    at = open_page("tokens", lang="en", model=GEMMA, params={"letter": "xyz", "ids": "maybe", "word": "w" * 100,
                                                             "inject": "<bos>" * 100})
    assert not at.exception and at.text_input(key="letter").value == "x"


@pytest.mark.parametrize("lang", list(i18n.LANGS))
def test_gemma_try_this_claims_hold(gemma, lang):
    """Each of the Gemma set's prompts, in every language, does what its "why" says."""
    cat = i18n.catalog(lang)
    checked = 0
    for n in range(1, 8):
        prompt, why = cat[f"tokens.gemma.try.{n}.prompt"], cat[f"tokens.gemma.try.{n}.why"]
        toks = [t for t in gemma.tokenize(prompt) if not t.added]
        texts = [t.text for t in toks]
        groups = T.character_groups(toks, prompt)
        if "strawberry" in prompt:                                    # one token after a space
            assert " strawberry" in texts
        elif "龘" in prompt:                                          # byte fallback, shown as byte pieces
            split = {g.text for g in groups if g.split}
            assert split == {"龘", "𝕏"} and all(t.is_partial for g in groups if g.split for t in g.tokens)
        elif "<start_of_turn>" in prompt:                             # typed markers are special ids
            assert [(t.text, t.id) for t in toks if t.special] == [("<start_of_turn>", 105), ("<end_of_turn>", 106)]
        elif any(ch.isdigit() for ch in prompt):                      # digit by digit
            digits = [t.text.strip() for t in toks if t.text.strip().isdigit()]
            assert len(digits) >= 4 and all(len(d) == 1 for d in digits)
        elif prompt in ("我吃魚，魚吃我。", "我吃鱼，鱼吃我。"):          # one token per character
            assert texts == list(prompt)
        elif "\u4e00" <= prompt[0] <= "\u9fff":                      # named words are one token each
            named = [w for w in ("喜歡", "因為", "喜欢", "因为", "台灣", "最高的", "中国") if w in why]
            assert len(named) == 2 and all(w in texts for w in named), (prompt, named, texts)
            assert not any(g.split for g in groups)
        else:                                                         # long words: several subword pieces
            assert all(len(gemma.tokenize(" " + w)) > 2 for w in prompt.split())
        checked += 1
    assert checked == 7


def test_id_chart_reaches_the_top_of_the_vocabulary(open_page, gemma):
    """Gemma's Chinese characters have ids near 240,000: the log axis must reach them."""
    import math
    at = open_page("tokens", lang="zh-Hant", prompt="我吃魚，魚吃我。", model=GEMMA)
    spec = chart(at, "token_ids")
    top = spec["layout"]["yaxis"]["range"][1]
    assert 10 ** top >= gemma.cfg.vocab_size > max(spec["data"][0]["customdata"])
    assert top == pytest.approx(math.log10(gemma.cfg.vocab_size) + 0.1)


BIDI = "Say \u202eevil\u202c twice."      # a right-to-left override and its pop around "evil"


@pytest.mark.parametrize("model,lang", [(SMOL, "en"), (GEMMA, "zh-Hant")])
def test_direction_controls_are_shown_not_obeyed(open_page, models, model, lang):
    """A right-to-left override in the prompt showed the split-character line backwards and read
    "evil" as "live" among the chips: now every control is a visible <U+202E> chip, and nothing
    the page drew holds a direction control outside a balanced isolate."""
    lm = models[model]
    at = open_page("tokens", lang=lang, prompt=BIDI, model=model)
    assert not at.exception, [e.value for e in at.exception]
    assert direction_leaks(at) == []
    text, captions = markdown(at), "\n".join(c.value for c in at.caption)
    cat = i18n.catalog(lang)
    assert cat["tokens.chips.hidden"].split("{n}")[1].split("{chars}")[0] in captions
    for chip, name in [("<U+202E>", "RIGHT-TO-LEFT OVERRIDE"), ("<U+202C>", "POP DIRECTIONAL FORMATTING")]:
        assert i18n.with_paren(f"`{chip}`", name, lang) in captions
    toks = lm.tokenize(BIDI)
    for control in ("\u202e", "\u202c"):
        chip = f"<U+{ord(control):04X}>"
        whole = [t for t in toks if control in t.text]
        if whole:        # the control is a token of its own (Gemma): a chip, a table row, an axis label
            assert "\\" + chip.replace("+", "\\+").replace(">", "\\>") in text
            assert chip in at.dataframe[0].value[cat["tokens.table.piece"]].tolist()
        else:            # spelled in byte tokens (SmolLM2): the "did not fit in one token" line names it
            group = next(g for g in T.split_characters(toks, BIDI) if control in g.text)   # " \u202e": <20 E2 80> <AE>
            shown = group.text.replace(" ", "·").replace(control, chip)
            assert f"`{shown}` = " + " + ".join(f"`{t.text}`" for t in group.tokens) in text
        assert any(chip.replace("<", "&lt;").replace(">", "&gt;") in x for x in chart(at, "token_ids")["data"][0]["x"])
    rendered = [c.value for c in at.code if "evil" in c.value]    # the chat template: SmolLM2 has one
    assert len(rendered) == (model == SMOL) and all("<U+202E>evil<U+202C>" in value for value in rendered)
