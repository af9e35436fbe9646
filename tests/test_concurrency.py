"""One model object, many threads, each with its own hooks: every call gets what it would alone."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from tests._fixtures_model import smollm2, tiny  # noqa: F401

N_THREADS = 8


def zero_head(head: int):
    def hook(z):                                   # z: [batch, pos, n_heads, d_head]
        return z.index_fill(2, torch.tensor([head], device=z.device), 0.0)
    return hook


def jobs_for(lm, ids):
    """Eight different calls: ablations of different heads and layers, captures of different points."""
    cfg = lm.cfg
    jobs = []
    n_combos = cfg.n_layers * cfg.n_heads
    for i in range(N_THREADS):
        spread = i * n_combos // N_THREADS          # eight different (layer, head) pairs, spread out
        layer, head = spread % cfg.n_layers, spread // cfg.n_layers
        names = [f"blocks.{layer}.attn.hook_pattern", f"blocks.{layer}.hook_attn_out"] if i % 2 else None
        hooks = {f"blocks.{layer}.attn.hook_z": zero_head(head)}
        if i == 3:
            hooks[f"blocks.{cfg.n_layers - 1}.hook_resid_post"] = lambda x: x * 0.5
        if i == 5:
            hooks = {}                              # a clean run among the ablated ones
        jobs.append((ids, names, hooks))
    return jobs


def run_all(lm, jobs, rounds: int = 1):
    def call(job):
        ids, names, hooks = job
        return lm.run(ids, names=names, hooks=hooks)
    with ThreadPoolExecutor(N_THREADS) as pool:
        return list(pool.map(call, jobs * rounds))


def assert_same(a, b):
    assert torch.equal(a.logits, b.logits)
    assert a.cache.keys() == b.cache.keys()
    for name in a.cache:
        assert torch.equal(a.cache[name], b.cache[name]), name


def check(lm, ids, rounds):
    jobs = jobs_for(lm, ids)
    alone = [lm.run(ids, names=names, hooks=hooks) for ids, names, hooks in jobs]
    together = run_all(lm, jobs, rounds=rounds)
    for i, result in enumerate(together):
        assert_same(result, alone[i % len(jobs)])
    # The ablations really differ from each other (so a mix-up would have been seen).
    assert len({tuple(r.logits[0, -1, :5].tolist()) for r in alone}) == len(jobs)


def test_threads_with_different_hooks_tiny(tiny):
    _, lm = tiny
    check(lm, torch.randint(0, lm.cfg.vocab_size, (1, 24), generator=torch.Generator().manual_seed(0)), rounds=4)


def test_threads_generating_with_different_seeds_tiny(tiny):
    _, lm = tiny

    def gen(seed):
        return [s.token_id for s in lm.generate_steps("the cat", 12, temperature=1.3, seed=seed)]

    alone = [gen(seed) for seed in range(N_THREADS)]
    with ThreadPoolExecutor(N_THREADS) as pool:
        together = list(pool.map(gen, list(range(N_THREADS)) * 2))
    assert together == alone * 2


@pytest.mark.parity
def test_threads_with_different_hooks_smollm2(smollm2):
    check(smollm2, smollm2.encode("The cat sat on the mat. The dog sat on the log. The cat"), rounds=1)
