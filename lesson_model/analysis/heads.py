"""What each attention head does on one run, as one number per head.

    run = lm.run(text, names=head_measure_names(lm.cfg.n_layers))
    grids = head_measures(lm, run)          # {measure: [n_layers, n_heads]}
    grids["previous"][5, 2]                  # head 5.2's previous-token score

Measures (each a mean over query positions, from hook_pattern):
    previous   attention to the token just before the query (positions 1..n-1)
    sink       attention to the first token (positions 1..n-1; position 0 can only see itself)
    entropy    how spread the attention is, in bits (positions 1..n-1)
    induction  at each token that occurred earlier, attention to the token(s) right after its
               earlier occurrence(s) (A B ... A -> B); NaN when nothing in the prompt repeats
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

MEASURES = ("previous", "sink", "induction", "entropy")


def head_measure_names(n_layers: int) -> list[str]:
    """The hook points head_measures reads: every layer's pattern."""
    return [f"blocks.{layer}.attn.hook_pattern" for layer in range(n_layers)]


def run_ids(run) -> list[int]:
    """The token ids of a run's first sequence, whether ``run.ids`` is a [batch, pos]
    tensor (lesson_model.Run) or a plain tuple of ids (the app's cached run)."""
    ids = run.ids
    if isinstance(ids, torch.Tensor):
        return (ids[0] if ids.dim() == 2 else ids).tolist()
    return [int(i) for i in ids]


def stacked_patterns(run, n_layers: int) -> torch.Tensor:
    """[n_layers, n_heads, q_pos, k_pos] for batch element 0 (float32)."""
    return torch.stack([run.cache[f"blocks.{layer}.attn.hook_pattern"][0].float() for layer in range(n_layers)])


def previous_token_score(patterns: torch.Tensor) -> torch.Tensor:
    """patterns [..., q, k] -> [...]: mean attention from position i to i - 1, i >= 1."""
    n = patterns.shape[-1]
    if n < 2:
        return torch.full(patterns.shape[:-2], float("nan"))
    return patterns.diagonal(offset=-1, dim1=-2, dim2=-1).mean(-1)


def sink_score(patterns: torch.Tensor) -> torch.Tensor:
    """patterns [..., q, k] -> [...]: mean attention from positions 1.. to position 0."""
    if patterns.shape[-1] < 2:
        return torch.full(patterns.shape[:-2], float("nan"))
    return patterns[..., 1:, 0].mean(-1)


def row_entropy_bits(patterns: torch.Tensor) -> torch.Tensor:
    """patterns [..., q, k] -> [..., q]: entropy of each query's weights in bits."""
    p = patterns.double()
    terms = torch.where(p > 0, -p * p.clamp_min(1e-300).log2(), torch.zeros_like(p))
    return terms.sum(-1).float()


def entropy_score(patterns: torch.Tensor) -> torch.Tensor:
    """patterns [..., q, k] -> [...]: mean entropy (bits) over positions 1.. (position 0
    always has 0 bits: it can only see itself)."""
    if patterns.shape[-1] < 2:
        return torch.full(patterns.shape[:-2], float("nan"))
    return row_entropy_bits(patterns)[..., 1:].mean(-1)


def induction_targets(ids) -> list[tuple[int, list[int]]]:
    """For each position q whose token occurred before, the positions right after its
    earlier occurrences (j + 1 for every j < q with ids[j] == ids[q], and j + 1 < q):
    [(q, [targets])]. A B ... A -> the second A's target is B."""
    ids = [int(i) for i in ids]
    seen: dict[int, list[int]] = {}
    out = []
    for q, token in enumerate(ids):
        targets = [j + 1 for j in seen.get(token, []) if j + 1 < q]
        if targets:
            out.append((q, targets))
        seen.setdefault(token, []).append(q)
    return out


def induction_score_on(patterns: torch.Tensor, ids) -> torch.Tensor:
    """patterns [..., q, k] -> [...]: mean over repeated tokens of the attention they put
    on the token(s) after their earlier occurrence(s); NaN when no token repeats."""
    targets = induction_targets(ids)
    if not targets:
        return torch.full(patterns.shape[:-2], float("nan"))
    per_query = [patterns[..., q, ts].sum(-1) for q, ts in targets]     # each [...]
    return torch.stack(per_query, dim=-1).mean(-1)


def head_measures(lm, run) -> dict[str, torch.Tensor]:
    """Every measure in MEASURES for every head: {name: [n_layers, n_heads]}."""
    patterns = stacked_patterns(run, lm.cfg.n_layers)                  # [L, H, q, k]
    ids = run_ids(run)
    return {
        "previous": previous_token_score(patterns),
        "sink": sink_score(patterns),
        "induction": induction_score_on(patterns, ids),
        "entropy": entropy_score(patterns),
    }


