"""One "Predict, then see" question per lesson and lab, its answer computed from the loaded
model on the learner's prompt (no Streamlit: tests/test_predict*.py run them on both models).

``build(lesson, lm, text, run)`` returns a Question, or None when this prompt gives no answer
to ask about (empty, too short, a tie). Distractors are drawn from the run (tokens of the
prompt, other heads, other layers) and are distinct from the answer and wrong on this run.

Forward passes go through ``run(ids, names, all_logits=False)``, which returns an object with
``.cache`` (the captures in ``names``) and ``.last_logits`` ([vocab]). The block
(course/predict_view.py) passes the process's run cache (server.models.cached_run), so a
question asked of the same tokens and captures as its page's own pass (each builder says which
page pass it shares) costs no forward pass of its own and reads the very tensors the page
draws; ``direct_runner`` runs the model itself (tests, scripts: no Streamlit here).

The training lab's question (``train_question``) is asked of the run about to be trained: it
is built from the lab's settings, pending (no answer) until that run is finished.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import torch

from course.predict.core import (Question, Score, best_guess, guess_candidates, percent, run_digest, score_choice,
                                 score_number, score_token)

from lesson_model.analysis import embeddings as E
from lesson_model.analysis import heads as H
from lesson_model.analysis import lens as LENS
from lesson_model.analysis import tokenization as T
from lesson_model.analysis import rope as R
from lesson_model.analysis.attention import capture_names
from lesson_model.analysis.sampling_demo import final_vector_hook_names

CAP = 64                 # tokens of the prompt a question runs on (the pages' usual cap)
CAPS = {"sampling": 256, "generation": 128, "position": 128}   # a page that runs more: its own cap (course/cache/<page>.py)
INDUCTION_BODY = 24      # tokens of the prompt repeated for the induction question
N_OPTIONS = 4
POSITION_DISTANCES = (0, 1, 2, 4, 8, 16)   # the position page's "moved along the text" distances (REL_DISTANCES)
POSITION_CURVE = 128                       # its score-against-distance curve: distances 0..this
POSITION_LAYER_FRACTION = 0.55             # its default layer: this fraction of the stack (course/cache/position.py)
POSITION_HEAD = 0                          # its default head
POSITION_MARGIN = 0.05                     # a distractor scores at least this much below the answer
TRAIN_BINS = 4                             # the training question: the run's steps in this many parts, and "not at all"


class _DirectRun:
    """One pass of ``lm.run`` with the interface of server.models.CachedRun that builders read."""

    def __init__(self, run, all_logits: bool):
        self.cache = run.cache
        self.logits = run.logits if all_logits else None
        self.last_logits = run.logits[0, -1]


def direct_runner(lm):
    """``run(ids, names, all_logits=False, hooks=None, hooks_key=None)`` straight through the
    model, uncached (tests, scripts); ``hooks_key`` is what the run cache keys hooks by."""
    def run(ids, names=(), all_logits: bool = False, hooks: dict | None = None, hooks_key=None):
        return _DirectRun(lm.run(list(ids), names=list(names), hooks=hooks, last_only=not all_logits), all_logits)
    return run


def _shuffled(answer_text: str, distractors: list[str], seed: str) -> tuple[tuple[str, ...], int]:
    """The options in an order fixed by the run (a class sees one order), and the answer's index."""
    options = [answer_text] + distractors
    random.Random(seed).shuffle(options)
    return tuple(options), options.index(answer_text)


def _prompt_tokens(lm, text: str, cap: int = CAP) -> list:
    return lm.cut(lm.tokenize(text), cap)[0]       # <bos> kept (LessonModel.cut)


def _ids(tokens) -> list[int]:
    return [tok.id for tok in tokens]


def _last_probs(run, ids: list[int], names=()) -> torch.Tensor:
    return torch.softmax(run(ids, names).last_logits.float(), dim=-1)


def _pick_distinct(candidates, taken: set[str], n: int) -> list:
    """Up to ``n`` of (label, ...) candidates whose labels are new and not empty, in order."""
    out = []
    for item in candidates:
        if len(out) == n:
            break
        if item[0].strip() and item[0] not in taken:
            taken.add(item[0])
            out.append(item)
    return out


# --- tokens --------------------------------------------------------------------------------

