"""AppTests of the heads / GQA / KV cache lesson: the head measures on the page are the
model's, the controls are bound to the URL, and the KV calculator's arithmetic holds."""

from __future__ import annotations

import pytest

from course.figures.diagrams import STREAMLIT_DOT_TEXT
from course.tokens import readable_texts
from lesson_model.analysis import heads as H
from lesson_model.analysis import kv_memory as K
from tests._apptest import charts, errors, says, text_of

DEFAULT = "The cat sat on the mat because it was tired. The cat"
REPEAT = "Mr and Mrs Dursley were proud. Mr and Mrs Dursley"


def metric(at, label_part: str) -> str:
    return next(m.value for m in at.metric if label_part in m.label)


def test_default_page_measures_are_the_models(open_page, lm):
    at = open_page("heads", lang="en")
    assert not errors(at)
    figs = charts(at)
    assert {"grid_chart", "overview", "open_chart", "slices_chart", "group_chart", "kv_chart"} <= set(figs)
    run = lm.run(DEFAULT, names=H.head_measure_names(lm.cfg.n_layers))
    grids = H.head_measures(lm, run)
    # The overview: 270 squares coloured by the previous-token score (the default measure).
    squares = figs["overview"]["data"][0]
    assert len(squares["x"]) == 270
    assert squares["marker"]["color"] == pytest.approx(grids["previous"].flatten().tolist(), abs=1e-5)
    # The strongest previous-token head is named in What to notice (no tie on this prompt), and
    # it is the head the controls open on (a default chosen from the analysis, not a constant).
    leaders = H.leaders(grids["previous"])
    assert len(leaders) == 1
    layer, head, value = leaders[0]
    assert f"strongest previous-token score on your prompt is {value:.0%}, in head {layer}.{head}:" in text_of(at)
    assert (at.slider(key="layer").value, at.slider(key="head").value) == (layer, head)
    # The grid: the 9 heads of that layer, each the model's pattern.
    heat = [t for t in figs["grid_chart"]["data"] if t["type"] == "heatmap"]
    assert len(heat) == 9
    assert heat[4]["z"][3][1] == pytest.approx(float(run.cache[f"blocks.{layer}.attn.hook_pattern"][0, 4, 3, 1]),
                                               abs=1e-6)
    # GQA: the three heads of the open head's group, same keys; the check is shown.
    g = head // lm.cfg.group_size
    group = figs["group_chart"]["data"]
    assert [t["name"] for t in group] == [f"head {layer}.{h}" for h in range(3 * g, 3 * g + 3)]
    assert f"K/V head {g}" in text_of(at)
    assert "Grouped-query attention: 9 query heads, 3 K/V heads" in text_of(at)
    assert "uses GQA: its 9 query heads share 3 K/V heads" in text_of(at)
    assert "sliding" not in text_of(at) and "kv_layers_chart" not in figs      # SmolLM2 has no window
    # Every head reads the whole vector.
    share = figs["slices_chart"]["data"][0]["z"]
    assert len(share) == 9 and max(max(r) for r in share) < 0.3
    # The KV cache measured during a real generation step: 46,080 bytes per position (fp32).
    assert "46,080" in text_of(at)


def test_measure_and_head_from_the_url(open_page, lm):
    at = open_page("heads", lang="en", prompt=REPEAT, params={"measure": "induction", "layer": "17", "head": "4"})
    assert not errors(at)
    run = lm.run(REPEAT, names=H.head_measure_names(lm.cfg.n_layers))
    induction = H.head_measures(lm, run)["induction"]
    squares = charts(at)["overview"]["data"][0]
    assert squares["marker"]["color"] == pytest.approx(induction.flatten().tolist(), abs=1e-5)
    best = H.top_heads(induction, 1)[0]
    assert best[2] > 0.5                                     # the repeat is picked up by some head
    assert f"the highest induction score is {best[2]:.0%}, in head {best[0]}.{best[1]}:" in text_of(at)
    outline = charts(at)["overview"]["data"][-1]
    assert (outline["x"], outline["y"]) == ([4], [17])       # the open head is outlined


