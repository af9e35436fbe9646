"""The residual-stream lesson page: runs in three languages and with odd prompts, binds its
controls to the URL, and draws numbers that match the model (parts add up, the lens's
last row is the model's prediction, attributions sum to the logit)."""

from __future__ import annotations

import pytest
import torch

from course import i18n
from course.tokens import plot_label
from lesson_model.analysis import attribution as A
from lesson_model.analysis import lens as LL
from lesson_model.analysis import norms as NO
from tests._apptest import arr, chart, errors, says

PAGE = "residual"
CHARTS = ["sum_chart", "norms_chart", "lens_chart", "rank_chart", "dla_chart", "heads_chart", "norm_chart", "grad_chart"]


def sink_layers(lm):
    return range(lm.cfg.n_layers // 2, lm.cfg.n_layers)


def model_run(lm, prompt):
    names = sorted(set(A.dla_names(lm)) | set(NO.residual_names(lm)) | set(LL.logit_lens_names(lm, include_embed=True))
                   | set(NO.sink_names(lm, sink_layers(lm))) | set(NO.sublayer_write_names(lm)))
    return lm.run(prompt, names=names)


@pytest.mark.parametrize("lang,model", [("en", "smollm2-135m"), ("zh-Hant", "gemma-3-270m"), ("zh-Hans", "smollm2-135m"),
                                        ("en", "gemma-3-270m")])
def test_default_prompt_every_language(open_page, models, lang, model):
    lm = models[model]
    at = open_page(PAGE, lang=lang, model=model)
    assert not errors(at)
    for key in CHARTS:
        chart(at, key)
    prompt = i18n.catalog(lang)["prompt.default"]
    run = model_run(lm, prompt)
    predicted = int(run.logits[0, -1].argmax())
    # the waterfall: 61 parts adding up to the final vector's length
    water = chart(at, "sum_chart")["data"][0]
    final = run.cache[f"blocks.{lm.cfg.n_layers - 1}.hook_resid_post"][0, -1]
    assert len(water["y"]) == 1 + 2 * lm.cfg.n_layers + 1
    assert sum(water["y"][:-1]) == pytest.approx(float(final.norm()), rel=1e-4)
    assert water["y"][-1] == pytest.approx(float(final.norm()), rel=1e-5)
    # the lens's last row is the model's own prediction at the last position, with its probability
    lens = chart(at, "lens_chart")["data"][0]
    assert lens["z"][-1][-1] == pytest.approx(float(run.logits[0, -1].softmax(-1).max()), abs=1e-4)
    # direct logit attribution: parts sum to the model's logit of the predicted token
    dla = chart(at, "dla_chart")["data"]
    total = dla[0]["y"][0] + sum(dla[1]["y"]) + sum(dla[2]["y"])
    assert total == pytest.approx(float(run.logits[0, -1, predicted]), abs=1e-2)
    assert dla[2]["y"] == pytest.approx(A.direct_logit_attribution(lm, run, predicted).mlp.tolist(), abs=1e-4)
    # the heads of the chosen block add up to its attention bar
    layer = at.slider(key="head_layer").value
    heads = chart(at, "heads_chart")["data"][0]["y"]
    assert len(heads) == lm.cfg.n_heads
    assert sum(heads) == pytest.approx(dla[1]["y"][layer], abs=1e-3)
    # what each sub-layer computes and adds: with post-norms two lines per sub-layer, else one
    writes = NO.sublayer_writes(lm, run, -1)
    post = chart(at, "post_chart")["data"]
    assert len(post) == (4 if lm.cfg.post_norms else 2)
    assert post[-1]["y"] == pytest.approx(writes.written[:, 1].tolist(), rel=1e-4)
    if lm.cfg.post_norms:
        assert post[0]["y"] == pytest.approx(writes.computed[:, 0].tolist(), rel=1e-4)
    assert at.number_input(key="lens_cols").value == 12 and at.slider(key="layer").value == lm.cfg.n_layers // 3


def test_norms_heatmap_matches_the_model(open_page, lm):
    prompt = "Hello. The dog ran home"
    at = open_page(PAGE, lang="en", prompt=prompt)
    assert not errors(at)
    run = model_run(lm, prompt)
    norms = NO.residual_norms(lm, run)
    z = torch.tensor(chart(at, "norms_chart")["data"][0]["z"])
    assert torch.allclose(10 ** z, norms, rtol=1e-4)
    # the first token is far longer than the rest on this model: the page says so, with numbers
    massive = NO.massive_activations(lm, run)
    assert massive and all(m.position == 0 for m in massive if m.ratio > 50)
    info = " ".join(i.value for i in at.info)
    worst = max(massive, key=lambda m: m.norm)
    assert f"{worst.norm:,.0f}" in info and str(worst.dim) in info
    share = float(NO.first_token_attention(lm, run, layers=sink_layers(lm)).mean())
    assert says(info, "{:.0%}", share)


@pytest.mark.parametrize("prompt,model", [("貓坐在墊子上，因為牠累了。", "smollm2-135m"), ("🐱 cats 😀 and 🐶 dogs 👍🏽", "gemma-3-270m"),
                                          ("Hi", "smollm2-135m"), ("Hi", "gemma-3-270m")])
def test_odd_prompts(open_page, models, prompt, model):
    lm = models[model]
    at = open_page(PAGE, lang="zh-Hans", prompt=prompt, model=model)
    assert not errors(at)
    n_tokens = len(lm.tokenize(prompt))
    lens = chart(at, "lens_chart")["data"][0]
    assert len(lens["x"]) == min(n_tokens, 12) and len(lens["y"]) == lm.cfg.n_layers + 1


def test_empty_prompt(open_page):
    at = open_page(PAGE, lang="zh-Hant", prompt="")
    assert not errors(at)
    assert i18n.catalog("zh-Hant")["lesson.empty_prompt"] in [i.value for i in at.info]


def test_url_controls_and_logit_difference(open_page, lm):
    prompt = "The opposite of hot is"
    run = model_run(lm, prompt)
    top = torch.topk(run.logits[0, -1], 10).indices.tolist()
    at = open_page(PAGE, lang="en", prompt=prompt,
                   params={"pos": 4, "target": 0, "versus": 3, "head_layer": 25, "layer": 7})
    assert not errors(at) and not at.warning
    assert at.selectbox(key="pos").value == 4 and at.slider(key="head_layer").value == 25
    dla = chart(at, "dla_chart")["data"]
    want = A.direct_logit_attribution(lm, run, top[0], 4, other_token=top[3])
    assert dla[1]["y"] == pytest.approx(want.attn.tolist(), abs=1e-4)
    diff = float(run.logits[0, 4, top[0]] - run.logits[0, 4, top[3]])
    assert dla[0]["y"][0] + sum(dla[1]["y"]) + sum(dla[2]["y"]) == pytest.approx(diff, abs=1e-2)
    # the norm comparison reads the vector entering block 7 at the chosen token
    norm = chart(at, "norm_chart")["data"]
    assert norm[0]["y"] == pytest.approx(run.cache["blocks.6.hook_resid_post"][0, 4].tolist(), abs=1e-3)
    assert sum(norm[1]["y"]) == pytest.approx(0, abs=1e-2)                      # LayerNorm: centered


def test_bad_url_values(open_page):
    at = open_page(PAGE, lang="en", prompt="The cat sat",
                   params={"pos": "abc", "target": 99, "versus": "x", "head_layer": -4, "layer": 1e9})
    assert not errors(at)
    notes = " ".join(w.value for w in at.warning)
    for param in ("pos=abc", "target=99", "versus=x", "head_layer=-4", "layer=1000000000.0"):
        assert param in notes
    assert at.selectbox(key="target").value == 9 and at.slider(key="head_layer").value == 0


def notices(at) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("- "))


