"""The readable decoder against transformers on tiny random checkpoints (fast suite)."""

from __future__ import annotations

import pytest
import torch

from lesson_model import Hooks, KVCache, LessonModel
from lesson_model.loading import convert_hf
from tests._fixtures_model import (  # noqa: F401
    assert_close_f32,
    assert_run_invariants,
    block_output_depth,
    finite_scale,
    logits_depth,
    pattern_depth,
    random_hf_model,
    tiny,
    tiny_llama_config,
    tiny_tokenizer_view,
    torch_threads,
)


def random_ids(lm, batch=2, n_pos=12, seed=0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, lm.cfg.vocab_size, (batch, n_pos), generator=g)


def hf_forward(hf, ids):
    with torch.no_grad():
        return hf(ids, output_attentions=True)


def scores_names(lm) -> list[str]:
    return [f"blocks.{L}.attn.hook_attn_scores" for L in range(lm.cfg.n_layers)]


def assert_logits_close(lm, actual, expected, what: str) -> None:
    assert_close_f32(actual, expected, depth=logits_depth(lm.cfg, expected.shape[-2]), what=what)


def assert_pattern_close(lm, actual, expected, run, layer: int, what: str) -> None:
    """A pattern's float32 error is its scores' error, passed on by the softmax: the scores set the scale."""
    assert_close_f32(actual, expected, depth=pattern_depth(lm.cfg, expected.shape[-1], layer),
                     scale=finite_scale(run.cache[f"blocks.{layer}.attn.hook_attn_scores"]), what=what)


# --------------------------------------------------------------------------- parity with transformers

def test_logits_equal_transformers(tiny, torch_threads):
    hf, lm = tiny
    ids = random_ids(lm)
    assert_logits_close(lm, lm.run(ids, names=[]).logits, hf_forward(hf, ids).logits, "tiny: logits")


def test_attention_patterns_equal_transformers_eager(tiny, torch_threads):
    hf, lm = tiny
    ids = random_ids(lm, seed=1)
    names = [f"blocks.{L}.attn.hook_pattern" for L in range(lm.cfg.n_layers)]
    run = lm.run(ids, names=names + scores_names(lm))
    ref = hf_forward(hf, ids)
    assert set(run.cache) == set(names + scores_names(lm))
    for L, hf_pattern in enumerate(ref.attentions):
        assert_pattern_close(lm, run.cache[names[L]], hf_pattern, run, L, f"tiny: layer {L} pattern")
    assert_logits_close(lm, run.logits, ref.logits, "tiny: logits with patterns")


def test_full_capture_logits_equal_transformers_and_invariants_hold(tiny, torch_threads):
    hf, lm = tiny
    ids = random_ids(lm, seed=2)
    run = lm.run(ids, names=None)
    assert_logits_close(lm, run.logits, hf_forward(hf, ids).logits, "tiny: full-capture logits")
    assert_run_invariants(lm, run)


@pytest.mark.parametrize("arch", ["qwen2", "mistral", "llama-tied-bias"])
def test_other_llama_family_configs_equal_transformers(arch, torch_threads):
    from transformers import MistralConfig, Qwen2Config
    common = dict(vocab_size=97, hidden_size=48, intermediate_size=80, num_hidden_layers=2, num_attention_heads=6,
                  num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6, initializer_range=0.2)
    if arch == "qwen2":
        config = Qwen2Config(**common, rope_theta=1000.0, tie_word_embeddings=True)
    elif arch == "mistral":
        config = MistralConfig(**common, rope_theta=1000.0, sliding_window=None)
    else:
        config = tiny_llama_config(**common, tie_word_embeddings=True, head_dim=16)
    hf = random_hf_model(config, seed=3)
    if arch == "qwen2":   # the random init leaves biases at zero; make them matter
        with torch.no_grad():
            for name, p in hf.named_parameters():
                if name.endswith("bias"):
                    p.normal_(0, 0.5)
    decoder = convert_hf(hf)
    assert decoder.cfg.attn_bias == (arch == "qwen2")
    lm = LessonModel(decoder, tiny_tokenizer_view(), name=arch)
    ids = random_ids(lm, seed=4, n_pos=10)
    ref = hf_forward(hf, ids)
    run = lm.run(ids, names=[f"blocks.{L}.attn.hook_pattern" for L in range(2)] + scores_names(lm))
    assert_logits_close(lm, run.logits, ref.logits, f"{arch}: logits")
    for L in range(2):
        assert_pattern_close(lm, run.cache[f"blocks.{L}.attn.hook_pattern"], ref.attentions[L], run, L,
                             f"{arch}: layer {L} pattern")


