"""AppTests of the generation lesson: stepping, shared links, stopping, the KV cache, timing,
speculative decoding, languages and bad URL values."""

from __future__ import annotations

import dataclasses
import json

import pytest

from course import i18n
from course.text import md_escape, shorten
from course.tokens import label, readable_texts
from lesson_model.analysis import generation_demo as gd
from lesson_model.analysis import kv_memory as K
from lesson_model.speculative import speculative_generate
from tests._apptest import direction_leaks

PROMPT = "The capital of France is"
SMOLLM2, GEMMA = "smollm2-135m", "gemma-3-270m"
FIXTURE = {SMOLLM2: "lm", GEMMA: "gemma"}


def url(at, key: str):
    value = at.query_params.get(key)
    return value[-1] if isinstance(value, list) else value


def by_title(at, text: str) -> dict:
    for c in at.get("plotly_chart"):
        spec = json.loads(c.proto.spec)
        titles = [spec["layout"].get("title", {}).get("text", "")]
        titles += [a.get("text", "") for a in spec["layout"].get("annotations", [])]   # subplot titles
        titles += [spec["layout"].get(ax, {}).get("title", {}).get("text", "") for ax in ("xaxis", "yaxis")]
        if any(text in title.replace("<br>", " ") for title in titles):     # titles wrap
            return spec
    raise AssertionError(f"no chart titled {text!r}")


def table_tokens(at) -> list[str]:
    df = at.dataframe[0].value
    return list(df.iloc[:, 1])


def expected(lm, prompt, n, **kw) -> list:
    return list(lm.generate_steps(prompt, n, **kw))


@pytest.mark.parametrize("lang,model", [("en", SMOLLM2), ("zh-Hant", GEMMA), ("zh-Hans", GEMMA), ("en", GEMMA),
                                        ("zh-Hant", SMOLLM2)])
def test_opens_at_step_zero_in_every_language(open_page, request, lang, model):
    lm = request.getfixturevalue(FIXTURE[model])
    at = open_page("generation", lang=lang, model=model)
    assert not at.exception, [e.value for e in at.exception]
    cat = i18n.catalog(lang)
    assert at.title[0].value == cat["nav.generation"]
    assert at.slider(key="step").value == 0
    assert at.button(key="gen_back").disabled and not at.button(key="gen_next").disabled
    labels = {b.label for b in at.button}
    assert {cat["generation.btn.next"], cat["generation.btn.run"], cat["generation.btn.back"],
            cat["generation.btn.reset"]} <= labels
    assert len(at.get("plotly_chart")) == 1            # the first candidates only; speculative decoding off
    preview = by_title(at, cat["generation.cand.title_first"])
    probs = lm.run(cat["prompt.default"], names=[]).logits[0, -1].softmax(-1)
    assert [x / 100 for x in preview["data"][0]["x"]] == pytest.approx(probs.topk(10).values.tolist(), abs=1e-5)
    assert url(at, "step") is None


def test_next_run_back_reset(open_page, lm):
    at = open_page("generation", prompt=PROMPT, params={"temperature": "0", "max_new": "5"})
    steps = expected(lm, PROMPT, 5, temperature=0)
    at.button(key="gen_next").click().run()
    assert not at.exception
    assert at.slider(key="step").value == 1 and url(at, "step") == "1"
    assert table_tokens(at) == [label(steps[0].text)]
    cand = by_title(at, "candidates at this step")
    assert len(cand["data"]) == 1                     # greedy: the model's bars only, chosen one marked
    at.button(key="gen_run").click().run()
    assert at.slider(key="step").value == 5 and url(at, "step") == "5"
    assert table_tokens(at) == [label(s.text) for s in steps]
    assert any("limit of 5 new tokens" in w.value for w in at.warning)
    assert at.button(key="gen_next").disabled and at.button(key="gen_run").disabled
    at.button(key="gen_back").click().run()
    assert at.slider(key="step").value == 4 and len(table_tokens(at)) == 4
    at.button(key="gen_reset").click().run()
    assert at.slider(key="step").value == 0 and url(at, "step") is None


