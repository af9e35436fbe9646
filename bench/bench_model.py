"""lesson_model against transformers on the same weights: forward with and without captures,
capture memory, warm and cold start, generation with and without the KV cache.

    python -m bench            # from the repository root (./lab bench); writes bench/RESULTS.md
    python -m bench --quick    # fewer repeats, no cold start: a smoke run
    python -m bench --model gemma-3-270m   # the same table for Gemma 3 (bench/RESULTS_gemma-3-270m.md)

Timings are medians of interleaved repeats (every variant once per round), so a burst of
load from other processes hits all variants alike. Ratios compare with the transformers
forward at the same length and thread count.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
TEXT = ("The cat sat on the mat because the mat was warm. Later the dog came in, looked at the cat, "
        "and lay down by the door. 我喜歡貓，因為貓很可愛。 def area(r):\n    return 3.14159 * r ** 2\n")
TARGETS = {"full": 1.10, "none": 1.00}


# --------------------------------------------------------------------------- the reference model

def _projections(h: str, b) -> dict:
    """One block's attention and MLP matrices under transformers' names (the same in Llama and Gemma 3)."""
    return {f"{h}.self_attn.q_proj.weight": b.attn.W_Q.T, f"{h}.self_attn.k_proj.weight": b.attn.W_K.T,
            f"{h}.self_attn.v_proj.weight": b.attn.W_V.T, f"{h}.self_attn.o_proj.weight": b.attn.W_O.T,
            f"{h}.mlp.gate_proj.weight": b.mlp.gate_proj.T, f"{h}.mlp.up_proj.weight": b.mlp.up_proj.T,
            f"{h}.mlp.down_proj.weight": b.mlp.down_proj.T}


def gemma_twin(lm):
    """A transformers Gemma3ForCausalLM holding exactly lm's weights (its norms store w, ours 1 + w)."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig
    cfg, dec = lm.cfg, lm.decoder
    config = Gemma3TextConfig(
        vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, intermediate_size=cfg.d_ff, num_hidden_layers=cfg.n_layers,
        num_attention_heads=cfg.n_heads, num_key_value_heads=cfg.n_kv_heads, head_dim=cfg.d_head,
        query_pre_attn_scalar=cfg.d_head, sliding_window=cfg.sliding_window, rms_norm_eps=cfg.norm_eps,
        layer_types=["sliding_attention" if L in cfg.sliding_layers else "full_attention" for L in range(cfg.n_layers)],
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": cfg.rope_theta_sliding},
                         "full_attention": {"rope_type": "default", "rope_theta": cfg.rope_theta}},
        max_position_embeddings=cfg.max_position, hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True,
        attn_implementation="sdpa")
    model = Gemma3ForCausalLM(config)
    w = lambda norm: norm.weight - 1.0   # noqa: E731
    sd = {"model.embed_tokens.weight": dec.W_E, "lm_head.weight": dec.W_E, "model.norm.weight": w(dec.ln_final)}
    for L, b in enumerate(dec.blocks):
        h = f"model.layers.{L}"
        sd |= {f"{h}.input_layernorm.weight": w(b.ln1), f"{h}.post_attention_layernorm.weight": w(b.ln1_post),
               f"{h}.pre_feedforward_layernorm.weight": w(b.ln2), f"{h}.post_feedforward_layernorm.weight": w(b.ln2_post),
               f"{h}.self_attn.q_norm.weight": w(b.attn.q_norm), f"{h}.self_attn.k_norm.weight": w(b.attn.k_norm),
               **_projections(h, b)}
    model.load_state_dict({k: v.detach().contiguous() for k, v in sd.items()}, strict=True)
    return model.eval().requires_grad_(False)


