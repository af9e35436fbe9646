"""One "Predict, then see" question per lesson and lab, its answer computed from the loaded
model on the learner's prompt (no Streamlit: tests/test_predict*.py run them on both models).

``build(lesson, lm, text)`` returns a Question, or None when this prompt gives no answer to
ask about (empty, too short, a tie). Distractors are drawn from the run (tokens of the
prompt, other heads, other layers) and are distinct from the answer and wrong on this run.
"""

from __future__ import annotations

import random

import torch

from course.predict.core import (Question, Score, best_guess, guess_candidates, percent, run_digest, score_choice,
                                 score_number, score_token)

from lesson_model.analysis import embeddings as E
from lesson_model.analysis import heads as H
from lesson_model.analysis import lens as LENS
from lesson_model.analysis import tokenization as T
from lesson_model.analysis.attention import pattern_names

CAP = 64                 # tokens of the prompt a question runs on (the pages' usual cap)
INDUCTION_BODY = 24      # tokens of the prompt repeated for the induction question
N_OPTIONS = 4


def _shuffled(answer_text: str, distractors: list[str], seed: str) -> tuple[tuple[str, ...], int]:
    """The options in an order fixed by the run (a class sees one order), and the answer's index."""
    options = [answer_text] + distractors
    random.Random(seed).shuffle(options)
    return tuple(options), options.index(answer_text)


def _prompt_tokens(lm, text: str) -> list:
    return lm.cut(lm.tokenize(text), CAP)[0]       # <bos> kept (LessonModel.cut)


def _ids(tokens) -> list[int]:
    return [tok.id for tok in tokens]


def _last_probs(lm, ids: list[int]) -> torch.Tensor:
    run = lm.run(ids, names=[], last_only=True)
    return torch.softmax(run.logits[0, -1].float(), dim=-1)


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

def tokens_question(lm, text: str) -> Question | None:
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

def embeddings_question(lm, text: str) -> Question | None:
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


# --- attention -----------------------------------------------------------------------------

def _position_label(pos: int, text: str) -> str:
    return f"#{pos} {text}"


def attention_question(lm, text: str) -> Question | None:
    """From the last token, which earlier token will head L.H attend to most? The head: the one
    that attends most strongly to some middle token of the prompt (not the first, the previous,
    or itself), so the answer is not always the first token."""
    from lesson_model.analysis.attention import strongest_link
    tokens = _prompt_tokens(lm, text)
    if len(tokens) < 4:
        return None
    run = lm.run(_ids(tokens), names=pattern_names(lm.cfg.n_layers), last_only=True)
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

def heads_question(lm, text: str) -> Question | None:
    """Which of these four heads is the previous-token head on your prompt? The answer: the head
    with the highest previous-token score; the others: heads well below it, low to middling."""
    tokens = _prompt_tokens(lm, text)
    if len(tokens) < 3:
        return None
    run = lm.run(_ids(tokens), names=H.head_measure_names(lm.cfg.n_layers), last_only=True)
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


def induction_question(lm, text: str) -> Question | None:
    """Your prompt, repeated: in the second copy, after token X, what will the model predict next?"""
    found = induction_ids(lm, text)
    if found is None:
        return None
    ids, q = found
    probs = _last_probs(lm, ids[:q + 1])
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

def ffn_question(lm, text: str) -> Question | None:
    """Which block's MLP adds the most (the largest vector) to the last token's stream?"""
    tokens = _prompt_tokens(lm, text)
    if len(tokens) < 2:
        return None
    n = lm.cfg.n_layers
    run = lm.run(_ids(tokens), names=[f"blocks.{L}.hook_mlp_out" for L in range(n)], last_only=True)
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


def residual_question(lm, text: str) -> Question | None:
    """At which layer does the final answer first become the logit lens's top token (and stay)?"""
    tokens = _prompt_tokens(lm, text)
    if len(tokens) < 2:
        return None
    run = lm.run(_ids(tokens), names=LENS.logit_lens_names(lm), last_only=True, unembed=False)
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

