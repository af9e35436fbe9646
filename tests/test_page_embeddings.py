"""The embeddings lesson: row strips, neighbours, analogies, the PCA map, cosine matrices, order."""

from __future__ import annotations

import pytest
import torch

from course import i18n
from course.figures.embeddings import ANALOGIES, CHINESE_ANALOGIES, CHINESE_GROUPS, CHINESE_MAPS, GROUPS, MAPS, chinese_words
from lesson_model.analysis import embeddings as E
from tests._apptest import arr, chart, says, text_of

CHINESE = "狗咬人。人咬狗。"
EMOJI = "I love 🍕 and 🐱"
SMOL, GEMMA = "smollm2-135m", "gemma-3-270m"
MODELS = [SMOL, GEMMA]


def metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


@pytest.mark.parametrize("model", MODELS)
def test_every_group_word_is_one_token(models, model):
    lm = models[model]
    for words in GROUPS.values():
        for word in words:
            E.token_id_of(lm, " " + word)                          # one token (after Gemma's <bos>)
    for example in ANALOGIES:
        for word in example:
            E.token_id_of(lm, " " + word)
    assert all(set(groups) <= set(GROUPS) for groups in MAPS.values())


@pytest.mark.parametrize("lang", ["zh-Hant", "zh-Hans"])
def test_chinese_word_sets_are_whole_tokens_on_gemma_only(models, lang):
    """Every word of a script's Chinese set is one Gemma token with no space before it; SmolLM2
    cuts them, so it keeps the English set."""
    from course.cache.embeddings import words
    gemma, smol = models[GEMMA], models[SMOL]
    for word in chinese_words(lang):
        E.token_id_of(gemma, word)
    assert all(set(groups) <= set(CHINESE_GROUPS[lang]) for groups in CHINESE_MAPS.values())
    assert words(gemma, lang).analogies == CHINESE_ANALOGIES[lang] and words(gemma, lang).prefix == ""
    assert words(smol, lang).analogies == ANALOGIES and words(gemma, "en").analogies == ANALOGIES


def test_chinese_capital_analogy_ranks_first_on_gemma(models):
    """The review's check on Gemma's table: 巴黎 − 法國 + 日本 → 東京 is first (the inputs left out),
    and the page's first zh-Hant preset is that analogy."""
    gemma = models[GEMMA]
    assert CHINESE_ANALOGIES["zh-Hant"][0] == ("巴黎", "法國", "日本", "東京")
    res = E.analogy(gemma, "巴黎", "法國", "日本", k=5, expected="東京")
    assert res.expected_rank == 1 and res.top[0].text == "東京"


