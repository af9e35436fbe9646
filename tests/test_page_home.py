"""The big-picture page: its Try-this claims hold on the model, the model card says what the
weights really are, and every candidate shown can be appended (byte pieces finish their
character, and the page says so)."""

from __future__ import annotations

import pytest

from course import i18n
from lesson_model.analysis.tokenization import finish_characters
from lesson_model.sampling import next_token_distribution
from tests._apptest import chart, errors, text_of


def try_prompt(n: int) -> str:
    """The Try-this prompt n, which every language offers unchanged."""
    prompts = {i18n.catalog(lang)[f"home.try.{n}.prompt"] for lang in i18n.LANGS}
    assert len(prompts) == 1, prompts
    return prompts.pop()


def top(lm, text: str, k: int = 5) -> list[tuple[int, float]]:
    probs = next_token_distribution(lm.run(text, names=()).logits[0, -1])
    values, ids = probs.topk(k)
    return [(int(i), float(p)) for i, p in zip(ids, values)]


def gemma_try(lang: str, n: int) -> tuple[str, str]:
    """Gemma's Try-this n in a language: (prompt, why)."""
    catalog = i18n.catalog(lang)
    return catalog[f"home.gemma.try.{n}.prompt"], catalog[f"home.gemma.try.{n}.why"]


def greedy(lm, text: str, n: int) -> str:
    """What following the model's top choices writes after ``text`` (n tokens)."""
    steps = list(lm.generate_steps(text, n, temperature=0))
    return lm.decode(steps[-1].ids[len(lm.encode(text)):])


def rank(lm, text: str, token_id: int) -> int:
    probs = next_token_distribution(lm.run(text, names=()).logits[0, -1])
    return int((probs > probs[token_id]).sum()) + 1


COLOURS = set("黑白紅红藍蓝綠绿黃黄粉紫灰橙棕")


def test_gemma_try_sets_cover_every_language():
    for lang in i18n.LANGS:
        numbers = sorted({key.split(".")[3] for key in i18n.catalog(lang) if key.startswith("home.gemma.try.")})
        assert numbers == ["1", "2", "3", "4"], (lang, numbers)
    # The Chinese catalogs give Gemma Chinese prompts, each in its own script.
    assert gemma_try("zh-Hant", 1)[0] == "台灣最高的山是" and gemma_try("zh-Hans", 1)[0] == "中国最高的山是"
    assert gemma_try("zh-Hant", 4)[0].startswith("貓坐在墊子上，因為牠累了。")   # 牠 for animals in Taiwan
    assert gemma_try("zh-Hans", 4)[0].startswith("猫坐在垫子上，因为它累了。")


def test_gemma_try_this_claims_hold_in_english(gemma):
    # 1. "A fact: one candidate, ·Paris, stands far above the rest."
    (i1, p1), (_, p2) = top(gemma, gemma_try("en", 1)[0])[:2]
    assert gemma.token_text(i1) == " Paris" and p1 > 5 * p2 and p1 > 0.4
    # 2. "An opinion: the probability spreads over many candidates."
    assert top(gemma, gemma_try("en", 2)[0])[0][1] < 0.3
    # 3. "... the model continues it with ·Friday."
    assert gemma.token_text(top(gemma, gemma_try("en", 3)[0])[0][0]) == " Friday"
    # 4. "星期 is a single token ... over 90% ... following its top choices gives 星期五."
    prompt = gemma_try("en", 4)[0]
    (i1, p1), = top(gemma, prompt, 1)
    assert gemma.token_text(i1) == "星期" and p1 > 0.9
    assert greedy(gemma, prompt, 3).startswith("星期五")