def test_a_shared_link_reproduces_the_same_sampled_step(open_page, lm):
    params = {"temperature": "0.9", "top_p": "0.95", "seed": "7", "max_new": "8", "step": "6"}
    steps = expected(lm, PROMPT, 8, temperature=0.9, top_p=0.95, seed=7)
    at = open_page("generation", prompt=PROMPT, params=params)
    assert not at.exception
    assert at.slider(key="step").value == 6
    assert table_tokens(at) == [label(s.text) for s in steps[:6]]
    again = open_page("generation", prompt=PROMPT, params=params)
    assert table_tokens(again) == table_tokens(at)
    cand = by_title(at, "candidates at this step")
    assert len(cand["data"]) == 2                     # sampled: the model's and the settings' probabilities


def test_stops_at_eos_and_says_so(open_page, lm):
    prompt = lm.chat_template([{"role": "user", "content": "What is 2+2?"}])
    steps = expected(lm, prompt, 30, temperature=0)
    assert steps[-1].stop == "eos"
    at = open_page("generation", prompt=prompt, params={"temperature": "0", "max_new": "30", "step": "30"})
    assert not at.exception
    assert at.slider(key="step").value == len(steps)
    assert any("end-of-sequence token" in s.value for s in at.success)
    assert at.button(key="gen_next").disabled
    assert any("its end-of-sequence token" in m.value for m in at.markdown)


def test_kv_cache_grid_and_numbers(open_page, lm):
    at = open_page("generation", prompt=PROMPT, params={"temperature": "0", "max_new": "6", "step": "4"})
    assert not at.exception
    n_prompt = len(lm.encode(PROMPT))
    cached = n_prompt + 3                              # the 4th chosen token enters at the next step
    grid = by_title(at, "What the cache holds")
    z = grid["data"][0]["z"]
    assert len(z) == lm.cfg.n_layers and len(z[0]) == cached
    assert z[0][-1] == 2 and z[0][-2] == 1 and z[0][0] == 0            # new, generated, prompt
    assert grid["data"][1]["x"][0] == pytest.approx(gd.kv_bytes_per_layer(lm.cfg, cached) / 1024)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Positions in the cache"] == str(cached)
    assert metrics["Cache, all layers"] == "{:.4g} {}".format(*K.human_bytes(gd.kv_bytes(lm.cfg, cached)))
    assert metrics["Cache, all layers"].endswith(" KiB")              # binary units, as the heads lesson
    assert metrics["Positions computed this step"] == "1"


def test_timing_cache_on_and_off(open_page):
    at = open_page("generation", prompt=PROMPT, params={"temperature": "0", "max_new": "4", "step": "1"})
    at.button(key="time_button").click().run()
    assert not at.exception
    spec = by_title(at, "time per step")
    on, off = spec["data"][0]["y"], spec["data"][1]["y"]
    assert len(on) == len(off) == 4 and all(v > 0 for v in on + off)
    positions_on, positions_off = spec["data"][2]["y"], spec["data"][3]["y"]
    n = positions_on[0]
    assert positions_on == [n, 1, 1, 1] and positions_off == [n, n + 1, n + 2, n + 3]
    assert any("Identical output" in s.value for s in at.success)


def test_speculative_decoding_section(open_page, lm):
    params = {"temperature": "0", "max_new": "8", "spec": "1", "draft_layers": "27", "draft_len": "3"}
    at = open_page("generation", prompt=PROMPT, params=params)
    assert not at.exception
    result = speculative_generate(lm, PROMPT, 8, draft_layers=27, draft_len=3)
    grid = by_title(at, "the draft's guesses")
    assert len(grid["data"][0]["z"]) == len(result.rounds)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Acceptance rate"] == f"{result.acceptance_rate:.0%}"
    assert metrics["Full-model passes / tokens"] == f"{result.full_passes} / {len(result.new_ids)}"
    assert any("Identical to plain greedy decoding" in s.value for s in at.success)
    # sampled variant: the note about different draws instead of the equality check
    sampled = open_page("generation", prompt=PROMPT, params=dict(params, spec_sample="1", temperature="0.8"))
    assert not sampled.exception
    assert any("different random draws" in i.value for i in sampled.info)