@pytest.mark.parametrize("lang", ["zh-Hant", "zh-Hans"])
def test_gemma_analogies_and_map_in_chinese_come_from_the_table(open_page, models, lang):
    gemma = models[GEMMA]
    cat = i18n.catalog(lang)
    at = open_page("embeddings", lang=lang, model=GEMMA)
    assert not at.exception
    a, b, c, d = CHINESE_ANALOGIES[lang][0]
    assert [at.text_input(key=k).value for k in ("a", "b", "c", "expect")] == [a, b, c, d]
    res = E.analogy(gemma, a, b, c, k=10, expected=d)
    assert chart(at, "analogy_chart")["data"][0]["customdata"] == [n.id for n in res.top]
    assert metric(at, cat["embeddings.ana.rank"].format(token=d)) == f"{res.expected_rank:,}"
    data = [trace for trace in chart(at, "map_chart")["data"] if trace["mode"] == "markers"]
    shown = [w for trace in data for w in trace["text"]]
    words = [w for g in CHINESE_MAPS["capitals"] for w in CHINESE_GROUPS[lang][g]]
    assert shown == words
    ids = [E.token_id_of(gemma, w) for w in words]
    p = E.pca(gemma.decoder.W_E.detach().cpu()[ids], 2)
    xs = [x for trace in data for x in arr(trace["x"]).tolist()]
    assert xs == pytest.approx(p.coords[:, 0].tolist(), abs=1e-4)
    # What to notice says what PC1 does with these groups (it may or may not split them).
    from course.notices import embeddings as NE
    (key, fields), = NE.map_notice(which="capitals", explained=p.explained.tolist(), pc1=p.coords[:, 0].tolist(),
                                   n_countries=len(CHINESE_GROUPS[lang]["countries"]), dims=2, n=len(words), d=640)
    assert cat[f"embeddings.{key}"].format(**fields) in text_of(at)
    # The preset buttons are the script's Chinese analogies (clicking one is tested in English:
    # AppTest re-formats translated radio options outside the script run).
    for n, (a, b, c, _) in enumerate(CHINESE_ANALOGIES[lang]):
        assert at.button(key=f"analogy_{n}").label == f"{a} − {b} + {c}"
    # The English set stays on SmolLM2 in Chinese.
    at = open_page("embeddings", lang=lang, model=SMOL)
    assert at.text_input(key="a").value == ANALOGIES[0][0]


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("lang", list(i18n.LANGS))
@pytest.mark.parametrize("prompt", [None, CHINESE, EMOJI])
def test_row_strip_and_neighbours_come_from_the_table(open_page, models, model, lang, prompt):
    lm = models[model]
    at = open_page("embeddings", lang=lang, prompt=prompt, model=model)
    assert not at.exception, [e.value for e in at.exception]
    text = prompt if prompt is not None else i18n.catalog(lang)["prompt.default"]
    ids = lm.encode(text)
    chosen = ids[1]                                          # the page's default position is 1
    strip = chart(at, "row_strip")["data"][0]
    torch.testing.assert_close(torch.tensor(arr(strip["z"])[0]), lm.decoder.W_E.detach().cpu()[chosen].float(), atol=1e-6, rtol=0)
    nearest = E.nearest_neighbours(lm, chosen, k=12)
    bars = chart(at, "neighbours_chart")["data"][0]
    assert bars["customdata"] == [n.id for n in nearest]
    assert arr(bars["x"]).tolist() == pytest.approx([n.cosine for n in nearest], abs=1e-6)
    # The prompt's cosine matrix is the matrix of its embedding rows.
    heat = chart(at, "prompt_cosines")["data"][0]
    expected = E.cosine_matrix(lm.decoder.W_E.detach().cpu()[ids])
    torch.testing.assert_close(torch.tensor(arr(heat["z"])), expected, atol=1e-5, rtol=0)


def test_word_lookup_and_multi_token_warning(open_page, lm):
    at = open_page("embeddings", lang="en", params={"word": "Monday", "k": 5})
    got = chart(at, "neighbours_chart")["data"][0]["customdata"]
    assert got == [n.id for n in E.nearest_neighbours(lm, " Monday", k=5)]
    at = open_page("embeddings", lang="en", params={"word": "antidisestablishmentarianism"})
    assert not at.exception
    assert any("antidisestablishmentarianism" in w.value for w in at.warning)
    # Falls back to the prompt token at the chosen position.
    fallback = lm.encode(i18n.catalog("en")["prompt.default"])[1]
    assert chart(at, "neighbours_chart")["data"][0]["customdata"][0] == E.nearest_neighbours(lm, fallback, k=1)[0].id


def test_analogy_from_the_url_reports_honest_ranks(open_page, lm):
    at = open_page("embeddings", lang="en", params={"a": "Paris", "b": "France", "c": "Italy", "expect": "Rome"})
    assert not at.exception
    res = E.analogy(lm, " Paris", " France", " Italy", k=10, expected=" Rome")
    assert metric(at, "Rank of ·Rome") == f"{res.expected_rank:,}"
    assert metric(at, "Rank with the inputs kept") == f"{res.expected_rank_with_inputs:,}"
    bars = chart(at, "analogy_chart")["data"][0]
    assert bars["customdata"] == [n.id for n in res.top]
    assert res.expected_rank > 10                             # half-works: Rome is not in the top 10


def test_preset_button_fills_the_analogy(open_page, lm):
    # English: AppTest re-formats translated radio options outside the script run (in English).
    at = open_page("embeddings", lang="en")
    n = next(i for i, ex in enumerate(ANALOGIES) if ex[0] == "walking")
    at.button(key=f"analogy_{n}").click().run()
    assert not at.exception
    assert [at.text_input(key=k).value for k in ("a", "b", "c", "expect")] == list(ANALOGIES[n])
    res = E.analogy(lm, " walking", " walk", " swim", k=10, expected=" swimming")
    assert chart(at, "analogy_chart")["data"][0]["customdata"] == [t.id for t in res.top]


def test_bad_analogy_words_warn(open_page):
    at = open_page("embeddings", lang="en", params={"a": "antidisestablishment", "b": "", "expect": "xyzzyq"})
    assert not at.exception
    texts = " ".join(w.value for w in at.warning)
    assert "antidisestablishment" in texts
    assert not any(c.proto.id.endswith("-analogy_chart") for c in at.get("plotly_chart"))