def test_unsupported_checkpoint_features_are_refused():
    for overrides in (dict(attention_bias=True), dict(mlp_bias=True), dict(hidden_act="gelu"),
                      dict(rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0})):
        hf = random_hf_model(tiny_llama_config(**overrides))
        with pytest.raises(NotImplementedError):
            convert_hf(hf)


# --------------------------------------------------------------------------- the two attention paths

def test_explicit_attention_equals_fused_sdpa(tiny, torch_threads):
    _, lm = tiny
    cfg = lm.cfg
    ids = random_ids(lm, seed=5, n_pos=16)
    z_names = [f"blocks.{L}.attn.hook_z" for L in range(cfg.n_layers)]
    v_names = [f"blocks.{L}.attn.hook_v" for L in range(cfg.n_layers)]
    fused = lm.run(ids, names=z_names)                                        # nobody asks for the pattern
    explicit = lm.run(ids, names=z_names + v_names + ["blocks.0.attn.hook_pattern"] + scores_names(lm))
    assert_logits_close(lm, explicit.logits, fused.logits, "explicit vs fused attention: logits")
    for L, name in enumerate(z_names):
        # z = pattern @ v: its error is the scores' error times |v| plus the values' own error.
        scale = finite_scale(explicit.cache[v_names[L]]) * max(1.0, finite_scale(explicit.cache[scores_names(lm)[L]]))
        assert_close_f32(explicit.cache[name], fused.cache[name], depth=pattern_depth(cfg, 16, L) + 16, scale=scale,
                         what=f"explicit vs fused attention: layer {L} z")


@pytest.mark.parametrize("explicit", [False, True], ids=["sdpa", "explicit"])
def test_kv_cache_forward_equals_full_forward(tiny, explicit, torch_threads):
    _, lm = tiny
    ids = random_ids(lm, batch=2, seed=6, n_pos=11)
    names = [f"blocks.{L}.attn.hook_pattern" for L in range(lm.cfg.n_layers)] if explicit else []
    with torch.inference_mode():
        full = lm.decoder(ids, Hooks(names))
        cache = KVCache(lm.cfg.n_layers)
        pieces = [lm.decoder(ids[:, :4], Hooks(names), kv_cache=cache)]     # a prompt of 4, then one at a time
        for i in range(4, ids.shape[1]):
            hooks = Hooks(names)
            pieces.append(lm.decoder(ids[:, i:i + 1], hooks, kv_cache=cache))
            if explicit:   # the new query row attends over every stored key
                assert hooks.cache["blocks.0.attn.hook_pattern"].shape[-2:] == (1, i + 1)
    assert len(cache) == ids.shape[1]
    assert_logits_close(lm, torch.cat(pieces, dim=1), full, f"KV cache ({'explicit' if explicit else 'sdpa'}) vs full")
    cache.crop(5)
    assert len(cache) == 5 and cache.keys[1].shape[1] == 5


# --------------------------------------------------------------------------- hooks: captures

def test_last_only_unembeds_the_last_position_and_keeps_every_hook(tiny):
    _, lm = tiny
    ids = random_ids(lm, batch=2, n_pos=6)
    names = ["ln_final.hook_scale", "ln_final.hook_normalized", "blocks.0.hook_resid_post"]
    full, last = lm.run(ids, names=names), lm.run(ids, names=names, last_only=True)
    assert last.logits.shape == (2, 1, lm.cfg.vocab_size)
    # The same numbers up to rounding: a matrix product over 1 row and over 6 rows may sum in another
    # order (seen: 1.4e-6 apart on one CPU); another position's logits would be ~1 apart.
    torch.testing.assert_close(last.logits, full.logits[:, -1:], rtol=1e-5, atol=1e-5)
    assert not torch.allclose(last.logits, full.logits[:, -2:-1], rtol=1e-3, atol=1e-3)
    for name in names:          # the final norm's hooks too: the pages read them at any position
        assert last.cache[name].shape == full.cache[name].shape
        torch.testing.assert_close(last.cache[name], full.cache[name], rtol=0, atol=0)