def test_induction_measure_without_repeats(open_page):
    at = open_page("heads", lang="en", prompt="One two three.", params={"measure": "induction"})
    assert not errors(at)
    assert any("No token occurs twice" in i.value for i in at.info)


def test_kv_calculator(open_page):
    at = open_page("heads", lang="en", params={"preset": "llama2_70b", "dtype": "fp16", "ctx": "4096"})
    assert not errors(at)
    assert metric(at, "per token") == "320 KiB"               # 2 * 80 * 8 * 128 * 2 = 327,680 bytes
    assert metric(at, "For 4,096") == "1.25 GiB"
    assert "327,680 bytes per token" in text_of(at)
    at = open_page("heads", lang="en", params={"preset": "llama2_70b", "dtype": "fp16", "kv": "MQA"})
    assert metric(at, "per token") == "40 KiB"                # one K/V head: 327,680 / 8
    series = [t["name"] for t in charts(at)["kv_chart"]["data"]]
    assert any("MQA" in s and "LLaMA-2-70B" in s for s in series)
    at = open_page("heads", lang="en", params={"preset": "gpt3", "dtype": "fp16", "ctx": "2048"})
    assert metric(at, "per token") == "4.5 MiB"
    assert metric(at, "For 2,048") == "9 GiB"
    kv = charts(at)["kv_chart"]["data"]
    gpt3 = next(t for t in kv if t["name"].startswith("GPT-3"))
    i = gpt3["x"].index(2048)
    assert gpt3["y"][i] == pytest.approx(K.kv_bytes(K.PRESETS["gpt3"], 2048, "fp16") / 2**30)


def test_bad_url_values(open_page):
    at = open_page("heads", lang="en", params={"measure": "<script>", "preset": "gpt5", "dtype": "fp8", "ctx": "-5",
                                               "kv": "zzz", "layer": "abc", "head": "99"})
    assert not errors(at)
    assert at.selectbox(key="measure").value == "previous"
    assert at.selectbox(key="preset").value == "this"
    assert at.slider(key="head").value == 8
    assert at.number_input(key="ctx").value == 1
    notes = " ".join(w.value for w in at.warning)
    for param in ("measure=", "preset=gpt5", "dtype=fp8", "ctx=-5", "kv=zzz", "head=99"):
        assert param in notes


@pytest.mark.parametrize("lang,title,model,n_charts", [("zh-Hant", "多頭注意力", None, 7),   # Chinese: Gemma first
                                                        ("zh-Hans", "多头注意力", None, 7),
                                                        ("zh-Hant", "多頭注意力", "smollm2-135m", 6)])
def test_chinese_pages(open_page, lang, title, model, n_charts):
    at = open_page("heads", lang=lang, model=model)
    assert not errors(at)
    assert title in at.title[0].value
    assert len(charts(at)) == n_charts          # Gemma adds the per-layer sliding-window chart


@pytest.mark.parametrize("prompt", ["貓咪貓咪喜歡魚", "🐱🐶🐱🐶 🎉"])
@pytest.mark.parametrize("model", ["smollm2-135m", "gemma-3-270m"])
def test_chinese_and_emoji_prompts(open_page, lm, gemma, prompt, model):
    at = open_page("heads", lang="zh-Hans", prompt=prompt, params={"measure": "induction"}, model=model)
    assert not errors(at)
    n = len((gemma if model == "gemma-3-270m" else lm).tokenize(prompt))
    assert len(charts(at)["open_chart"]["data"][0]["x"]) == n


def test_empty_prompt(open_page):
    at = open_page("heads", lang="en", prompt="")
    assert not errors(at)
    assert not at.get("plotly_chart")


