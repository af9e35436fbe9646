"""Shared builders for the model tests: a tiny random Llama, a tiny byte-level tokenizer,
and (loaded once per process) the real SmolLM2 with its transformers reference.

Import the fixtures you need into a test module:

    from tests._fixtures_model import tiny, smollm2, reference   # noqa: F401

Every expensive builder is memoised at module level, so a session-scoped fixture imported
into several modules still loads its model only once per pytest process.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os

# Nothing in these tests may touch the network.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402
import torch  # noqa: E402

# Strings that break naive tokenizer code: multi-byte scripts, emoji with modifiers and
# zero-width joiners, combining marks, right-to-left text, code and runs of whitespace.
UNICODE_GAUNTLET = [
    "The cat sat on the mat.",
    "我喜歡貓。我喜欢猫，因为它们很可爱。",
    "日本語のテキストとカタカナ",
    "한국어 문장입니다",
    "👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️‍🔥 🇹🇼🇯🇵",
    "e\u0301 n\u0303 a\u0308\u0304 Z\u0351\u0352\u0353 café naïve",
    "שלום עולם مرحبا بالعالم",
    "def f(x):\n\treturn x ** 2  # square\n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "   leading, inner    runs,\n\n\n\ttabs\t\tand trailing   ",
    "\u200b\u200d\ufeff zero width",
    "mixed 中文 and English 😀 123.45e-6",
    "𝕳𝖊𝖑𝖑𝖔 𝔀𝓸𝓻𝓵𝓭 ∑∫√∞",
    "\x00\x01 control \x7f bytes",
    "a",
    " ",
    "\n",
]


# --------------------------------------------------------------------------- tiny tokenizer and model

@functools.cache
def tiny_tokenizer_view():
    """A byte-level BPE tokenizer trained on a few lines (a real `tokenizers.Tokenizer`)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from lesson_model.tokens import TokenizerView

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    corpus = ["the cat sat on the mat and the dog sat on the log"] * 20 + ["我喜歡貓 我喜欢猫"] * 5
    tok.train_from_iterator(corpus, trainer=trainer)
    return TokenizerView(tok, chat_template=None, bos_token=None, add_bos=False, eos_token="<|endoftext|>")


def tiny_eos_id() -> int:
    return tiny_tokenizer_view().tokenizer.token_to_id("<|endoftext|>")


def tiny_llama_config(**overrides):
    from transformers import LlamaConfig
    kwargs = dict(vocab_size=tiny_tokenizer_view().vocab_size, hidden_size=64, intermediate_size=96,
                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                  rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=False, initializer_range=0.2,
                  bos_token_id=None, eos_token_id=tiny_eos_id(), pad_token_id=tiny_eos_id())
    kwargs.update(overrides)
    return LlamaConfig(**kwargs)


def random_hf_model(config, seed: int = 0):
    """A transformers causal LM with random weights, eager attention, eval mode, float32."""
    from transformers import AutoModelForCausalLM
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch.float32)
    # Random norm weights too, so the tests notice a norm applied in the wrong place.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.3 * torch.randn_like(p))
    return model.eval()


@functools.cache
def _tiny():
    from lesson_model import LessonModel
    from lesson_model.loading import convert_hf
    hf = random_hf_model(tiny_llama_config())
    lm = LessonModel(convert_hf(hf).eval().requires_grad_(False), tiny_tokenizer_view(), name="tiny-llama")
    return hf, lm


@pytest.fixture(scope="session")
def tiny():
    """(transformers LlamaForCausalLM, LessonModel) sharing the same random weights."""
    return _tiny()


TINY_GEMMA_WINDOW = 5      # short, so a 12-token test prompt reaches past it