def test_unembed_false_stops_at_the_final_norm(tiny):
    _, lm = tiny
    ids = random_ids(lm, batch=2, n_pos=6)
    names = ["ln_final.hook_normalized"]
    full = lm.run(ids, names=names)
    for last_only in (False, True):
        run = lm.run(ids, names=names, last_only=last_only, unembed=False)
        assert run.logits is None
        out = full.cache[names[0]] * lm.decoder.ln_final.weight          # the final norm's output
        want = out[:, -1:] if last_only else out
        assert run.final.shape == want.shape                      # [batch, pos or 1, d_model]
        torch.testing.assert_close(run.final, want, rtol=0, atol=0)
        torch.testing.assert_close(run.final @ lm.decoder.W_U, full.logits[:, -run.final.shape[1]:],
                                   rtol=1e-5, atol=1e-5)


def test_hook_shapes_follow_the_table(tiny):
    _, lm = tiny
    cfg = lm.cfg
    batch, n_pos = 2, 7
    run = lm.run(random_ids(lm, batch=batch, n_pos=n_pos), names=None)
    assert list(run.cache) == lm.hook_names(), "names=None captures every hook point, in forward order"
    d, h, kv, dh, ff = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.d_head, cfg.d_ff
    expected = {"hook_embed": (batch, n_pos, d), "ln_final.hook_scale": (batch, n_pos, 1),
                "ln_final.hook_normalized": (batch, n_pos, d)}
    for L in range(cfg.n_layers):
        b = f"blocks.{L}"
        expected |= {f"{b}.hook_resid_pre": (batch, n_pos, d), f"{b}.hook_resid_mid": (batch, n_pos, d),
                     f"{b}.hook_resid_post": (batch, n_pos, d), f"{b}.hook_attn_out": (batch, n_pos, d),
                     f"{b}.hook_mlp_out": (batch, n_pos, d),
                     f"{b}.ln1.hook_scale": (batch, n_pos, 1), f"{b}.ln2.hook_scale": (batch, n_pos, 1),
                     f"{b}.ln1.hook_normalized": (batch, n_pos, d), f"{b}.ln2.hook_normalized": (batch, n_pos, d),
                     f"{b}.attn.hook_q": (batch, n_pos, h, dh), f"{b}.attn.hook_rot_q": (batch, n_pos, h, dh),
                     f"{b}.attn.hook_k": (batch, n_pos, kv, dh), f"{b}.attn.hook_rot_k": (batch, n_pos, kv, dh),
                     f"{b}.attn.hook_v": (batch, n_pos, kv, dh),
                     f"{b}.attn.hook_attn_scores": (batch, h, n_pos, n_pos),
                     f"{b}.attn.hook_pattern": (batch, h, n_pos, n_pos),
                     f"{b}.attn.hook_z": (batch, n_pos, h, dh), f"{b}.attn.hook_result": (batch, n_pos, h, d),
                     f"{b}.mlp.hook_pre": (batch, n_pos, ff), f"{b}.mlp.hook_pre_linear": (batch, n_pos, ff),
                     f"{b}.mlp.hook_post": (batch, n_pos, ff)}
    assert {k: tuple(v.shape) for k, v in run.cache.items()} == expected
    assert run.logits.shape == (batch, n_pos, cfg.vocab_size)


def test_names_select_what_is_captured(tiny):
    _, lm = tiny
    ids = random_ids(lm, n_pos=5)
    assert lm.run(ids, names=[]).cache == {}
    chosen = ["blocks.1.attn.hook_result", "hook_embed", "blocks.0.mlp.hook_post"]
    run = lm.run(ids, names=chosen)
    assert set(run.cache) == set(chosen)
    full = lm.run(ids, names=None)      # explicit attention everywhere: the same numbers up to float32 rounding
    assert torch.equal(run.cache["hook_embed"], full.cache["hook_embed"])
    for name, layer in (("blocks.1.attn.hook_result", 1), ("blocks.0.mlp.hook_post", 0)):
        assert_close_f32(run.cache[name], full.cache[name], depth=block_output_depth(lm.cfg, 5, layer), what=name)
    assert_logits_close(lm, run.logits, full.logits, "chosen captures vs full capture: logits")


