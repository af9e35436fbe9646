"""The feed-forward lesson page: runs in three languages and with odd prompts, binds its
controls to the URL, and draws numbers that match the model."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import torch

from course import i18n
from course.i18n import join_list
from course.tokens import md_label
from lesson_model.analysis import neurons as N
from lesson_model.analysis import params as P
from tests._apptest import arr, chart, errors, says

PAGE = "ffn"


CHARTS = ["activation_chart", "swiglu_chart", "singular_chart", "neuron_bars", "neuron_strip", "vocab_chart",
          "params_chart", "moe_chart"]


MODELS = {"smollm2-135m": "lm", "gemma-3-270m": "gemma"}


@pytest.mark.parametrize("lang,model", [("en", "smollm2-135m"), ("zh-Hant", "gemma-3-270m"), ("zh-Hans", "smollm2-135m"),
                                        ("en", "gemma-3-270m")])
def test_default_prompt_every_language(open_page, models, lang, model):
    lm = models[model]
    at = open_page(PAGE, lang=lang, model=model)
    assert not errors(at)
    for key in CHARTS:
        chart(at, key)
    # the neuron bars are the model's own top activations at the default layer and last token
    prompt = i18n.catalog(lang)["prompt.default"]
    layer = at.slider(key="layer").value
    run = lm.run(prompt, names=N.neuron_names(layer))
    top = N.neuron_top_activations(lm, run, layer, -1, k=12)
    bars = chart(at, "neuron_bars")["data"][0]
    assert bars["x"] == pytest.approx([a.value for a in top], abs=1e-4)
    # the neuron shown first: of these, the one that pushes the model's next token up the most
    assert layer == lm.cfg.n_layers * 7 // 8                                  # the default: late in the model
    run_effect = lm.run(prompt, names=N.neuron_effect_names(lm, layer))
    predicted = int(run_effect.logits[0, -1].argmax())
    pushes = N.neuron_effects_on_token(lm, run_effect, layer, predicted, -1)
    best = max(top, key=lambda a: float(pushes[a.neuron])).neuron
    assert at.selectbox(key="neuron").value == str(best)
    # the neuron strip shows that neuron on every token
    strip = chart(at, "neuron_strip")["data"][0]
    cells = [v for row in strip["z"] for v in row if v is not None]
    assert cells == pytest.approx(N.neuron_activations(lm, run, layer, best).tolist(), abs=1e-4)
    # the notice and the math are filled with numbers from this run
    notice = " ".join(m.value for m in at.markdown)
    assert f"{top[0].value:+.2f}" in notice


def test_numbers_on_the_page(open_page, lm):
    at = open_page(PAGE, lang="en")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["MLP parameters per block"] == "2,654,208"
    assert metrics["Attention parameters per block"] == "884,736"
    assert metrics["Parameters in total"] == "46.70 B"
    assert metrics["Parameters used per token"] == "12.88 B"
    # the singular values are those of the layer's up_proj @ down_proj
    layer = at.slider(key="layer").value
    s = chart(at, "singular_chart")["data"][0]["y"]
    c = N.linear_collapse(lm, layer)
    assert len(s) == lm.cfg.d_model
    assert s[:5] == pytest.approx(c.singular_values[:5].tolist(), rel=1e-4)
    # the parameter chart's rows add up to 100%
    data = chart(at, "params_chart")["data"]
    for row in range(4):
        assert sum(trace["x"][row] for trace in data) == pytest.approx(100)


@pytest.mark.parametrize("prompt,model", [("貓坐在墊子上，因為牠累了。", "smollm2-135m"), ("貓坐在墊子上，因為它累了。", "gemma-3-270m"),
                                          ("🐱 cats 😀 and 🐶 dogs 👍🏽", "gemma-3-270m")])
def test_chinese_and_emoji_prompts(open_page, models, prompt, model):
    lm = models[model]
    at = open_page(PAGE, lang="zh-Hant", prompt=prompt, model=model)
    assert not errors(at)
    strip = chart(at, "neuron_strip")["data"][0]
    n_tokens = len(lm.tokenize(prompt))
    assert sum(v is not None for row in strip["z"] for v in row) == n_tokens
    assert at.selectbox(key="pos").value == n_tokens - 1


def test_empty_prompt_shows_a_hint(open_page):
    at = open_page(PAGE, lang="zh-Hans", prompt="")
    assert not errors(at)
    assert at.info and i18n.catalog("zh-Hans")["lesson.empty_prompt"] in [i.value for i in at.info]


def test_url_controls(open_page, lm):
    prompt = "The cat sat on the mat"
    run = lm.run(prompt, names=N.neuron_names(5))
    second = N.neuron_top_activations(lm, run, 5, 2, k=12)[1].neuron
    at = open_page(PAGE, lang="en", prompt=prompt,
                   params={"layer": 5, "pos": 2, "neuron": second, "experts": 4, "active": 1})
    assert not errors(at) and not at.warning
    assert at.slider(key="layer").value == 5 and at.selectbox(key="pos").value == 2
    assert at.selectbox(key="neuron").value == str(second)
    strip = [v for row in chart(at, "neuron_strip")["data"][0]["z"] for v in row if v is not None]
    assert strip == pytest.approx(N.neuron_activations(lm, run, 5, second).tolist(), abs=1e-4)
    metrics = {m.label: m.value for m in at.metric}
    moe = P.count_params(P.with_experts(P.PRESETS["mixtral-8x7b"], 4, 1))
    assert metrics["Parameters in total"] == f"{moe.total / 1e9:.2f} B"
    assert metrics["Parameters used per token"] == f"{moe.active / 1e9:.2f} B"
    url = {key: (v[-1] if isinstance(v, list) else v) for key, v in at.query_params.items()}
    # In Chinese the calculator counts in 億 / 亿 (1e8), never in B, in its metrics, caption and chart.
    for lang, unit in (("zh-Hant", "億"), ("zh-Hans", "亿")):
        zh = open_page(PAGE, lang=lang, prompt=prompt, params={"experts": 4, "active": 1})
        cat = i18n.catalog(lang)
        values = {m.label: m.value for m in zh.metric}
        assert values[cat["ffn.moe.total_metric"]] == f"{moe.total / 1e8:.2f} {unit}"
        assert values[cat["ffn.moe.active_metric"]] == f"{moe.active / 1e8:.2f} {unit}"
        bars = chart(zh, "moe_chart")["data"]
        assert sum(arr(bar["y"])[0] for bar in bars) == pytest.approx(moe.total / 1e8)
        assert all(unit in bar["hovertemplate"] and " B<" not in bar["hovertemplate"] for bar in bars)
        caption = " ".join(c.value for c in zh.caption)
        assert f"{P.PUBLISHED_TOTALS['mixtral-8x7b'] / 1e8:.1f} {unit}" in caption and " B" not in caption
    assert url["layer"] == "5" and url["pos"] == "2" and url["experts"] == "4" and url["active"] == "1"


def test_bad_url_values_are_clamped_with_a_note(open_page):
    at = open_page(PAGE, lang="en", prompt="The cat sat",
                   params={"layer": 99, "pos": "abc", "neuron": "huge", "experts": 0, "active": 7})
    assert not errors(at)
    assert at.slider(key="layer").value == 29
    assert at.number_input(key="experts").value == 1
    assert at.selectbox(key="active").value == 1        # one expert: the only choice, shown disabled
    notes = " ".join(w.value for w in at.warning)
    for param in ("layer=99", "pos=abc", "neuron=huge", "experts=0", "active=7"):
        assert param in notes


def page_constant(name: str):
    """A module-level constant of the lesson's cache module (course/cache/ffn.py), read without running the page."""
    tree = ast.parse((Path(__file__).resolve().parent.parent / "course" / "cache" / "ffn.py").read_text("utf-8"))
    return next(ast.literal_eval(node.value) for node in tree.body
                if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == name)


