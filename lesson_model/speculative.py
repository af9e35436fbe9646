"""Speculative decoding with a draft made of the model's own first layers (early exit).

A cheap *draft* guesses the next few tokens one at a time; the full model then checks
all the guesses in ONE forward pass, because a causal model scores every position of
its input at once. The guesses are kept up to the first one the full model disagrees
with; at that position the full model's own choice is used instead, so every round
adds at least one token and, with greedy decoding, the text is exactly what the full
model alone would have written.

The draft here is the same network cut short: blocks 0..k-1, then the final norm and
the unembedding ("early exit", as in self-speculative decoding / LayerSkip). It needs no
extra weights, but it was never trained to exit early, so it agrees with the full model
less often than a purpose-trained small draft model would.

With sampling (temperature > 0) the guesses are drawn from the draft's distribution q
and checked with the rejection rule of Leviathan et al. (2023) and Chen et al. (2023):
keep a guess x with probability min(1, p(x) / q(x)); on the first rejection draw from
max(0, p - q) renormalised. The tokens then follow the full model's distribution p
exactly, whatever the draft does (only the speed depends on the draft). The rule is
accept_probability and residual_distribution; emitted_token_distribution works out
the distribution it produces, to show that it is p.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from .decoder import Hooks, KVCache
from .sampling import make_generator, next_token_distribution, sample


@dataclass(frozen=True)
class SpecRound:
    """One draft-then-verify round."""
    index: int
    proposed: list[int]          # the draft's guesses, in order
    accepted: int                # how many of them (a prefix) the full model kept
    token: int                   # the full model's own token after the accepted prefix
    bonus: bool                  # True when every guess was kept, so `token` is an extra one
    new_ids: list[int]           # tokens this round added: proposed[:accepted] + [token], cut after an EOS
    draft_probs: list[float]     # draft probability of each guess (softmax, or the warped q when sampling)
    target_probs: list[float]    # full-model probability of each guess at the same position
    target_choice: list[int]     # full model's greedy choice at each guess's position (len(proposed) + 1)
    positions_verified: int      # positions the verifying forward pass ran through the full model
    draft_seconds: float
    verify_seconds: float


@dataclass(frozen=True)
class SpecResult:
    prompt_ids: list[int]
    new_ids: list[int]                   # everything generated, in order
    rounds: list[SpecRound]
    draft_layers: int                    # k: blocks the draft runs before exiting
    draft_len: int                       # n: guesses per round (fewer in the last round, near the limit)
    greedy: bool
    stop: str                            # "eos" or "length"
    draft_forwards: int = 0              # forward passes through the k-layer draft
    seconds: float = 0.0
    ids: list[int] = field(default_factory=list)   # prompt + generated

    @property
    def proposed(self) -> int:
        return sum(len(r.proposed) for r in self.rounds)

    @property
    def accepted(self) -> int:
        return sum(r.accepted for r in self.rounds)

    @property
    def acceptance_rate(self) -> float:
        """Accepted guesses / proposed guesses (0 when nothing was proposed)."""
        return self.accepted / self.proposed if self.proposed else 0.0

    @property
    def full_passes(self) -> int:
        """Forward passes through the full model: one per round (the prompt goes in the first)."""
        return len(self.rounds)


def partial_forward(decoder, ids: torch.Tensor, n_layers: int, kv_cache: KVCache | None,
                    keep_last: int = 1) -> torch.Tensor:
    """Run blocks 0..n_layers-1, then the final norm and unembedding, on the last keep_last positions.

    ids: [batch, new_pos] (positions continue after what kv_cache holds) -> logits [batch, keep_last, vocab].
    With n_layers = cfg.n_layers this is the full model; with fewer it is the early-exit draft.
    """
    hooks = Hooks(names=())
    start = len(kv_cache) if kv_cache is not None else 0
    positions = torch.arange(start, start + ids.shape[1], device=ids.device)          # [new_pos]
    resid = decoder.embed(ids)                                                         # [batch, new_pos, d_model]
    for layer in range(n_layers):
        resid = decoder.blocks[layer](resid, decoder.rope_for(layer), positions, hooks, kv_cache)
    final = decoder.ln_final(resid[:, -keep_last:], hooks)                           # [batch, keep_last, d_model]
    return final @ decoder.W_U                                                         # [batch, keep_last, vocab]


def accept_probability(p: torch.Tensor, q: torch.Tensor, token: int) -> float:
    """How likely the full model keeps the draft's guess `token`: min(1, p(token) / q(token)).

    p, q: the full model's and the draft's distributions [vocab] at the same position.
    A guess the draft over-proposes (q > p) is kept only part of the time.
    """
    ratio = float(p[token]) / max(float(q[token]), 1e-30)
    return min(1.0, ratio)


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Where to draw from after a rejection: max(0, p - q), renormalised.

    It holds exactly the mass that p has and q under-proposed. When p equals q nothing
    is ever rejected; p itself is returned then, so the result is always a distribution.
    """
    residual = (p - q).clamp_min(0)                                   # [vocab]
    return residual / residual.sum() if residual.sum() > 0 else p