def notices(at) -> str:
    """The What-to-notice bullets (the Markdown block of "- " lines)."""
    return "\n".join(m.value for m in at.markdown if m.value.startswith("- "))


def depth_sentence(lm, prompt: str) -> tuple[float, float]:
    run = lm.run(prompt, names=H.head_measure_names(lm.cfg.n_layers))
    early, late, _ = H.depth_means(H.head_measures(lm, run)["sink"])
    return early, late


@pytest.mark.parametrize("prompt", ["Hello", "a"])
def test_one_token_prompt(open_page, prompt):
    """A one-token prompt: every measure is NaN (they start at the second token). The page
    says so instead of crashing (correctness review row 3) and greys the map."""
    at = open_page("heads", lang="en", prompt=prompt)
    assert not errors(at)
    assert any("single token" in i.value for i in at.info)
    text = notices(at)
    assert "every head of every layer puts 100% of its attention on it" in text
    assert "the first position, a query can see only its own key" in text
    assert "Depth" not in text and "strongest" not in text
    grey = charts(at)["overview"]["data"][1]               # the squares without a value
    assert len(grey["x"]) == 270
    assert "gives exactly the model's patterns" in text_of(at)       # one key: softmax is exactly 1
    assert "1 position in" in text_of(at)
    assert "Try this" in [s.value for s in at.subheader]    # the page ran to the end


@pytest.mark.parametrize("prompt", ["The cat sat on the mat because it was tired. The cat",
                                    "red green blue yellow red green blue yellow"])
def test_depth_sentence_follows_the_numbers(open_page, lm, prompt):
    """"Depth matters" only when the first and last thirds of the layers differ by 10 points
    or more (correctness review row 9); the direction is the numbers' direction."""
    early, late = depth_sentence(lm, prompt)
    text = notices(open_page("heads", lang="en", prompt=prompt))
    assert f"layers 0–9 put {early:.0%} of their attention on the first token" in text
    if late - early >= 0.10:
        assert "Depth matters here" in text and "later layers rest there more" in text
    elif early - late >= 0.10:
        assert "Depth matters here" in text and "early layers rest there more" in text
    else:
        assert "depth makes little difference" in text and "Depth matters" not in text


@pytest.mark.parametrize("prompt,layer", [("The cat sat on the mat because it was tired. The cat", 0),
                                          ("The capital of France is", 0),
                                          ("The capital of France is", 3)])
def test_group_sentence_matches_the_case(open_page, lm, prompt, layer):
    """"Same keys, different queries ... while ..." is a contrast only when the two heads'
    largest weights go to different tokens (correctness review row 22)."""
    run = lm.run(prompt, names=[f"blocks.{layer}.attn.hook_pattern"])
    pattern = run.cache[f"blocks.{layer}.attn.hook_pattern"][0]
    q = pattern.shape[-1] - 1
    contrast = H.group_contrast(pattern[0, q], pattern[1, q])
    text = notices(open_page("heads", lang="en", prompt=prompt, params={"layer": layer, "head": 0}))
    kind = contrast.kind()
    if kind == "different":
        assert contrast.top_a != contrast.top_b
        assert f"gives its largest weight, {contrast.weight_a:.0%}," in text and "while head" in text
    else:
        assert "while head" not in text
    if kind == "amount":
        assert says(text, "not the same amount: {:.0%} and {:.0%}", contrast.weight_a, contrast.weight_b)
    if kind == "alike":
        assert contrast.max_gap < 0.05 and "almost alike" in text


def test_ties_are_not_one_strongest_head(open_page, lm):
    """On a two-token prompt dozens of heads give 100% to the first token: the notice names
    a tie, not "the" strongest head, and says that previous = first token here."""
    prompt = "Hi there"
    run = lm.run(prompt, names=H.head_measure_names(lm.cfg.n_layers))
    sink = H.leaders(H.head_measures(lm, run)["sink"])
    assert len(sink) > 3
    text = notices(open_page("heads", lang="en", prompt=prompt))
    assert f"is {sink[0][2]:.0%}, in {len(sink)} tied heads such as {sink[0][0]}.{sink[0][1]}" in text
    assert "previous-token and first-token scores are the same numbers" in text