def tokens_question(lm, text: str, run) -> Question | None:
    """How many tokens will your prompt become? (the text's own tokens, not an added <bos>)."""
    counts = T.text_counts(lm, text)
    if counts.tokens < 2:
        return None
    n = counts.tokens
    return Question("tokens.count", run_digest(lm.name, text), "number", ("predict.tokens.text", {"chars": counts.chars}),
                    ("predict.tokens.why", {"chars": counts.chars, "n": n, "cpt": f"{counts.chars_per_token:.1f}"}),
                    n, low=1, high=max(20, 2 * counts.chars), integer=True, unit="predict.unit.tokens",
                    answer_text=str(n))


# --- embeddings ----------------------------------------------------------------------------

def embeddings_question(lm, text: str, run) -> Question | None:
    """Which of these four is nearest to X in the embedding table? X: the prompt's longest
    token; the answer: its nearest vocabulary entry; the others: tokens of the prompt, less near."""
    special = set(lm.tokenizer.special_ids)
    tokens = [tok for tok in _prompt_tokens(lm, text) if not tok.added and tok.id not in special and tok.text.strip()]
    if len(tokens) < 2:
        return None
    x = max(tokens, key=lambda tok: len(tok.text.strip()))
    near = E.nearest_neighbours(lm, x.id, k=1)
    if not near:
        return None
    best = near[0]
    cos = E.cosine_to_all(lm, E.embedding_row(lm, x.id))
    others = sorted({tok.id for tok in tokens} - {x.id, best.id}, key=lambda i: -float(cos[i]))
    pool = [(lm.token_text(i), float(cos[i])) for i in others if float(cos[i]) < best.cosine - 1e-6]
    picked = _pick_distinct(pool, {best.text, x.text}, N_OPTIONS - 1)
    if not picked:
        return None
    digest = run_digest(lm.name, text)
    options, answer = _shuffled(best.text, [p[0] for p in picked], digest)
    return Question("embeddings.nearest", digest, "choice", ("predict.embeddings.text", {"token": x.text}),
                    ("predict.embeddings.why", {"token": x.text, "answer": best.text, "cos": f"{best.cosine:.2f}",
                                                "other": picked[0][0], "other_cos": f"{picked[0][1]:.2f}"}),
                    answer, options=options, answer_text=best.text)


# --- position ------------------------------------------------------------------------------

def position_layer(cfg) -> int:
    """The position page's default layer (course/cache/position.py default_layer)."""
    return int(cfg.n_layers * POSITION_LAYER_FRACTION)