def emitted_token_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """The exact distribution [vocab] of the token one sampled guess leads to.

    The draft proposes d with probability q(d); it is kept with probability a(d) =
    accept_probability(p, q, d), otherwise a token is drawn from residual_distribution(p, q):
        sum over d of  q(d) * (a(d) * onehot(d) + (1 - a(d)) * residual).
    The rejection rule is built so that this equals p, whatever q is. Computed in float64.
    """
    p, q = p.double(), q.double()
    residual = residual_distribution(p, q)
    out = torch.zeros_like(p)
    for d in q.nonzero().flatten().tolist():          # only tokens the draft can propose
        keep = accept_probability(p, q, d)
        out[d] += q[d] * keep                          # the guess itself, kept
        out += q[d] * (1 - keep) * residual            # rejected: a draw from the residual
    return out


def speculative_generate(lm, prompt, max_new_tokens: int, *, draft_layers: int, draft_len: int = 4,
                         temperature: float = 0.0, top_k: int | None = None, top_p: float | None = None,
                         seed: int | None = None) -> SpecResult:
    """Generate up to max_new_tokens with an early-exit draft of `draft_layers` blocks.

    temperature 0: greedy, and the tokens equal lm.generate_steps(..., temperature=0).
    temperature > 0: speculative sampling with the same warping (top-k, top-p) for draft and target.
    """
    cfg, decoder = lm.cfg, lm.decoder
    if not 1 <= draft_layers <= cfg.n_layers:
        raise ValueError(f"draft_layers must be in 1..{cfg.n_layers}")
    if draft_len < 1 or max_new_tokens < 1:
        raise ValueError("draft_len and max_new_tokens must be at least 1")
    greedy = temperature == 0
    prompt_ids = lm.to_ids(prompt)[0].tolist()
    generator = make_generator(seed)
    eos = lm.eos_token_ids
    full_cache, draft_cache = KVCache(cfg.n_layers), KVCache(draft_layers)
    committed = list(prompt_ids)         # every cache holds committed[:-1] or less; the last token is pending
    rounds: list[SpecRound] = []
    draft_forwards = 0
    stop = "length"
    started = time.perf_counter()

    def dist(logits: torch.Tensor) -> torch.Tensor:            # [vocab] -> probabilities [vocab]
        return logits.float().softmax(-1) if greedy else next_token_distribution(logits, temperature, top_k, top_p)

    with torch.inference_mode():
        while len(committed) - len(prompt_ids) < max_new_tokens:
            remaining = max_new_tokens - (len(committed) - len(prompt_ids))
            n_round = min(draft_len, remaining - 1)   # the full model adds one token itself

            # 1. Draft: n_round guesses, one k-layer forward each.
            t0 = time.perf_counter()
            proposed, q_dists = [], []
            pending = committed[len(draft_cache):]
            for _ in range(n_round):
                logits = partial_forward(decoder, torch.tensor([pending], device=lm.device), draft_layers,
                                         draft_cache)[0, -1].cpu()                                   # [vocab]
                draft_forwards += 1
                q = dist(logits)
                token = int(logits.argmax()) if greedy else int(sample(q, generator)[0])
                proposed.append(token)
                q_dists.append(q)
                pending = [token]
                if token in eos:
                    break
            t1 = time.perf_counter()

            # 2. Verify: the full model scores the pending token and every guess in one pass.
            verify_in = committed[len(full_cache):] + proposed
            logits = partial_forward(decoder, torch.tensor([verify_in], device=lm.device), cfg.n_layers,
                                     full_cache, keep_last=len(proposed) + 1)[0].cpu()             # [n+1, vocab]
            p_dists = [dist(row) for row in logits]
            target_choice = [int(row.argmax()) for row in logits]
            accepted, token = 0, None
            for i, guess in enumerate(proposed):
                if greedy:
                    ok = guess == target_choice[i]
                else:   # keep the guess with probability min(1, p / q)
                    keep = accept_probability(p_dists[i], q_dists[i], guess)
                    ok = float(torch.rand(1, generator=generator)) < keep
                if not ok:
                    if greedy:
                        token = target_choice[i]
                    else:   # resample from what p has and q over-proposed
                        residual = residual_distribution(p_dists[i], q_dists[i])
                        token = int(sample(residual, generator)[0])
                    break
                accepted += 1
            bonus = token is None
            if bonus:   # every guess kept: the last position of the same pass gives one more token
                token = target_choice[accepted] if greedy else int(sample(p_dists[accepted], generator)[0])
            t2 = time.perf_counter()

            new_ids = proposed[:accepted] + [token]
            for j, tok in enumerate(new_ids):
                if tok in eos:
                    new_ids, stop = new_ids[: j + 1], "eos"
                    break
            rounds.append(SpecRound(
                index=len(rounds), proposed=proposed, accepted=accepted, token=token, bonus=bonus, new_ids=new_ids,
                draft_probs=[float(q[g]) for q, g in zip(q_dists, proposed)],
                target_probs=[float(p[g]) for p, g in zip(p_dists, proposed)],
                target_choice=target_choice, positions_verified=len(verify_in),
                draft_seconds=t1 - t0, verify_seconds=t2 - t1))
            committed += new_ids
            # 3. Roll back: the caches forget the rejected guesses (they hold committed[:-1] at most).
            full_cache.crop(len(committed) - 1)
            draft_cache.crop(min(len(draft_cache), len(committed) - 1))
            if stop == "eos":
                break

    return SpecResult(prompt_ids=prompt_ids, new_ids=committed[len(prompt_ids):], rounds=rounds,
                      draft_layers=draft_layers, draft_len=draft_len, greedy=greedy, stop=stop,
                      draft_forwards=draft_forwards, seconds=time.perf_counter() - started, ids=committed)