def transformers_twin(lm):
    """A transformers model holding exactly lm's weights: LlamaForCausalLM, or Gemma3ForCausalLM for Gemma."""
    if lm.cfg.qk_norm:
        return gemma_twin(lm)
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg, dec = lm.cfg, lm.decoder
    config = LlamaConfig(vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, intermediate_size=cfg.d_ff,
                         num_hidden_layers=cfg.n_layers, num_attention_heads=cfg.n_heads,
                         num_key_value_heads=cfg.n_kv_heads, head_dim=cfg.d_head, rope_theta=cfg.rope_theta,
                         rms_norm_eps=cfg.norm_eps, max_position_embeddings=cfg.max_position,
                         tie_word_embeddings=cfg.tie_embeddings, attn_implementation="sdpa")
    model = LlamaForCausalLM(config)
    sd = {"model.embed_tokens.weight": dec.W_E, "model.norm.weight": dec.ln_final.weight}
    if not cfg.tie_embeddings:
        sd["lm_head.weight"] = dec.W_U_untied.T
    else:
        sd["lm_head.weight"] = dec.W_E
    for L, b in enumerate(dec.blocks):
        h = f"model.layers.{L}"
        sd |= {f"{h}.input_layernorm.weight": b.ln1.weight, f"{h}.post_attention_layernorm.weight": b.ln2.weight,
               **_projections(h, b)}
    model.load_state_dict({k: v.detach().contiguous() for k, v in sd.items()}, strict=True)
    return model.eval().requires_grad_(False)


def random_smollm2_shaped():
    """SmolLM2-135M's shapes with random weights and a byte-level tokenizer: the same speed, no model
    package needed (for machines without it). Not for correctness: the tests cover that."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM

    from lesson_model import DecoderConfig, LessonModel
    from lesson_model.loading import convert_hf
    from lesson_model.tokens import TokenizerView
    cfg = DecoderConfig()
    torch.manual_seed(0)
    hf = LlamaForCausalLM(LlamaConfig(vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, intermediate_size=cfg.d_ff,
                                      num_hidden_layers=cfg.n_layers, num_attention_heads=cfg.n_heads,
                                      num_key_value_heads=cfg.n_kv_heads, rope_theta=cfg.rope_theta,
                                      tie_word_embeddings=True, initializer_range=0.04))
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return LessonModel(convert_hf(hf).eval().requires_grad_(False), TokenizerView(tok), name="random SmolLM2-shaped")


# --------------------------------------------------------------------------- timing helpers

def interleaved_medians(fns: dict, repeats: int, warmup: int = 1) -> dict[str, float]:
    """Median seconds of each callable, calling them round-robin."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            gc.collect()
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


def capture_mb(run) -> tuple[float, float]:
    """(MB the capture holds after the call, MB once every entry has been read).

    They differ by the per-head writes (hook_result), which are filled in when first read."""
    held = run.cache.held_bytes() if hasattr(run.cache, "held_bytes") else None
    everything = sum(t.numel() * t.element_size() for t in run.cache.values())
    return (everything if held is None else held) / 2**20, everything / 2**20


def forward_table(lm, hf, lengths, threads_list, repeats) -> list[dict]:
    ids_all = lm.encode(TEXT * 20)
    patterns = [f"blocks.{L}.attn.hook_pattern" for L in range(lm.cfg.n_layers)]
    rows = []
    for threads in threads_list:
        torch.set_num_threads(threads)
        for n in lengths:
            ids = torch.tensor([ids_all[:n]])

            def hf_forward(impl):
                def call():
                    hf.set_attn_implementation(impl)
                    with torch.inference_mode():
                        return hf(ids, use_cache=False).logits
                return call

            fns = {
                "transformers (sdpa)": hf_forward("sdpa"),
                "transformers (eager)": hf_forward("eager"),
                "lm.run names=[]": lambda: lm.run(ids, names=[]),
                "lm.run patterns": lambda: lm.run(ids, names=patterns),
                "lm.run names=None": lambda: lm.run(ids, names=None),
            }
            medians = interleaved_medians(fns, repeats)
            memory = {"lm.run patterns": capture_mb(lm.run(ids, names=patterns)),
                      "lm.run names=None": capture_mb(lm.run(ids, names=None)), "lm.run names=[]": (0.0, 0.0)}
            for name, seconds in medians.items():
                rows.append({"threads": threads, "tokens": n, "variant": name, "ms": seconds * 1e3,
                             "vs_sdpa": seconds / medians["transformers (sdpa)"],
                             "vs_eager": seconds / medians["transformers (eager)"],
                             "capture_mb": memory.get(name)})
            print(f"  threads={threads} tokens={n}: " + ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in medians.items()),
                  file=sys.stderr, flush=True)
    return rows