def test_unknown_hook_names_raise(tiny):
    _, lm = tiny
    with pytest.raises(KeyError, match="blocks.9.attn.hook_z"):
        lm.run([1, 2, 3], names=["blocks.9.attn.hook_z"])
    with pytest.raises(KeyError, match="hook_nope"):
        lm.run([1, 2, 3], hooks={"blocks.0.attn.hook_nope": lambda t: t})
    with pytest.raises(KeyError):
        lm.run([1, 2, 3], names="hook_embed")   # a bare string is not a list of names


def test_inputs_as_string_list_and_tensor_agree(tiny):
    _, lm = tiny
    text = "the cat sat on the mat"
    ids = lm.encode(text)
    a = lm.run(text, names=[]).logits
    for x in (ids, torch.tensor(ids), torch.tensor([ids])):
        torch.testing.assert_close(lm.run(x, names=[]).logits, a, atol=0, rtol=0)
    with pytest.raises(ValueError):
        lm.run([], names=[])
    with pytest.raises(ValueError):
        lm.run([lm.cfg.vocab_size], names=[])


def test_batch_rows_are_independent(tiny, torch_threads):
    _, lm = tiny
    ids = random_ids(lm, batch=3, n_pos=9, seed=7)
    batched = lm.run(ids, names=None)
    for row in range(3):
        alone = lm.run(ids[row:row + 1], names=None)
        assert_logits_close(lm, batched.logits[row:row + 1], alone.logits, f"batch row {row}: logits")
        assert_pattern_close(lm, batched.cache["blocks.1.attn.hook_pattern"][row:row + 1],
                             alone.cache["blocks.1.attn.hook_pattern"], alone, 1, f"batch row {row}: layer 1 pattern")


# --------------------------------------------------------------------------- hooks: interventions

def test_zeroing_one_head_equals_the_manual_computation(tiny):
    _, lm = tiny
    cfg = lm.cfg
    layer, head = 1, 2
    ids = random_ids(lm, batch=1, n_pos=10, seed=8)
    name = f"blocks.{layer}.attn.hook_z"

    def zero_head(z):                        # [batch, pos, n_heads, d_head]
        return z.index_fill(2, torch.tensor([head]), 0.0)

    clean = lm.run(ids, names=None)
    ablated = lm.run(ids, names=None, hooks={name: zero_head})
    assert (ablated.cache[name][:, :, head] == 0).all(), "the capture sees the replaced tensor"
    assert not torch.allclose(ablated.logits, clean.logits, atol=1e-3)

    # By hand: the attention output is the clean z with that head zeroed, through W_O ...
    z = clean.cache[name].clone()
    z[:, :, head] = 0
    W_O = lm.decoder.blocks[layer].attn.W_O
    attn_out = z.reshape(1, 10, cfg.n_heads * cfg.d_head) @ W_O
    heads_sum = cfg.n_heads * cfg.d_head + cfg.n_heads       # z @ W_O against per-head writes added up
    result = clean.cache[f"blocks.{layer}.attn.hook_result"]
    sum_scale = max(finite_scale(result), finite_scale(clean.cache[f"blocks.{layer}.hook_attn_out"]))
    assert_close_f32(ablated.cache[f"blocks.{layer}.hook_attn_out"], attn_out, depth=heads_sum, scale=sum_scale,
                     what="ablated attn_out vs z @ W_O by hand")
    # ... which is the clean attention output minus that head's write ...
    assert_close_f32(attn_out, clean.cache[f"blocks.{layer}.hook_attn_out"] - result[:, :, head], depth=heads_sum,
                     scale=sum_scale, what="attn_out minus one head's write")
    assert (ablated.cache[f"blocks.{layer}.attn.hook_result"][:, :, head] == 0).all()
    # ... and the rest of the network (the last block's MLP, the final norm, the unembedding) follows.
    block = lm.decoder.blocks[layer]
    with torch.inference_mode():
        resid_mid = clean.cache[f"blocks.{layer}.hook_resid_pre"] + attn_out
        resid_post = resid_mid + block.mlp(block.ln2(resid_mid, Hooks(())), Hooks(()))
        logits = lm.decoder.ln_final(resid_post, Hooks(())) @ lm.decoder.W_U
    assert_close_f32(ablated.logits, logits, depth=block_output_depth(cfg, 10, 0) + 2 * cfg.d_model,
                     what="ablated logits vs the last block by hand")


