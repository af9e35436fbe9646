"""Pages on Gemma read what Gemma always reads: <bos> first, a prompt cut to the page's cap
included (the notice says <bos> is kept); home counts the prompt's tokens apart from <bos>."""

from __future__ import annotations

import pytest

from server.models import run_cache
from tests._apptest import errors, text_of
from tests._inputs import record_fresh_inputs, without_bos
from tests.test_bos_parity import PROMPTS

GEMMA = "gemma-3-270m"


def test_a_cut_prompt_keeps_bos(open_page, gemma, monkeypatch):
    """The heads page cuts a long prompt to its last tokens: the model still reads <bos> first
    (it used to read the last 64 tokens without it, and no head rested on the first token)."""
    seen = record_fresh_inputs(monkeypatch)
    run_cache().clear()
    at = open_page("heads", lang="en", model=GEMMA, prompt=PROMPTS["long"])
    assert not errors(at)
    n = len(gemma.tokenize(PROMPTS["long"]))
    assert n > 64
    warning = " ".join(w.value for w in at.warning)
    assert f"Your prompt has {n} tokens; this lesson keeps `<bos>` and the last 63 after it (64 in all)" in warning
    rows = [row for vocab, row in seen if vocab == gemma.cfg.vocab_size]
    assert any(len(row) == 64 for row in rows), [len(r) for r in rows]
    assert not without_bos(seen, gemma)


@pytest.mark.parametrize("lang,sentence", [
    ("en", "Tokens the tokenizer makes of them: {n}, plus the `<bos>` it puts first: {total} in all."),
    ("zh-Hant", "分詞器把它切成 {n} 個詞元，再在前面加上 `<bos>`，一共 {total} 個"),
])
def test_home_counts_tokens_apart_from_bos(open_page, gemma, lang, sentence):
    """Home on Gemma: N tokens of the prompt plus <bos>, as the tokens page counts them."""
    from course import i18n
    at = open_page("home", lang=lang, model=GEMMA)
    assert not errors(at)
    prompt = i18n.catalog(lang)["prompt.default"]
    tokens = gemma.tokenize(prompt)
    assert tokens[0].added
    assert sentence.format(n=len(tokens) - 1, total=len(tokens)) in text_of(at)