def test_default_prompt_claims(open_page, lm):
    """The blue box (chinese review zh-Hant 46 / zh-Hans 40: an absolute amount taken back
    out, no double negative), the lens window caption (ux 26) and the Try-this claims,
    each computed here from the model."""
    at = open_page(PAGE, lang="en", params={"lens_cols": 12})
    assert not errors(at)
    prompt = i18n.catalog("en")["prompt.default"]
    run = model_run(lm, prompt)
    n = run.cache["hook_embed"].shape[1]
    # the massive-activation box: who wrote the outlier dimension, and who took how much back out
    massive = max(NO.massive_activations(lm, run), key=lambda m: m.norm)
    parts = A.residual_decomposition(lm, run, massive.position).parts[:, massive.dim]
    sign = 1 if massive.value > 0 else -1
    eraser = float(parts[int((sign * parts).argmin())])
    box = next(i.value for i in at.info if "Measured on this prompt" in i.value)
    assert sign * eraser < 0 and f"took {abs(eraser):,.0f} of it back out" in box
    assert f"{eraser:+,.0f}" not in box
    # the lens grid: 12 columns ending at the last token, with a caption saying which
    assert n > 12
    assert len(chart(at, "lens_chart")["data"][0]["x"]) == 12
    captions = " ".join(c.value for c in at.caption)
    assert f"positions {n - 12}–{n - 1} of your {n} tokens" in captions
    # Try this: answer, first depth on top in the lens, largest direct contributions
    catalog = i18n.catalog("en")
    for k in (1, 2, 3):
        try_run = model_run(lm, catalog[f"residual.try.{k}.prompt"])
        answer = int(try_run.logits[0, -1].argmax())
        lens = LL.logit_lens(lm, try_run, positions=[-1], include_embed=True)
        ranks = lens.target_ranks[:, 0].tolist()
        start = max(i for i, r in enumerate(ranks) if r != 0) + 1           # first row from which it stays on top
        dla = A.direct_logit_attribution(lm, try_run, answer)
        both = torch.cat([dla.attn, dla.mlp])
        best = int(both.abs().argmax())
        name = f"attn {best}" if best < lm.cfg.n_layers else f"MLP {best - lm.cfg.n_layers}"
        why = next(m.value for m in at.markdown if m.value.startswith(catalog[f"residual.try.{k}.why"]))
        assert f"`·{lm.token_text(answer).strip()}`" in why
        if start - 1 == lm.cfg.n_layers - 1:
            assert "only after the last block" in why
        else:
            assert f"after block {start - 1} and stays" in why
        part = f"{name} ({float(both[best]):+.2f})"
        assert f"contributions in size: {part}" in why or (f", and {part}" in why and float(both[best]) < 0)
        after = why.split(part, 1)[1]
        # listed with the parts that push the same way: a negative one works against the answer
        assert after[after.index("pushing it"):].startswith("pushing it up") == (float(both[best]) >= 0), why
    try_run = model_run(lm, catalog["residual.try.4.prompt"])
    top = torch.topk(try_run.logits[0, -1], 4).indices.tolist()
    diff = A.direct_logit_attribution(lm, try_run, top[0], other_token=top[3])
    why = next(m.value for m in at.markdown if m.value.startswith(catalog["residual.try.4.why"]))
    assert f"attn {int(diff.attn.argmax())} ({float(diff.attn.max()):+.2f})" in why and float(diff.attn.max()) > 0
    assert f"MLP {int(diff.mlp.argmin())} ({float(diff.mlp.min()):+.2f})" in why and float(diff.mlp.min()) < 0