def test_hooks_replace_and_observe(tiny):
    _, lm = tiny
    ids = random_ids(lm, batch=1, n_pos=6, seed=9)
    seen = {}

    def observe(x):                          # returns None: the tensor is kept
        seen["shape"] = tuple(x.shape)

    clean = lm.run(ids, names=[])
    observed = lm.run(ids, names=[], hooks={"blocks.0.mlp.hook_post": observe})
    assert seen["shape"] == (1, 6, lm.cfg.d_ff)
    torch.testing.assert_close(observed.logits, clean.logits, atol=0, rtol=0)

    # Replace the last residual stream: the logits are the unembedding of its normalized form.
    last = f"blocks.{lm.cfg.n_layers - 1}.hook_resid_post"
    new_resid = torch.randn(1, 6, lm.cfg.d_model)
    patched = lm.run(ids, names=["ln_final.hook_normalized"], hooks={last: lambda _: new_resid})
    with torch.inference_mode():
        expected = lm.decoder.ln_final(new_resid, Hooks(())) @ lm.decoder.W_U
    assert_close_f32(patched.logits, expected, depth=2 * lm.cfg.d_model, what="logits of a replaced residual stream")

    # Hooking the pattern (forces the explicit path) and scaling it changes z accordingly.
    doubled = lm.run(ids, names=["blocks.0.attn.hook_z"], hooks={"blocks.0.attn.hook_pattern": lambda p: 2 * p})
    normal = lm.run(ids, names=["blocks.0.attn.hook_z", "blocks.0.attn.hook_pattern"])   # the explicit path too
    # Doubling is exact in floating point, and so is every sum of doubled terms: the same bits, twice.
    assert torch.equal(doubled.cache["blocks.0.attn.hook_z"], 2 * normal.cache["blocks.0.attn.hook_z"])


def test_hooks_are_per_call_and_leave_the_model_untouched(tiny):
    _, lm = tiny
    ids = random_ids(lm, batch=1, n_pos=6, seed=10)
    before = {k: v.clone() for k, v in lm.decoder.state_dict().items()}
    clean = lm.run(ids, names=[])
    lm.run(ids, hooks={"blocks.0.hook_resid_post": lambda x: x * 0})
    again = lm.run(ids, names=[])
    torch.testing.assert_close(again.logits, clean.logits, atol=0, rtol=0)
    for k, v in lm.decoder.state_dict().items():
        assert torch.equal(v, before[k]), k
    assert not any(p.requires_grad for p in lm.decoder.parameters())


def test_param_counts_add_up(tiny):
    _, lm = tiny
    counts = lm.param_counts()
    assert counts["total"] == sum(p.numel() for p in lm.decoder.parameters())
    assert counts["unembedding"] == lm.cfg.d_model * lm.cfg.vocab_size   # untied in the tiny config


def test_decoder_source_is_readable():
    """decoder.py is shown to learners: every tensor line in the forward passes says its shape."""
    import inspect

    from lesson_model import decoder
    src = inspect.getsource(decoder)
    assert "import streamlit" not in src and "plotly" not in src
    for cls in (decoder.Attention, decoder.MLP, decoder.RMSNorm, decoder.Block, decoder.Decoder):
        assert "[batch, pos" in inspect.getsource(cls.forward), cls.__name__


def test_decoder_lines_fit_the_code_panel():
    """The "In the code" panels cut lines off past 100 characters (and with them the shape comments)."""
    from lesson_model import decoder
    with open(decoder.__file__, encoding="utf-8") as f:
        long = [(n, len(line)) for n, line in enumerate(f.read().splitlines(), 1) if len(line) > 100]
    assert not long, f"lines of decoder.py over 100 characters (line, length): {long}"


def test_modules_hook_names_are_their_paths(tiny):
    """Each module names its hook points after its place in the model (blocks.1.ln1, ...), the
    same path as its weights in the state_dict."""
    _, lm = tiny
    named = {path: m for path, m in lm.decoder.named_modules() if hasattr(m, "name")}
    assert {"blocks.0.ln1", "blocks.0.attn", "blocks.0.mlp", "blocks.1", "ln_final"} <= named.keys()
    for path, module in named.items():
        assert module.name == path