def md_texts(at) -> list[str]:
    return [m.value for m in at.markdown]


NEGATIVE_CLAIM = {"en": "fires negative", "zh-Hant": "激活值為負", "zh-Hans": "激活值为负"}


@pytest.mark.parametrize("lang,model", [("en", "smollm2-135m"), ("en", "gemma-3-270m"), ("zh-Hant", "gemma-3-270m"),
                                        ("zh-Hans", "gemma-3-270m")])
def test_try_this_neurons_are_computed_from_the_model(open_page, models, lang, model):
    """correctness review row 10, per model and language: each Try-this names the neuron that
    really pushes the model's answer most (of every layer's 12 most active at the last token)
    and its real top pushes, computed here by hand from the weights (through ln2_post, with its
    scale frozen, on Gemma); a "why" that promises a negative neuron gets one."""
    lm = models[model]
    TRY_TOKENS = page_constant("TRY_TOKENS")
    at = open_page(PAGE, lang=lang, model=model)
    assert not errors(at)
    whys = md_texts(at)
    catalog = i18n.catalog(lang)
    tree = "ffn.gemma.try" if model == "gemma-3-270m" else "ffn.try"
    numbers = sorted({int(k.split(".")[-2]) for k in catalog if k.startswith(tree + ".") and k.endswith(".prompt")})
    assert numbers == [1, 2, 3, 4]
    if lang != "en":
        assert all(any("\u4e00" <= ch <= "\u9fff" for ch in catalog[f"{tree}.{n}.prompt"]) for n in (1, 3, 4))
    d = lm.decoder
    for n in numbers:
        prompt = catalog[f"{tree}.{n}.prompt"]
        run = lm.run(prompt, names=sorted({x for L in range(lm.cfg.n_layers) for x in N.neuron_effect_names(lm, L)}))
        answer = int(run.logits[0, -1].argmax())
        s = float(run.cache["ln_final.hook_scale"][0, -1, 0])
        found = []
        for layer in range(lm.cfg.n_layers):
            block = d.blocks[layer]
            post = run.cache[f"blocks.{layer}.mlp.hook_post"][0, -1]
            with torch.inference_mode():
                per_unit = block.mlp.down_proj * d.ln_final.weight                  # [d_ff, d_model]
                scale = s
                if lm.cfg.post_norms:
                    per_unit = per_unit * block.ln2_post.weight
                    scale = s * float(run.cache[f"blocks.{layer}.ln2_post.hook_scale"][0, -1, 0])
                pushes = post * (per_unit @ d.W_U[:, answer]) / scale                # [d_ff]
                top = torch.topk(post.abs(), 12).indices.tolist()
                best = max(top, key=lambda i: float(pushes[i]))
                found.append((float(pushes[best]), layer, best, float(post[best]),
                              post[best] * (per_unit[best] @ d.W_U) / scale))
        push, layer, best, value, effect = max(found, key=lambda f: f[0])
        pushed = torch.topk(effect, TRY_TOKENS).indices.tolist()
        why = next(w for w in whys if w.startswith(catalog[f"{tree}.{n}.why"]))
        assert md_label(lm.token_text(answer)) in why and push > 0
        assert re.search(rf"(?<!\d){best}(?!\d)", why) and re.search(rf"(?<!\d){layer}(?!\d)", why), why
        sep = ", " if lang == "en" else "、"
        assert sep.join(md_label(lm.token_text(i)) for i in pushed) in why, (why, [lm.token_text(i) for i in pushed])
        assert (catalog["ffn.try_detail.negative"] in why) == (value < 0)
        if NEGATIVE_CLAIM[lang] in catalog[f"{tree}.{n}.why"]:
            assert value < 0, (n, why)