def test_map_choices_and_bad_values(open_page, lm):
    at = open_page("embeddings", lang="en", params={"map": "time", "dims": "3"})
    data = chart(at, "map_chart")["data"]
    assert {trace["type"] for trace in data} == {"scatter3d"}
    n_points = sum(len(arr(trace["x"])) for trace in data)
    assert n_points == sum(len(GROUPS[g]) for g in MAPS["time"])
    ids = [lm.encode(" " + w)[0] for g in MAPS["time"] for w in GROUPS[g]]
    p = E.pca(lm.decoder.W_E.detach().cpu()[ids], 3)
    first = data[0]
    xs = arr(first["x"]).tolist()
    assert xs == pytest.approx(p.coords[: len(xs), 0].tolist(), abs=1e-4)
    at = open_page("embeddings", lang="en", params={"map": "<script>", "dims": "9", "k": "999", "pos": "abc"})
    assert not at.exception
    assert at.slider(key="k").value == 30
    notes = " ".join(w.value for w in at.warning)
    assert "map=<script>" in notes and "dims=9" in notes and "k=999" in notes


def test_map_of_the_prompt_and_capitals_lines(open_page, lm):
    at = open_page("embeddings", lang="en", prompt="one two two three", params={"map": "prompt"})
    data = chart(at, "map_chart")["data"]
    assert sum(len(arr(t["x"])) for t in data) == 3               # repeated tokens are placed once
    at = open_page("embeddings", lang="en")
    lines = [t for t in chart(at, "map_chart")["data"] if t.get("mode") == "lines"]
    assert len(lines) == len(GROUPS["countries"])            # one line from each country to its capital


def test_order_blindness(open_page, lm):
    at = open_page("embeddings", lang="en")
    assert at.success, "the default pair looks up the same rows"
    heat = arr(chart(at, "order_chart")["data"][0]["z"]).tolist()
    ones = [(r, c) for r, row in enumerate(heat) for c, v in enumerate(row) if v > 0.99999]
    assert len(ones) == len(lm.encode("The dog bites the man."))   # a permutation
    at = open_page("embeddings", lang="en", params={"order_b": "dog bites man"})
    assert not at.exception and not at.success and at.warning


def test_empty_prompt(open_page):
    at = open_page("embeddings", lang="zh-Hant", prompt="")
    assert not at.exception and at.info and not at.get("plotly_chart")


def prompt_cosines(lm, text: str):
    toks = lm.tokenize(text)
    return toks, E.cosine_matrix(lm.decoder.W_E.detach().cpu()[[t.id for t in toks]])


def test_try_this_claims_hold_on_the_table(lm):
    for lang in i18n.LANGS:
        cat = i18n.catalog(lang)
        # 1. each word's closest neighbour in the matrix is of its own kind; numbers are far from the calendar
        toks, cos = prompt_cosines(lm, cat["embeddings.try.1.prompt"])
        kind = {w: g for g in ("days", "months", "numbers") for w in GROUPS[g]}
        kinds = [kind[t.text.strip()] for t in toks]
        for i in range(len(toks)):
            others = [j for j in range(len(toks)) if j != i]
            assert kinds[max(others, key=lambda j: float(cos[i, j]))] == kinds[i]
        numbers = [i for i, k in enumerate(kinds) if k == "numbers"]
        calendar = [i for i, k in enumerate(kinds) if k != "numbers"]
        assert max(float(cos[i, j]) for i in numbers for j in calendar) < 0.1
        # 2. royal words close together, ·the and ·and close together, the groups apart
        toks, cos = prompt_cosines(lm, cat["embeddings.try.2.prompt"])
        at = {t.text: i for i, t in enumerate(toks)}
        royal = [at[w] for w in (" king", " queen", " prince", " princess")]
        function = [at[" the"], at[" and"]]
        within = [float(cos[i, j]) for g in (royal, function) for i in g for j in g if i < j]
        across = [float(cos[i, j]) for i in royal for j in function]
        assert min(within) > 0.4 and max(across) < 0.1 and min(within) > max(across)
        # 3. forms of one word are close; ·cats is closer to ·dogs than to cat
        toks, cos = prompt_cosines(lm, cat["embeddings.try.3.prompt"])
        at = {t.text: i for i, t in enumerate(toks)}
        assert len(set(at)) == 6                                            # six different tokens
        for a, b in (("cat", " cats"), ("cat", " Cat"), (" dog", " dogs"), (" dog", " Dog")):
            assert float(cos[at[a], at[b]]) > 0.5
        assert float(cos[at[" cats"], at[" dogs"]]) > float(cos[at[" cats"], at["cat"]])
        # 4. the same words in another order; only ·The differs from The
        first, second = cat["embeddings.try.4.prompt"].split(". ", 1)
        a, b = [t.text for t in lm.tokenize(first + ".")], [t.text for t in lm.tokenize(" " + second)]
        assert a[0] == "The" and b[0] == " The" and sorted(a[1:]) == sorted(b[1:])
        assert [t.text for t in lm.tokenize(cat["embeddings.try.4.prompt"])] == a + b
        # 5. Chinese: the second sentence has exactly the first one's tokens, reordered, all byte pieces but 人 and 。
        text = cat["embeddings.try.5.prompt"]
        half = text.index("。") + 1
        ids_a, ids_b = lm.encode(text[:half]), lm.encode(text[half:])
        assert sorted(ids_a) == sorted(ids_b) and ids_a != ids_b
        assert lm.encode(text) == ids_a + ids_b
        assert any(t.is_partial for t in lm.tokenize(text))


