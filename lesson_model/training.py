"""Train a tiny decoder on repeated random tokens and watch an induction head form (issue 13).

The model is lesson_model.decoder.Decoder itself, with a small DecoderConfig: not a second
implementation. Plain torch: no streamlit, no plotly.

    from lesson_model.training import TrainSettings, train
    for event in train(TrainSettings(n_layers=2)):
        ...                              # Progress, Checkpoint, ..., and last the TrainResult

The task. Every sequence is SEQ_LEN random tokens in which a segment appears twice. With
random_offset the segment's length (SEG_MIN..SEG_MAX) and both of its places are drawn anew for
every sequence, so the only way to predict the second copy is to find the current token's
earlier occurrence and read the token after it: an induction head, which needs two layers (a
previous-token head, then a head whose query matches what the previous-token head wrote).
Without random_offset the segment is always at FIXED_REPEAT, the same distance back, so a
single head that attends that fixed distance back solves it: a positional shortcut.

Switches, all per call, none needing a change to the decoder:
- mlp=False: the config's d_ff is 0, so each MLP is a product of empty matrices, an exact zero
  that costs nothing (attention-only blocks);
- positions=False: per-call hooks hand back the unrotated q and k (hook_q/hook_k) at
  hook_rot_q/hook_rot_k, so attention scores carry no position information at all.

Scores (on a fixed eval batch, every EVAL_EVERY steps, under torch.no_grad):
- induction score of a head: its mean attention, from each position of the second copy, on the
  token AFTER that position's earlier occurrence (the standard definition);
- previous-token score: its mean attention on the position just before (over positions 1..T-1).
Progress.induction[L] is the best head's induction score in layer L (the head in best_heads[L]);
Progress.prev_token[L] is the best previous-token score in layer L (the head in prev_heads[L]).

Phase change (phase_change): the first eval step from which the best induction score over all
layers is at least PHASE_THRESHOLD (0.3) at every later eval. None if it never gets there to stay.

Determinism: data, eval batch and initialization come from local torch.Generator objects
(never the global RNG); the same settings give the same curves in one process at the same
torch thread count. train() never calls torch.set_num_threads (that is process-wide).

API changes (for the page, against the brief's contract): only ADDED fields:
- Progress.train_loss (mean training-batch loss since the previous eval), Progress.prev_heads;
- Checkpoint.repeat: (first start, second start, length) of the probe's segment;
- TrainResult.shortcut: for random_offset=False only, the finished model measured on the
  random-offset eval batch (a Progress): the fixed-offset model's scores collapse there.
- TrainResult.steps_done.

Measured (seed 0 unless said, default settings otherwise, one torch thread, on the shared 2-core
machine under heavy load, so the seconds are 5-30x an idle core's; "rep" is loss_repeat at step 0
-> at the end, "score" the best induction score over the layers):
- 2 layers, random offset: phase at step 1,550; rep 4.68 -> 0.70; score 0.04 -> 0.72 (layer 1,
  fed by a previous-token head in layer 0 at 0.83); seed 1: phase 1,750, score 0.60 at step
  2,000 (rep 1.32; 0.67 and 0.89 at 2,500); seed 2: phase about 1,800, score 0.65 at 2,000 (rep 1.12).
- 1 layer, random offset: stuck; rep 4.69 -> 3.67 (it learns "a token seen earlier is likelier",
  not where to look); score never above 0.09.
- 1 layer, fixed offset: the shortcut; phase (score over 0.3 to stay) at 650, rep 4.72 -> 0.20,
  score 0.61: its head attends a fixed distance back, which here IS the induction target, so the
  score is high by coincidence. The same model on random offsets (TrainResult.shortcut): rep 5.42
  (worse than guessing, log 64 = 4.16), score 0.08. That is what the page should say.
- 2 layers, fixed offset: the shortcut again, faster: phase 175, rep 4.70 -> 0.01, score 1.00 in
  layer 1 with NO previous-token head (0.06); on random offsets rep 8.33, score 0.06.
- no positions, random offset: 1 layer rep 4.69 -> 4.08, score 0.04; 2 layers rep 4.68 -> 3.88,
  score 0.05, previous-token 0.11: without position information no previous-token head, so no
  induction head either.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, fields
from typing import Callable, Iterator, Mapping

import numpy as np
import torch
import torch.nn.functional as F

from .decoder import Decoder, DecoderConfig, Hooks
from .whatif import no_rope_hooks

# --------------------------------------------------------------------------- fixed sizes

VOCAB = 64
D_MODEL = 64
N_HEADS = 4
D_HEAD = D_MODEL // N_HEADS
D_FF = 4 * D_MODEL          # only with mlp=True
SEQ_LEN = 40
BATCH = 64
EVAL_BATCH = 64
SEG_MIN, SEG_MAX = 6, 18    # random_offset: the segment's length, both ends included
FIXED_REPEAT = (8, 24, 12)  # random_offset=False: (first start, second start, length), always
ROPE_THETA = 10000.0
WEIGHT_DECAY = 0.01
EVAL_EVERY = 25
CHECKPOINT_EVERY = 100
PHASE_THRESHOLD = 0.3
EVAL_SEED = 1234            # the eval batch and probe: the same for every run, so runs compare
INIT_SALT = 0x5EED          # the init generator's seed is seed + INIT_SALT (data uses seed)


@dataclass(frozen=True)
class TrainSettings:
    n_layers: int = 2            # 1..3
    mlp: bool = False            # False: attention-only blocks (the MLP is an exact zero)
    random_offset: bool = True   # False: the repeated segment always at the same place
    positions: bool = True       # False: no position information (q, k not rotated)
    lr: float = 1e-3
    steps: int = 2000
    seed: int = 0


LIMITS: dict[str, tuple] = {"n_layers": (1, 3), "lr": (1e-4, 1e-2), "steps": (100, 4000), "seed": (0, 9999)}
_BOOLS = ("mlp", "random_offset", "positions")
_DEFAULTS = TrainSettings()


def _as_bool(value):
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "on", "false", "0", "no", "off"):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return None


def _as_number(value, kind):
    if isinstance(value, (bool, np.bool_)):
        return None
    try:
        number = float(value.strip()) if isinstance(value, str) else float(value)
    except (TypeError, ValueError, AttributeError):
        return None
    if not math.isfinite(number):
        return None
    return int(round(number)) if kind is int else number


def clamp(settings) -> tuple[TrainSettings, list[tuple[str, object, object]]]:
    """(settings within LIMITS, [(field, given, used)] for every value that was changed).

    Accepts a TrainSettings or a mapping (missing keys take the defaults, unknown keys are
    ignored). A value that is not a number / not a boolean takes the default; a number out of
    range is clipped to the nearest limit; an int field given 2.0 or "2" becomes 2 (noted only
    when the value changed).
    """
    given = {f.name: getattr(settings, f.name) for f in fields(TrainSettings)} if isinstance(settings, TrainSettings) \
        else {f.name: settings.get(f.name, getattr(_DEFAULTS, f.name)) for f in fields(TrainSettings)} \
        if isinstance(settings, Mapping) else None
    if given is None:
        raise TypeError(f"clamp() takes a TrainSettings or a mapping, not {type(settings).__name__}")
    used, notes = {}, []
    for f in fields(TrainSettings):
        value, default = given[f.name], getattr(_DEFAULTS, f.name)
        if f.name in _BOOLS:
            v = _as_bool(value)
            v = default if v is None else v
            changed = not isinstance(value, (bool, np.bool_)) or bool(value) != v
        else:
            kind = float if f.name == "lr" else int
            v = _as_number(value, kind)
            v = default if v is None else v
            low, high = LIMITS[f.name]
            v = kind(min(max(v, low), high))
            try:
                changed = isinstance(value, (bool, np.bool_)) or float(value) != v
            except (TypeError, ValueError):
                changed = True
        used[f.name] = v
        if changed:
            notes.append((f.name, value, v))
    return TrainSettings(**used), notes


def log_vocab() -> float:
    """log(VOCAB): the loss of guessing uniformly, the line a curve starts on."""
    return math.log(VOCAB)


# --------------------------------------------------------------------------- events

@dataclass
class Progress:
    step: int
    steps: int
    elapsed_s: float
    loss: float                 # mean next-token loss over the whole sequence (eval batch)
    loss_repeat: float          # over the predictable part of the second copy only
    induction: list[float]      # per layer: the best head's induction score
    prev_token: list[float]     # per layer: the best head's previous-token score
    best_heads: list[int]       # per layer: the head with the best induction score
    prev_heads: list[int]       # per layer: the head with the best previous-token score
    train_loss: float | None = None   # mean training-batch loss since the previous eval


@dataclass
class Checkpoint:
    step: int
    probe: list[int]                                  # the probe sequence's tokens
    patterns: dict[tuple[int, int], np.ndarray]       # (layer, head) -> [T, T] attention, every head
    repeat: tuple[int, int, int] = (0, 0, 0)          # the probe's (first start, second start, length)


@dataclass
class TrainResult:
    settings: TrainSettings
    history: list[Progress]
    checkpoints: list[Checkpoint]
    phase_step: int | None
    stopped: str                 # "done" | "cancelled" | "time"
    seconds: float
    steps_done: int = 0
    shortcut: Progress | None = None   # random_offset=False: the final model on random-offset data


# --------------------------------------------------------------------------- the task

def make_batch(generator: torch.Generator, batch: int, random_offset: bool):
    """Random tokens with one segment repeated: ids [batch, SEQ_LEN] and the (first start,
    second start, length) of each row's segment, three int tensors [batch]."""
    ids = torch.randint(0, VOCAB, (batch, SEQ_LEN), generator=generator)
    if random_offset:
        length = torch.randint(SEG_MIN, SEG_MAX + 1, (batch,), generator=generator)
        first = (torch.rand(batch, generator=generator) * (SEQ_LEN - 2 * length + 1)).floor().long()
        room = SEQ_LEN - length - (first + length) + 1                       # choices for the second start
        second = first + length + (torch.rand(batch, generator=generator) * room).floor().long()
    else:
        f, s, n = FIXED_REPEAT
        first, second, length = (torch.full((batch,), v) for v in (f, s, n))
    pos = torch.arange(SEQ_LEN)[None, :]                                      # [1, T]
    in_copy = (pos >= second[:, None]) & (pos < (second + length)[:, None])   # [batch, T]
    source = torch.where(in_copy, pos - (second - first)[:, None], pos)
    return ids.gather(1, source), (first, second, length)


