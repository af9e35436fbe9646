"""Generation as a sequence of inspectable steps: run, pick a token, append it, run again."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from .decoder import Hooks, KVCache
from .sampling import make_generator, next_token_distribution, sample


@dataclass(frozen=True)
class Candidate:
    id: int
    text: str       # display text
    logit: float
    prob: float     # probability after temperature / top-k / top-p


@dataclass(frozen=True)
class Step:
    index: int                  # 0 for the first generated token
    token_id: int               # the chosen token
    text: str                   # its display text
    prob: float                 # its probability under the sampling distribution
    candidates: list[Candidate]  # the most likely next tokens, best first
    seconds: float              # wall time of this step's forward pass and choice
    positions_computed: int     # positions this step ran through the model (1 with the KV cache)
    kv_positions: int           # positions held in the KV cache after the step (0 without it)
    kv_bytes: int               # bytes the KV cache holds after the step (all layers)
    ids: list[int] = field(repr=False, default_factory=list)   # the whole sequence after this step
    stop: str | None = None     # "eos" or "length" on the last step, else None


def generate_steps(lm, prompt, max_new_tokens: int, *, temperature: float = 1.0, top_k: int | None = None,
                   top_p: float | None = None, seed: int | None = None, use_kv_cache: bool = True,
                   n_candidates: int = 10):
    """Yield one Step per generated token; stop at an end-of-sequence token or after max_new_tokens."""
    ids = lm.to_ids(prompt)[0].tolist()
    generator = make_generator(seed)
    decoder = lm.decoder
    kv_cache = KVCache(decoder.cfg.n_layers) if use_kv_cache else None
    pending = ids                                      # what the next forward must process
    for index in range(max_new_tokens):
        started = time.perf_counter()
        with torch.inference_mode():
            x = torch.tensor([pending], device=lm.device)
            logits = decoder(x, Hooks(names=()), kv_cache=kv_cache, last_only=True)[0, -1].float().cpu()   # [vocab]
            probs = next_token_distribution(logits, temperature, top_k, top_p)
            token_id = int(probs.argmax()) if temperature == 0 else int(sample(probs, generator)[0])
        seconds = time.perf_counter() - started
        top = torch.topk(probs, min(n_candidates, probs.shape[-1]))
        candidates = [Candidate(int(i), lm.token_text(int(i)), float(logits[i]), float(p))
                      for p, i in zip(top.values, top.indices) if p > 0]
        ids = ids + [token_id]
        stop = "eos" if token_id in lm.eos_token_ids else ("length" if index == max_new_tokens - 1 else None)
        yield Step(index=index, token_id=token_id, text=lm.token_text(token_id), prob=float(probs[token_id]),
                   candidates=candidates, seconds=seconds, positions_computed=len(pending),
                   kv_positions=len(kv_cache) if kv_cache is not None else 0,
                   kv_bytes=sum(kv_cache.nbytes(L) for L in range(decoder.cfg.n_layers)) if kv_cache is not None else 0,
                   ids=ids, stop=stop)
        if stop:
            return
        pending = [token_id] if kv_cache is not None else ids
