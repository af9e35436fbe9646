"""Predict, then see, on the real models: every lesson's question has the answer an
independent computation on the same run gives (SmolLM2 on English, Gemma on English and on
Chinese), its distractors are distinct and wrong, and a prompt with nothing to ask about
gives no question."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from course.predict import builders as B

pytestmark = pytest.mark.parity

EN = "The capital of France is Paris, and the capital of Italy is"
ZH = "我喜歡貓，因為牠們很可愛。貓喜歡睡覺，也喜歡在陽光下玩耍"
CASES = [("smollm2-135m", EN), ("gemma-3-270m", EN), ("gemma-3-270m", ZH)]


@pytest.fixture(params=CASES, ids=["smollm2-en", "gemma-en", "gemma-zh"])
def case(request, models):
    key, text = request.param
    return models[key], text


def ids_of(lm, text):
    return [t.id for t in lm.tokenize(text)]


def full_logits(lm, ids):
    return lm.run(ids, names=[]).logits[0].float()


def distinct(q):
    assert len(set(q.options)) == len(q.options) >= 2


def test_tokens(case):
    lm, text = case
    q = B.build("tokens", lm, text)
    assert q.answer == len([t for t in lm.tokenize(text) if not t.added])
    assert B.score(q, q.answer).right and not B.score(q, q.answer + 1).right


def test_embeddings(case):
    lm, text = case
    q = B.build("embeddings", lm, text)
    distinct(q)
    x = next(t for t in lm.tokenize(text) if t.text == q.text[1]["token"])
    W = F.normalize(lm.decoder.W_E.detach().float(), dim=-1)
    cos = W @ W[x.id]
    cos[x.id] = -2
    cos[sorted(lm.tokenizer.special_ids)] = -2
    best = int(cos.argmax())
    assert q.options[q.answer] == lm.token_text(best)
    vocab = {lm.token_text(i): i for i in set(ids_of(lm, text))}
    for i, option in enumerate(q.options):
        if i != q.answer:
            assert float(cos[vocab[option]]) < float(cos[best])     # wrong: less near


def test_attention(case):
    lm, text = case
    q = B.build("attention", lm, text)
    distinct(q)
    layer, head = q.text[1]["layer"], q.text[1]["head"]
    ids = ids_of(lm, text)
    row = lm.run(ids, names=[f"blocks.{layer}.attn.hook_pattern"]).cache[f"blocks.{layer}.attn.hook_pattern"][0, head, -1]
    top = int(row.argmax())
    assert q.options[q.answer].startswith(f"#{top} ")
    for i, option in enumerate(q.options):
        if i != q.answer:
            assert float(row[int(option.split()[0][1:])]) < float(row[top])


def test_heads(case):
    lm, text = case
    q = B.build("heads", lm, text)
    distinct(q)
    ids = ids_of(lm, text)
    n = lm.cfg.n_layers
    run = lm.run(ids, names=[f"blocks.{L}.attn.hook_pattern" for L in range(n)])
    score = {}
    for L in range(n):
        p = run.cache[f"blocks.{L}.attn.hook_pattern"][0].float()            # [H, q, k]
        for h in range(p.shape[0]):
            score[f"L{L}.H{h}"] = float(sum(p[h, i, i - 1] for i in range(1, len(ids))) / (len(ids) - 1))
    assert score[q.options[q.answer]] == pytest.approx(max(score.values()), abs=1e-5)
    for i, option in enumerate(q.options):
        if i != q.answer:
            assert score[option] < max(score.values()) - 0.2


def test_induction(case):
    lm, text = case
    q = B.build("induction", lm, text)
    distinct(q)
    ids, pos = B.induction_ids(lm, text)
    logits = full_logits(lm, ids)[pos]
    assert q.options[q.answer] == lm.token_text(int(logits.argmax()))


def test_ffn(case):
    lm, text = case
    q = B.build("ffn", lm, text)
    if q is None:                      # two blocks within 10% of each other: nothing to ask
        return
    distinct(q)
    n = lm.cfg.n_layers
    run = lm.run(ids_of(lm, text), names=[f"blocks.{L}.hook_mlp_out" for L in range(n)])
    norms = [float(run.cache[f"blocks.{L}.hook_mlp_out"][0, -1].norm()) for L in range(n)]
    best = max(range(n), key=lambda L: norms[L])
    assert q.options[q.answer] == str(best)
    assert all(norms[int(o)] < norms[best] for i, o in enumerate(q.options) if i != q.answer)


def test_residual(case):
    lm, text = case
    q = B.build("residual", lm, text)
    n = lm.cfg.n_layers
    run = lm.run(ids_of(lm, text), names=[f"blocks.{L}.hook_resid_post" for L in range(n)])
    final = int(run.logits[0, -1].argmax())
    tops = []
    for L in range(n):
        resid = run.cache[f"blocks.{L}.hook_resid_post"][0, -1]
        norm = lm.decoder.ln_final
        normed = resid.float() / (resid.float().pow(2).mean() + norm.eps).sqrt() * norm.weight.detach().float()
        logits = normed @ lm.decoder.W_U.detach().float()
        tops.append(int(logits.argmax()))
    first = n - 1
    while first > 0 and tops[first - 1] == final:
        first -= 1
    assert tops[-1] == final and q.answer == first


def test_sampling_and_generation(case):
    lm, text = case
    probs = torch.softmax(full_logits(lm, ids_of(lm, text))[-1], -1)
    q = B.build("sampling", lm, text)
    assert q.answer == int(probs.argmax())
    assert B.score(q, lm.token_text(q.answer), lm, text).right
    g = B.build("generation", lm, text)
    assert g.answer == round(100 * float(probs.max()))


def test_architecture(case):
    lm, _ = case
    q = B.build("architecture", lm, "x")
    assert q.answer == sum(p.numel() for p in lm.decoder.parameters())     # a tied table counts once
    assert q.log and B.score(q, q.answer).right


def test_whatif(case):
    lm, text = case
    from lesson_model import whatif as W
    q = B.build("whatif", lm, text)
    ids = ids_of(lm, text)
    target = torch.tensor(ids[1:])

    def loss(run):
        return float(F.cross_entropy(run.logits[0, :-1].float(), target))
    before = loss(lm.run(ids, names=[]))
    after = loss(lm.run(ids, names=[], hooks=W.hooks_for(lm, W.Switches(no_mask=True))))
    assert q.options[q.answer] == ("predict.whatif.up" if after > before else "predict.whatif.down")


@pytest.mark.parametrize("lesson", sorted(B.BUILDERS))
def test_nothing_to_ask(models, lesson):
    """Empty prompt: no question; a one-token prompt: none where the answer needs more."""
    lm = models["smollm2-135m"]
    assert B.build(lesson, lm, "") is None and B.build(lesson, lm, "   ") is None
    if lesson not in ("sampling", "generation", "architecture"):
        assert B.build(lesson, lm, "a") is None


def test_typed_guess_of_several_tokens(models):
    lm = models["gemma-3-270m"]
    q = B.build("sampling", lm, EN)
    ids, p = B.token_probability(lm, q, "Romeo and Juliet", EN)
    assert len(ids) > 1 and p == pytest.approx(float(q.probs[ids[0]]))
    s = B.score(q, "Romeo and Juliet", lm, EN)
    assert s.note == ("predict.note.first_token", {"n": len(ids)})


def test_class_summary(models):
    lm = models["smollm2-135m"]
    q = B.build("sampling", lm, EN)
    answers = [{"value": "Rome"}, {"value": " Rome"}, {"value": "Milan"}]
    summary = B.class_summary(q, answers, lm, EN)
    assert summary["n"] == 3
    top = summary["bars"][0]
    assert top["count"] == 2 and top["value"] == lm.token_text(q.answer) and top["right"]
    assert any(b["value"] == q.top[0][1] for b in summary["bars"])          # the model's own top choice
    csv = B.answers_csv(q, answers, lm, EN)
    assert csv.count("\n") == 4 and "sampling.next" in csv


def _turn(x, angles):
    """x [d_head] turned pair by pair, the pairs (i, i + d_head/2), by ``angles`` [d_head/2]: RoPE by hand."""
    h = x.shape[0] // 2
    a, b = x[:h].double(), x[h:].double()
    c, s = torch.cos(angles.double()), torch.sin(angles.double())
    return torch.cat([a * c - b * s, a * s + b * c])


def test_position(case):
    """The position question: the distance of the given ones where the last token's query and the
    previous token's key score highest, recomputed from the model's own rotated q and k."""
    lm, text = case
    q = B.build("position", lm, text)
    distinct(q)
    layer, head = q.text[1]["layer"], q.text[1]["head"]
    ids = ids_of(lm, text)
    n = len(ids)
    a = f"blocks.{layer}.attn"
    run = lm.run(ids, names=[f"{a}.hook_rot_q", f"{a}.hook_rot_k"])
    theta = lm.decoder.rope_for(layer).inv_freq.detach().double()
    rot_q = run.cache[f"{a}.hook_rot_q"][0, n - 1, head].double()
    rot_k = run.cache[f"{a}.hook_rot_k"][0, n - 2, head // lm.cfg.group_size].double()
    qv, kv = _turn(rot_q, -(n - 1) * theta), _turn(rot_k, -(n - 2) * theta)     # back to before RoPE
    d_head = lm.cfg.d_head

    def score(d):                     # key at position 0, query at d
        return float(_turn(qv, d * theta) @ kv) / d_head ** 0.5
    assert score(1) == pytest.approx(float(rot_q @ rot_k) / d_head ** 0.5, abs=1e-3)   # the model's own score
    scores = {int(o): score(int(o)) for o in q.options}
    best = int(q.options[q.answer])
    assert best == max((d for d in B.POSITION_DISTANCES), key=score)        # the best of all the distances
    assert all(scores[d] < scores[best] for d in scores if d != best)       # the others are wrong
    assert q.why[1]["score"] == f"{scores[best]:.2f}"


def test_position_nothing_to_ask(models):
    for lm in models.values():
        assert B.build("position", lm, "Hi") is None         # one token of text: no key before it


def test_training_lab_question_on_a_real_run(trained):
    """The training lab's question, answered by a real training: the part of the run that holds
    the step from which the best induction score stays at the threshold, by hand."""
    from lesson_model import training as T
    result = trained(n_layers=2)
    q = B.train_question(result.settings, result)
    assert not q.pending and q.key == B.train_question(result.settings).key
    best = [max(p.induction) for p in result.history]
    stays = [i for i in range(len(best)) if all(s >= T.PHASE_THRESHOLD for s in best[i:])]
    assert stays, "the default training forms an induction head (lesson_model.training's docstring)"
    phase = result.history[stays[0]].step
    edges = B.train_bins(result.settings.steps, T.EVAL_EVERY)
    assert edges[q.answer] < phase <= edges[q.answer + 1] and q.answer_text == str(phase)


def test_questions_read_their_pages_pass(models):
    """Through the run cache (as the block asks), a question reads the very pass its page draws:
    the same caps, layer and captures as course/cache/<page>.py, so no forward pass of its own."""
    from course.cache import generation as CG
    from course.cache import position as CP
    from course.cache import residual as CR
    from course.cache import sampling as CS
    from course.predict_view import shared_runner
    from server.models import cached_run
    assert B.CAPS == {"sampling": CS.CAP, "generation": CG.CAP, "position": CP.CAP}
    for lm in models.values():
        assert B.position_layer(lm.cfg) == CP.default_layer(lm.cfg)
        assert B.residual_names(lm) == CR.lesson_names(lm)
        tokens = lm.cut(lm.tokenize(EN), CP.CAP)[0]
        page = CP.lesson_run(lm, tokens, CP.default_layer(lm.cfg))
        seen = []

        def spy(ids, names=(), all_logits=False):
            seen.append(cached_run(lm, ids, names, all_logits=all_logits))
            return seen[-1]
        assert B.build("position", lm, EN, spy) == B.build("position", lm, EN, shared_runner(lm))
        assert seen == [page] and seen[0] is page                    # the page's own CachedRun object
        # what-if: the page's two passes of its first view (the causal mask off)
        from course.cache import whatif as CW
        from lesson_model.whatif import Switches
        seen.clear()

        def spy_hooks(ids, names=(), all_logits=False, hooks=None, hooks_key=None):
            seen.append(cached_run(lm, ids, names, all_logits=all_logits, hooks=hooks, hooks_key=hooks_key))
            return seen[-1]
        B.build("whatif", lm, EN, spy_hooks)
        before, after = CW.lesson_runs(lm, lm.cut(lm.tokenize(EN), CW.CAP)[0], Switches(no_mask=True))
        assert seen[0] is before and seen[1] is after
