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