def test_chinese_prompt_reads_as_characters(open_page, lm):
    """Byte pieces of split characters read as the character (我¹ 我²) in the query choice
    and the notices (UX review row 10)."""
    prompt = "我吃魚，魚吃我。"
    at = open_page("heads", lang="zh-Hant", prompt=prompt, model="smollm2-135m")
    assert not errors(at)
    readable = readable_texts(lm.tokenize(prompt))
    options = at.selectbox(key="pos").options
    assert options[0] == f"0: {readable[0]}" and "我¹" in options[0]
    assert "<E6" not in notices(at)


@pytest.mark.parametrize("lang", ["zh-Hant", "zh-Hans"])
def test_gqa_check_says_exactly_when_exact(open_page, lang):
    """With one key the recomputed weights equal the model's exactly: 「完全一致」, never
    「相差不到 0.0e+00」 (Chinese review zh-Hant 47 / zh-Hans 41)."""
    at = open_page("heads", lang=lang, prompt="Hello", model="smollm2-135m")
    assert not errors(at)
    captions = text_of(at)
    assert "完全一致" in captions and "0.0e+00" not in captions


def test_diagrams_are_readable(open_page):
    """Graphviz text large enough to read on a projector (UX review row 9). Streamlit's CSS
    draws every diagram text at 9.6 SVG units, so the on-screen size is 9.6 x (drawn width /
    SVG width): the DOT fontsize is that 9.6 (boxes fit the text) and each diagram is drawn
    at the width that makes its text F.DIAGRAM_TEXT_PX, from the builder's width estimate."""
    import re
    import shutil
    import subprocess

    from course.figures import heads as F
    at = open_page("heads", lang="en")
    diagrams = at.get("graphviz_chart")
    assert len(diagrams) == 2
    for chart in diagrams:
        sizes = {float(v) for v in re.findall(r"fontsize=([0-9.]+)", chart.proto.spec)}
        assert sizes == {STREAMLIT_DOT_TEXT}
    assert F.DIAGRAM_TEXT_PX >= 14
    if shutil.which("dot"):     # the estimate is close to Graphviz's own layout (so the text is ~16 px)
        class Cfg:
            d_model, n_heads, n_kv_heads, d_head = 576, 9, 3, 64
        from course.i18n import catalog
        for lang in ("en", "zh-Hant", "zh-Hans"):
            cat = catalog(lang)
            tr = lambda key, **f: cat["heads." + key].format(**f)   # noqa: E731
            for source, estimate in (F.projection_dot(Cfg, tr, "Noto Sans"), F.gqa_dot(9, 3, 0, tr, "Noto Sans")):
                svg = subprocess.run(["dot", "-Tsvg"], input=source.encode(), capture_output=True, check=True).stdout
                width = float(re.search(rb'viewBox="[\d.]+ [\d.]+ ([\d.]+)', svg).group(1))
                assert 0.8 < estimate / width < 1.25, (lang, estimate, width)


# --------------------------------------------------------------------------- Gemma 3 270M

GEMMA = "gemma-3-270m"