@pytest.mark.parametrize("prompt", ["Hello", "a"])
def test_echo_claim_follows_the_count(open_page, lm, prompt):
    """correctness review row 12: the tied-weights reason is printed only when the count
    supports it (on "Hello" the embedding row reads back another token)."""
    at = open_page(PAGE, lang="en", prompt=prompt)
    assert not errors(at)
    run = lm.run(prompt, names=["hook_embed"])
    ids = [t.id for t in lm.tokenize(prompt)]
    echo = sum(int(LL.decode_residual(lm, run.cache["hook_embed"][0, i]).argmax()) == ids[i] for i in range(len(ids)))
    text = notices(at)
    catalog = i18n.catalog("en")
    if echo == 0:
        assert catalog["residual.notice.echo_none"] in text and "tends to score" not in text
    elif len(ids) == 1:
        assert catalog["residual.notice.echo_one"] in text
    else:
        assert catalog["residual.notice.echo_all"].format(n=len(ids)) in text
    assert prompt != "Hello" or echo == 0                  # the case the review saw


@pytest.mark.parametrize("lang", ["zh-Hant", "zh-Hans"])
def test_chinese_prompt_reads_as_characters(open_page, lang):
    """ux review row 10: token choices, chart titles and notices show 我¹ rather than <E6 88>;
    lists and brackets are Chinese (chinese review zh 12)."""
    at = open_page(PAGE, lang=lang, prompt="我吃魚，魚吃我。", model="smollm2-135m")
    assert not errors(at)
    options = at.selectbox(key="pos").options
    assert any("我¹" in o for o in options) and not any("<E6" in o for o in options)
    text = notices(at)
    assert "), " not in text and " (" not in text and "）、" in text