def test_collapse_numbers_and_claims_match_the_model(open_page, lm):
    """correctness review row 1: the gated MLP without SiLU is quadratic (doubling 4) and not
    additive, the plain up-down map is linear; the page's table and notice say so with the
    real layer's numbers (computed here by hand)."""
    prompt, layer = "The cat sat on the mat", 10
    at = open_page(PAGE, lang="en", prompt=prompt, params={"layer": layer})
    assert not errors(at)
    run = lm.run(prompt, names=N.mlp_names(layer))
    block = lm.decoder.blocks[layer]
    x = (run.cache[f"blocks.{layer}.ln2.hook_normalized"][0] * block.ln2.weight).double()
    G, U, D = (m.detach().double() for m in (block.mlp.gate_proj, block.mlp.up_proj, block.mlp.down_proj))
    a, b = x[-1], x[-2]
    maps = {"plain": lambda v: v @ U @ D, "bilinear": lambda v: ((v @ G) * (v @ U)) @ D,
            "real": lambda v: (torch.nn.functional.silu(v @ G) * (v @ U)) @ D}
    gap = {k: float((f(a + b) - f(a) - f(b)).norm() / f(a + b).norm()) for k, f in maps.items()}
    double = {k: float(f(2 * a).norm() / f(a).norm()) for k, f in maps.items()}
    assert double["bilinear"] == pytest.approx(4, abs=1e-6) and gap["bilinear"] > 0.05 and gap["plain"] < 1e-6
    table = next(m for m in md_texts(at) if m.startswith("|map|"))
    rows = {k: next(line for line in table.splitlines() if i18n.catalog("en")[f"ffn.collapse.map.{k}"].format(act="SiLU", fn="silu") in line)
            for k in maps}
    assert f"|{gap['bilinear']:.1%}|{double['bilinear']:.2f}|" in rows["bilinear"]
    assert f"|{gap['real']:.1%}|{double['real']:.2f}|" in rows["real"]
    assert rows["plain"].endswith(f"|{double['plain']:.2f}|") and "rounding" in rows["plain"]
    notice = next(m for m in md_texts(at) if m.startswith("- "))
    assert "does not collapse even without SiLU" in notice and says(notice, "by {:.1%}", gap["bilinear"])
    assert "x · up_proj · down_proj: zero" not in " ".join(md_texts(at))        # the old stand-in claim is gone
    captions = " ".join(c.value for c in at.caption)
    assert "quadratic in x" in captions