def test_bad_url_values(open_page):
    at = open_page("generation", prompt=PROMPT, params={"step": "99999", "max_new": "0", "draft_layers": "99",
                                                        "draft_len": "x", "temperature": "-3"})
    assert not at.exception
    assert at.number_input(key="max_new").value == 1
    assert at.slider(key="step").value == 1
    assert at.slider(key="draft_layers").value == 29 and at.slider(key="draft_len").value == 4
    notes = " ".join(w.value for w in at.warning)
    for param in ("step=99999", "max_new=0", "draft_layers=99", "draft_len=x", "temperature=-3"):
        assert param in notes
    bad = open_page("generation", prompt=PROMPT, params={"step": "abc"})
    assert not bad.exception and bad.slider(key="step").value == 0
    assert any("step=abc" in w.value for w in bad.warning)


@pytest.mark.parametrize("lang,prompt,model", [("zh-Hant", "從前有一隻小貓，牠", SMOLLM2), ("zh-Hans", "今天天气很好", GEMMA),
                                               ("en", "Pizza 🍕 is", SMOLLM2), ("en", "Pizza 🍕 is", GEMMA)])
def test_chinese_and_emoji_prompts_step(open_page, request, lang, prompt, model):
    lm = request.getfixturevalue(FIXTURE[model])
    at = open_page("generation", lang=lang, prompt=prompt, params={"step": "3", "max_new": "3", "seed": "2"},
                   model=model)
    assert not at.exception
    steps = expected(lm, prompt, 3, temperature=1.0, seed=2)
    assert len(table_tokens(at)) == 3
    # byte pieces read as the characters they belong to, across the prompt and the new tokens
    seq = lm.tokenize(prompt) + lm.tokenizer.tokens([s.token_id for s in steps])
    assert table_tokens(at) == [label(x) for x in readable_texts(seq)[-3:]]


def test_empty_prompt(open_page):
    at = open_page("generation", prompt="")
    assert not at.exception and at.info and not at.get("plotly_chart")


def notices(at) -> str:
    return " ".join(m.value for m in at.markdown)


def try_button(at, n: int):
    return at.button(key=f"try_{n}")


@pytest.mark.parametrize("lang", list(i18n.LANGS))
def test_chat_example_sets_greedy_and_stops_at_eos(open_page, lm, lang):
    """The chat Try-this says the reply ends with <|im_end|> before the limit: the button sets
    greedy decoding, and the model, run as the page runs it, does stop there."""
    cat = i18n.catalog(lang)
    chat = lm.chat_template([{"role": "user", "content": cat["generation.try.chat_question"]}])
    at = open_page("generation", lang=lang, params={"max_new": "10", "step": "3"}, model=SMOLLM2)
    assert lm.tokenizer.chat_template is not None
    assert try_button(at, 2).label == md_escape(shorten(chat, 60))
    try_button(at, 2).click().run()
    assert not at.exception
    assert at.slider(key="temperature").value == 0 and at.number_input(key="max_new").value == 24
    assert at.slider(key="step").value == 0                          # a fresh start on the new prompt
    at.button(key="gen_run").click().run()
    steps = expected(lm, chat, 24, temperature=0)
    assert steps[-1].stop == "eos" and len(steps) < 24                # the claim, from the model itself
    assert steps[-1].token_id in lm.eos_token_ids and lm.token_text(steps[-1].token_id) == "<|im_end|>"
    assert at.slider(key="step").value == len(steps)
    assert at.success and not any(cat["generation.stop.length"][:8] in w.value for w in at.warning)
    assert any(cat["generation.try.chat_why"] in m.value for m in at.markdown)


