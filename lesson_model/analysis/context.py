"""Meaning from context: one word in two texts, from its embedding row through every block.

    found = find_word(lm, "I deposited my salary in the bank", "bank")   # -> WordAt or None
    result = word_in_contexts(lm, text_a, text_b, "bank")                # -> ContextResult

The embedding row of a token is looked up by its id alone, so a word that is the same token in
two texts starts as the same vector (cosine 1). Attention then mixes in the words around it,
block after block, and the two vectors move apart when the contexts give the word different
meanings (the fruit and the company: 蘋果; a river bank and a bank account).

Which vector: a word may be several tokens; we follow its **last** token, the one that has
read the whole word (under the causal mask a position sees only itself and what came before).

Centred cosine: at any block the residual vectors of all tokens share a large common part
(the raw cosine of any two is high), so we subtract, at each block, the mean of every
position of both texts except the first (position 0 is the attention sink, which plays a role
of its own). What is left is what sets this token
apart from the other tokens of the two texts; its cosine goes negative when the two are
pulled in opposite directions.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

TOP = 5     # predictions listed after each context


def block_names(n_layers: int) -> list[str]:
    """The residual stream after each block."""
    return [f"blocks.{layer}.hook_resid_post" for layer in range(n_layers)]


@dataclass(frozen=True)
class WordAt:
    """Where a word sits in a text as the model reads it."""
    ids: list[int]           # the whole text's token ids (the model's encode path: <bos> where it adds one)
    pieces: list[int]        # positions of the tokens that hold the word's characters
    position: int            # the last of them: the vector we follow

    @property
    def n_pieces(self) -> int:
        return len(self.pieces)


def find_word(lm, text: str, word: str) -> WordAt | None:
    """The last occurrence of ``word`` in ``text`` and the tokens that cover its characters, or
    None when the word is not in the text (or is blank)."""
    word = word.strip()
    if not word:
        return None
    start = text.rfind(word)
    if start < 0:
        return None
    end = start + len(word)
    tokens = lm.tokenize(text)
    pieces = [i for i, tok in enumerate(tokens) if not tok.added and tok.start < end and tok.end > start]
    if not pieces:
        return None
    return WordAt([tok.id for tok in tokens], pieces, pieces[-1])


@dataclass(frozen=True)
class ContextResult:
    word: str
    a: WordAt
    b: WordAt
    same_token: bool                 # the followed token has the same id in both texts
    embed_cosine: float              # cosine of the two embedding rows (1 when same_token)
    raw: list[float]                 # per block: cosine of the two residual vectors
    centred: list[float]             # per block: cosine after subtracting the two texts' mean
    top_a: list[tuple[int, float]]   # (token id, probability) of the next token after the word in A
    top_b: list[tuple[int, float]]


def cosine(x: torch.Tensor, y: torch.Tensor) -> float:
    x, y = x.double(), y.double()
    return float(x @ y / (x.norm() * y.norm()).clamp_min(1e-30))


def centred_cosines(stream_a: torch.Tensor, stream_b: torch.Tensor, pos_a: int, pos_b: int) -> tuple[float, float]:
    """(raw, centred) cosine between stream_a[pos_a] and stream_b[pos_b] ([pos, d] each, one
    block). Centred: minus the mean of both texts' positions 1.. (position 0 left out)."""
    rest = [s[1:] for s in (stream_a, stream_b) if s.shape[0] > 1]
    mean = torch.cat(rest).double().mean(0) if rest else torch.zeros(stream_a.shape[-1], dtype=torch.float64)
    va, vb = stream_a[pos_a].double(), stream_b[pos_b].double()
    return cosine(va, vb), cosine(va - mean, vb - mean)


def top_next(logits: torch.Tensor, k: int = TOP) -> list[tuple[int, float]]:
    probs = logits.float().softmax(-1)
    top = torch.topk(probs, k)
    return [(int(i), float(p)) for p, i in zip(top.values, top.indices)]


def compare(word: str, a: WordAt, b: WordAt, W_E: torch.Tensor, streams_a: list[torch.Tensor],
            streams_b: list[torch.Tensor], logits_a: torch.Tensor, logits_b: torch.Tensor) -> ContextResult:
    """The comparison from two runs: ``streams_*`` the residual stream [pos, d] after each block
    of the text cut after the word, ``logits_*`` the next-token logits at the word."""
    id_a, id_b = a.ids[a.position], b.ids[b.position]
    pairs = [centred_cosines(sa, sb, a.position, b.position) for sa, sb in zip(streams_a, streams_b)]
    return ContextResult(word=word, a=a, b=b, same_token=id_a == id_b,
                         embed_cosine=cosine(W_E[id_a].float().cpu(), W_E[id_b].float().cpu()),
                         raw=[r for r, _ in pairs], centred=[c for _, c in pairs],
                         top_a=top_next(logits_a), top_b=top_next(logits_b))


def word_in_contexts(lm, text_a: str, text_b: str, word: str) -> ContextResult | None:
    """Both texts through the model up to and including the word (what comes after it cannot
    change the word's vector under the causal mask); None when the word is missing from either."""
    a, b = find_word(lm, text_a, word), find_word(lm, text_b, word)
    if a is None or b is None:
        return None
    names = block_names(lm.cfg.n_layers)
    run_a = lm.run(a.ids[:a.position + 1], names, last_only=True)
    run_b = lm.run(b.ids[:b.position + 1], names, last_only=True)
    return compare(word.strip(), a, b, lm.decoder.W_E.detach(), [run_a.cache[n][0] for n in names],
                   [run_b.cache[n][0] for n in names], run_a.logits[0, -1], run_b.logits[0, -1])