def test_one_token_prompt_says_the_effect_is_negligible(open_page, lm):
    """correctness review row 13: on "Hello" no notice says a neuron "pushes up the most by
    +0.00"; it says the effect is negligible and why (the final norm's large s)."""
    at = open_page(PAGE, lang="en", prompt="Hello")
    assert not errors(at)
    notice = next(m for m in md_texts(at) if m.startswith("- "))
    assert "+0.00" not in notice and "-0.00" not in notice
    run = lm.run("Hello", names=["ln_final.hook_scale"])
    s = float(run.cache["ln_final.hook_scale"][0, -1, 0])
    assert "negligible" in notice and f"s = {s:,.1f}" in notice
    assert "b = a here" in " ".join(md_texts(at))                               # a one-token prompt: a and b coincide


@pytest.mark.parametrize("lang", ["zh-Hant", "zh-Hans"])
def test_chinese_prompt_reads_as_characters(open_page, lang):
    """ux review row 10: the token select and the strip show 我¹/我² rather than <E6 88> (SmolLM2's byte pieces)."""
    at = open_page(PAGE, lang=lang, prompt="我吃魚，魚吃我。", model="smollm2-135m")
    assert not errors(at)
    options = at.selectbox(key="pos").options
    assert any("我¹" in o for o in options) and not any("<E6" in o for o in options)
    strip = chart(at, "neuron_strip")["data"][0]
    assert any("我¹" in (cell or "") for row in strip["text"] for cell in row)


