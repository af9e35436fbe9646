"""Induction heads: A B ... A -> B.

An induction head, at the second occurrence of a token A, attends to the token that came
right after A's first occurrence (B) and copies it, so the model predicts B. Detect them
by repeating a random token sequence: on the second copy, every token has occurred
before, and predicting the next one is possible only by looking back.

    scores = induction_scores(lm)                 # [n_layers, n_heads]
    exp = induction_experiment(lm, seq_len=50, n_seqs=10, seed=0)
    exp.loss_first, exp.loss_second               # per-token loss on each copy
    ablate(lm, exp.tokens, top_k_heads(scores, 5), seed=0)   # zero heads, loss on the repeat
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from .heads import induction_targets, run_ids
from .lens import chunk_rows


def random_repeated_tokens(lm, seq_len: int = 50, n_seqs: int = 10, seed: int = 0) -> torch.Tensor:
    """[n_seqs, start + 2 * seq_len]: each row is the model's <bos> when it has one (start = 1,
    as every input the model reads begins: LessonModel.with_bos), then seq_len random tokens,
    then the same tokens again. Tokens are drawn from the vocabulary without special tokens, without repeats
    inside a sequence (so each token of the second copy has exactly one earlier
    occurrence), with a seeded CPU generator (same seed, same tokens on every machine)."""
    if seq_len < 2 or n_seqs < 1:
        raise ValueError("need seq_len >= 2 and n_seqs >= 1")
    special = set(getattr(lm.tokenizer, "special_ids", set()))          # built once: Gemma has 6,000+
    allowed = torch.tensor([i for i in range(lm.cfg.vocab_size) if i not in special])   # [n_allowed]
    if seq_len > len(allowed):
        raise ValueError("seq_len is larger than the vocabulary")
    generator = torch.Generator().manual_seed(int(seed))
    rows = [allowed[torch.randperm(len(allowed), generator=generator)[:seq_len]] for _ in range(n_seqs)]
    first = torch.stack(rows)                                          # [n_seqs, seq_len]
    bos = [] if lm.bos_id is None else [torch.full((n_seqs, 1), lm.bos_id, dtype=first.dtype)]
    return torch.cat([*bos, first, first], dim=1)                      # [n_seqs, start + 2 * seq_len]


def copies_start(lm) -> int:
    """Positions before the first copy in random_repeated_tokens: 1 for the model's <bos>, else 0."""
    return 0 if lm.bos_id is None else 1