def _masks(repeat):
    """Boolean [batch, T] masks: the query positions of the second copy, and the positions whose
    NEXT token is predictable from the first copy (the loss on the repeated part)."""
    first, second, length = repeat
    pos = torch.arange(SEQ_LEN)[None, :]
    copy = (pos >= second[:, None]) & (pos < (second + length)[:, None])
    predictable = (pos >= second[:, None]) & (pos < (second + length - 1)[:, None])
    return copy, predictable


# --------------------------------------------------------------------------- the model

def model_config(settings: TrainSettings) -> DecoderConfig:
    return DecoderConfig(vocab_size=VOCAB, d_model=D_MODEL, n_layers=settings.n_layers, n_heads=N_HEADS,
                         n_kv_heads=N_HEADS, d_head=D_HEAD, d_ff=D_FF if settings.mlp else 0,
                         rope_theta=ROPE_THETA, max_position=SEQ_LEN, tie_embeddings=False)


def build_model(settings: TrainSettings) -> Decoder:
    """A Decoder with its weights drawn from a local generator (seeded by settings.seed)."""
    model = Decoder(model_config(settings))
    g = torch.Generator().manual_seed(settings.seed + INIT_SALT)
    residual_scale = 1.0 / math.sqrt(2 * settings.n_layers)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.numel() == 0:
                continue
            if name.endswith("weight"):                         # RMSNorm weights
                p.fill_(1.0)
            elif name == "W_E":
                p.normal_(0.0, 1.0, generator=g)
            else:                                                # [fan_in, fan_out] matrices
                std = 1.0 / math.sqrt(p.shape[0])
                if name.endswith(("W_O", "down_proj")):         # writes into the residual stream
                    std *= residual_scale
                p.normal_(0.0, std, generator=g)
    return model