def test_head_results_are_filled_in_when_read(tiny):
    """Captured hook_result (no hook function) is computed from hook_z on first read: the same
    numbers as computing it during the pass, and capturing it does not change the logits."""
    _, lm = tiny
    ids = random_ids(lm, batch=2, n_pos=9, seed=11)
    name = "blocks.1.attn.hook_result"
    lazy = lm.run(ids, names=[name])
    eager = lm.run(ids, names=[name], hooks={name: lambda t: None})     # a hook function forces it during the pass
    assert name in lazy.cache and list(lazy.cache) == [name] and len(lazy.cache) == 1
    assert lazy.cache.held_bytes() == 0
    assert torch.equal(lazy.cache[name], eager.cache[name])
    assert lazy.cache.held_bytes() == lazy.cache[name].numel() * 4
    assert lazy.cache[name] is lazy.cache[name], "computed once"
    assert torch.equal(lazy.logits, lm.run(ids, names=[]).logits), "an unread capture changes nothing"
    assert_logits_close(lm, eager.logits, lazy.logits, "head writes summed vs z @ W_O: logits")

    full = lm.run(ids, names=None)
    held = full.cache.held_bytes()
    results = sum(full.cache[f"blocks.{L}.attn.hook_result"].numel() * 4 for L in range(lm.cfg.n_layers))
    assert full.cache.held_bytes() == held + results
    assert dict(full.cache).keys() == set(lm.hook_names())
    with pytest.raises(KeyError):
        full.cache["blocks.0.attn.hook_nope"]
    assert "blocks.0.attn.hook_nope" not in full.cache


def test_assert_close_f32_finds_the_exact_worst_difference():
    """The float32 first pass of assert_close_f32 decides as the exact float64 one would: the
    same pass or fail on either side of the bound, non-finite entries compared by place and value,
    and finite_scale exact in float32."""
    g = torch.Generator().manual_seed(0)
    expected = torch.randn(64, 257, generator=g) * 3
    expected[0, :5] = float("-inf")
    actual = expected + torch.randn(64, 257, generator=g) * 1e-7
    exact = (actual.double() - expected.double()).abs().nan_to_num(0).max().item()
    assert finite_scale(expected) == expected.double()[expected.isfinite()].abs().max().item()
    worst = assert_close_f32(actual, expected, depth=1, what="noise", scale=1.0, safety=exact / (2.0 ** -23) * 1.001)
    assert worst == pytest.approx(exact, rel=2.0 ** -23)
    with pytest.raises(AssertionError, match="exceeds the float32 bound"):
        assert_close_f32(actual, expected, depth=1, what="noise", scale=1.0, safety=exact / (2.0 ** -23) * 0.999)
    at_the_bound = exact / (2.0 ** -23)            # too close to call in float32: decided in float64
    assert assert_close_f32(actual, expected, depth=1, what="noise", scale=1.0, safety=at_the_bound) == exact
    moved = actual.clone()
    moved[0, 5] = float("-inf")
    with pytest.raises(AssertionError, match="non-finite entries at different places"):
        assert_close_f32(moved, expected, depth=1, what="moved", scale=1.0)
    flipped = actual.clone()
    flipped[0, 0] = float("inf")
    with pytest.raises(AssertionError, match="different non-finite values"):
        assert_close_f32(flipped, expected, depth=1, what="flipped", scale=1.0)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("where", [0, 4097, -1])
def test_assert_close_f32_sees_one_non_finite_entry_anywhere(bad, where):
    """The all-finite shortcut (one max |x| per tensor instead of masks) must not hide a single
    NaN or infinity, wherever it sits in a tensor large enough for vectorized reductions:
    finite_scale leaves it out, assert_close_f32 finds it on either side."""
    g = torch.Generator().manual_seed(1)
    expected = torch.randn(3, 70_001, generator=g)
    actual = expected + 1e-7
    assert finite_scale(expected) == expected.abs().max().item()
    odd = expected.clone()
    odd.view(-1)[where] = bad
    assert finite_scale(odd) == expected.view(-1)[torch.arange(expected.numel()) != where % expected.numel()].abs().max().item()
    for a, e in ((odd, expected), (actual, odd)):
        with pytest.raises(AssertionError, match="non-finite entries at different places"):
            assert_close_f32(a, e, depth=1, what="one bad", scale=1.0, safety=1e6)
    both = actual.clone()
    both.view(-1)[where] = bad
    assert assert_close_f32(both, odd, depth=1, what="same place", scale=1.0, safety=1e6) > 0   # compared by place
