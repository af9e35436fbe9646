"""Shared builders for the model tests: a tiny random Llama, a tiny byte-level tokenizer,
and (loaded once per process) the real SmolLM2 with its transformers reference.

Import the fixtures you need into a test module:

    from tests._fixtures_model import tiny, smollm2, reference   # noqa: F401

Every expensive builder is memoised at module level, so a session-scoped fixture imported
into several modules still loads its model only once per pytest process.
"""

from __future__ import annotations

import functools
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


# --------------------------------------------------------------------------- the real model

@functools.cache
def _smollm2():
    from lesson_model import load_model
    return load_model(device="cpu")


@functools.cache
def _reference_tokenizer():
    """transformers' tokenizer rebuilt from the same GGUF file (~8 s)."""
    from transformers import AutoTokenizer
    from lesson_model.loading import bundled_gguf_path
    path = bundled_gguf_path()
    return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


@functools.cache
def _reference():
    """transformers' own load of the same GGUF file: (model with eager attention, tokenizer)."""
    from transformers import AutoModelForCausalLM
    from lesson_model.loading import bundled_gguf_path
    path = bundled_gguf_path()
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                 attn_implementation="eager", dtype=torch.float32)
    return model.eval(), _reference_tokenizer()


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


@pytest.fixture(scope="session")
def reference_tokenizer():
    return _reference_tokenizer()


@pytest.fixture(scope="session")
def reference():
    """(transformers model, tokenizer) loaded from the same GGUF file (slow: ~20 s, once)."""
    return _reference()


# --------------------------------------------------------------------------- invariants of a full capture

def assert_run_invariants(lm, run, atol: float = 1e-4) -> None:
    """Relations every full capture (names=None) must satisfy, whatever the weights."""
    import torch.nn.functional as F
    cfg, c = lm.cfg, run.cache
    close = functools.partial(torch.testing.assert_close, atol=atol, rtol=1e-4)
    n_pos = run.ids.shape[1]
    future = torch.triu(torch.ones(n_pos, n_pos, dtype=torch.bool), diagonal=1)   # [q_pos, k_pos]

    attn_and_mlp = torch.zeros_like(c["hook_embed"])
    close(c["blocks.0.hook_resid_pre"], c["hook_embed"])
    for L in range(cfg.n_layers):
        b = f"blocks.{L}"
        # RMSNorm: hook_scale is the divisor sqrt(mean(x^2) + eps), hook_normalized = x / scale.
        for ln, x in (("ln1", c[f"{b}.hook_resid_pre"]), ("ln2", c[f"{b}.hook_resid_mid"])):
            close(c[f"{b}.{ln}.hook_scale"], (x.pow(2).mean(-1, keepdim=True) + cfg.norm_eps).sqrt())
            close(c[f"{b}.{ln}.hook_normalized"] * c[f"{b}.{ln}.hook_scale"], x)
        # RoPE rotates: it keeps the norm of every head's query and key at every position.
        close(c[f"{b}.attn.hook_rot_q"].norm(dim=-1), c[f"{b}.attn.hook_q"].norm(dim=-1))
        close(c[f"{b}.attn.hook_rot_k"].norm(dim=-1), c[f"{b}.attn.hook_k"].norm(dim=-1))
        # Causal attention: scores -inf above the diagonal, pattern zero there, rows sum to 1.
        scores, pattern = c[f"{b}.attn.hook_attn_scores"], c[f"{b}.attn.hook_pattern"]
        assert torch.isneginf(scores[..., future]).all() and torch.isfinite(scores[..., ~future]).all()
        assert (pattern[..., future] == 0).all()
        close(pattern.sum(-1), torch.ones(pattern.shape[:-1]))
        close(pattern, scores.softmax(-1))
        # Each head's write adds up to the attention output.
        close(c[f"{b}.attn.hook_result"].sum(dim=2), c[f"{b}.hook_attn_out"])
        # Residual stream bookkeeping and the gated MLP.
        close(c[f"{b}.hook_resid_mid"], c[f"{b}.hook_resid_pre"] + c[f"{b}.hook_attn_out"])
        close(c[f"{b}.hook_resid_post"], c[f"{b}.hook_resid_mid"] + c[f"{b}.hook_mlp_out"])
        close(c[f"{b}.mlp.hook_post"], F.silu(c[f"{b}.mlp.hook_pre"]) * c[f"{b}.mlp.hook_pre_linear"])
        if L + 1 < cfg.n_layers:
            close(c[f"blocks.{L + 1}.hook_resid_pre"], c[f"{b}.hook_resid_post"])
        attn_and_mlp = attn_and_mlp + c[f"{b}.hook_attn_out"] + c[f"{b}.hook_mlp_out"]
    final = c[f"blocks.{cfg.n_layers - 1}.hook_resid_post"]
    # The residual stream is the sum of everything written into it.
    close(c["hook_embed"] + attn_and_mlp, final, atol=atol * 10, rtol=1e-4)
    close(c["ln_final.hook_scale"], (final.pow(2).mean(-1, keepdim=True) + cfg.norm_eps).sqrt())
    W_U = lm.decoder.W_U.detach().cpu()
    close(run.logits, (c["ln_final.hook_normalized"] * lm.decoder.ln_final.weight.detach().cpu()) @ W_U)