def test_gemma_page_teaches_its_own_shapes(open_page, gemma):
    """Gemma: 4 query heads share 1 K/V head (MQA), d_head 256 so n_heads * d_head = 1,024 != 640,
    a sliding window on most layers: every number on the page comes from its config."""
    cfg = gemma.cfg
    at = open_page("heads", lang="en", model=GEMMA, params={"ctx": "4096", "dtype": "fp16"})
    assert not errors(at)
    figs, text = charts(at), text_of(at)
    total = cfg.n_layers * cfg.n_heads
    assert len(figs["overview"]["data"][0]["x"]) == total
    assert f"{cfg.n_heads} heads in each of its {cfg.n_layers} layers, {total} in all" in text
    # The default head is the best previous-token head on this prompt.
    run = gemma.run(DEFAULT, names=H.head_measure_names(cfg.n_layers))
    grids = H.head_measures(gemma, run)
    layer, head, _ = H.top_heads(grids["previous"], 1)[0]
    assert (at.slider(key="layer").value, at.slider(key="head").value) == (layer, head)
    assert len([t for t in figs["grid_chart"]["data"] if t["type"] == "heatmap"]) == cfg.n_heads
    # Wider heads than the slice picture allows.
    q = cfg.n_heads * cfg.d_head
    assert q != cfg.d_model
    assert f"d_model = {cfg.d_model}, but {cfg.n_heads} heads × {cfg.d_head} = {q:,}" in text
    chunk = cfg.d_model // cfg.n_heads
    assert f"{cfg.n_heads} chunks of {chunk} numbers" in text
    share = figs["slices_chart"]["data"][0]
    assert share["x"][0] == f"0–{chunk - 1}" and len(share["z"]) == cfg.n_heads
    # Multi-query attention, not "GQA with 3 K/V heads".
    assert f"Multi-query attention: {cfg.n_heads} query heads, one K/V head" in text
    assert f"its {cfg.n_heads} query heads share a single K/V head (MQA)" in text
    assert "9 query heads" not in text and "3 K/V heads" not in text
    group = figs["group_chart"]["data"]
    assert [t["name"] for t in group] == [f"head {layer}.{h}" for h in range(cfg.n_heads)]
    # KV bytes per token from the config; the window-aware cache against the full one.
    shape = K.shape_of(cfg, gemma.name)
    per = K.kv_bytes_per_token(shape, "fp16")
    assert per == 2 * cfg.n_layers * cfg.n_kv_heads * cfg.d_head * 2
    assert f"**{per:,.0f} bytes per token**" in text
    full, win = K.kv_bytes(shape, 4096, "fp16"), K.kv_bytes_windowed(shape, 4096, "fp16")
    fmt = "{:.4g} {}".format
    assert win < full
    assert (f"would hold **{fmt(*K.human_bytes(win))}** (fp16); a full cache holds **{fmt(*K.human_bytes(full))}**"
            in text)
    assert "This app's `KVCache` is the full kind" in text
    n_win = len(cfg.sliding_layers)
    assert f"{n_win} of {gemma.name}'s {cfg.n_layers} layers are sliding-window layers" in text
    globals_ = [str(layer) for layer in range(cfg.n_layers) if cfg.window(layer) is None]
    assert f"Only layers {', '.join(globals_)}, the global ones" in text
    bars = figs["kv_layers_chart"]["data"]
    assert bars[0]["y"] == [4096] * cfg.n_layers                                       # what KVCache stores
    needed = {x: y for t in bars[1:] for x, y in zip(t["x"], t["y"])}
    assert [needed[str(layer)] for layer in range(cfg.n_layers)] == K.positions_needed_by_layer(cfg, 4096)
    kv_lines = [t["name"] for t in figs["kv_chart"]["data"]]
    assert f"{gemma.name}, window-aware cache" in kv_lines
    # The cache this pass leaves (what a generation step keeps): the full kind, per position from the config.
    n = len(gemma.tokenize(DEFAULT))
    assert f"holds {n} positions in {K.kv_bytes(shape, n, 'fp32'):,.0f} bytes" in text
    assert f"exactly {K.kv_bytes_per_token(shape, 'fp32'):,.0f} bytes per position (fp32)" in text
    # The notice on the window: numbers from the calculator's context.
    assert (f"On {gemma.name}, {n_win} of the {cfg.n_layers} layers see only the last {cfg.sliding_window} positions: "
            f"for 4,096 tokens a window-aware cache would need {fmt(*K.human_bytes(win))}") in notices(at)
    # The open layer says whether it slides.
    kind = "sliding-window layer" if cfg.window(layer) else "global layers"
    assert f"Layer {layer} is" in text and kind in text