@pytest.mark.parametrize("lang", ["zh-Hant", "zh-Hans"])
def test_chinese_order_defaults_are_the_chinese_pair(open_page, lang):
    at = open_page("embeddings", lang=lang, model=SMOL)
    assert not at.exception
    assert at.text_input(key="order_a").value == "狗咬人。" and at.text_input(key="order_b").value == "人咬狗。"
    assert at.success                                                        # same rows, another order
    at = open_page("embeddings", lang=lang, model=GEMMA)                     # Gemma: the seed's 我吃魚／魚吃我
    fish = "魚" if lang == "zh-Hant" else "鱼"
    assert at.text_input(key="order_a").value == f"我吃{fish}。" and at.text_input(key="order_b").value == f"{fish}吃我。"
    assert at.success and not at.exception


def test_three_d_map_labels_groups_not_points(open_page):
    at = open_page("embeddings", lang="en", params={"map": "time", "dims": "3"})
    spec = chart(at, "map_chart")
    labels = [a["text"] for a in spec["layout"]["scene"]["annotations"]]
    assert labels == ["<b>numbers</b>", "<b>days</b>", "<b>months</b>"]
    assert all(trace["mode"] == "markers" for trace in spec["data"])
    assert spec["layout"]["scene"]["xaxis"]["title"]["text"].startswith("PC1 (")


def test_chinese_prompt_reads_as_characters(open_page, lm):
    at = open_page("embeddings", lang="zh-Hant", prompt="我吃魚，魚吃我。", model=SMOL)
    assert not at.exception
    options = at.selectbox(key="pos").options
    assert options[:3] == ["0: 我¹", "1: 我²", "2: 吃¹"]
    at = open_page("embeddings", lang="en", prompt="cat cats Cat dog dogs Dog")
    heat = chart(at, "prompt_cosines")["data"][0]
    cells = [cell for row in heat["text"] for cell in row]
    assert heat["text"][0][0] == "1" and all("0." not in cell for cell in cells)   # .59, not 0.59
    z = arr(heat["z"])
    assert heat["text"][0][1] == f"{z[0][1]:.2f}".replace("0.", ".", 1)


# --------------------------------------------------------------------------- Gemma 3 270M

def test_gemma_page_says_the_first_block_reads_the_scaled_row(open_page, gemma):
    import math
    at = open_page("embeddings", lang="en", prompt="The cat sat", model=GEMMA)
    assert not at.exception, [e.value for e in at.exception]
    ids = gemma.encode("The cat sat")
    row = gemma.decoder.W_E.detach().cpu()[ids[1]].float()
    scale = math.sqrt(gemma.cfg.d_model)
    info = " ".join(i.value for i in at.info)
    assert says(info, "√{} ≈ {:.2f}", gemma.cfg.d_model, scale)
    assert says(info, "of length {:.3f}, reaches the first block (hook_embed) with length {:.3f}",
                float(row.norm()), float(row.norm()) * scale)
    run = gemma.run(ids, names=["hook_embed"])                  # what hook_embed really holds
    assert float(run.cache["hook_embed"][0, 1].norm()) == pytest.approx(float(row.norm()) * scale, rel=1e-5)
    text = "\n".join(m.value for m in at.markdown)
    assert says(text, "enters the model with length {:.2f}", float(row.norm()) * scale)
    assert f"Here $V$ = {gemma.cfg.vocab_size:,} and $d$ = {gemma.cfg.d_model}." in text
    # the strip shows the row as stored (W_E), not the scaled one
    strip = chart(at, "row_strip")["data"][0]
    torch.testing.assert_close(torch.tensor(arr(strip["z"])[0]), row, atol=1e-6, rtol=0)
    # SmolLM2 has no scale and says nothing of one
    smol = open_page("embeddings", lang="en", prompt="The cat sat", model=SMOL)
    assert not any("hook_embed" in i.value for i in smol.info)


