"""The What-if lab's comparison: one prompt through the intact model and through the model with
some switches on (lesson_model.whatif), and the facts a "What to notice" line needs.

Loss at position i is -log p(next token), the model's surprise at token i + 1 of the text it
read. With ``shuffle`` the broken run reads the shuffled text, so its loss is measured against
the shuffled text's own next tokens (what it was given to read), not against the original's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lesson_model.analysis import architecture
from lesson_model.analysis.lens import slice_width
from lesson_model.whatif import Switches, hooks_for, shuffle_order

FINAL = "ln_final.hook_normalized"     # the stream the unembedding reads, before the final norm's weight


def pattern_name(layer: int) -> str:
    return f"blocks.{layer}.attn.hook_pattern"


def read_ids(ids, sw: Switches) -> list[int]:
    """The token ids the run with these switches reads, in its order (shuffled or not)."""
    ids = [int(i) for i in ids]
    if not sw.shuffle:
        return ids
    return [ids[j] for j in shuffle_order(len(ids), sw.seed)]


def position_losses(logits: torch.Tensor, ids) -> torch.Tensor:
    """logits [pos, vocab] (or [1, pos, vocab]) and the ids read -> [pos - 1]: the loss (nats) of
    predicting token i + 1 at position i (Lesson 11's training loss at every position)."""
    return architecture.position_losses(ids, logits)


@dataclass(frozen=True)
class ReadOut:
    """What the lab reads of one run's logits."""
    losses: torch.Tensor      # [pos - 1] nats: -log p(token i + 1) at position i
    last: torch.Tensor        # [vocab] the logits at the last position
    finite: bool              # every logit of the run is a number


def read_runs(lm, runs: list[tuple[torch.Tensor, list[int]]]) -> list[ReadOut]:
    """Each run's loss at every position and last logits, from its FINAL capture [1, pos, d_model]
    and the ids it read, without holding any run's logits whole.

    The runs' vectors go through the unembedding together, one slice of the vocabulary at a time
    (lens.slice_width): the unembedding is read once for all of them (671 MB on Gemma), and a
    slice of logits stays in the CPU's caches. The softmax's log-sum-exp is kept as it goes (the
    largest logit so far and the sum of exp(logit - largest)); the loss at a position is
    log-sum-exp minus the logit of the token that came next."""
    d = lm.decoder
    W = d.W_U.detach().float()                                                  # [d_model, vocab]
    weight = d.ln_final.weight.detach().float()
    with torch.inference_mode():
        rows = torch.cat([normalized[0].float().to(W.device) for normalized, _ in runs]) * weight   # [rows, d_model]
        starts = torch.tensor([0] + [normalized.shape[1] for normalized, _ in runs]).cumsum(0).tolist()
        last_rows = [end - 1 for end in starts[1:]]                            # each run's last position
        # each row's target, the token after it (-1: a run's last position has none)
        targets = torch.tensor([i for _, ids in runs for i in list(ids)[1:] + [-1]], device=W.device)
        n_rows, vocab = rows.shape[0], W.shape[1]
        largest = torch.full((n_rows,), -torch.inf, device=W.device)           # [rows] running max logit
        total = torch.zeros(n_rows, device=W.device)                           # [rows] sum of exp(logit - largest)
        target_logit = torch.zeros(n_rows, device=W.device)
        finite = torch.ones(n_rows, dtype=torch.bool, device=W.device)
        last = torch.empty(len(runs), vocab, device=W.device)                  # [runs, vocab]
        width = slice_width()
        for start in range(0, vocab, width):
            logits = rows @ W[:, start:start + width]                          # [rows, width]
            finite &= torch.isfinite(logits).all(-1)
            new_largest = torch.maximum(largest, logits.amax(-1))
            total = total * torch.exp(largest - new_largest) + torch.exp(logits - new_largest[:, None]).sum(-1)
            largest = new_largest
            here = ((targets >= start) & (targets < start + width)).nonzero()[:, 0]
            target_logit[here] = logits[here, targets[here] - start]
            last[:, start:start + width] = logits[last_rows]
        losses = (largest + total.log() - target_logit).cpu()                  # [rows] (the last rows' are not losses)
        finite = finite.cpu()
    return [ReadOut(losses=losses[begin:end - 1], last=last[i].cpu(), finite=bool(finite[begin:end].all()))
            for i, (begin, end) in enumerate(zip(starts, starts[1:]))]


@dataclass(frozen=True)
class Comparison:
    """The intact run against the broken one, on one prompt."""
    switches: Switches
    ids_before: tuple[int, ...]          # the prompt
    ids_after: tuple[int, ...]           # what the broken run read (the shuffled prompt with shuffle)
    loss_before: list[float]             # [n - 1] nats at each position (predicting the next token)
    loss_after: list[float]              # [n - 1] against ids_after's next tokens (nan when it overflowed)
    top_before: list[tuple[int, float]]  # the next-token candidates after the last position: (id, p)
    top_after: list[tuple[int, float]]   # (empty when the broken run's numbers overflowed)
    kl: float                            # KL(intact || broken) of the next-token distributions, nats
    finite: bool                         # every logit of the broken run is a number (no overflow)
    layer: int                           # the attention pattern shown
    head: int
    pattern_before: torch.Tensor         # [q_pos, k_pos]
    pattern_after: torch.Tensor
    future_weight: float                 # mean share of attention on later positions, over every head and query
    future_weight_head: float            # ...of the head shown
    row_max_before: float                # the largest weight of a row, averaged over every head and query
    row_max_after: float                 #   (query 0 left out: it sees only itself)
    most_changed: tuple[int, int]        # the head whose pattern changed the most (mean |Δ weight|)
    stream_sizes: list[float]            # the broken run's stream, mean ‖resid_post‖ after each block ([] if not captured)
    overflow_block: int | None           # the first block whose output is not finite (inf/NaN)
    farthest_key: int                    # the farthest any query looks back: n - 1 positions
    window: int | None                   # the loaded model's sliding window (None: none)

    @property
    def n(self) -> int:
        return len(self.ids_before)

    @property
    def mean_before(self) -> float:
        return sum(self.loss_before) / len(self.loss_before) if self.loss_before else float("nan")

    @property
    def mean_after(self) -> float:
        return sum(self.loss_after) / len(self.loss_after) if self.loss_after else float("nan")

    @property
    def top1_changed(self) -> bool:
        return not self.top_after or self.top_before[0][0] != self.top_after[0][0]

    @property
    def window_matters(self) -> bool:
        """Could the sliding window hide anything on this prompt? Only if some key lies a whole
        window or more behind its query."""
        return self.window is not None and self.farthest_key >= self.window

    @property
    def first_loss_change(self) -> float:
        """How much the loss at position 0 moved (no RoPE: position 0 is rotated by angle 0)."""
        return abs(self.loss_after[0] - self.loss_before[0]) if self.loss_before else 0.0

    @property
    def pattern_changed(self) -> float:
        """The largest change of one attention weight in the pattern shown."""
        return float((self.pattern_after - self.pattern_before).abs().max())


def future_share(pattern: torch.Tensor) -> torch.Tensor:
    """pattern [..., q_pos, k_pos] -> [..., q_pos]: each query's weight on keys after it."""
    n = pattern.shape[-1]
    above = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
    return (pattern.float() * above).sum(-1)


def most_changed_head(patterns_before: torch.Tensor, patterns_after: torch.Tensor) -> tuple[int, int]:
    """(layer, head) whose pattern changed the most (mean |Δ weight|) between the two runs;
    the first head when nothing changed."""
    change = (patterns_after.float() - patterns_before.float()).abs().mean((-1, -2))   # [n_layers, n_heads]
    best = int(change.nan_to_num(0.0).flatten().argmax())
    return divmod(best, patterns_after.shape[1])


def _row_max(patterns: torch.Tensor) -> float:
    rows = patterns[..., 1:, :] if patterns.shape[-2] > 1 else patterns
    return float(rows.float().amax(-1).mean())


def compare(lm, sw: Switches, ids, before: ReadOut, after: ReadOut,
            patterns_before: torch.Tensor, patterns_after: torch.Tensor, layer: int, head: int,
            stream_after: list[torch.Tensor] | None = None, k: int = 8) -> Comparison:
    """The comparison from two runs: what read_runs read of each, every layer's attention
    patterns [n_layers, n_heads, q_pos, k_pos] each, and optionally the broken run's stream
    after each block ([1, pos, d_model] each)."""
    ids = [int(i) for i in ids]
    after_ids = read_ids(ids, sw)
    finite = after.finite
    p_before = before.last.float().softmax(-1)
    tb = p_before.topk(min(k, p_before.numel()))
    top_after, kl = [], float("nan")
    if finite:
        p_after = after.last.float().softmax(-1)
        ta = p_after.topk(min(k, p_after.numel()))
        top_after = list(zip(ta.indices.tolist(), ta.values.tolist()))
        kl = max(float((p_before * (p_before.clamp_min(1e-30).log() - p_after.clamp_min(1e-30).log())).sum()), 0.0)
    sizes, overflow = [], None
    for block, resid in enumerate(stream_after or []):
        sizes.append(float(resid.float().norm(dim=-1).mean()))
        if overflow is None and not bool(torch.isfinite(resid).all()):
            overflow = block
    return Comparison(
        switches=sw, ids_before=tuple(ids), ids_after=tuple(after_ids),
        loss_before=before.losses.tolist(), loss_after=after.losses.tolist(),
        top_before=list(zip(tb.indices.tolist(), tb.values.tolist())), top_after=top_after, kl=kl,
        finite=finite, layer=layer, head=head,
        pattern_before=patterns_before[layer, head], pattern_after=patterns_after[layer, head],
        future_weight=float(future_share(patterns_after).mean()),
        future_weight_head=float(future_share(patterns_after[layer, head]).mean()),
        row_max_before=_row_max(patterns_before), row_max_after=_row_max(patterns_after),
        most_changed=most_changed_head(patterns_before, patterns_after), stream_sizes=sizes, overflow_block=overflow,
        farthest_key=len(ids) - 1, window=lm.cfg.sliding_window if lm.cfg.sliding_layers else None)


def capture_names(cfg, sw: Switches) -> list[str]:
    """What a run of the lab captures: every layer's attention pattern (the heatmaps, the facts),
    the stream the unembedding reads (read_runs), and with the norms off the stream after each
    block (to find where it overflows)."""
    names = [pattern_name(layer) for layer in range(cfg.n_layers)] + [FINAL]
    if sw.no_norms:
        names += [f"blocks.{layer}.hook_resid_post" for layer in range(cfg.n_layers)]
    return names


def stacked_patterns(cache, n_layers: int) -> torch.Tensor:
    """[n_layers, n_heads, q_pos, k_pos] from a run's captures."""
    return torch.stack([cache[pattern_name(layer)][0] for layer in range(n_layers)])


def streams(cache, n_layers: int) -> list[torch.Tensor] | None:
    name = "blocks.{}.hook_resid_post"
    if name.format(0) not in cache:
        return None
    return [cache[name.format(layer)] for layer in range(n_layers)]


def run_comparison(lm, ids, sw: Switches, layer: int, head: int, k: int = 8) -> Comparison:
    """Both runs (uncached, two forward passes) and their comparison: for tests and scripts;
    the page takes its runs from the shared cache and calls ``compare``."""
    ids = [int(i) for i in ids]
    n_layers = lm.cfg.n_layers
    before = lm.run(ids, names=capture_names(lm.cfg, Switches()), unembed=False)
    after = lm.run(ids, names=capture_names(lm.cfg, sw), hooks=hooks_for(lm, sw), unembed=False)
    read_before, read_after = read_runs(lm, [(before.cache[FINAL], ids), (after.cache[FINAL], read_ids(ids, sw))])
    return compare(lm, sw, ids, read_before, read_after, stacked_patterns(before.cache, n_layers),
                   stacked_patterns(after.cache, n_layers), layer, head, streams(after.cache, n_layers), k)