def test_counting_example_switches_on_speculative_decoding(open_page, lm):
    at = open_page("generation")
    try_button(at, 0).click().run()
    assert not at.exception
    assert at.toggle(key="spec").value and at.slider(key="temperature").value == 0
    prompt = i18n.catalog("en")["generation.try.1.prompt"]
    result = speculative_generate(lm, prompt, 24, draft_layers=26, draft_len=4)
    # "the draft agrees with the full model almost every time ... accepts whole rounds of guesses"
    assert result.acceptance_rate >= 0.9 and any(r.bonus for r in result.rounds)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Acceptance rate"] == f"{result.acceptance_rate:.0%}"
    assert "guessed right most of the time" in notices(at)


def test_pattern_example_greedy_continues_it_and_sampling_wanders(open_page, lm):
    prompt = i18n.catalog("en")["generation.try.3.prompt"]
    greedy = "".join(s.text for s in expected(lm, prompt, 24, temperature=0))
    cycle = " green, blue, red,"
    assert greedy == (cycle * 10)[:len(greedy)] and len(greedy) > 3 * len(cycle)     # exactly the pattern
    sampled = "".join(s.text for s in expected(lm, prompt, 24, temperature=1.0, seed=1))
    assert not (cycle * 10).startswith(sampled)                                       # wanders off it
    at = open_page("generation")
    try_button(at, 3).click().run()
    assert at.slider(key="temperature").value == 0
    at.button(key="gen_run").click().run()
    assert not at.exception
    assert "".join(table_tokens(at)).replace("·", " ") == greedy


def test_long_prompt_continues_from_its_end(open_page, lm):
    prompt = "Once upon a time a fox lived in the woods. " * 30 + "At the end of the story the fox"
    ids = lm.encode(prompt)
    assert len(ids) > 128
    at = open_page("generation", prompt=prompt, params={"temperature": "0", "max_new": "2", "step": "1"})
    assert not at.exception
    steps = expected(lm, ids[-128:], 2, temperature=0)
    assert table_tokens(at)[0] == label(steps[0].text)
    assert "the last 128 tokens of your prompt" in " ".join(c.value for c in at.caption)
    assert any("last 128" in w.value for w in at.warning)


def test_sizes_in_binary_units_and_counts_in_words(open_page, lm):
    at = open_page("generation", prompt=PROMPT, params={"temperature": "0", "max_new": "3", "step": "3"})
    text = notices(at)
    assert "KiB" in text and "MiB" in text and " KB" not in text and " MB" not in text
    per_token = 2 * lm.cfg.n_layers * lm.cfg.n_kv_heads * lm.cfg.d_head * 4
    assert f"adds {per_token / 1024:.4g} KiB" in text
    assert "million multiply-adds" in text
    zh = open_page("generation", lang="zh-Hant", prompt=PROMPT, params={"temperature": "0", "max_new": "3", "step": "3"},
                   model=SMOLLM2)
    assert "億次乘加" in notices(zh) and "百萬" not in notices(zh)
    one = open_page("generation", prompt="Hello", params={"temperature": "0", "max_new": "1", "step": "1"})
    assert not one.exception
    assert "read 1 token " in notices(one) and "1 tokens" not in notices(one)
    assert "limit of 1 new token," in notices(one)


# --- Gemma 3 270M: a base model (no chat format), MQA, sliding-window layers ----------------------

def key(cat: dict, model: str, k: str) -> str:
    """The catalog string the page shows on this model (its variant when the catalog has one)."""
    tag = "gemma" if model == GEMMA else "smollm2"
    return cat.get(f"generation.{tag}.{k}", cat[f"generation.{k}"])


# What greedy decoding writes after each catalog's base-model example on Gemma, as its "why" says.
BASE_CONTINUATION = {"en": "\n\nWhat is 2+2?" * 3, "zh-Hant": "的腿被壓在墊子上，牠的腳下被壓在墊子上，牠的腳下被壓",
                     "zh-Hans": "的腿很长，它很累。\n\n猫的腿很长，它很累。"}