def generation_rows(lm, threads_list, new_tokens: int) -> list[dict]:
    """Tokens/s for greedy generation of exactly new_tokens (end-of-sequence tokens ignored)."""
    from lesson_model import LessonModel
    view = lm.tokenizer
    no_eos = type(view).__new__(type(view))
    no_eos.__dict__ = dict(view.__dict__, eos_ids=set())
    lm_no_eos = LessonModel(lm.decoder, no_eos, name=lm.name)
    if view.chat_template:
        prompt = lm.encode(lm.chat_template([{"role": "user", "content": "Write a short story about a cat who learns to read."}]))
    else:
        prompt = lm.encode(TEXT)[:40]
    rows = []
    for threads in threads_list:
        torch.set_num_threads(threads)
        result = {}
        for use_kv_cache in (True, False):
            list(lm_no_eos.generate_steps(prompt, 4, temperature=0, use_kv_cache=use_kv_cache))   # warm up
            start = time.perf_counter()
            steps = list(lm_no_eos.generate_steps(prompt, new_tokens, temperature=0, use_kv_cache=use_kv_cache))
            seconds = time.perf_counter() - start
            assert len(steps) == new_tokens
            result[use_kv_cache] = (new_tokens / seconds, [s.token_id for s in steps])
        assert result[True][1] == result[False][1], "greedy output differs with and without the KV cache"
        rows.append({"threads": threads, "prompt_tokens": len(prompt), "new_tokens": new_tokens,
                     "kv_tps": result[True][0], "no_kv_tps": result[False][0],
                     "speedup": result[True][0] / result[False][0]})
        print(f"  generation threads={threads}: kv {result[True][0]:.1f} tok/s, "
              f"no kv {result[False][0]:.1f} tok/s", file=sys.stderr, flush=True)
    return rows


STARTUP = """
import json, sys, time
t0 = time.perf_counter()
from lesson_model import load_model
t1 = time.perf_counter()
lm = load_model(sys.argv[1] if len(sys.argv) > 1 else None, device="cpu")
t2 = time.perf_counter()
lm.run("warm", names=[])
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "first_run_s": time.perf_counter() - t2}))
"""


def start_seconds(cache: str | None, model: str | None = None) -> dict:
    """load_model(model) in a fresh interpreter; cache=None means the user's default cache."""
    env = dict(os.environ)
    if cache is not None:
        env["DECODER_LAB_CACHE"] = cache
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", STARTUP] + ([model] if model else []), cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["process_s"] = time.perf_counter() - start
    return result


def startup_rows(cold: bool, model: str | None = None) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="decoder-lab-bench-") as empty:
        if cold:
            rows.append({"kind": "cold (empty cache: convert GGUF, write cache)", **start_seconds(empty, model)})
            warm = [start_seconds(empty, model) for _ in range(3)]
            rows.append({"kind": "warm (cache just written)", **min(warm, key=lambda r: r["load_s"])})
    warm = [start_seconds(None, model) for _ in range(3)]
    rows.append({"kind": "warm (user cache)", **min(warm, key=lambda r: r["load_s"])})
    for r in rows:
        print(f"  start {r['kind']}: load_model {r['load_s']:.2f} s, process {r['process_s']:.2f} s",
              file=sys.stderr, flush=True)
    return rows


# --------------------------------------------------------------------------- the table

def machine_description() -> str:
    name = platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{name}, {os.cpu_count()} cores"


