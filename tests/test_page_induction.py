"""AppTests of the induction-heads lesson: the score map is induction_scores, the ablation
raises the loss on the repeat more than random heads do, the learner's repeats are found,
and the controls are bound to the URL. Short sequences keep the tests cheap."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from course import i18n
from course.tokens import readable_texts
from lesson_model.analysis import induction as I
from tests._apptest import arr, charts, errors, says, text_of

SMALL = {"len": "12", "seed": "3", "k": "4"}
GORP = "My friend Gorp Fendleton likes tea. Gorp"


def test_random_tokens_map_loss_and_ablation(open_page, lm):
    at = open_page("induction", lang="en", params=SMALL)
    assert not errors(at)
    figs = charts(at)
    assert {"map_chart", "stripes_chart_0", "stripes_chart_1", "stripes_chart_2", "loss_chart", "ablation_chart",
            "site_chart"} <= set(figs)
    exp = I.induction_experiment(lm, seq_len=12, n_seqs=10, seed=3)
    torch.testing.assert_close(torch.tensor(figs["map_chart"]["data"][0]["z"]), exp.scores, atol=1e-5, rtol=0)
    loss = figs["loss_chart"]["data"]
    assert loss[0]["y"] == pytest.approx(exp.loss_first.tolist(), abs=1e-4)
    assert loss[1]["y"] == pytest.approx(exp.loss_second.tolist(), abs=1e-4)
    # Ablation: intact, top 4 zeroed, 3 random sets of 4.
    bars = figs["ablation_chart"]["data"][0]
    assert len(bars["y"]) == 5
    intact, top, *randoms = bars["y"]
    assert intact == pytest.approx(exp.mean_loss_second, abs=1e-4)
    assert top > intact + 1.0
    assert top > max(randoms)
    best = I.top_k_heads(exp.scores, 4)
    assert f"{best[0][0]}.{best[0][1]}" in text_of(at)
    # The top heads' patterns: one chart each (they stack on a phone), 24 x 24, titled with the head.
    for i, (layer, head, score) in enumerate(I.top_k_heads(exp.scores, 3)):
        fig = figs[f"stripes_chart_{i}"]
        heat = [t for t in fig["data"] if t["type"] == "heatmap"]
        z = arr(heat[0]["z"])
        assert len(heat) == 1 and z.shape == (24, 24)
        torch.testing.assert_close(torch.tensor(np.nan_to_num(np.tril(z))),
                                   exp.example_patterns[(layer, head)].float(), atol=1e-6, rtol=0)
        assert np.isnan(z[np.triu_indices(24, 1)]).all(), "the future is a gap, not a zero"
        assert len(heat[0]["x"]) == 24 and heat[0]["x"][1].startswith("1 (")   # hover: position (token)
        assert fig["layout"]["title"]["text"] == f"head {layer}.{head}: {score:.0%}"


def test_learner_text_repeat(open_page, lm):
    at = open_page("induction", lang="en", prompt=GORP, params=SMALL)
    assert not errors(at)
    tokens = lm.tokenize(GORP)
    run = lm.run(GORP, names=[f"blocks.{layer}.attn.hook_pattern" for layer in range(30)])
    sites = I.repeat_sites(lm, run)
    last = sites[-1]
    assert at.selectbox(key="site").value == str(last.query)       # the last repeat by default
    b = last.targets[-1]
    probs = run.logits[0, last.query].softmax(-1)
    assert says(text_of(at), "{:.1%}", float(probs[tokens[b].id]))      # the model's probability for B
    bars = charts(at)["site_chart"]["data"][0]
    flat = last.grid.flatten()
    assert bars["x"][0] == pytest.approx(float(flat.max()), abs=1e-5)
    assert bars["x"][0] > 0.5                                     # some head copies the made-up name
    # The next token after the first A and after the second: the best 5 after the second A (and
    # B, marked), each the model's softmax probability (in %) at A's two positions.
    first, second = charts(at)["next_chart"]["data"]
    first_probs = run.logits[0, b - 1].softmax(-1)
    top = probs.topk(5).indices.tolist()
    ids = top + ([tokens[b].id] if tokens[b].id not in top else [])
    assert len(second["y"]) == len(ids)
    assert second["x"] == pytest.approx([100 * float(probs[i]) for i in ids], abs=1e-3)
    assert first["x"] == pytest.approx([100 * float(first_probs[i]) for i in ids], abs=1e-3)
    assert second["y"][ids.index(tokens[b].id)].endswith("(B)")
    assert second["x"][ids.index(tokens[b].id)] > 10 * first["x"][ids.index(tokens[b].id)]   # the jump


def test_no_repeat_in_text(open_page):
    at = open_page("induction", lang="en", prompt="Hello there", params=SMALL)
    assert not errors(at)
    assert any("No token occurs twice" in i.value for i in at.info)
    assert "site_chart" not in charts(at)
    assert "map_chart" in charts(at)                              # the random-token test still runs


def test_bad_url_values(open_page):
    at = open_page("induction", lang="en", prompt=GORP, params={"len": "5", "seed": "x", "k": "99", "site": "abc"})
    assert not errors(at)
    assert at.number_input(key="len").value == 10
    assert at.number_input(key="seed").value == 0
    assert at.slider(key="k").value == 10
    notes = " ".join(w.value for w in at.warning)
    for param in ("len=5", "seed=x", "k=99", "site=abc"):
        assert param in notes


@pytest.mark.parametrize("lang,word", [("zh-Hant", "歸納"), ("zh-Hans", "归纳")])
def test_chinese_pages(open_page, lang, word):
    at = open_page("induction", lang=lang, params=SMALL)
    assert not errors(at)
    assert word in at.title[0].value
    assert word in text_of(at)


@pytest.mark.parametrize("prompt", ["貓咪說：喵喵。貓咪", "🐱 says hi 🐱 says"])
@pytest.mark.parametrize("model", ["smollm2-135m", "gemma-3-270m"])
def test_chinese_and_emoji_prompts(open_page, prompt, model):
    at = open_page("induction", lang="zh-Hans", prompt=prompt, params=SMALL, model=model)
    assert not errors(at)
    assert "site_chart" in charts(at)


def test_empty_prompt(open_page):
    at = open_page("induction", lang="en", prompt="", params=SMALL)
    assert not errors(at)
    assert not at.get("plotly_chart")


def notices(at) -> str:
    return "\n".join(m.value for m in at.markdown if m.value.startswith("- "))


def test_notices_follow_the_numbers(open_page, lm):
    """Each What-to-notice sentence is the variant the run's numbers support: "only" for the
    early layers when they are far below the best head, "copied" when the second copy's loss
    is much lower, "raises" and "far more than random" when the ablation says so."""
    at = open_page("induction", lang="en", params=SMALL)
    assert not errors(at)
    text = notices(at)
    exp = I.induction_experiment(lm, seq_len=12, n_seqs=10, seed=3)
    best = I.top_k_heads(exp.scores, 4)
    early = float(exp.scores[:10].max())
    assert says(text, "The strongest induction head is {}.{}: {:.0%}", best[0][0], best[0][1], best[0][2])
    layers = sorted({layer for layer, _, _ in best})
    assert f"The top 4 sit in layers {', '.join(map(str, layers))}." in text or len(layers) == 1
    if early < best[0][2] / 2:
        assert says(text, "reaches only {:.0%}", early)
    else:
        assert "only" not in text.split("The best head in layers")[1].split(".")[0]
    copied = exp.mean_loss_second <= exp.mean_loss_first - 1.0
    assert ("the second is copied" in text) == (copied and exp.top1_second >= 0.5)
    assert ("the second is much easier" in text) == (copied and exp.top1_second < 0.5)
    assert f"right next token at {exp.top1_second:.0%} of the second copy's positions" in text
    ab = I.ablate(lm, exp.tokens, exp.scores, 4, seed=3, n_random=3, baseline=exp.mean_loss_second)
    move, random_move = ab.top_loss - ab.baseline, ab.random_mean - ab.baseline
    if move >= 0.1:
        assert says(text, "raises the loss on the second copy from {:.2f} to {:.2f}", ab.baseline, ab.top_loss)
    if move >= 0.1 and move > 2 * max(random_move, 0):
        assert "matter far more than heads picked at random" in text
    else:
        assert "far more" not in text


def test_citation():
    """The name and the two-step mechanism: Elhage et al. 2021, then Olsson et al. 2022
    (correctness review row 19)."""
    for lang in ("en", "zh-Hant", "zh-Hans"):
        intro = i18n.lesson_sections("induction", lang)["intro"]
        assert "Elhage" in intro and "2021" in intro and "Olsson" in intro and "2022" in intro
        assert "Anthropic，2022" not in intro and "(Anthropic, 2022)" not in intro


def test_chinese_prompt_reads_as_characters(open_page, lm):
    """The repeated-token choice and the strip show characters, not byte pieces (UX review row 10)."""
    prompt = "我吃魚，魚吃我。"
    at = open_page("induction", lang="zh-Hant", prompt=prompt, params=SMALL, model="smollm2-135m")
    assert not errors(at)
    readable = readable_texts(lm.tokenize(prompt))
    options = at.selectbox(key="site").options
    assert all("<" not in o for o in options)
    last = int(at.selectbox(key="site").value)
    assert options[-1] == f"{last}: {readable[last]}"
    strip = next(m.value for m in at.markdown if ":orange-background[" in m.value)
    assert "魚" in strip and "E9" not in strip


# --------------------------------------------------------------------------- Gemma 3 270M

GEMMA = "gemma-3-270m"


def test_gemma_random_tokens_map_and_ablation(open_page, gemma):
    """18 layers x 4 heads scored; head names, the ablation and every notice computed from the run."""
    cfg = gemma.cfg
    at = open_page("induction", lang="en", params=SMALL, model=GEMMA, prompt=GORP)
    assert not errors(at)
    figs, text = charts(at), notices(at)
    exp = I.induction_experiment(gemma, seq_len=12, n_seqs=10, seed=3)
    z = torch.tensor(figs["map_chart"]["data"][0]["z"])
    assert z.shape == (cfg.n_layers, cfg.n_heads)
    torch.testing.assert_close(z, exp.scores, atol=1e-5, rtol=0)
    best = I.top_k_heads(exp.scores, 4)
    assert says(text, "The strongest induction head is {}.{}: {:.0%}", best[0][0], best[0][1], best[0][2])
    for i, (layer, head, score) in enumerate(best[:3]):
        assert figs[f"stripes_chart_{i}"]["layout"]["title"]["text"] == f"head {layer}.{head}: {score:.0%}"
    # The global layers: how many of the top 4 sit there, from cfg.window.
    in_global = sum(1 for layer, _, _ in best if cfg.window(layer) is None)
    globals_ = ", ".join(str(layer) for layer in range(cfg.n_layers) if cfg.window(layer) is None)
    if in_global == 4:
        assert f"All of the top 4 sit in this model's global layers ({globals_})" in text
    elif in_global == 0:
        assert "None of the top 4 sits in this model's global layers" in text
    else:
        assert f"{in_global} of the top 4 sit in this model's global layers ({globals_})" in text
    assert f"These 24-token sequences fit inside the {cfg.sliding_window}-token window" in text
    # The loss, against the uniform guess over Gemma's vocabulary.
    uniform = math.log(cfg.vocab_size)
    assert says(text, "a uniform guess over the {:,} vocabulary entries would score {:.2f}", cfg.vocab_size, uniform)
    assert ("even worse than a uniform guess" in text) == (exp.mean_loss_first > uniform)
    # The ablation: zeroing the top 4 raises the loss on the second copy; random heads less.
    ab = I.ablate(gemma, exp.tokens, exp.scores, 4, seed=3, n_random=3, baseline=exp.mean_loss_second)
    bars = figs["ablation_chart"]["data"][0]["y"]
    assert bars == pytest.approx([ab.baseline, ab.top_loss, *ab.random_losses], abs=1e-4)
    assert ab.top_loss > ab.baseline + 1.0 and ab.top_loss > ab.random_mean
    assert says(text, "raises the loss on the second copy from {:.2f} to {:.2f}", ab.baseline, ab.top_loss)
    assert f"**Top heads zeroed:** {', '.join(f'{l}.{h}' for l, h, _ in best)}" in text_of(at)


def try_set(lang: str, model: str) -> list[str]:
    cat = i18n.catalog(lang)
    prefix = "induction.gemma.try." if model == GEMMA else "induction.try."
    n = sorted({k[len(prefix):].split(".")[0] for k in cat if k.startswith(prefix)})
    return [cat[f"{prefix}{i}.prompt"] for i in n]


@pytest.mark.parametrize("model", ["smollm2-135m", GEMMA])
@pytest.mark.parametrize("lang", ["en", "zh-Hant", "zh-Hans"])
def test_try_this_prompts_copy(lm, gemma, lang, model):
    """Each Try-this on the model it runs on: at the last repeated token (the page's default
    site) some head puts most of its attention on B, the token after the earlier copy, and the
    model gives B far more probability than after the first A (the "why" texts ask exactly this)."""
    m = gemma if model == GEMMA else lm
    prompts = try_set(lang, model)
    assert len(prompts) == 3
    for prompt in prompts:
        run = m.run(prompt, names=[f"blocks.{layer}.attn.hook_pattern" for layer in range(m.cfg.n_layers)])
        site = I.repeat_sites(m, run)[-1]
        b = site.targets[-1]
        ids = run.ids[0]
        p2 = float(run.logits[0, site.query].softmax(-1)[ids[b]])
        p1 = float(run.logits[0, b - 1].softmax(-1)[ids[b]])
        assert float(site.grid.max()) > 0.5, prompt
        assert p2 > 0.3 and p2 > 10 * p1, (prompt, p1, p2)


@pytest.mark.parametrize("lang,b", [("zh-Hant", "芭"), ("zh-Hans", "芒果")])
def test_gemma_repeated_chinese_sentence(open_page, gemma, lang, b):
    """The Chinese Try-this on Gemma: a sentence said twice. Its induction heads attend from the
    second copy's last token to the token after the first copy's; the second copy's loss drops."""
    prompt = try_set(lang, GEMMA)[0]
    sentence_end = prompt.index("。") + 1
    assert prompt[sentence_end:] == prompt[:len(prompt) - sentence_end]          # the second copy repeats the first
    run = gemma.run(prompt, names=[f"blocks.{layer}.attn.hook_pattern" for layer in range(gemma.cfg.n_layers)])
    ids = run.ids[0].tolist()
    site = I.repeat_sites(gemma, run)[-1]
    assert gemma.token_text(ids[site.targets[-1]]) == b
    exp = I.induction_experiment(gemma, seq_len=12, n_seqs=10, seed=3)
    top = {(layer, head) for layer, head, _ in I.top_k_heads(exp.scores, 4)}
    flat = site.grid.flatten()
    best = int(flat.argmax())
    assert (best // gemma.cfg.n_heads, best % gemma.cfg.n_heads) in top              # the page's "also" sentence
    # Loss per token: the second copy (after its first token) far below the first copy.
    n_first = len(gemma.tokenize(prompt[:sentence_end]))                            # <bos> + the first sentence
    loss = -run.logits[0, :-1].log_softmax(-1).gather(-1, run.ids[0, 1:, None])[:, 0]
    first = loss[1:n_first - 1].mean()                                              # predicting tokens 2..end of copy 1
    second = loss[n_first:].mean()                                                  # predicting copy 2's tokens 2..
    assert float(second) < float(first) / 4
    at = open_page("induction", lang=lang, prompt=prompt, params=SMALL, model=GEMMA)
    assert not errors(at)
    p2 = float(run.logits[0, site.query].softmax(-1)[ids[site.targets[-1]]])
    assert f"**{p2:.1%}**" in text_of(at)
    assert "site_chart" in charts(at)


@pytest.mark.parametrize("lang", ["en", "zh-Hant"])
def test_gemma_short_prompts(open_page, lang):
    at = open_page("induction", lang=lang, prompt="Hi", params=SMALL, model=GEMMA)
    assert not errors(at)
    assert "map_chart" in charts(at) and "site_chart" not in charts(at)


def test_several_earlier_occurrences_name_the_longest_match(open_page, gemma):
    """The Chinese review's prompt: 喜歡 occurs twice before the last one. The text before the
    first (王小明) matches longest, and the model puts more on its B (吃) than on the latest's (喝);
    the page says which occurrence matches and gives both probabilities from this run."""
    prompt = "王小明喜歡吃蘋果。陳大文喜歡喝咖啡。王小明喜歡"
    at = open_page("induction", lang="zh-Hant", model="gemma-3-270m", prompt=prompt)
    assert not errors(at)
    texts = [t.text for t in gemma.tokenize(prompt)]
    like = [i for i, t in enumerate(texts) if t == "喜歡"]
    assert len(like) == 3
    probs = gemma.run(prompt, names=()).logits[0, -1].float().softmax(-1)
    eat, drink = gemma.encode("吃")[-1], gemma.encode("喝")[-1]
    assert texts[like[0] + 1] == "吃" and texts[like[1] + 1] == "喝"
    assert probs[eat] > probs[drink]
    text = text_of(at)
    assert f"位置 {like[0]} 那一次" in text and f"最近的一次（位置 {like[1]}）" in text
    assert f"{float(probs[eat]):.1%}" in text and f"{float(probs[drink]):.1%}" in text