@pytest.mark.parametrize("lang", list(i18n.LANGS))
def test_gemma_base_example_continues_the_text(gemma, lang):
    """The base-model Try-this replaces the chat one on Gemma: greedy decoding continues the text
    (the continuation its "why" quotes), never writes <eos>, and runs to the limit of 24."""
    cat = i18n.catalog(lang)
    assert gemma.tokenizer.chat_template is None and not gemma.bundled.instruct
    assert {gemma.token_text(i) for i in gemma.eos_token_ids} == {"<eos>"}
    prompt = cat["generation.try.base.prompt"]
    steps = expected(gemma, prompt, 24, temperature=0)
    text = "".join(s.text for s in steps)
    assert len(steps) == 24 and steps[-1].stop == "length"
    assert not any(s.token_id in gemma.eos_token_ids for s in steps)
    assert text.startswith(BASE_CONTINUATION[lang]), text
    why = key(cat, GEMMA, "try.base.why")
    if lang == "en":
        assert "`What is 2+2?`" in why
    else:
        quoted = BASE_CONTINUATION[lang].split("。")[0].split("，")[0]
        assert quoted in why
    if lang == "zh-Hant":      # the issue's own example
        assert prompt == "貓坐在墊子上，因為牠累了。貓" and "「牠的腳下被壓在墊子上」" in why


def test_gemma_page_has_no_chat_format_and_says_why(open_page, gemma):
    cat = i18n.catalog("zh-Hant")
    at = open_page("generation", lang="zh-Hant", params={"max_new": "10", "step": "2"})      # Chinese: Gemma
    assert not at.exception, [e.value for e in at.exception]
    note = key(cat, GEMMA, "base_note").format(name=gemma.bundled.name, eos="`<eos>`")
    assert note in [c.value for c in at.caption]
    assert "<|im_end|>" not in notices(at)
    prompt = cat["generation.try.base.prompt"]
    assert try_button(at, 2).label == md_escape(shorten(prompt, 60))
    why = key(cat, GEMMA, "try.base.why").format(name=gemma.bundled.name, eos="`<eos>`")
    assert any(why in m.value for m in at.markdown)
    try_button(at, 2).click().run()
    assert not at.exception
    assert at.slider(key="temperature").value == 0 and at.number_input(key="max_new").value == 24
    at.button(key="gen_run").click().run()
    assert not at.exception
    assert at.slider(key="step").value == 24
    steps = expected(gemma, prompt, 24, temperature=0)
    seq = gemma.tokenize(prompt) + gemma.tokenizer.tokens([s.token_id for s in steps])
    assert table_tokens(at) == [label(x) for x in readable_texts(seq)[-24:]]
    stop = " ".join(w.value for w in at.warning)
    assert "`<eos>`" in stop and "24 個新詞元" in stop                     # the limit, and the model's own end token


def test_gemma_kv_cache_numbers_come_from_its_config(open_page, gemma):
    cfg = gemma.cfg
    assert (cfg.n_layers, cfg.n_kv_heads, cfg.d_head) == (18, 1, 256)
    assert gd.kv_bytes_per_layer(cfg, 1) == 1 * 256 * 2 * 4 and gd.kv_bytes(cfg, 1) == 18 * 2048
    at = open_page("generation", prompt=PROMPT, params={"temperature": "0", "max_new": "6", "step": "4"}, model=GEMMA)
    assert not at.exception
    n_prompt = len(gemma.encode(PROMPT))
    cached = n_prompt + 3
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Positions in the cache"] == str(cached)
    assert metrics["Cache per layer"] == "{:.4g} {}".format(*K.human_bytes(2048 * cached))
    assert metrics["Cache, all layers"] == "{:.4g} {}".format(*K.human_bytes(18 * 2048 * cached))
    grid = by_title(at, "What the cache holds")
    assert len(grid["data"][0]["z"]) == 18 and len(grid["data"][0]["z"][0]) == cached
    text = notices(at)
    assert "Every new token adds 36 KiB" in text and "18 layers" in text
    assert "\\text{1 KV head} \\times 256" in text and "(no MQA)" in text and "4× as much" in text
    assert next(m for m in at.metric if m.label == "Cache per layer").help.startswith("Keys and values: 1 KV head × 256")
    # the sliding window: 15 of 18 layers need only the last 512 positions
    n_sliding = sum(cfg.window(L) == 512 for L in range(18))
    assert n_sliding == len(cfg.sliding_layers) == 15
    windowed = (3 * cfg.max_position + 15 * 512) * 2048
    assert gd.kv_bytes_windowed(cfg, cfg.max_position) == windowed
    line = next(m.value for m in at.markdown if "sliding-window attention" in m.value)
    assert "15 of the 18 layers" in line and "last 512 positions" in line
    assert "{:.4g} {}".format(*K.human_bytes(windowed)) in line
    assert "{:.4g} {}".format(*K.human_bytes(gd.kv_bytes(cfg, cfg.max_position))) in line
    assert "at most 192 positions" in line                              # 128 prompt + 64 new < 512
    smol = open_page("generation", prompt=PROMPT, params={"temperature": "0", "max_new": "2", "step": "1"})
    assert not any("sliding-window" in m.value for m in smol.markdown)   # SmolLM2 has no windows