def second_copy_positions(seq_len: int, start: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(queries, keys) of the induction stripe, counted from the first copy's first token
    (``start``: positions before it, the model's <bos>): query seq_len + i (a token of the
    second copy) and key i + 1 (the token right after that token's first occurrence), i in
    0..seq_len-1. The stripe is the diagonal q - k = seq_len - 1."""
    i = torch.arange(seq_len)
    return start + seq_len + i, start + i + 1


def induction_score_grid(patterns: torch.Tensor, seq_len: int, start: int = 0) -> torch.Tensor:
    """patterns [..., start + 2*seq_len, start + 2*seq_len] -> [...]: mean attention on the stripe."""
    queries, keys = second_copy_positions(seq_len, start)
    return patterns[..., queries, keys].mean(-1)


def _chunks(n: int, size: int):
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))


def _next_token_loss(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """logits [batch, pos, vocab], ids [batch, pos] -> [batch, pos - 1]: -log p(ids[p+1])
    predicted at position p (natural log, nats)."""
    logprobs = logits[:, :-1].float().log_softmax(-1)                  # [batch, pos-1, vocab]
    return -logprobs.gather(-1, ids[:, 1:, None])[..., 0]              # [batch, pos-1]


@dataclass(frozen=True)
class InductionExperiment:
    seq_len: int
    seed: int
    tokens: torch.Tensor          # [n_seqs, start + 2*seq_len]: what the model read (<bos> first on a model with one)
    scores: torch.Tensor          # [n_layers, n_heads] mean attention on the induction stripe
    loss_first: torch.Tensor      # [seq_len - 1] mean loss predicting token i of the first copy, i = 1..seq_len-1
    loss_second: torch.Tensor     # [seq_len - 1] the same token i, in the second copy
    example_patterns: dict        # {(layer, head): [2*seq_len, 2*seq_len]} of sequence 0, for the top heads (the copies' positions)
    top1_first: float = float("nan")    # share of the first copy's tokens 1..L-1 that are the model's top guess
    top1_second: float = float("nan")   # the same on the second copy
    start: int = 0                # positions before the first copy (1: the model's <bos>)

    @property
    def copies(self) -> torch.Tensor:
        """[n_seqs, 2*seq_len]: the two copies, without what comes before them."""
        return self.tokens[:, self.start:]

    @property
    def mean_loss_first(self) -> float:
        return float(self.loss_first.mean())

    @property
    def mean_loss_second(self) -> float:
        return float(self.loss_second.mean())


def sequences_per_pass(lm, seq_len: int) -> int:
    """Sequences of 2*seq_len tokens run together, so that a pass's logits stay about
    lens.CHUNK_FLOATS floats (all of them at every position: Gemma's 262,144-entry vocabulary
    made five sequences of 100 tokens 0.5 GB of logits, and as much again for the loss)."""
    return max(1, chunk_rows(lm) // (2 * seq_len))


def induction_experiment(lm, seq_len: int = 50, n_seqs: int = 10, seed: int = 0,
                         n_examples: int = 3, batch: int | None = None) -> InductionExperiment:
    """Run repeated random sequences once and keep: the induction score of every head,
    the per-token loss on each copy, and sequence 0's pattern for the n_examples best heads.
    ``batch``: sequences per forward pass (default: sequences_per_pass)."""
    cfg = lm.cfg
    batch = batch or sequences_per_pass(lm, seq_len)
    tokens = random_repeated_tokens(lm, seq_len, n_seqs, seed)         # [n_seqs, s + 2L]
    s = copies_start(lm)
    names = [f"blocks.{layer}.attn.hook_pattern" for layer in range(cfg.n_layers)]
    score_sum = torch.zeros(cfg.n_layers, cfg.n_heads)
    losses, hits, first_patterns = [], [], None
    for part in _chunks(n_seqs, batch):
        run = lm.run(tokens[part], names=names)
        patterns = torch.stack([run.cache[name].float() for name in names], dim=1)   # [b, L, H, s+2L, s+2L]
        score_sum += induction_score_grid(patterns, seq_len, s).sum(0)  # [L, H]
        if first_patterns is None:
            first_patterns = patterns[0, :, :, s:, s:].clone()         # [L, H, 2L, 2L] the copies
        losses.append(_next_token_loss(run.logits, tokens[part])[:, s:])   # [b, 2L-1] from the first copy's token 0
        hits.append((run.logits[:, s:-1].argmax(-1) == tokens[part][:, s + 1:]).float())   # [b, 2L-1] top guess right
        del run, patterns
    scores = score_sum / n_seqs
    loss = torch.cat(losses).mean(0)                                   # [2L-1]; loss[p] predicts token p+1
    loss_first = loss[0:seq_len - 1]                                   # tokens 1..L-1
    loss_second = loss[seq_len:2 * seq_len - 1]                        # tokens L+1..2L-1
    # Each example its own [2L, 2L] copy: a view would keep (and pickle) all L x H patterns.
    examples = {(layer, head): first_patterns[layer, head].clone()
                for layer, head, _ in top_k_heads(scores, n_examples)}
    hit = torch.cat(hits)                                              # [n_seqs, 2L-1]
    return InductionExperiment(seq_len, seed, tokens, scores, loss_first, loss_second, examples,
                               top1_first=float(hit[:, 0:seq_len - 1].mean()),
                               top1_second=float(hit[:, seq_len:2 * seq_len - 1].mean()), start=s)


def induction_scores(lm, seq_len: int = 50, n_seqs: int = 10, seed: int = 0) -> torch.Tensor:
    """[n_layers, n_heads]: repeat a random token sequence; a head's score is its mean
    attention from each token of the second copy to the token right after that token's
    first occurrence (averaged over n_seqs sequences)."""
    return induction_experiment(lm, seq_len, n_seqs, seed, n_examples=0).scores


def top_k_heads(scores: torch.Tensor, k: int) -> list[tuple[int, int, float]]:
    """The k heads with the highest score: [(layer, head, score)], best first."""
    n_heads = scores.shape[1]
    flat = scores.flatten()
    order = torch.argsort(flat, descending=True)[:k]
    return [(int(i) // n_heads, int(i) % n_heads, float(flat[i])) for i in order]


def random_heads(n_layers: int, n_heads: int, k: int, seed: int,
                 exclude: set[tuple[int, int]] = frozenset()) -> list[tuple[int, int]]:
    """k distinct heads drawn at random (seeded) from those not in ``exclude``."""
    pool = [(layer, head) for layer in range(n_layers) for head in range(n_heads) if (layer, head) not in exclude]
    return sorted(random.Random(seed).sample(pool, k))


def zero_heads_hooks(heads) -> dict:
    """Per-call hooks that zero the output z of the given (layer, head) pairs (the head
    then writes nothing into the residual stream). The captured tensor is cloned, never
    changed in place."""
    by_layer: dict[int, list[int]] = {}
    for layer, head, *_ in heads:
        by_layer.setdefault(int(layer), []).append(int(head))

    def make(head_list: list[int]):
        def zero(z: torch.Tensor) -> torch.Tensor:        # z: [batch, pos, n_heads, d_head]
            z = z.clone()
            z[:, :, head_list] = 0.0
            return z
        return zero

    return {f"blocks.{layer}.attn.hook_z": make(sorted(set(hs))) for layer, hs in by_layer.items()}


def second_copy_loss(lm, tokens: torch.Tensor, heads=(), batch: int | None = None) -> float:
    """Mean loss (nats) predicting the second copy's tokens 1..L-1 of each sequence in
    ``tokens`` [n_seqs, start + 2L] (random_repeated_tokens), with the given heads zeroed
    (none: the intact model). Only the positions that predict those tokens are unembedded:
    on Gemma's 262,144-entry vocabulary the unembedding is most of a pass."""
    s = copies_start(lm)
    seq_len = (tokens.shape[1] - s) // 2
    batch = batch or sequences_per_pass(lm, seq_len)
    hooks = zero_heads_hooks(heads)
    W_U = lm.decoder.W_U                                                # [d_model, vocab]
    total, count = 0.0, 0
    for part in _chunks(tokens.shape[0], batch):
        run = lm.run(tokens[part], names=[], hooks=hooks, unembed=False)
        second = run.final[:, s + seq_len:]                             # [b, L, d_model]: the second copy
        logits = (second.to(W_U.device) @ W_U).cpu()                    # [b, L, vocab]
        loss = _next_token_loss(logits, tokens[part][:, s + seq_len:])  # [b, L-1]: tokens 1..L-1
        total += float(loss.sum())
        count += loss.numel()
    return total / count


@dataclass(frozen=True)
class Ablation:
    k: int
    baseline: float                          # loss on the second copy, nothing zeroed
    top_heads: list[tuple[int, int]]         # the k best induction heads
    top_loss: float                          # loss with them zeroed
    random_sets: list[list[tuple[int, int]]]  # control: k random other heads, per draw
    random_losses: list[float]               # loss with each random set zeroed

    @property
    def random_mean(self) -> float:
        return sum(self.random_losses) / len(self.random_losses)


def ablate(lm, tokens: torch.Tensor, scores: torch.Tensor, k: int, seed: int = 0,
           n_random: int = 3, baseline: float | None = None) -> Ablation:
    """Zero the top-k induction heads, and (control) n_random sets of k random heads chosen
    among the others; return the loss on the second copy for each. ``baseline`` (the
    intact model's loss on these tokens, e.g. InductionExperiment.mean_loss_second) saves
    one forward pass when given."""
    top = [(layer, head) for layer, head, _ in top_k_heads(scores, k)]
    n_layers, n_heads = scores.shape
    sets = [random_heads(n_layers, n_heads, k, seed * 1000 + draw, exclude=set(top)) for draw in range(n_random)]
    return Ablation(
        k=k, baseline=second_copy_loss(lm, tokens) if baseline is None else baseline, top_heads=top, top_loss=second_copy_loss(lm, tokens, top),
        random_sets=sets, random_losses=[second_copy_loss(lm, tokens, s) for s in sets],
    )


# --------------------------------------------------------------------------- on the learner's text

@dataclass(frozen=True)
class RepeatSite:
    query: int                 # position of the repeated token (the second A)
    earlier: list[int]         # its earlier occurrences (the first A)
    targets: list[int]         # the positions right after them (B)
    grid: torch.Tensor         # [n_layers, n_heads] attention from query to the targets (summed)


def repeat_sites(lm, run) -> list[RepeatSite]:
    """Every position of the run whose token occurred earlier, with each head's attention
    to the token(s) right after the earlier occurrence(s). Needs every layer's hook_pattern."""
    ids = run_ids(run)
    patterns = torch.stack([run.cache[f"blocks.{layer}.attn.hook_pattern"][0].float()
                            for layer in range(lm.cfg.n_layers)])     # [L, H, q, k]
    sites = []
    for q, targets in induction_targets(ids):
        earlier = [t - 1 for t in targets]
        sites.append(RepeatSite(q, earlier, targets, patterns[:, :, q, targets].sum(-1)))
    return sites