def no_rope_fns(model: Decoder) -> dict:
    """Per-call hook functions that undo RoPE in every layer (the What-if lab's switch):
    hook_rot_q/hook_rot_k get back the q and k that went in. Fresh closures: one dict per
    training, in one thread."""
    fns = {}
    for layer in range(model.cfg.n_layers):
        fns |= no_rope_hooks(model, layer, {})
    return fns


def one_hot_embed(model: Decoder, ids: torch.Tensor) -> dict:
    """A per-call hook that hands back the same embedding rows as one_hot(ids) @ W_E.

    The values are bit-for-bit W_E[ids]; the point is the backward pass: the gradient of
    W_E[ids] is an indexed accumulation whose summation order varies between runs at 2+ torch
    threads (measured: W_E's gradient differs in the last bits), while one_hot.T @ grad is a
    matmul, the same every run. Used on training steps only (evals need no gradient)."""
    one_hot = F.one_hot(ids, model.cfg.vocab_size).to(model.W_E.dtype)          # [batch, pos, vocab]
    return {"hook_embed": lambda embedded: one_hot @ model.W_E}                # [batch, pos, d_model]


# --------------------------------------------------------------------------- measuring

def _evaluate(model, ids, repeat, fns, step, steps, elapsed, train_loss=None, keep_patterns=False):
    """Loss, repeated-part loss and every head's scores on one batch (no grad)."""
    n_layers = model.cfg.n_layers
    names = [f"blocks.{L}.attn.hook_pattern" for L in range(n_layers)]
    hooks = Hooks(names=names, fns=fns)
    with torch.no_grad():
        logits = model(ids, hooks=hooks)
        losses = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), ids[:, 1:].reshape(-1),
                                 reduction="none").view(ids.shape[0], -1)        # [batch, T-1]
        copy, predictable = _masks(repeat)
        loss_repeat = losses[predictable[:, :-1]].mean().item()
        first, second, _ = repeat
        target = torch.arange(SEQ_LEN)[None, :] - (second - first)[:, None] + 1  # induction target position
        target = target.clamp(0, SEQ_LEN - 1)
        induction, prev, best, prev_best = [], [], [], []
        patterns = []
        for name in names:
            pattern = hooks.cache[name]                                            # [batch, heads, T, T]
            patterns.append(pattern)
            on_target = pattern.gather(-1, target[:, None, :, None].expand(-1, N_HEADS, -1, 1))[..., 0]
            ind = (on_target * copy[:, None, :]).sum((0, 2)) / copy.sum()          # [heads]
            prev_score = pattern.diagonal(offset=-1, dim1=-2, dim2=-1).mean((0, 2))   # [heads]
            induction.append(ind.max().item()); best.append(int(ind.argmax()))
            prev.append(prev_score.max().item()); prev_best.append(int(prev_score.argmax()))
    progress = Progress(step=step, steps=steps, elapsed_s=elapsed, loss=losses.mean().item(),
                        loss_repeat=loss_repeat, induction=induction, prev_token=prev, best_heads=best,
                        prev_heads=prev_best, train_loss=train_loss)
    return (progress, patterns) if keep_patterns else progress