def sampling_question(lm, text: str) -> Question | None:
    """What will the next token be? (typed; matched on the model's own tokenization)."""
    tokens = _prompt_tokens(lm, text)
    if not [tok for tok in tokens if not tok.added]:
        return None
    probs = _last_probs(lm, _ids(tokens))
    values, indices = probs.topk(5)
    top = tuple((int(i), lm.token_text(int(i)), float(p)) for p, i in zip(values, indices))
    return Question("sampling.next", run_digest(lm.name, _ids(tokens)), "next_token", ("predict.sampling.text", {}),
                    ("predict.sampling.why", {"token": top[0][1], "p": percent(top[0][2]), "second": top[1][1],
                                              "p2": percent(top[1][2])}),
                    top[0][0], top=top, probs=probs, answer_text=top[0][1])


def generation_question(lm, text: str) -> Question | None:
    """How sure is the model of its most likely next token, in percent?"""
    tokens = _prompt_tokens(lm, text)
    if not [tok for tok in tokens if not tok.added]:
        return None
    probs = _last_probs(lm, _ids(tokens))
    values, indices = probs.topk(2)
    p = 100 * float(values[0])
    return Question("generation.sure", run_digest(lm.name, _ids(tokens)), "number",
                    ("predict.generation.text", {"token": lm.token_text(int(indices[0]))}),
                    ("predict.generation.why", {"token": lm.token_text(int(indices[0])), "p": percent(float(values[0])),
                                                "second": lm.token_text(int(indices[1])),
                                                "p2": percent(float(values[1]))}),
                    round(p), low=0, high=100, integer=True, unit="predict.unit.percent", answer_text=f"{round(p)}")


# --- architecture, what-if --------------------------------------------------------------------

def architecture_question(lm, text: str) -> Question | None:
    """How many parameters does the loaded model have, roughly? (a log scale)"""
    from lesson_model.analysis.params import model_breakdown
    counts = model_breakdown(lm)              # the loaded model's real tensors, a tied table once
    total = counts.total
    embed = counts.embedding + counts.unembedding
    return Question("architecture.params", run_digest(lm.name), "number", ("predict.architecture.text", {}),
                    ("predict.architecture.why", {"total": total, "share": percent(embed / total)}),
                    total, low=1e6, high=1e10, log=True, integer=True, answer_text=f"{total:,}")


def whatif_question(lm, text: str) -> Question | None:
    """Remove the causal mask: will the loss on your prompt go up or down?"""
    from lesson_model.analysis.whatif import run_comparison
    from lesson_model.whatif import Switches
    tokens = _prompt_tokens(lm, text)
    if len([tok for tok in tokens if not tok.added]) < 3:
        return None
    c = run_comparison(lm, _ids(tokens), Switches(no_mask=True), 0, 0)
    if not c.finite or abs(c.mean_after - c.mean_before) < 1e-3:
        return None
    up = c.mean_after > c.mean_before
    options = ("predict.whatif.up", "predict.whatif.down")
    return Question("whatif.mask", run_digest(lm.name, _ids(tokens)), "choice", ("predict.whatif.text", {}),
                    ("predict.whatif.why_up" if up else "predict.whatif.why_down",
                     {"before": f"{c.mean_before:.2f}", "after": f"{c.mean_after:.2f}"}),
                    0 if up else 1, options=options, option_keys=True, answer_text=options[0 if up else 1])


BUILDERS = {
    "tokens": tokens_question,
    "embeddings": embeddings_question,
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


def build(lesson: str, lm, text: str) -> Question | None:
    """This lesson's question on ``text`` with the loaded model, or None (no builder, or no answer
    on this prompt)."""
    builder = BUILDERS.get(lesson)
    if builder is None or not text or not text.strip():
        return None
    return builder(lm, text)


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


def answers_csv(question: Question, answers: list[dict], lm=None, prompt: str = "") -> str:
    """The class's answers as CSV (the teacher's download): nickname, language, the answer as
    given, whether it is right, its score out of 100, and the model's answer."""
    import csv
    import io
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["question", "nickname", "language", "answer", "right", "score", "model_answer"])
    for a in answers:
        value = a.get("value")
        shown = question.options[int(value)] if question.kind == "choice" and isinstance(value, int) and \
            0 <= value < len(question.options) else value
        try:
            result = score(question, value, lm, prompt)
            right, points = result.right, round(100 * result.value)
        except (TypeError, ValueError):
            right, points = False, 0
        writer.writerow([question.id, a.get("nick", ""), a.get("lang", ""), shown, right, points, question.answer_text])
    return out.getvalue()