@pytest.mark.parametrize("lang", ["zh-Hant", "zh-Hans"])
def test_gemma_try_this_claims_hold_in_chinese(gemma, lang):
    # 1. The highest mountain (玉山 in Taiwan, 珠穆朗玛峰 on the mainland): the top guess has under
    #    5%, the mountain's first character is far down, and the greedy text is fluent but wrong.
    prompt, why = gemma_try(lang, 1)
    (first, p1), = top(gemma, prompt, 1)
    assert p1 < 0.05
    if lang == "zh-Hant":
        jade = gemma.encode("玉")[-1]
        assert gemma.token_text(jade) == "玉" and rank(gemma, prompt, jade) > 20
        written = greedy(gemma, prompt, 12)
        assert "玉山" not in written
        assert written.startswith("台南的台南山") and "「台南的台南山」" in why
    else:
        assert gemma.token_text(first) == "位于" and "第一名“位于”的概率不到 5%" in why
        pearl = gemma.encode("珠")[-1]
        assert gemma.token_text(pearl) == "珠" and rank(gemma, prompt, pearl) > 100 and "前 100 名" in why
        written = greedy(gemma, prompt, 12)
        assert "珠穆朗玛" not in written
        assert written.startswith("位于中国最北端的山峰") and "“位于中国最北端的山峰”" in why
    # 2. Favourite colour: spread out, and over colours.
    prompt, _ = gemma_try(lang, 2)
    candidates = top(gemma, prompt, 5)
    assert candidates[0][1] < 0.3
    assert sum(bool(set(gemma.token_text(i)) & COLOURS) for i, _ in candidates) >= 3
    # 3. Weekdays: 星期 is one token with over 90%, and the greedy text is 星期五.
    prompt, why = gemma_try(lang, 3)
    (i1, p1), = top(gemma, prompt, 1)
    assert gemma.token_text(i1) == "星期" and p1 > 0.9 and "90%" in why
    assert greedy(gemma, prompt, 3).startswith("星期五")
    # 4. The cat: a base model continues the story; the why quotes the sentence it writes.
    prompt, why = gemma_try(lang, 4)
    sentence = {"zh-Hant": "的腿被壓在墊子上，牠的腳下被壓在墊子上", "zh-Hans": "的腿很长，它很累。"}[lang]
    assert greedy(gemma, prompt, 20).startswith(sentence)
    assert prompt[-1] + sentence in why


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


@pytest.mark.parametrize("model", ["smollm2-135m", "gemma-3-270m"])
@pytest.mark.parametrize("lang", list(i18n.LANGS))
def test_model_card_says_the_weights_are_a_quantized_copy(open_page, lm, gemma, lang, model):
    loaded = {"smollm2-135m": lm, "gemma-3-270m": gemma}[model]
    at = open_page("home", lang=lang, model=model)
    assert not errors(at)
    text = text_of(at)
    assert loaded.weight_formats and loaded.embedding_format
    for fmt in loaded.weight_formats:
        assert fmt in text
    assert "float32" in text
    low = min({"Q4_1": 4, "Q4_K": 4, "Q5_0": 5, "Q6_K": 6, "Q8_0": 8}.get(f, 99) for f in loaded.weight_formats)
    assert low == 4
    assert i18n.catalog(lang)["home.card.bits"].format(bits=low) in text


def card(lang: str, key: str, **fields) -> str:
    """The model-card line ``key`` as the page formats it."""
    return i18n.catalog(lang)[f"home.card.{key}"].format(**fields)


@pytest.mark.parametrize("lang", list(i18n.LANGS))
def test_gemma_model_card_shows_what_differs(open_page, gemma, lang):
    at = open_page("home", lang=lang, model="gemma-3-270m")
    assert not errors(at)
    metrics = [m.value for m in at.metric]
    assert metrics == ["18", "4", "1", "640", "256", "2,048", "262,144"]
    text = text_of(at)
    assert i18n.catalog(lang)["home.card.title"].format(name="Gemma 3 270M") in [s.value for s in at.subheader]
    join = "、" if lang != "en" else ", "
    expected = [
        card(lang, "design.base"),
        card(lang, "design.mqa", heads=4, kv=1, group=4),
        card(lang, "design.head_width", heads=4, d_head=256, width="1,024", d_model="640"),
        card(lang, "design.window", window="512", n_local=15, n=18, theta_local="10,000",
             layers=join.join(["5", "11", "17"]), theta="1,000,000"),
        card(lang, "design.mlp_gelu", d_ff="2,048"),
        card(lang, "design.norms_sandwich"),
        card(lang, "design.qk_norm", d_head=256),
        card(lang, "design.embed_scaled", d_model=640, scale="25.3"),
        i18n.catalog(lang)["home.gemma.card.licence"],
    ]
    for line in expected:
        assert line in text, line
    for absent in ("design.instruct", "design.gqa", "design.global", "design.mlp_silu", "design.norms_pre"):
        assert i18n.catalog(lang)[f"home.card.{absent}"].split("{")[0] not in text, absent
    assert "https://ai.google.dev/gemma/terms" in text
    # The loop diagram and What to notice quote Gemma's sizes.
    notice = i18n.catalog(lang)["home.notice.positions"].split("{")[0]
    assert any(notice in m.value and "262,144" in m.value and "18" in m.value for m in at.markdown)