def tiny_gemma_config(**overrides):
    """A tiny Gemma 3: 3 layers (sliding, sliding, global), window 5, 4 query heads sharing 1 K/V
    head of width 16 (so n_heads * d_head = 64 != d_model 48), RoPE bases 10 and 1000."""
    from transformers import Gemma3TextConfig
    kwargs = dict(vocab_size=tiny_tokenizer_view().vocab_size, hidden_size=48, intermediate_size=80,
                  num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=1, head_dim=16,
                  query_pre_attn_scalar=16, sliding_window=TINY_GEMMA_WINDOW,
                  layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                  rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10.0},
                                   "full_attention": {"rope_type": "default", "rope_theta": 1000.0}},
                  max_position_embeddings=128, rms_norm_eps=1e-6, initializer_range=0.2,
                  hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True,
                  bos_token_id=None, eos_token_id=tiny_eos_id(), pad_token_id=tiny_eos_id())
    kwargs.update(overrides)
    return Gemma3TextConfig(**kwargs)


@functools.cache
def _tiny_gemma():
    from lesson_model import LessonModel
    from lesson_model.loading import convert_hf
    hf = random_hf_model(tiny_gemma_config(), seed=7)
    with torch.no_grad():    # Gemma's norms multiply by 1 + w: random w around 0
        for name, p in hf.named_parameters():
            if "norm" in name:
                p.copy_(0.3 * torch.randn_like(p))
    lm = LessonModel(convert_hf(hf).eval().requires_grad_(False), tiny_tokenizer_view(), name="tiny-gemma3")
    return hf, lm


@pytest.fixture(scope="session")
def tiny_gemma():
    """(transformers Gemma3ForCausalLM, LessonModel) sharing the same random weights."""
    return _tiny_gemma()


# --------------------------------------------------------------------------- the real model

@functools.cache
def _smollm2():
    from lesson_model import load_model
    return load_model(device="cpu")


_PARSED: dict[str, object] = {}      # GGUF path -> its reader, while _gguf_parsed_once is on


@contextlib.contextmanager
def _gguf_parsed_once():
    """transformers' GGUF loads parse the whole file with gguf.GGUFReader each time: for the
    config, again for the weights, again for the tokenizer (three parses of Gemma's 262,144
    vocabulary strings were most of its reference's minute). Inside this block each file is
    parsed once, by lesson_model.loading.gguf_reader (gguf's own parse of the same bytes, over a
    plain array); what transformers does with the fields and tensors is its own."""
    import gguf

    from lesson_model.loading import gguf_reader
    outermost = not _PARSED
    real = gguf.GGUFReader

    def reader(path, mode="r"):
        key = os.path.realpath(path)
        if key not in _PARSED:
            _PARSED[key] = gguf_reader(key)
        return _PARSED[key]

    gguf.GGUFReader = reader
    try:
        yield
    finally:
        gguf.GGUFReader = real
        if outermost:
            _PARSED.clear()


@functools.cache
def gguf_reference_tokenizer(model: str = "smollm2-135m"):
    """transformers' tokenizer rebuilt from the bundled model's GGUF file."""
    from transformers import AutoTokenizer

    from lesson_model.loading import bundled_gguf_path
    path = bundled_gguf_path(model)
    with _gguf_parsed_once():
        return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


def _gguf_reference_model(model: str):
    """transformers' own load of the bundled model's GGUF file, with eager attention (every pattern)."""
    from transformers import AutoModelForCausalLM

    from lesson_model.loading import bundled_gguf_path
    path = bundled_gguf_path(model)
    with _gguf_parsed_once():
        hf = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                  attn_implementation="eager", dtype=torch.float32)
        return hf.eval(), gguf_reference_tokenizer(model)


@functools.cache
def _reference():
    """transformers' own load of SmolLM2's GGUF file: (model with eager attention, tokenizer)."""
    return _gguf_reference_model("smollm2-135m")


@pytest.fixture(scope="session")
def smollm2(request):
    """The bundled SmolLM2-135M-Instruct as a LessonModel on the CPU (from the user cache).

    Shares conftest's session ``lm`` when there is one on the CPU (one copy of the weights)."""
    try:
        lm = request.getfixturevalue("lm")
        if lm.device.type == "cpu" and lm.name == "SmolLM2-135M-Instruct":
            return lm
    except pytest.FixtureLookupError:
        pass
    return _smollm2()