PART = {"en": ("attn {}", "MLP {}"), "zh-Hant": ("注意力 {}", "MLP {}"), "zh-Hans": ("注意力 {}", "MLP {}")}


@pytest.mark.parametrize("lang,model", [("en", "gemma-3-270m"), ("zh-Hant", "gemma-3-270m"), ("zh-Hans", "gemma-3-270m")])
def test_gemma_try_this_claims(open_page, gemma, lang, model):
    """Gemma's own Try-this set (Chinese prompts in the Chinese catalogs): each answer, the depth
    from which it stays on top in the lens, and the largest direct contributions, computed here."""
    lm = gemma
    at = open_page(PAGE, lang=lang, model=model)
    assert not errors(at)
    catalog = i18n.catalog(lang)
    texts = [m.value for m in at.markdown]
    if lang != "en":
        assert all(any("\u4e00" <= ch <= "\u9fff" for ch in catalog[f"residual.gemma.try.{k}.prompt"]) for k in (1, 2, 3, 4))
    for k in (1, 2, 3):
        try_run = model_run(lm, catalog[f"residual.gemma.try.{k}.prompt"])
        answer = int(try_run.logits[0, -1].argmax())
        lens = LL.logit_lens(lm, try_run, positions=[-1], include_embed=True)
        start = LL.first_depth_on_top(lens, 0)
        dla = A.direct_logit_attribution(lm, try_run, answer)
        both = torch.cat([dla.attn, dla.mlp])
        best = int(both.abs().argmax())
        name = PART[lang][0 if best < lm.cfg.n_layers else 1].format(best % lm.cfg.n_layers)
        why = next(t for t in texts if t.startswith(catalog[f"residual.gemma.try.{k}.why"]))
        assert f"`{lm.token_text(answer).replace(' ', '·')}`" in why
        assert name in why and f"{float(both[best]):+.2f}" in why, why
        if start == lm.cfg.n_layers - 1:
            assert catalog["residual.try_detail.lens_last"].split("{")[0] in why or "only after the last block" in why
        else:
            assert str(start) in why
    try_run = model_run(lm, catalog["residual.gemma.try.4.prompt"])
    top = torch.topk(try_run.logits[0, -1], 4).indices.tolist()
    diff = A.direct_logit_attribution(lm, try_run, top[0], other_token=top[3])
    why = next(t for t in texts if t.startswith(catalog["residual.gemma.try.4.why"]))
    assert float(diff.attn.max()) > 0 and float(diff.mlp.min()) < 0
    assert f"{float(diff.attn.max()):+.2f}" in why and f"{float(diff.mlp.min()):+.2f}" in why