def test_smollm2_model_card_shows_its_design(open_page, lm):
    at = open_page("home", lang="en", model="smollm2-135m")
    text = text_of(at)
    for line in [card("en", "design.instruct"), card("en", "design.gqa", heads=9, kv=3, group=3),
                 card("en", "design.global", theta="100,000"), card("en", "design.mlp_silu", d_ff="1,536"),
                 card("en", "design.norms_pre"), card("en", "design.embed_plain"),
                 card("en", "licence", licence="SmolLM2: Apache 2.0 (Hugging Face)")]:
        assert line in text, line
    for absent in ("QK-norm", "sliding-window", "√", "Gemma Terms", "Wide heads"):
        assert absent not in text, absent


@pytest.mark.parametrize("lang", list(i18n.LANGS))
def test_gemma_try_buttons_offer_its_own_prompts(open_page, gemma, lang):
    at = open_page("home", lang=lang, model="gemma-3-270m", prompt="")
    assert not errors(at)
    at.button(key="try_0").click().run()
    assert not errors(at)
    assert at.text_area(key="prompt").value == gemma_try(lang, 1)[0]
    assert gemma_try(lang, 1)[1] in text_of(at)


def test_append_on_gemma_extends_the_prompt(open_page, gemma):
    prompt = gemma_try("zh-Hant", 4)[0]
    at = open_page("home", lang="zh-Hant", model="gemma-3-270m", prompt=prompt)
    assert not errors(at)
    assert at.button(key="append_0").label.startswith("的")
    at.button(key="append_0").click().run()
    assert not errors(at)
    assert at.text_area(key="prompt").value == prompt + "的"


@pytest.mark.parametrize("lang,half,full", [("zh-Hant", "?（半形）", "？（"), ("zh-Hans", "?（半角）", "？（")])
def test_half_and_full_width_question_marks_are_told_apart(open_page, gemma, lang, half, full):
    """天空為什麼是藍色 on Gemma: 「？」 and 「?」 are both among the top candidates (different
    tokens). The half-width one is marked in the chart and on its button, and every button
    puts its percentage in full-width brackets: 「？（41%）」."""
    prompt = {"zh-Hant": "天空為什麼是藍色", "zh-Hans": "天空为什么是蓝色"}[lang]
    at = open_page("home", lang=lang, model="gemma-3-270m", prompt=prompt)
    assert not errors(at)
    texts = [gemma.token_text(i) for i, _ in top(gemma, prompt, 8)]
    assert "？" in texts and "?" in texts
    labels = [b.label.replace("\\", "") for b in at.button if b.key and b.key.startswith("append_")]
    assert any(label.startswith(half + "（") for label in labels), labels
    assert any(label.startswith(full) for label in labels), labels
    assert not any("  (" in label or " (" in label for label in labels), labels
    axis = chart(at, "candidates_chart")["data"][0]["y"]
    assert half in list(axis) and "？" in list(axis)


def test_width_kind():
    from course.text import width_kind
    assert width_kind("?") == "half" and width_kind("?!") == "half" and width_kind("？") == "full"
    assert width_kind("。") == "full" and width_kind("a?") is None and width_kind("") is None
    assert i18n.mark_width("?", "?", "zh-Hant") == "?（半形）" and i18n.mark_width("?", "?", "zh-Hans") == "?（半角）"
    assert i18n.mark_width("？", "？", "en") == "？ (full-width)"
    assert i18n.mark_width("？", "？", "zh-Hant") == "？" and i18n.mark_width("?", "?", "en") == "?"


def test_every_candidate_shown_has_an_append_button(open_page):
    at = open_page("home", lang="en", prompt="The capital of France is", params={"top": 15})
    assert not errors(at)
    appends = [b for b in at.button if b.key and b.key.startswith("append_")]
    assert len(appends) == 15
    assert "Paris" in appends[0].label


def test_appending_a_byte_piece_appends_the_whole_character(open_page, lm):
    prompt = try_prompt(4)
    at = open_page("home", lang="zh-Hant", prompt=prompt, model="smollm2-135m")
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


@pytest.mark.parametrize("prompt", ["", "Hello", "\u200b\u202e", "𠀋𡈽", "<img src=x onerror=alert(1)>", "貓" * 400])
def test_gemma_home_takes_odd_prompts(open_page, gemma, prompt):
    at = open_page("home", lang="zh-Hant", model="gemma-3-270m", prompt=prompt)
    assert not errors(at)
    if prompt:
        assert at.button(key="append_0")
        at.button(key="append_0").click().run()
        assert not errors(at)
        assert "\ufffd" not in at.text_area(key="prompt").value