@functools.cache
def _gemma():
    from lesson_model import load_model
    return load_model("gemma-3-270m", device="cpu")


@functools.cache
def _gemma_reference():
    """transformers' own load of the Gemma GGUF file: (Gemma3ForCausalLM with eager attention,
    its tokenizer)."""
    return _gguf_reference_model("gemma-3-270m")


@pytest.fixture(scope="session")
def gemma_lm(request):
    """The bundled Gemma 3 270M as a LessonModel on the CPU (shares conftest's ``gemma`` when there is one)."""
    try:
        lm = request.getfixturevalue("gemma")
        if lm.device.type == "cpu":
            return lm
    except pytest.FixtureLookupError:
        pass
    return _gemma()


@pytest.fixture(scope="session")
def gemma_reference():
    """(transformers Gemma3ForCausalLM, tokenizer) loaded from the same GGUF file (slow, once)."""
    return _gemma_reference()


@pytest.fixture(scope="session")
def reference_tokenizer():
    return gguf_reference_tokenizer("smollm2-135m")


@pytest.fixture(scope="session")
def reference():
    """(transformers model, tokenizer) loaded from the same GGUF file (slow: ~20 s, once)."""
    return _reference()


# --------------------------------------------------------------------------- float32 parity

EPS32 = 2.0 ** -23      # float32 machine epsilon: the spacing of float32 numbers at 1.0
SAFETY = 8.0            # see assert_close_f32: the measured worst case and the margin are in its docstring