def _checkpoint(step, patterns, probe_ids, repeat) -> Checkpoint:
    first, second, length = (int(r[0]) for r in repeat)
    return Checkpoint(step=step, probe=probe_ids[0].tolist(), repeat=(first, second, length),
                      patterns={(L, h): p[0, h].numpy().copy() for L, p in enumerate(patterns)
                                for h in range(p.shape[1])})


def phase_change(history) -> int | None:
    """The step the induction head formed: the first eval step from which the best induction
    score over all layers stays at or above PHASE_THRESHOLD at every later eval; None if never."""
    phase = None
    for p in history:
        if max(p.induction, default=0.0) >= PHASE_THRESHOLD:
            if phase is None:
                phase = p.step
        else:
            phase = None
    return phase


# --------------------------------------------------------------------------- training

def train(settings, *, should_stop: Callable[[], bool] = lambda: False,
          max_seconds: float = 120.0) -> Iterator[Progress | Checkpoint | TrainResult]:
    """Train and yield events: a Progress every EVAL_EVERY steps (and at step 0 and the end), a
    Checkpoint every CHECKPOINT_EVERY steps (and at the end), and last a TrainResult.

    Bounded: at most settings.steps (clamped) steps and about max_seconds; should_stop() is
    asked before every step (stopped="cancelled"). A consumer that stops iterating stops the
    training too (it is a generator: nothing runs between two next() calls).
    """
    settings, _ = clamp(settings)
    start = time.perf_counter()
    data = torch.Generator().manual_seed(settings.seed)
    eval_gen = torch.Generator().manual_seed(EVAL_SEED)
    eval_ids, eval_repeat = make_batch(eval_gen, EVAL_BATCH, settings.random_offset)
    model = build_model(settings)
    fns = {} if settings.positions else no_rope_fns(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=WEIGHT_DECAY,
                                  foreach=True)
    history, checkpoints = [], []
    stopped, step, losses = "done", 0, []

    def measure(step):
        progress, patterns = _evaluate(model, eval_ids, eval_repeat, fns, step, settings.steps,
                                       time.perf_counter() - start,
                                       train_loss=(sum(losses) / len(losses)) if losses else None,
                                       keep_patterns=True)
        losses.clear()
        history.append(progress)
        return progress, patterns

    progress, patterns = measure(0)
    yield progress
    checkpoints.append(_checkpoint(0, patterns, eval_ids, eval_repeat))
    yield checkpoints[-1]
    model.train()
    while step < settings.steps:
        if should_stop():
            stopped = "cancelled"
            break
        if time.perf_counter() - start > max_seconds:
            stopped = "time"
            break
        ids, _ = make_batch(data, BATCH, settings.random_offset)
        logits = model(ids, hooks=Hooks(names=(), fns={**fns, **one_hot_embed(model, ids)}))
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        step += 1
        last = step == settings.steps
        if step % EVAL_EVERY == 0 or last:
            progress, patterns = measure(step)
            yield progress
            if step % CHECKPOINT_EVERY == 0 or last:
                checkpoints.append(_checkpoint(step, patterns, eval_ids, eval_repeat))
                yield checkpoints[-1]
    if stopped != "done" and history[-1].step != step:    # a final measurement where it stopped
        progress, patterns = measure(step)
        yield progress
        checkpoints.append(_checkpoint(step, patterns, eval_ids, eval_repeat))
        yield checkpoints[-1]
    shortcut = None
    if not settings.random_offset:
        other_ids, other_repeat = make_batch(torch.Generator().manual_seed(EVAL_SEED), EVAL_BATCH, True)
        shortcut = _evaluate(model, other_ids, other_repeat, fns, step, settings.steps, time.perf_counter() - start)
    yield TrainResult(settings=settings, history=history, checkpoints=checkpoints, phase_step=phase_change(history),
                      stopped=stopped, seconds=time.perf_counter() - start, steps_done=step, shortcut=shortcut)


def run(settings, **kwargs) -> TrainResult:
    """train() to the end, returning only the TrainResult (for tests, benchmarks and scripts)."""
    result = None
    for event in train(settings, **kwargs):
        result = event
    return result