def position_question(lm, text: str, run) -> Question | None:
    """Take the real query of the last token and the real key of the token before it (the
    position page's default layer and head) and slide them apart along the text: at which of
    these distances is their score highest? RoPE turns both by their positions, so the score
    depends on the distance alone; the page's "score against distance" curve is this one. The
    answer: the best of POSITION_DISTANCES; the others: distances that score clearly lower."""
    tokens = _prompt_tokens(lm, text, CAPS["position"])
    if len([tok for tok in tokens if not tok.added]) < 2:
        return None
    layer, head = position_layer(lm.cfg), POSITION_HEAD
    n = len(tokens)
    pass_ = run(_ids(tokens), R.rope_hook_names(layer))                 # the position page's pass
    q, k = R.query_and_key(lm, pass_, layer, head, n - 1, n - 2)
    curve = R.score_by_distance(lm, q, k, POSITION_CURVE, layer)      # the page's curve, the same numbers
    scores = {d: float(curve[d]) for d in POSITION_DISTANCES}
    best = max(POSITION_DISTANCES, key=lambda d: scores[d])
    lower = [d for d in POSITION_DISTANCES if scores[d] < scores[best] - POSITION_MARGIN]
    if len(lower) < N_OPTIONS - 1:
        return None
    # the runner-up, the lowest and one between: near, far and middling guesses
    by_score = sorted(lower, key=lambda d: -scores[d])
    picked = list(dict.fromkeys([by_score[0], by_score[-1], by_score[len(by_score) // 2]]))
    for d in by_score:                                                  # fill up to three when two coincide
        if len(picked) == N_OPTIONS - 1:
            break
        if d not in picked:
            picked.append(d)
    options = tuple(str(d) for d in sorted([best] + picked))           # in order of distance
    digest = run_digest(lm.name, _ids(tokens), layer, head)
    runner_up = by_score[0]
    return Question("position.distance", digest, "choice",
                    ("predict.position.text", {"layer": layer, "head": head, "token": tokens[-1].text,
                                               "key_token": tokens[-2].text}),
                    ("predict.position.why", {"layer": layer, "head": head, "best": best,
                                              "score": f"{scores[best]:.2f}", "other": runner_up,
                                              "other_score": f"{scores[runner_up]:.2f}",
                                              "low": by_score[-1], "low_score": f"{scores[by_score[-1]]:.2f}"}),
                    options.index(str(best)), options=options, answer_text=str(best))


# --- attention -----------------------------------------------------------------------------

def _position_label(pos: int, text: str) -> str:
    return f"#{pos} {text}"


def attention_question(lm, text: str, run) -> Question | None:
    """From the last token, which earlier token will head L.H attend to most? The head: the one
    that attends most strongly to some middle token of the prompt (not the first, the previous,
    or itself), so the answer is not always the first token."""
    from lesson_model.analysis.attention import strongest_link
    tokens = _prompt_tokens(lm, text)
    if len(tokens) < 4:
        return None
    run = run(_ids(tokens), capture_names(lm.cfg.n_layers))       # the attention page's pass
    q = len(tokens) - 1
    link = strongest_link(lm, run, q)
    if link is None:
        return None
    hit = link[1]
    row = run.cache[f"blocks.{hit.layer}.attn.hook_pattern"][0, hit.head, q].float()
    order = [int(i) for i in torch.argsort(row, descending=True)]
    top = order[0]
    if top == q or float(row[top]) - float(row[order[1]]) < 0.01:   # itself, or a near tie: not asked
        return None
    labels = [_position_label(i, tokens[i].text) for i in range(len(tokens))]
    pool = [(labels[i], float(row[i])) for i in order[1:] if i != q]
    picked = _pick_distinct(pool, {labels[top]}, N_OPTIONS - 1)
    digest = run_digest(lm.name, _ids(tokens))
    options, answer = _shuffled(labels[top], [p[0] for p in picked], digest)
    return Question("attention.look", digest, "choice",
                    ("predict.attention.text", {"layer": hit.layer, "head": hit.head, "token": tokens[q].text}),
                    ("predict.attention.why", {"layer": hit.layer, "head": hit.head, "answer": labels[top],
                                               "weight": percent(float(row[top])), "other": picked[0][0],
                                               "other_weight": percent(picked[0][1])}),
                    answer, options=options, answer_text=labels[top])


# --- heads ---------------------------------------------------------------------------------

def heads_question(lm, text: str, run) -> Question | None:
    """Which of these four heads is the previous-token head on your prompt? The answer: the head
    with the highest previous-token score; the others: heads well below it, low to middling."""
    tokens = _prompt_tokens(lm, text)
    if len(tokens) < 3:
        return None
    run = run(_ids(tokens), capture_names(lm.cfg.n_layers))       # the heads page's pass (the attention page's)
    grid = H.previous_token_score(H.stacked_patterns(run, lm.cfg.n_layers))
    ranked_top = H.top_heads(grid, 1)
    if not ranked_top:
        return None
    layer, head, best = ranked_top[0]          # heads tied with it are left out of the options
    ranked = H.top_heads(grid, grid.numel(), largest=False)          # lowest first
    below = [r for r in ranked if r[2] < best - 0.2]
    if len(below) < N_OPTIONS - 1:
        return None
    spots = [0, len(below) // 2, (3 * len(below)) // 4]
    picked = [below[i] for i in spots]
    label = lambda l, h: f"L{l}.H{h}"                                 # noqa: E731
    digest = run_digest(lm.name, _ids(tokens))
    options, answer = _shuffled(label(layer, head), [label(l, h) for l, h, _ in picked], digest)
    runner = H.top_heads(grid, 2)[1]
    return Question("heads.previous", digest, "choice", ("predict.heads.text", {}),
                    ("predict.heads.why", {"head": label(layer, head), "score": percent(best),
                                           "other": label(runner[0], runner[1]), "other_score": percent(runner[2])}),
                    answer, options=options, answer_text=label(layer, head))


# --- induction -----------------------------------------------------------------------------

def induction_ids(lm, text: str) -> tuple[list[int], int] | None:
    """The prompt repeated (its first INDUCTION_BODY tokens, after a <bos> if the tokenizer adds
    one) and the position in the second copy the question asks about: halfway through it."""
    tokens = lm.tokenize(text)
    lead = [tok.id for tok in tokens if tok.added]
    body = [tok.id for tok in tokens if not tok.added][:INDUCTION_BODY]
    if len(body) < 4:
        return None
    q = len(lead) + len(body) + len(body) // 2 - 1
    return lead + body + body, q


def induction_question(lm, text: str, run) -> Question | None:
    """Your prompt, repeated: in the second copy, after token X, what will the model predict next?"""
    found = induction_ids(lm, text)
    if found is None:
        return None
    ids, q = found
    probs = _last_probs(run, ids[:q + 1])
    top = int(torch.argmax(probs))
    copy = ids[q + 1]
    candidates = sorted(set(ids) - {top} - set(lm.tokenizer.special_ids), key=lambda i: -float(probs[i]))
    pool = [(lm.token_text(i), i) for i in candidates]
    picked = _pick_distinct(pool, {lm.token_text(top)}, N_OPTIONS - 1)
    if not picked:
        return None
    digest = run_digest(lm.name, ids)
    options, answer = _shuffled(lm.token_text(top), [p[0] for p in picked], digest)
    p_top, p_copy = percent(float(probs[top])), percent(float(probs[copy]))
    why = (("predict.induction.why_copy", {"token": lm.token_text(top), "p": p_top}) if top == copy else
           ("predict.induction.why_other", {"token": lm.token_text(top), "p": p_top, "copy": lm.token_text(copy),
                                             "p_copy": p_copy}))
    return Question("induction.next", digest, "choice", ("predict.induction.text", {"token": lm.token_text(ids[q])}),
                    why, answer, options=options, answer_text=lm.token_text(top))


# --- ffn and residual ------------------------------------------------------------------------

def ffn_question(lm, text: str, run) -> Question | None:
    """Which block's MLP adds the most (the largest vector) to the last token's stream?"""
    tokens = _prompt_tokens(lm, text)
    if len(tokens) < 2:
        return None
    n = lm.cfg.n_layers
    run = run(_ids(tokens), [f"blocks.{L}.hook_mlp_out" for L in range(n)])
    norms = torch.stack([run.cache[f"blocks.{L}.hook_mlp_out"][0, -1].float().norm() for L in range(n)])
    order = [int(i) for i in torch.argsort(norms, descending=True)]
    best = order[0]
    if float(norms[order[1]]) > 0.9 * float(norms[best]):        # too close to call
        return None
    below = sorted(order[1:], key=lambda L: float(norms[L]))      # smallest first
    picked = [below[0], below[len(below) // 2], below[-1]]
    picked = list(dict.fromkeys(L for L in picked if L != best))
    digest = run_digest(lm.name, _ids(tokens))
    label = lambda L: f"{L}"                                           # noqa: E731
    options, answer = _shuffled(label(best), [label(L) for L in picked], digest)
    return Question("ffn.largest", digest, "choice", ("predict.ffn.text", {"token": tokens[-1].text, "n": n}),
                    ("predict.ffn.why", {"layer": best, "norm": f"{float(norms[best]):.0f}",
                                         "median": f"{float(norms.median()):.0f}"}),
                    answer, options=options, answer_text=label(best))


def residual_names(lm) -> list[str]:
    """What the residual page keeps of its pass (course/cache/residual.py lesson_names; the same
    list, so the question reads that very pass)."""
    from lesson_model.analysis import attribution as A
    from lesson_model.analysis import norms as NO
    cfg = lm.cfg
    sink = list(range(cfg.n_layers // 2, cfg.n_layers))
    return sorted(set(A.dla_names(lm)) | set(NO.residual_names(lm)) | set(LENS.logit_lens_names(lm))
                  | set(NO.sink_names(lm, sink)) | set(NO.sublayer_write_names(lm))
                  | {name for layer in range(cfg.n_layers) for name in A.head_dla_names(lm, layer)})


def residual_question(lm, text: str, run) -> Question | None:
    """At which layer does the final answer first become the logit lens's top token (and stay)?"""
    tokens = _prompt_tokens(lm, text)
    if len(tokens) < 2:
        return None
    run = run(_ids(tokens), residual_names(lm))                           # the residual page's pass
    lens = LENS.logit_lens(lm, run, positions=[len(tokens) - 1])
    depth = LENS.first_depth_on_top(lens, 0)
    if depth is None:
        return None
    token = lm.token_text(int(lens.target_ids[0]))
    row = lens.layers.index(depth)
    return Question("residual.first_top", run_digest(lm.name, _ids(tokens)), "number",
                    ("predict.residual.text", {"n": lm.cfg.n_layers, "last": lm.cfg.n_layers - 1}),
                    ("predict.residual.why", {"token": token, "layer": depth,
                                              "p": percent(float(lens.target_probs[row, 0])),
                                              "p_final": percent(float(lens.target_probs[-1, 0]))}),
                    depth, low=0, high=lm.cfg.n_layers - 1, integer=True, answer_text=str(depth))


# --- sampling and generation -----------------------------------------------------------------

def sampling_question(lm, text: str, run) -> Question | None:
    """What will the next token be? (typed; matched on the model's own tokenization)."""
    tokens = _prompt_tokens(lm, text, CAPS["sampling"])
    if not [tok for tok in tokens if not tok.added]:
        return None
    probs = _last_probs(run, _ids(tokens), final_vector_hook_names())    # the sampling page's pass
    values, indices = probs.topk(5)
    top = tuple((int(i), lm.token_text(int(i)), float(p)) for p, i in zip(values, indices))
    return Question("sampling.next", run_digest(lm.name, _ids(tokens)), "next_token", ("predict.sampling.text", {}),
                    ("predict.sampling.why", {"token": top[0][1], "p": percent(top[0][2]), "second": top[1][1],
                                              "p2": percent(top[1][2])}),
                    top[0][0], top=top, probs=probs, answer_text=top[0][1])


def generation_question(lm, text: str, run) -> Question | None:
    """How sure is the model of its most likely next token, in percent?"""
    tokens = _prompt_tokens(lm, text, CAPS["generation"])
    if not [tok for tok in tokens if not tok.added]:
        return None
    probs = _last_probs(run, _ids(tokens))                               # the generation page's pass
    values, indices = probs.topk(2)
    p = 100 * float(values[0])
    return Question("generation.sure", run_digest(lm.name, _ids(tokens)), "number",
                    ("predict.generation.text", {"token": lm.token_text(int(indices[0]))}),
                    ("predict.generation.why", {"token": lm.token_text(int(indices[0])), "p": percent(float(values[0])),
                                                "second": lm.token_text(int(indices[1])),
                                                "p2": percent(float(values[1]))}),
                    round(p), low=0, high=100, integer=True, unit="predict.unit.percent", answer_text=f"{round(p)}")


# --- architecture, what-if --------------------------------------------------------------------

def architecture_question(lm, text: str, run) -> Question | None:
    """How many parameters does the loaded model have, roughly? (a log scale)"""
    from lesson_model.analysis.params import model_breakdown
    counts = model_breakdown(lm)              # the loaded model's real tensors, a tied table once
    total = counts.total
    embed = counts.embedding + counts.unembedding
    return Question("architecture.params", run_digest(lm.name), "number", ("predict.architecture.text", {}),
                    ("predict.architecture.why", {"total": total, "share": percent(embed / total)}),
                    total, low=1e6, high=1e10, log=True, integer=True, answer_text=f"{total:,}")


def whatif_question(lm, text: str, run) -> Question | None:
    """Remove the causal mask: will the loss on your prompt go up or down?"""
    from lesson_model.analysis import whatif as WA
    from lesson_model.whatif import Switches, hooks_for
    tokens = _prompt_tokens(lm, text)
    if len([tok for tok in tokens if not tok.added]) < 3:
        return None
    ids, n, sw = _ids(tokens), lm.cfg.n_layers, Switches(no_mask=True)    # the what-if page's first view
    # the page's two passes (course/cache/whatif.py lesson_runs), then its comparison (as run_comparison)
    before = run(ids, WA.capture_names(lm.cfg, Switches()))
    after = run(ids, WA.capture_names(lm.cfg, sw), hooks=hooks_for(lm, sw), hooks_key=sw.key())
    read_before, read_after = WA.read_runs(lm, [(before.cache[WA.FINAL], ids), (after.cache[WA.FINAL], WA.read_ids(ids, sw))])
    c = WA.compare(lm, sw, ids, read_before, read_after, WA.stacked_patterns(before.cache, n),
                   WA.stacked_patterns(after.cache, n), 0, 0, WA.streams(after.cache, n))
    if not c.finite or abs(c.mean_after - c.mean_before) < 1e-3:
        return None
    up = c.mean_after > c.mean_before
    options = ("predict.whatif.up", "predict.whatif.down")
    return Question("whatif.mask", run_digest(lm.name, _ids(tokens)), "choice", ("predict.whatif.text", {}),
                    ("predict.whatif.why_up" if up else "predict.whatif.why_down",
                     {"before": f"{c.mean_before:.2f}", "after": f"{c.mean_after:.2f}"}),
                    0 if up else 1, options=options, option_keys=True, answer_text=options[0 if up else 1])


# --- the training lab --------------------------------------------------------------------------

def train_bins(steps: int, every: int) -> list[int]:
    """The edges of the training question's parts of a run of ``steps`` steps: 0, then
    TRAIN_BINS evenly spaced ends on the eval grid (multiples of ``every``), the last ``steps``."""
    edges = [0] + [max(every, round(steps * i / TRAIN_BINS / every) * every) for i in range(1, TRAIN_BINS)] + [steps]
    return sorted(set(edges))


def train_bin(phase_step: int | None, edges: list[int]) -> int:
    """Which option a phase change at ``phase_step`` falls in: part i holds (edges[i], edges[i + 1]]
    (the first also step 0); None, no phase change in the run, is the last option."""
    if phase_step is None:
        return len(edges) - 1
    for i in range(len(edges) - 1):
        if phase_step <= edges[i + 1]:
            return i
    raise ValueError(f"phase step {phase_step} is past the run's {edges[-1]} steps")


def train_question(settings, result=None) -> Question:
    """Training lab: in which part of the run will the phase change come (the best induction
    score at PHASE_THRESHOLD or more, to stay: lesson_model.training.phase_change), or not at all?
    Asked of the run these ``settings`` train; ``result`` (a finished TrainResult of these
    settings) answers it, and until there is one the question is pending."""
    from dataclasses import asdict

    from lesson_model import training as T
    steps = settings.steps
    edges = train_bins(steps, T.EVAL_EVERY)
    options = tuple(["predict.train.part"] * (len(edges) - 1) + ["predict.train.never"])
    fields = tuple([{"low": f"{edges[i]:,}", "high": f"{edges[i + 1]:,}"} for i in range(len(edges) - 1)]
                   + [{"steps": f"{steps:,}"}])
    threshold = percent(T.PHASE_THRESHOLD)
    text = ("predict.train.text", {"steps": f"{steps:,}", "threshold": threshold})
    digest = run_digest("train", sorted(asdict(settings).items()))
    if result is None or result.settings != settings or result.stopped != "done" or not result.history:
        return Question("train.phase", digest, "choice", text, ("", {}), None, options=options, option_keys=True,
                        option_fields=fields, intro="predict.train.intro")
    phase = T.phase_change(result.history)
    if phase != result.phase_step:
        raise ValueError("the result's phase step is not its history's")
    if phase is None:
        top = max(result.history, key=lambda p: max(p.induction, default=0.0))
        why = ("predict.train.why_never", {"steps": f"{steps:,}", "threshold": threshold,
                                           "score": percent(max(top.induction, default=0.0)), "at": f"{top.step:,}"})
        shown = "none"
    else:
        last = result.history[-1]
        layer = max(range(len(last.induction)), key=lambda L: last.induction[L])
        why = ("predict.train.why_phase", {"step": f"{phase:,}", "threshold": threshold,
                                           "score": percent(last.induction[layer]), "layer": layer,
                                           "end": f"{last.step:,}"})
        shown = str(phase)
    answer = train_bin(phase, edges)
    return Question("train.phase", digest, "choice", text, why, answer, options=options, option_keys=True,
                    option_fields=fields, answer_text=shown, intro="predict.train.intro")


BUILDERS = {
    "tokens": tokens_question,
    "embeddings": embeddings_question,
    "position": position_question,
    "attention": attention_question,
    "heads": heads_question,
    "induction": induction_question,
    "ffn": ffn_question,
    "residual": residual_question,
    "sampling": sampling_question,
    "generation": generation_question,
    "architecture": architecture_question,
    "whatif": whatif_question,
}


def build(lesson: str, lm, text: str, run=None) -> Question | None:
    """This lesson's question on ``text`` with the loaded model, or None (no builder, or no answer
    on this prompt). ``run``: how forward passes are made (the module's docstring); default
    ``direct_runner(lm)``."""
    builder = BUILDERS.get(lesson)
    if builder is None or not text or not text.strip():
        return None
    return builder(lm, text, run or direct_runner(lm))


def guess_ids(lm, question: Question, guess: str, prompt: str) -> list[int]:
    """A typed next-token guess as the model's tokens: as typed or with a leading space, whichever
    tokenization's first token the model finds more likely (course.predict.core.best_guess)."""
    texts = guess_candidates(guess, prompt[-1:].isspace())
    return best_guess([lm.tokenizer.encode_literal(t) for t in texts], question.probs)


def score(question: Question, guess, lm=None, prompt: str = "") -> Score:
    """Score a guess: an option's index (choice), a number, or typed text (next_token, needs ``lm``)."""
    if question.kind == "choice":
        return score_choice(int(question.answer), int(guess))
    if question.kind == "number":
        return score_number(question.answer, float(guess), log=question.log, low=question.low, high=question.high,
                            integer=question.integer)
    ids = guess_ids(lm, question, str(guess), prompt)
    return score_token(int(question.answer), ids, question.probs, question.top[0][2])


def token_probability(lm, question: Question, guess: str, prompt: str) -> tuple[list[int], float]:
    """A typed guess's tokens and the model's probability of the first (0 when it has none)."""
    ids = guess_ids(lm, question, guess, prompt)
    return ids, float(question.probs[ids[0]]) if ids else 0.0


# --- a class's answers -------------------------------------------------------------------------

def class_summary(question: Question, answers: list[dict], lm=None, prompt: str = "") -> dict:
    """What the teacher's reveal shows (JSON, the same for every student): one bar per option,
    per number guessed or per first token guessed, each with how many answered it, whether it is
    the model's answer, and (next token) the model's probability of it; the model's own top
    choices are there too, guessed or not."""
    bars: dict = {}
    for a in answers:
        value = a.get("value")
        try:
            if question.kind == "choice":
                key = int(value)
                if not 0 <= key < len(question.options):
                    continue
                bar = {"value": key, "right": key == int(question.answer)}
            elif question.kind == "number":
                number = float(value)
                key = round(number) if question.integer else round(number, 1)
                bar = {"value": key, "right": score(question, number).right}
            else:
                ids = guess_ids(lm, question, str(value), prompt)
                if not ids:
                    continue
                key = ids[0]
                bar = {"value": lm.token_text(key), "right": key == int(question.answer),
                       "p": float(question.probs[key])}
        except (TypeError, ValueError):
            continue
        bars.setdefault(key, dict(bar, count=0))["count"] += 1
    if question.kind == "choice":
        for i in range(len(question.options)):
            bars.setdefault(i, {"value": i, "right": i == int(question.answer), "count": 0})
        order = sorted(bars)
    elif question.kind == "number":
        order = sorted(bars)
    else:
        for token_id, text, p in question.top[:3]:
            bars.setdefault(token_id, {"value": text, "right": token_id == int(question.answer), "p": p, "count": 0})
        order = sorted(bars, key=lambda k: (-bars[k]["count"], -bars[k].get("p", 0.0)))
    n = sum(b["count"] for b in bars.values())
    return {"n": n, "answer": question.answer, "answer_text": question.answer_text, "kind": question.kind,
            "bars": [bars[k] for k in order],
            "right": sum(b["count"] for b in bars.values() if b["right"])}


def answers_csv(question: Question, answers: list[dict], lm=None, prompt: str = "",
                option_text: Callable[[int], str] | None = None) -> str:
    """The class's answers as CSV (the teacher's download): nickname, language, the answer as
    given, whether it is right, its score out of 100, and the model's answer. ``option_text(i)``
    reads option i in the teacher's language (needed where options are catalog keys: the
    training lab's); without it the option is written as stored."""
    import csv
    import io
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["question", "nickname", "language", "answer", "right", "score", "model_answer"])
    for a in answers:
        value = a.get("value")
        is_option = question.kind == "choice" and isinstance(value, int) and 0 <= value < len(question.options)
        shown = (option_text(value) if option_text else question.options[value]) if is_option else value
        try:
            result = score(question, value, lm, prompt)
            right, points = result.right, round(100 * result.value)
        except (TypeError, ValueError):
            right, points = False, 0
        writer.writerow([question.id, a.get("nick", ""), a.get("lang", ""), shown, right, points, question.answer_text])
    return out.getvalue()