@pytest.fixture(params=[1, 2], ids=lambda n: f"threads{n}")
def torch_threads(request):
    """Run the test at 1 and at 2 intra-op threads (the split of a matmul changes its summation
    order, so float32 results change in the last bits); the setting is restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    try:
        yield request.param
    finally:
        torch.set_num_threads(before)


def block_depth(cfg, n_pos: int) -> int:
    """Reduction length along one block's longest chain of float32 roundings: the RMSNorm mean
    (d_model), the q/k/v projection (d_model), q . k (d_head), pattern @ v (n_pos), W_O
    (n_heads * d_head), a residual add, the second RMSNorm (d_model), gate/up (d_model), down
    (d_ff), a residual add; with QK-norm the mean over d_head, with post-norms two more means
    over d_model."""
    extra = (cfg.d_head if cfg.qk_norm else 0) + (2 * cfg.d_model if cfg.post_norms else 0)
    return 4 * cfg.d_model + cfg.d_head + n_pos + cfg.n_heads * cfg.d_head + cfg.d_ff + 2 + extra


def logits_depth(cfg, n_pos: int, n_layers: int | None = None) -> int:
    """Depth of the logits after n_layers blocks (all by default): the blocks, the final norm,
    the unembedding."""
    return (cfg.n_layers if n_layers is None else n_layers) * block_depth(cfg, n_pos) + 2 * cfg.d_model


def block_output_depth(cfg, n_pos: int, layer: int) -> int:
    """Depth of anything computed inside block `layer` (an upper bound: through its last add)."""
    return (layer + 1) * block_depth(cfg, n_pos)


def pattern_depth(cfg, n_pos: int, layer: int) -> int:
    """Depth of layer `layer`'s attention scores (and so of its pattern): the blocks before it,
    its norm, its q/k projection, q . k."""
    return layer * block_depth(cfg, n_pos) + 2 * cfg.d_model + cfg.d_head


def _max_abs(x: torch.Tensor) -> float:
    """max |x| over every entry, in one pass without a copy (exact: abs and max round nothing):
    NaN if any entry is NaN, inf if any is infinite, so a finite answer says every entry is finite.
    0 for an empty tensor."""
    return torch.linalg.vector_norm(x, float("inf")).item() if x.numel() else 0.0


def finite_scale(x: torch.Tensor) -> float:
    """max |x| over the finite entries (0 for none); exact in x's own float type (abs and max
    round nothing)."""
    x = torch.as_tensor(x).detach().cpu()
    if not x.is_floating_point():
        x = x.double()
    if x.numel() == 0:
        return 0.0
    top = _max_abs(x)
    if math.isfinite(top):                   # every entry finite: nothing to leave out
        return top
    return torch.where(torch.isfinite(x), x.abs(), 0).max().item()


def f32_bound(expected, *, depth: int, scale: float | None = None, safety: float = SAFETY) -> float:
    """safety * eps32 * sqrt(depth) * scale (scale: max |expected| unless given)."""
    scale = finite_scale(expected) if scale is None else float(scale)
    return safety * EPS32 * math.sqrt(max(depth, 1)) * scale


def _record(what: str, worst: float, bound: float, depth: int, scale: float) -> None:
    """With DECODER_LAB_F32_REPORT=<file>, append each comparison as one JSON line (for measuring)."""
    path = os.environ.get("DECODER_LAB_F32_REPORT")
    if path:
        ratio = worst / (EPS32 * math.sqrt(max(depth, 1)) * scale) if scale else 0.0
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(dict(what=what, threads=torch.get_num_threads(), max_diff=worst, bound=bound,
                                    depth=depth, scale=scale, c_observed=ratio)) + "\n")


def assert_close_f32(actual, expected, *, depth: int, what: str, scale: float | None = None,
                     safety: float = SAFETY) -> float:
    """Assert two float32 computations of the same quantity agree as closely as float32 allows.

    The bound, for every element:

        |actual - expected| <= safety * eps32 * sqrt(depth) * scale

    eps32 = 2**-23. depth is the total reduction length along the longest chain of float32
    operations that produced the tensor (``logits_depth``, ``pattern_depth``, or the length of
    one sum). scale is the size of the numbers that chain works with: max |expected| over its
    finite entries unless given (pass e.g. max |scores| for an attention pattern, whose error
    comes from its scores' error; pass the largest summand for a sum that may cancel).

    Why this form: a sum of K float32 terms computed in some order is off by about
    eps32 * sqrt(K) * (size of the terms) when the rounding errors are independent (the
    probabilistic bound of Higham and Mary, 2019; the worst case is eps32 * K); errors of the
    successive layers add the same way, so their lengths add up into one depth. Two
    implementations (ours and transformers', the fused and the explicit attention, 1 and 2
    threads, with and without a KV cache) sum in different orders, so each may be that far
    from the exact value and their difference up to twice that. The network may amplify an
    error on its way (a norm dividing by a small RMS, a softmax over large scores), so a
    safety factor covers that and the factor of two. Measured on the development machine (2
    cores, torch 2.13 CPU, MKL), the worst observed constant |diff| / (eps32 sqrt(depth) scale)
    over every parity test at 1 and 2 threads was 0.58 (the tiny random model; 0.064 for
    SmolLM2), so SAFETY = 8 leaves a margin of at least 14x (125x for SmolLM2). The failures
    seen on another machine with the old fixed tolerances (1.18e-4 on SmolLM2's logits,
    1.65e-5 on the tiny model's) sit 90x and 11x below these bounds. Bugs are still caught:
    the tiny model's logits move 9x the bound when the norms' eps goes from 1e-5 to 1e-6 and
    2.7x when one weight matrix is scaled by 1 + 1e-4; SmolLM2's move 2x and 2.8x for that eps
    and a 1e-3 scaling.

    -inf, +inf and NaN must sit at the same places with the same values. Returns max |diff|.

    The differences are exact: two float32 tensors are subtracted in float32 first (each
    difference then within half an ulp of itself), and in float64, where a float32 difference
    is exact, only when that cannot decide (the largest within 2**-22 of the bound): the
    logits of a long prompt on Gemma are 160 million numbers.
    """
    actual = torch.as_tensor(actual).detach().cpu()
    expected = torch.as_tensor(expected).detach().cpu()
    assert actual.shape == expected.shape, f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    top_expected = _max_abs(expected) if expected.is_floating_point() else math.nan
    if math.isfinite(top_expected) and actual.is_floating_point() and math.isfinite(_max_abs(actual)):
        finite = None                         # every entry of both finite (the usual case): no masks
        if scale is None:
            scale = top_expected
    else:
        finite = torch.isfinite(expected)
        assert torch.equal(torch.isfinite(actual), finite), f"{what}: non-finite entries at different places"
        if not finite.all():
            assert torch.equal(actual[~finite].double().nan_to_num(posinf=1, neginf=-1),
                               expected[~finite].double().nan_to_num(posinf=1, neginf=-1)), f"{what}: different non-finite values"
    scale = finite_scale(expected) if scale is None else float(scale)
    bound = f32_bound(expected, depth=depth, scale=scale, safety=safety)

    def differences(a, b):
        diff = (a - b).abs()
        return diff if finite is None else diff.where(finite, 0)

    worst, decided = 0.0, False
    if actual.dtype == expected.dtype == torch.float32 and actual.numel():
        worst = (_max_abs(actual - expected) if finite is None else differences(actual, expected).max().item())
        decided = abs(worst - bound) > bound * 2.0 ** -22     # else too close to call in float32
    if not decided:
        actual, expected = actual.double(), expected.double()
        worst = differences(actual, expected).max().item() if actual.numel() else 0.0
    _record(what, worst, bound, depth, scale)
    if worst > bound:
        diff = differences(actual, expected)
        at = tuple(int(i) for i in torch.unravel_index(diff.argmax(), diff.shape)) if diff.dim() else ()
        raise AssertionError(
            f"{what}: max |diff| {worst:.3g} at {at} (actual {actual[at].item():.8g}, expected "
            f"{expected[at].item():.8g}) exceeds the float32 bound {bound:.3g} = {safety:g} x eps32 x "
            f"sqrt(depth {depth}) x scale {scale:.4g}")
    return worst


def greedy_step_logits(lm, ids: list[int], n_prompt: int) -> torch.Tensor:
    """[steps, vocab]: the logits that chose each token after the first n_prompt (one forward pass;
    only those positions unembedded: for a long prompt on Gemma's 262,144-entry vocabulary, the
    unembedding of every position was most of the pass)."""
    run = lm.run(torch.tensor([ids[:-1]]), names=[], unembed=False)
    W_U = lm.decoder.W_U                                                    # [d_model, vocab]
    return (run.final[0, n_prompt - 1:].to(W_U.device) @ W_U).cpu()         # [steps, vocab]


def assert_greedy_has_margin(lm, prompt_ids: list[int], new_ids: list[int], *, what: str) -> float:
    """assert_greedy_margin for the tokens lm chose greedily after prompt_ids."""
    ids = list(prompt_ids) + list(new_ids)
    logits = greedy_step_logits(lm, ids, len(prompt_ids))
    assert torch.equal(logits.argmax(-1), torch.tensor(list(new_ids))), f"{what}: not the greedy choices"
    return assert_greedy_margin(logits, depth=logits_depth(lm.cfg, len(ids)), what=what)


def assert_greedy_margin(step_logits: torch.Tensor, *, depth: int, what: str, safety: float = SAFETY) -> float:
    """Every greedy step's best logit leads the runner-up by more than twice the float32 bound.

    Two implementations each within the bound of the same logits then must pick the same token
    at every step, so comparing greedy sequences exactly is fair. A step with a smaller gap is a
    near tie where two correct implementations may pick different tokens: the test says so
    (choose a prompt with a margin) instead of failing at random. Returns the smallest
    gap / (2 x bound)."""
    top2 = step_logits.double().topk(2, dim=-1).values                          # [steps, 2]
    gaps = top2[:, 0] - top2[:, 1]
    bounds = torch.tensor([f32_bound(row, depth=depth, safety=safety) for row in step_logits], dtype=torch.float64)
    ratio = gaps / (2 * bounds)
    worst = int(ratio.argmin())
    path = os.environ.get("DECODER_LAB_F32_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(dict(what=f"greedy margin: {what}", threads=torch.get_num_threads(), steps=len(gaps),
                                    min_gap=gaps[worst].item(), bound=bounds[worst].item(),
                                    gap_over_2bound=ratio[worst].item())) + "\n")
    assert ratio[worst] > 1, (
        f"{what}: near tie at step {worst}: the two best logits differ by {gaps[worst].item():.3g}, within twice "
        f"the float32 bound {bounds[worst].item():.3g}; two correct implementations may choose differently here, "
        f"so this prompt cannot check greedy equality (choose one with a margin)")
    return ratio[worst].item()


# --------------------------------------------------------------------------- invariants of a full capture

def assert_run_invariants(lm, run) -> None:
    """Relations every full capture (names=None) must satisfy, whatever the weights.

    Each relation recomputes one step of the forward pass (or regroups a sum), so its float32
    bound has the depth of that one step, not of the whole network (see assert_close_f32)."""
    cfg, c = lm.cfg, run.cache
    n_pos = run.ids.shape[1]
    positions = torch.arange(n_pos)
    close = assert_close_f32
    weight = lambda module: module.weight.detach().cpu()   # noqa: E731

    attn_and_mlp = torch.zeros_like(c["hook_embed"])
    assert torch.equal(c["blocks.0.hook_resid_pre"], c["hook_embed"])
    # What the first block reads: a row of W_E per token (times sqrt(d_model) with embed_scale).
    close(c["hook_embed"], lm.decoder.embed(run.ids.to(lm.device)).detach().cpu(), depth=1, what="hook_embed = embed(ids)")
    stream_scale = finite_scale(c["hook_embed"])           # the largest number any partial sum of the stream holds
    for L in range(cfg.n_layers):
        b = f"blocks.{L}"
        # RMSNorm: hook_scale is the divisor sqrt(mean(x^2) + eps), hook_normalized = x / scale.
        for ln, x in (("ln1", c[f"{b}.hook_resid_pre"]), ("ln2", c[f"{b}.hook_resid_mid"])):
            close(c[f"{b}.{ln}.hook_scale"], (x.pow(2).mean(-1, keepdim=True) + cfg.norm_eps).sqrt(),
                  depth=cfg.d_model, what=f"{b}.{ln} scale")
            close(c[f"{b}.{ln}.hook_normalized"] * c[f"{b}.{ln}.hook_scale"], x, depth=2,
                  what=f"{b}.{ln} normalized x scale")
        # RoPE rotates: it keeps the norm of every head's query and key at every position
        # (with QK-norm, of the normalized q and k: RoPE comes after the norm).
        attn = lm.decoder.blocks[L].attn
        for qk in ("q", "k"):
            before = c[f"{b}.attn.hook_{qk}"]
            if cfg.qk_norm:
                norm = f"{b}.attn.{qk}_norm"
                close(c[f"{norm}.hook_scale"], (before.pow(2).mean(-1, keepdim=True) + cfg.norm_eps).sqrt(),
                      depth=cfg.d_head, what=f"{norm} scale")
                before = c[f"{norm}.hook_normalized"] * weight(getattr(attn, f"{qk}_norm"))
            close(c[f"{b}.attn.hook_rot_{qk}"].norm(dim=-1), before.norm(dim=-1),
                  depth=cfg.d_head + 2, what=f"{b} |rot_{qk}| = |{qk}|")
        # Causal attention (and on a sliding layer, nothing sliding_window or more back):
        # scores -inf where hidden, pattern zero there, rows sum to 1.
        future = ~attn.allowed(positions, positions)                                       # [q_pos, k_pos]
        if attn.sliding_window is not None and n_pos > attn.sliding_window:
            assert future[-1, 0], "a sliding layer hides the far past"
        scores, pattern = c[f"{b}.attn.hook_attn_scores"], c[f"{b}.attn.hook_pattern"]
        assert torch.isneginf(scores[..., future]).all() and torch.isfinite(scores[..., ~future]).all()
        assert (pattern[..., future] == 0).all()
        close(pattern.sum(-1), torch.ones(pattern.shape[:-1]), depth=n_pos, what=f"{b} pattern rows sum to 1")
        close(pattern, scores.softmax(-1), depth=n_pos, what=f"{b} pattern = softmax(scores)")
        # Each head's write adds up to the attention output (einsum per head, then a sum, against z @ W_O);
        # with post-norms that sum is what ln1_post normalizes, and its output is what is added.
        result = c[f"{b}.attn.hook_result"]
        summed = c[f"{b}.ln1_post.hook_normalized"] * c[f"{b}.ln1_post.hook_scale"] if cfg.post_norms \
            else c[f"{b}.hook_attn_out"]
        close(result.sum(dim=2), summed, depth=cfg.n_heads * cfg.d_head + cfg.n_heads + 2,
              scale=max(finite_scale(result), finite_scale(summed)), what=f"{b} sum of head writes")
        if cfg.post_norms:
            block = lm.decoder.blocks[L]
            for ln, out in (("ln1_post", "hook_attn_out"), ("ln2_post", "hook_mlp_out")):
                close(c[f"{b}.{out}"], c[f"{b}.{ln}.hook_normalized"] * weight(getattr(block, ln)), depth=1,
                      what=f"{b}.{out} = {ln}(sub-layer output)")
        # Residual stream bookkeeping and the gated MLP.
        close(c[f"{b}.hook_resid_mid"], c[f"{b}.hook_resid_pre"] + c[f"{b}.hook_attn_out"], depth=1,
              what=f"{b} resid_mid")
        close(c[f"{b}.hook_resid_post"], c[f"{b}.hook_resid_mid"] + c[f"{b}.hook_mlp_out"], depth=1,
              what=f"{b} resid_post")
        close(c[f"{b}.mlp.hook_post"], lm.decoder.blocks[L].mlp.act(c[f"{b}.mlp.hook_pre"]) * c[f"{b}.mlp.hook_pre_linear"],
              depth=2, what=f"{b} mlp post = act(gate) x up")
        if L + 1 < cfg.n_layers:
            assert torch.equal(c[f"blocks.{L + 1}.hook_resid_pre"], c[f"{b}.hook_resid_post"])
        attn_and_mlp = attn_and_mlp + c[f"{b}.hook_attn_out"] + c[f"{b}.hook_mlp_out"]
        stream_scale = max(stream_scale, finite_scale(c[f"{b}.hook_attn_out"]), finite_scale(c[f"{b}.hook_mlp_out"]),
                           finite_scale(c[f"{b}.hook_resid_post"]), finite_scale(attn_and_mlp))
    final = c[f"blocks.{cfg.n_layers - 1}.hook_resid_post"]
    # The residual stream is the sum of everything written into it (the same terms, added in another order).
    close(c["hook_embed"] + attn_and_mlp, final, depth=2 * cfg.n_layers + 1, scale=stream_scale,
          what="residual stream = embedding + every write")
    close(c["ln_final.hook_scale"], (final.pow(2).mean(-1, keepdim=True) + cfg.norm_eps).sqrt(), depth=cfg.d_model,
          what="ln_final scale")
    W_U = lm.decoder.W_U.detach().cpu()
    close(run.logits, (c["ln_final.hook_normalized"] * weight(lm.decoder.ln_final)) @ W_U,
          depth=cfg.d_model + 1, what="logits = unembedded final norm")