def test_gemma_window_fits_and_the_same_ids_in_both_models(open_page, lm, gemma):
    """Below the window nothing is saved (the page says so); the measured KV cache is each
    model's own (built from that model's run, not from the ids)."""
    prompt = "The cat sat on the mat."
    for model, m in (("smollm2-135m", lm), (GEMMA, gemma)):
        at = open_page("heads", lang="en", prompt=prompt, model=model, params={"ctx": "300"})
        assert not errors(at)
        shape = K.shape_of(m.cfg, m.name)
        assert f"exactly {K.kv_bytes_per_token(shape, 'fp32'):,.0f} bytes per position" in text_of(at)
        if model == GEMMA:
            assert "300 tokens fit inside the window, so both kinds of cache hold" in text_of(at)
            assert "would save nothing yet" in notices(at)


@pytest.mark.parametrize("lang", ["en", "zh-Hant"])
def test_gemma_short_and_long_prompts(open_page, lang):
    """One word is two tokens on Gemma (<bos> first): the two-token case; a long prompt is cut."""
    at = open_page("heads", lang=lang, prompt="Hello", model=GEMMA)
    assert not errors(at)
    if lang == "en":
        assert "previous-token and first-token scores are the same numbers" in notices(at)
    at = open_page("heads", lang=lang, prompt="word " * 300, model=GEMMA)
    assert not errors(at)
    assert len(charts(at)["open_chart"]["data"][0]["x"]) == 64


def try_set(lang: str, model: str) -> list[str]:
    from course import i18n
    cat = i18n.catalog(lang)
    prefix = "heads.gemma.try." if model == GEMMA else "heads.try."
    n = sorted({k[len(prefix):].split(".")[0] for k in cat if k.startswith(prefix)})
    return [cat[f"{prefix}{i}.prompt"] for i in n]


@pytest.mark.parametrize("model", ["smollm2-135m", GEMMA])
@pytest.mark.parametrize("lang", ["en", "zh-Hant", "zh-Hans"])
def test_try_this_prompts_show_what_they_say(lm, gemma, lang, model):
    """Each Try-this "why" on the model it runs on: 1 repeats a name (some head's induction score
    is high), 2 counts (some head looks one step back), 3 is prose (many heads rest on the first token)."""
    m = gemma if model == GEMMA else lm
    prompts = try_set(lang, model)
    assert len(prompts) == 3
    if model == GEMMA and lang != "en":
        assert all(any("\u4e00" <= ch <= "\u9fff" for ch in p) for p in prompts)      # Chinese prompts on Gemma
    grids = [H.head_measures(m, m.run(p, names=H.head_measure_names(m.cfg.n_layers))) for p in prompts]
    assert H.top_heads(grids[0]["induction"], 1)[0][2] > 0.4
    assert H.top_heads(grids[1]["previous"], 1)[0][2] > 0.5
    assert int((grids[2]["sink"] > 0.5).sum()) > m.cfg.n_layers * m.cfg.n_heads / 10   # "how many": a good share


def test_gemma_chinese_try_button(open_page, gemma):
    prompt = try_set("zh-Hant", GEMMA)[0]
    at = open_page("heads", lang="zh-Hant", model=GEMMA, prompt=prompt)
    assert not errors(at)
    assert [b.label for b in at.button if b.key and b.key.startswith("try_")][0].startswith(prompt[:8])
    run = gemma.run(prompt, names=H.head_measure_names(gemma.cfg.n_layers))
    ind = H.leaders(H.head_measures(gemma, run)["induction"])
    assert says(notices(at), "歸納分數最高的是頭 {}.{}，達 {:.0%}", ind[0][0], ind[0][1], ind[0][2])
    assert "多查詢注意力" in text_of(at) and "滑動視窗" in text_of(at)
