"""The real Gemma 3 270M on its own (no transformers model): its config, and every relation of a
full capture of the forward pass on a short Chinese prompt and one longer than the 512-token
sliding window (tests/test_gemma_integration.py compares the same runs with transformers)."""

from __future__ import annotations

import pytest

from tests._fixtures_model import assert_run_invariants, gemma_lm  # noqa: F401
from tests.test_gemma_integration import LONG, PROMPTS

pytestmark = pytest.mark.parity


def test_config_is_gemma_3_270m(gemma_lm):
    cfg = gemma_lm.cfg
    assert (cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.d_head, cfg.d_ff, cfg.vocab_size) == \
        (18, 640, 4, 1, 256, 2048, 262144)
    assert (cfg.activation, cfg.embed_scale, cfg.qk_norm, cfg.post_norms, cfg.tie_embeddings) == \
        ("gelu_tanh", True, True, True, True)
    assert cfg.sliding_window == 512 and cfg.sliding_layers == tuple(L for L in range(18) if L % 6 != 5)
    assert (cfg.rope_theta_sliding, cfg.rope_theta) == (10_000.0, 1_000_000.0)
    assert gemma_lm.bundled.key == "gemma-3-270m" and not gemma_lm.bundled.instruct
    assert gemma_lm.tokenizer.chat_template is None
    assert 268_000_000 < gemma_lm.param_counts()["total"] < 269_000_000



@pytest.mark.parametrize("prompt", ["chinese", "long"])
def test_full_capture_invariants(gemma_lm, prompt):
    """Embedding (after the sqrt(d_model) scale) + every block's writes (after the post-norms) =
    the final residual, and every other relation of the forward pass, on Gemma."""
    text = LONG if prompt == "long" else PROMPTS[prompt]
    run = gemma_lm.run(text, names=None)
    assert len(run.cache) == len(gemma_lm.hook_names())
    assert_run_invariants(gemma_lm, run)