def test_gemma_bad_input_is_handled(open_page):
    for prompt in ["x", "<bos>", "\U00040000\x00", "貓" * 200]:
        at = open_page("embeddings", lang="zh-Hant", prompt=prompt, model=GEMMA)
        assert not at.exception, (prompt[:10], [e.value for e in at.exception])
    at = open_page("embeddings", lang="en", model=GEMMA,
                   params={"a": "國王", "b": "", "word": "antidisestablishmentarianism", "pos": "999", "k": "-4"})
    assert not at.exception and at.warning


def gemma_nearest_in_prompt(lm, text: str) -> dict[str, str]:
    """Each token of text (<bos> left out) -> its most alike other token of the prompt."""
    toks, cos = prompt_cosines(lm, text)
    out = {}
    for i in range(1, len(toks)):
        others = [j for j in range(1, len(toks)) if toks[j].id != toks[i].id]
        out[toks[i].text] = toks[max(others, key=lambda j: float(cos[i, j]))].text
    return out


@pytest.mark.parametrize("lang", list(i18n.LANGS))
def test_gemma_try_this_claims_hold(gemma, lang):
    cat = i18n.catalog(lang)
    kinds = {**{w: g for g in ("days", "months", "numbers") for w in GROUPS[g]}}
    groups_zh = [set("一二三"), set("貓狗魚猫鱼"), set("紅藍綠红蓝绿")]
    checked = 0
    for n in range(1, 7):
        prompt = cat[f"embeddings.gemma.try.{n}.prompt"]
        toks = gemma.tokenize(prompt)[1:]
        nearest = gemma_nearest_in_prompt(gemma, prompt)
        if prompt.startswith("Monday"):              # each word's closest is of its own kind
            assert all(kinds[a.strip()] == kinds[b.strip()] for a, b in nearest.items())
        elif prompt.startswith("The king"):          # royal with royal; The/·the/·and with each other
            royal = {" king", " queen", " prince", " princess"}
            function = {"The", " the", " and"}
            for a, b in nearest.items():
                if a in royal:
                    assert b in royal
                elif a in function:
                    assert b in function
        elif prompt.startswith("cat cats"):          # forms close; ·cats closer to ·dogs than to cat
            toks, cos = prompt_cosines(gemma, prompt)
            at = {t.text: i for i, t in enumerate(toks)}
            assert len(set(at)) == 7                                          # <bos> and six tokens
            for a, b in (("cat", " cats"), ("cat", " Cat"), (" dog", " dogs"), (" dog", " Dog")):
                assert float(cos[at[a], at[b]]) > 0.5
            assert float(cos[at[" cats"], at[" dogs"]]) > float(cos[at[" cats"], at["cat"]])
        elif prompt.startswith("The dog"):           # same words reordered; only ·The differs from The
            first, second = prompt.split(". ", 1)
            a = [t.text for t in gemma.tokenize(first + ".")[1:]]
            b = [t.text for t in gemma.tokenize(" " + second)[1:]]
            assert a[0] == "The" and b[0] == " The" and sorted(a[1:]) == sorted(b[1:])
            assert [t.text for t in toks] == a + b
        elif prompt.startswith("我吃"):               # one token a character; the halves are reorderings
            assert [t.text for t in toks] == list(prompt)
            half = prompt.index("，")
            assert sorted(prompt[:half]) == sorted(prompt[half + 1:-1])
        elif prompt == "貓猫魚鱼狗":                   # each form's closest is its other form
            assert [t.text for t in toks] == list(prompt)
            assert (nearest["貓"], nearest["猫"], nearest["魚"], nearest["鱼"]) == ("猫", "貓", "鱼", "魚")
        elif prompt.startswith("一二三"):              # three groups: numbers, animals, colours
            assert [t.text for t in toks] == list(prompt)
            for a, b in nearest.items():
                assert any(a in g and b in g for g in groups_zh), (a, b)
        else:
            raise AssertionError(f"no check for {prompt!r}")
        checked += 1
    assert checked == 6