def test_gemma_page_names_its_own_activation(open_page, gemma):
    """On Gemma the page says GELU (tanh) / GeGLU in text, formula, diagram and chart, its collapse
    table measures the GeGLU MLP, its metrics count Gemma's tensors, and the default layer is
    computed from the model (it used to fail on a SmolLM2 layer constant)."""
    prompt, layer = "我吃魚，魚吃我。", 9
    at = open_page(PAGE, lang="zh-Hant", prompt=prompt, params={"layer": layer}, model="gemma-3-270m")
    assert not errors(at) and not at.warning
    assert at.slider(key="layer").max == gemma.cfg.n_layers - 1
    text = " ".join(md_texts(at)) + " ".join(c.value for c in at.caption)
    assert "gelu_tanh(g)" in text and "GELU" in text and "silu(" not in text and "SiLU 之後" not in text
    assert "GeGLU" in text
    metrics = {m.label: m.value for m in at.metric}
    cat = i18n.catalog("zh-Hant")
    assert metrics[cat["ffn.metric.mlp_layer"]] == f"{3 * 640 * 2048:,}"
    assert metrics[cat["ffn.metric.attn_layer"]] == f"{2 * 640 * 1024 + 2 * 640 * 256:,}"
    assert chart(at, "swiglu_chart")["layout"]["title"]["text"] == "GeGLU：gelu_tanh(gate) × up"
    diagram = next(g for g in at.get("graphviz_chart"))
    assert "GELU" in diagram.proto.spec and "ln2_post" not in diagram.proto.spec and cat["ffn.diagram.post_norm"].split("\n")[0] in diagram.proto.spec
    # the table's real map is the GeGLU MLP, by hand
    run = gemma.run(prompt, names=N.mlp_names(layer))
    block = gemma.decoder.blocks[layer]
    x = (run.cache[f"blocks.{layer}.ln2.hook_normalized"][0] * block.ln2.weight).double()
    G, U, D = (m.detach().double() for m in (block.mlp.gate_proj, block.mlp.up_proj, block.mlp.down_proj))
    real = lambda v: (torch.nn.functional.gelu(v @ G, approximate="tanh") * (v @ U)) @ D      # noqa: E731
    a, b = x[-1], x[-2]
    gap = float((real(a + b) - real(a) - real(b)).norm() / real(a + b).norm())
    table = next(m for m in md_texts(at) if m.startswith("|"))
    row = next(line for line in table.splitlines() if "gelu_tanh(x·gate_proj)" in line)
    assert f"|{gap:.1%}|" in row
    # the neuron strip: one cell per Gemma token (one character each here)
    strip = chart(at, "neuron_strip")["data"][0]
    assert sum(v is not None for row in strip["z"] for v in row) == len(gemma.tokenize(prompt))


def test_strip_rows_hold_their_widest_label_and_bar_values_have_room():
    """Layout arithmetic of two FFN charts (no model): the token strip puts fewer cells in a
    row when a label is wide (a 10-cell row cut "·because" in presenter mode), and the neuron
    bars' axis leaves room beyond each bar for its value (a -5.73 ran into the tick labels)."""
    from course.figures import ffn as F

    assert F.strip_per_row(["·a", "·on"] * 8) == 10
    wide = F.strip_per_row(["·a", "·because"])
    assert 4 <= wide < 10
    assert F.strip_per_row(["因為它們"]) == wide        # 4 CJK characters are as wide as 8 Latin ones
    assert F.strip_per_row(["x" * 40]) == 4
    fig = F.neuron_bar_figure(lambda key, **kw: key, [1, 2, 3], [8.29, -5.73, 2.5], 1, "cat")
    lo, hi = fig.to_dict()["layout"]["xaxis"]["range"]
    span = 8.29 + 5.73
    assert lo <= -5.73 - 0.3 * span and hi >= 8.29 + 0.3 * span
    lo, hi = F.neuron_bar_figure(lambda key, **kw: key, [1, 2], [3.0, 1.0], 1, "cat").to_dict()["layout"]["xaxis"]["range"]
    assert -0.1 < lo < 0 and hi >= 3.0 * 1.3           # all positive: no empty room on the left