def test_gemma_shows_its_sandwich_norms(open_page, gemma):
    """The residual page on Gemma: the sandwich diagram is marked as this model's, the post-norm
    chart shows what each sub-layer computes and adds (from ln1_post/ln2_post's scales), the
    notice's numbers are this run's, the parts still add up to the final vector, and each head's
    attribution (through ln1_post) sums to its block's attention bar."""
    prompt = "貓坐在墊子上，因為它累了。"
    at = open_page(PAGE, lang="zh-Hant", prompt=prompt, params={"head_layer": 5}, model="gemma-3-270m")
    assert not errors(at) and not at.warning
    cat = i18n.catalog("zh-Hant")
    bold = [m.value for m in at.markdown]
    assert f"**{cat['residual.gemma.diag.sandwich_title']}**" in bold and f"**{cat['residual.gemma.diag.pre_title']}**" in bold
    specs = [g.proto.spec for g in at.get("graphviz_chart")]
    assert any(cat["residual.diag.post_norm"] in spec for spec in specs)
    run = model_run(gemma, prompt)
    writes = NO.sublayer_writes(gemma, run, -1)
    post = chart(at, "post_chart")["data"]
    assert [t["name"] for t in post] == [cat[f"residual.post.{k}"] for k in
                                        ("computed_attn", "written_attn", "computed_mlp", "written_mlp")]
    assert post[2]["y"] == pytest.approx(writes.computed[:, 1].tolist(), rel=1e-4)
    gain = writes.written / writes.computed
    i, j = divmod(int(gain.argmax()), 2)
    text = notices(at)
    assert f"{float(writes.written[i, j]):,.0f}" in text and f"{float(writes.computed[:, :].max()):,.0f}" in text
    assert f"{float(writes.written.min()):,.0f}" in text
    # the running sum still adds up (embedding after √d_model, writes after the post-norms)
    water = chart(at, "sum_chart")["data"][0]
    final = run.cache[f"blocks.{gemma.cfg.n_layers - 1}.hook_resid_post"][0, -1]
    assert sum(water["y"][:-1]) == pytest.approx(float(final.norm()), rel=1e-4)
    assert water["y"][0] == pytest.approx(float(A.residual_decomposition(gemma, run, -1).along_final[0]), rel=1e-4)
    # heads through ln1_post add up to block 5's attention bar
    heads = chart(at, "heads_chart")["data"][0]["y"]
    dla = chart(at, "dla_chart")["data"]
    assert len(heads) == gemma.cfg.n_heads and sum(heads) == pytest.approx(dla[1]["y"][5], abs=1e-3)


def test_lens_columns_kept_by_prefix_match_the_lens_of_the_edited_prompt(open_page, lm):
    """A prompt edited at its end reuses the lens columns of the tokens before the edit (they
    depend only on the tokens up to them, under the causal mask): every cell of the grid is
    still the lens of the new prompt, the new columns included."""
    from app_pages.residual import lens_cell_columns
    from course.cache.residual import LENS_CACHE_COLUMNS
    from course.tokens import cell_label
    from server.models import shared_lru
    base = "The lens reads the stream after each block as if it were the last one, so the"
    open_page(PAGE, lang="en", prompt=base, model="smollm2-135m")
    kept = shared_lru("residual.lens_columns", LENS_CACHE_COLUMNS)
    before = len(kept)
    edited = base + " answer appears"
    at = open_page(PAGE, lang="en", prompt=edited, model="smollm2-135m")
    assert not errors(at)
    n_new = len(lm.encode(edited)) - len(lm.encode(base))
    assert 0 < len(kept) - before <= n_new + 1, "only the columns after the edit were computed"
    grid = chart(at, "lens_chart")["data"][0]
    run = model_run(lm, edited)
    n = len(lm.encode(edited))
    window = list(range(n - 12, n))
    lens = LL.logit_lens(lm, run, positions=window, k=1, include_embed=True)
    assert arr(grid["z"]) == pytest.approx(lens.top_probs[..., 0].numpy(), abs=1e-5)
    fit = lens_cell_columns(len(window))        # each cell's text cut to fit it, the hover in full
    assert [list(row) for row in grid["text"]] == [[cell_label(lm.token_text(int(i)), fit) for i in row]
                                                    for row in lens.top_ids[..., 0]]
    assert all(plot_label(lm.token_text(int(i))) in hover
               for ids, hovers in zip(lens.top_ids[..., 0], grid["customdata"]) for i, hover in zip(ids, hovers))
    assert any(text.endswith("…") for row in grid["text"] for text in row)     # this prompt has tokens cut
    # a prompt that differs in its first token shares no prefix: every column is its own
    other = "A" + edited[3:]
    before = len(kept)
    at = open_page(PAGE, lang="en", prompt=other, model="smollm2-135m")
    n = len(lm.encode(other))
    assert len(kept) - before == min(n, 12)
    lens = LL.logit_lens(lm, model_run(lm, other), positions=list(range(max(0, n - 12), n)), k=1, include_embed=True)
    assert arr(chart(at, "lens_chart")["data"][0]["z"]) == pytest.approx(lens.top_probs[..., 0].numpy(), abs=1e-5)