def top_heads(grid: torch.Tensor, k: int = 3, largest: bool = True) -> list[tuple[int, int, float]]:
    """The k heads with the largest (or smallest) value in a [n_layers, n_heads] grid,
    NaN skipped: [(layer, head, value)]."""
    flat = grid.flatten().clone()
    valid = ~torch.isnan(flat)
    if not valid.any():
        return []
    flat[~valid] = float("-inf") if largest else float("inf")
    order = torch.argsort(flat, descending=largest)[: min(k, int(valid.sum()))]
    n_heads = grid.shape[1]
    return [(int(i) // n_heads, int(i) % n_heads, float(flat[i])) for i in order]


def leaders(grid: torch.Tensor, largest: bool = True, tol: float = 0.005) -> list[tuple[int, int, float]]:
    """Every head of a [n_layers, n_heads] grid whose value is within ``tol`` of the best
    one (largest or smallest), best first, NaN skipped: [(layer, head, value)]. More than
    one entry means a tie (as on a two-token prompt, where many heads give 100% to the
    first token): a page should then not name one head as "the" strongest."""
    ranked = top_heads(grid, grid.numel(), largest)
    if not ranked:
        return []
    best = ranked[0][2]
    return [r for r in ranked if abs(r[2] - best) <= tol]


def depth_means(grid: torch.Tensor) -> tuple[float, float, int]:
    """(mean of the first third of the layers, mean of the last third, layers per third)
    of a [n_layers, n_heads] grid; NaN heads skipped (NaN if a third has none)."""
    third = max(1, grid.shape[0] // 3)
    return float(grid[:third].nanmean()), float(grid[-third:].nanmean()), third


@dataclass(frozen=True)
class GroupContrast:
    """Two heads of one K/V group at one query: what each attends to most, and how far
    apart their whole weight rows are."""
    top_a: int            # key position with head a's largest weight
    top_b: int
    weight_a: float       # that largest weight
    weight_b: float
    max_gap: float        # max |w_a - w_b| over the keys
    n_keys: int           # keys the query can see (1 at the first position)

    @property
    def same_top(self) -> bool:
        return self.top_a == self.top_b

    def kind(self, alike: float = 0.05) -> str:
        """Which sentence describes the pair truthfully:
        "first"      the query is the first position: one key, both heads give it 100%
        "different"  the heads' largest weights go to different tokens
        "alike"      same top token and the rows never more than ``alike`` apart
        "amount"     same top token, different (printed) top weights
        "rest"       same top token and printed top weight, rows apart elsewhere"""
        if self.n_keys == 1:
            return "first"
        if not self.same_top:
            return "different"
        if self.max_gap < alike:
            return "alike"
        if f"{self.weight_a:.0%}" != f"{self.weight_b:.0%}":
            return "amount"
        return "rest"


def group_contrast(w_a: torch.Tensor, w_b: torch.Tensor) -> GroupContrast:
    """w_a, w_b: [keys] one query's weights in two heads of the same group."""
    return GroupContrast(int(w_a.argmax()), int(w_b.argmax()), float(w_a.max()), float(w_b.max()),
                         float((w_a - w_b).abs().max()), int(w_a.shape[-1]))


def slice_bounds(cfg) -> list[tuple[int, int]]:
    """The "one slice per head" picture: the d_model input numbers cut into n_heads chunks,
    [(start, end)] with end exclusive. When d_model = n_heads * d_head (SmolLM2: 9 x 64 = 576)
    each chunk is d_head numbers; when it is not (Gemma 3 270M: 640 numbers, 4 heads of 256)
    each is d_model / n_heads, and the picture cannot even give a head d_head numbers."""
    edges = [round(i * cfg.d_model / cfg.n_heads) for i in range(cfg.n_heads + 1)]
    return list(zip(edges[:-1], edges[1:]))


def query_weight_slices(lm, layer: int) -> torch.Tensor:
    """[n_heads, n_heads]: how much of head h's W_Q comes from each chunk of the input
    (the chunks of slice_bounds; Frobenius norm of W_Q[chunk rows, head columns], each
    head's row summing to 1).

    If each head read only "its slice" of the vector (a common misconception), only one
    chunk per head would be non-zero. In a trained model every chunk feeds every head."""
    cfg = lm.cfg
    W_Q = lm.decoder.blocks[layer].attn.W_Q.detach().float()                         # [d_model, n_heads*d_head]
    per_head = W_Q.reshape(cfg.d_model, cfg.n_heads, cfg.d_head)                     # [d_model, head, out]
    norms = torch.stack([per_head[start:end].pow(2).sum(dim=(0, 2)).sqrt()           # [n_heads] per chunk
                         for start, end in slice_bounds(cfg)], dim=1)                # [n_heads, n_chunks]
    return (norms / norms.sum(dim=1, keepdim=True)).cpu()


def inputs_feeding_head(lm, layer: int) -> torch.Tensor:
    """[n_heads]: how many of the d_model input numbers have a non-zero weight into each
    query head of ``layer`` (all of them, in a trained model)."""
    cfg = lm.cfg
    W_Q = lm.decoder.blocks[layer].attn.W_Q.detach()                                 # [d_model, n_heads*d_head]
    per_head = W_Q.reshape(cfg.d_model, cfg.n_heads, cfg.d_head)                     # [d_model, n_heads, d_head]
    return (per_head != 0).any(dim=-1).sum(dim=0).cpu()                             # [n_heads]