def load_average() -> float | None:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def render(forward, generation, startup, meta) -> str:
    lines = [f"# Benchmark: lesson_model vs transformers ({meta['model']})", "",
             f"{meta['when']} · {meta['machine']}, load average {meta['load']} · torch {meta['torch']} · "
             f"transformers {meta['transformers']} · {meta['repeats']} interleaved repeats, medians", "",
             "| threads | tokens | variant | ms | vs transformers sdpa | vs transformers eager | capture MB held (all read) | target |",
             "|---:|---:|---|---:|---:|---:|---:|---|"]
    for r in forward:
        target = ""
        if r["variant"] == "lm.run names=None":
            target = f"≤{TARGETS['full']:.2f}x sdpa: {'met' if r['vs_sdpa'] <= TARGETS['full'] else 'MISSED'}"
        elif r["variant"] == "lm.run names=[]":
            target = f"≤{TARGETS['none']:.2f}x sdpa: {'met' if r['vs_sdpa'] <= TARGETS['none'] else 'MISSED'}"
        mb = "" if r["capture_mb"] is None else f"{r['capture_mb'][0]:.1f} ({r['capture_mb'][1]:.1f})"
        lines.append(f"| {r['threads']} | {r['tokens']} | {r['variant']} | {r['ms']:.1f} | {r['vs_sdpa']:.2f}x | "
                     f"{r['vs_eager']:.2f}x | {mb} | {target} |")
    lines += ["", "| threads | prompt tokens | new tokens | KV cache tok/s | no cache tok/s | speedup | target |",
              "|---:|---:|---:|---:|---:|---:|---|"]
    for r in generation:
        lines.append(f"| {r['threads']} | {r['prompt_tokens']} | {r['new_tokens']} | {r['kv_tps']:.1f} | "
                     f"{r['no_kv_tps']:.1f} | {r['speedup']:.2f}x | ≥2x: {'met' if r['speedup'] >= 2 else 'MISSED'} |")
    lines += ["", "| start | import s | load_model() s | first run s | whole process s | target |",
              "|---|---:|---:|---:|---:|---|"]
    for r in startup:
        target = "" if r["kind"].startswith("cold") else f"load_model() ≤3 s: {'met' if r['load_s'] <= 3 else 'MISSED'}"
        lines.append(f"| {r['kind']} | {r['import_s']:.2f} | {r['load_s']:.2f} | {r['first_run_s']:.2f} | "
                     f"{r['process_s']:.2f} | {target} |")
    lines += ["", "Forward: one [1, tokens] batch, logits for every position, inside inference_mode; transformers "
              "is LlamaForCausalLM (Gemma3ForCausalLM for Gemma) on the same weights with use_cache=False. `patterns` captures every "
              "layer's hook_pattern; `names=None` captures every hook point (hook_result included). "
              "Capture MB: the captured tensors' bytes held right after the call, and (in brackets) once every "
              "entry has been read (hook_result is computed from hook_z when first read). "
              "Start-up: a fresh interpreter each time; import is `import lesson_model` (mostly torch), "
              "the target is load_model()'s own time.", ""]
    if (Path(__file__).parent / "RESULTS_idle_16core.md").exists() and meta["model"] != "random SmolLM2-shaped":
        lines += ["On a shared 2-core machine the forward timings are noisy; RESULTS_idle_16core.md has the same "
                  "benchmark (random weights at SmolLM2's shapes, `--random-weights`) on an idle 16-core machine.", ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, no cold start, do not write RESULTS.md")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--skip", nargs="*", default=[], choices=["forward", "generation", "startup"])
    parser.add_argument("--output", help="write the table here (default: bench/RESULTS.md after a full run)")
    parser.add_argument("--model", default=None, help="a bundled model: smollm2-135m (default) or gemma-3-270m")
    parser.add_argument("--random-weights", action="store_true",
                        help="SmolLM2's shapes with random weights (no model package; skips the start-up rows)")
    args = parser.parse_args(argv)
    repeats = args.repeats or (3 if args.quick else 9)

    import transformers

    from lesson_model import load_model
    load_at_start = load_average()
    lm = random_smollm2_shaped() if args.random_weights else load_model(args.model, device="cpu")
    hf = transformers_twin(lm)
    ids = torch.tensor([lm.encode(TEXT)])
    with torch.inference_mode():
        gap = (hf(ids, use_cache=False).logits - lm.run(ids, names=[]).logits).abs().max().item()
    assert gap < 1e-3, f"the transformers twin disagrees with lesson_model by {gap}"
    print(f"same weights: max |logit difference| {gap:.2e}", file=sys.stderr, flush=True)

    threads_before = torch.get_num_threads()
    forward = [] if "forward" in args.skip else forward_table(lm, hf, args.lengths, args.threads, repeats)
    generation = [] if "generation" in args.skip else generation_rows(lm, args.threads, 64)
    torch.set_num_threads(threads_before)
    del hf
    gc.collect()
    startup = [] if ("startup" in args.skip or args.random_weights) else startup_rows(cold=not args.quick, model=args.model)

    load_at_end = load_average()
    load = "n/a" if load_at_start is None else f"{load_at_start:.1f} at start, {load_at_end:.1f} at end"
    meta = {"model": lm.name, "when": time.strftime("%Y-%m-%d %H:%M"), "repeats": repeats, "load": load,
            "machine": machine_description(), "torch": torch.__version__,
            "transformers": transformers.__version__}
    table = render(forward, generation, startup, meta)
    print(table)
    if args.output:
        Path(args.output).write_text(table, encoding="utf-8")
    elif not (args.quick or args.random_weights or args.skip):
        out = RESULTS if args.model in (None, "smollm2-135m") else RESULTS.with_name(f"RESULTS_{args.model}.md")
        out.write_text(table, encoding="utf-8")