def test_gemma_counting_example_and_speculative_decoding(open_page, gemma):
    at = open_page("generation", model=GEMMA)
    try_button(at, 0).click().run()
    assert not at.exception
    assert at.toggle(key="spec").value and at.slider(key="temperature").value == 0
    k = at.slider(key="draft_layers").value
    assert k == round(0.85 * gemma.cfg.n_layers) == 15                   # the default follows the model
    prompt = i18n.catalog("en")["generation.try.1.prompt"]
    result = speculative_generate(gemma, prompt, 24, draft_layers=k, draft_len=4)
    assert result.acceptance_rate >= 0.9 and any(r.bonus for r in result.rounds)
    assert result.new_ids == [s.token_id for s in expected(gemma, prompt, 24, temperature=0)]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Acceptance rate"] == f"{result.acceptance_rate:.0%}"
    assert any("Identical to plain greedy decoding" in s.value for s in at.success)
    text = notices(at)
    assert "guessed right most of the time" in text and f"the first {k} of 18 layers" in text
    cost = gd.multiply_adds(dataclasses.replace(gemma.cfg, n_layers=k), len(gemma.encode(prompt)), 1) \
        / gd.multiply_adds(gemma.cfg, len(gemma.encode(prompt)), 1)
    assert f"about {cost:.0%} of a full pass" in text


@pytest.mark.parametrize("lang", list(i18n.LANGS))
def test_gemma_pattern_example_greedy_continues_it_and_sampling_wanders(gemma, lang):
    prompt = key(i18n.catalog(lang), GEMMA, "try.3.prompt")
    if lang != "en":
        assert prompt == "春、夏、秋、冬、春、夏、秋、冬、春、"
    cycle = "夏、秋、冬、春、" if lang != "en" else " green, blue, red,"
    greedy = "".join(s.text for s in expected(gemma, prompt, 24, temperature=0))
    assert greedy == (cycle * 20)[:len(greedy)] and len(greedy) >= 3 * len(cycle)
    sampled = "".join(s.text for s in expected(gemma, prompt, 24, temperature=1.0, seed=1))
    assert not (cycle * 20).startswith(sampled)


BIDI = "Say \u202eevil\u202c twice."      # a right-to-left override and its pop around "evil"


@pytest.mark.parametrize("model,lang", [(SMOLLM2, "en"), (GEMMA, "zh-Hant")])
def test_direction_controls_in_the_prompt_are_shown_not_obeyed(open_page, model, lang):
    """The running text showed "evil" as "live": the prompt's controls are now visible chips inside
    an isolate, and nothing the page drew (text, the steps table, the charts) lets one act."""
    at = open_page("generation", lang=lang, prompt=BIDI, model=model,
                   params={"step": "2", "max_new": "2", "temperature": "0"})
    assert not at.exception, [e.value for e in at.exception]
    assert direction_leaks(at) == []
    shown = "\\<U\\+202E\\>evil\\<U\\+202C\\>"
    running = [m.value for m in at.markdown if shown in m.value]
    # the prompt (after Gemma's <bos>) in grey, isolated as a whole
    assert running and all(f"Say {shown} twice\\.\u2069]" in value and value.startswith(":gray[\u2068")
                           for value in running)
    assert len(table_tokens(at)) == 2
