"""The embedding matrix as a space (lesson 2): neighbours, analogies, projections.

    nearest_neighbours(lm, " king", k=10)           # by cosine, over the whole vocabulary
    analogy(lm, " king", " man", " woman", expected=" queen")   # king - man + woman
    cosine_matrix(rows)                             # [n, n]
    pca(rows, 2)                                    # coordinates + variance explained

All of these read the *input* embedding matrix W_E [vocab, d_model], the lookup table at
the bottom of the model, as stored (tied models such as SmolLM2 and Gemma also use it as the
unembedding). A model with ``cfg.embed_scale`` (Gemma) multiplies the rows by √d_model before
the first block (``hook_embed``); one common factor changes no cosine, so nothing here needs
it. Cosines against the whole vocabulary are one matrix-vector product with W_E, divided by
row norms that are computed once per model and kept (not a second normalized copy of W_E:
the norms are vocab numbers, the copy would be another vocab × d_model floats).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import torch

# --------------------------------------------------------------------------- the hooks a page needs

HOOK_EMBED = "hook_embed"


def embedding_hook_names() -> list[str]:
    """Hook points the prompt figures need: the looked-up rows [batch, pos, d_model]."""
    return [HOOK_EMBED]


def prompt_rows(run) -> torch.Tensor:
    """What the first block reads for the prompt [pos, d_model], from a run that captured
    ``hook_embed``: its rows of W_E, times √d_model on a model with ``cfg.embed_scale``."""
    return run.cache[HOOK_EMBED][0]


# --------------------------------------------------------------------------- row norms, once per model

_NORMS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_NORMS_LOCK = threading.Lock()


def row_norms(lm) -> torch.Tensor:
    """The L2 norm of every embedding row [vocab], computed once per model object.

    Thread-safe: many sessions may ask at once; one computes, the others wait and reuse it.
    """
    with _NORMS_LOCK:
        norms = _NORMS.get(lm)
        if norms is None:
            with torch.inference_mode():
                norms = lm.decoder.W_E.detach().float().norm(dim=-1).clamp_min(1e-12)   # [vocab]
            _NORMS[lm] = norms
        return norms


def embedding_row(lm, token_id: int) -> torch.Tensor:
    """Row ``token_id`` of W_E [d_model], a CPU copy."""
    return lm.decoder.W_E.detach()[int(token_id)].float().cpu().clone()


def token_id_of(lm, token) -> int:
    """A token id from an int or a text that is exactly one token; ValueError otherwise."""
    if isinstance(token, bool):
        raise TypeError("a token is an int id or a text")
    if isinstance(token, int):
        if not 0 <= token < lm.cfg.vocab_size:
            raise ValueError(f"token id {token} is outside the vocabulary (0..{lm.cfg.vocab_size - 1})")
        return token
    ids = lm.encode(token)
    bos = lm.tokenizer.bos_id
    if bos is not None and ids and ids[0] == bos:
        ids = ids[1:]
    if len(ids) != 1:
        raise ValueError(f"{token!r} is {len(ids)} tokens, not one: {[lm.token_text(i) for i in ids]}")
    return ids[0]


def _as_vector(lm, query) -> tuple[torch.Tensor, int | None]:
    """(vector [d_model] on the model's device, its token id or None) for an id, a text or a vector."""
    if isinstance(query, torch.Tensor):
        return query.detach().float().to(lm.device).reshape(-1), None
    token_id = token_id_of(lm, query)
    return lm.decoder.W_E.detach()[token_id].float(), token_id


def cosine_to_all(lm, vector: torch.Tensor) -> torch.Tensor:
    """Cosine similarity of ``vector`` [d_model] with every embedding row -> [vocab] (CPU)."""
    with torch.inference_mode():
        v = vector.detach().float().to(lm.device).reshape(-1)            # [d_model]
        dots = lm.decoder.W_E.detach().float() @ v                        # [vocab]
        cos = dots / (row_norms(lm).to(dots.device) * v.norm().clamp_min(1e-12))
        return cos.cpu()


@dataclass(frozen=True)
class Neighbour:
    id: int
    text: str        # display text (lm.token_text)
    cosine: float


def _top(lm, cos: torch.Tensor, k: int, exclude: Sequence[int]) -> list[Neighbour]:
    cos = cos.clone()
    if len(exclude):
        cos[torch.tensor(sorted(set(int(i) for i in exclude)), dtype=torch.long)] = float("-inf")
    k = max(0, min(int(k), int(torch.isfinite(cos).sum())))
    top = cos.topk(k)
    return [Neighbour(int(i), lm.token_text(int(i)), float(s)) for s, i in zip(top.values, top.indices)]


def special_ids(lm) -> list[int]:
    return sorted(lm.tokenizer.special_ids)


def nearest_neighbours(lm, query, k: int = 10, *, exclude: Sequence[int] = (),
                       skip_special: bool = True) -> list[Neighbour]:
    """The ``k`` vocabulary entries whose embedding rows are closest to ``query`` by cosine.

    ``query`` is a token id, a text that is one token, or a vector [d_model]. A token is
    never its own neighbour. Special tokens are skipped unless ``skip_special`` is False.
    """
    vector, token_id = _as_vector(lm, query)
    skip = list(exclude) + ([token_id] if token_id is not None else []) + (special_ids(lm) if skip_special else [])
    return _top(lm, cosine_to_all(lm, vector), k, skip)


def rank_of(cos: torch.Tensor, target: int, exclude: Sequence[int] = ()) -> int:
    """1-based rank of entry ``target`` in ``cos`` [vocab] (highest first), ignoring ``exclude``.

    Ties count in the target's favour (rank = 1 + number of strictly higher entries).
    """
    higher = cos > cos[int(target)]
    if len(exclude):
        idx = torch.tensor([i for i in set(int(i) for i in exclude) if i != int(target)], dtype=torch.long)
        if len(idx):
            higher[idx] = False
    return int(higher.sum()) + 1


# --------------------------------------------------------------------------- analogies

@dataclass(frozen=True)
class Analogy:
    """a - b + c, answered by cosine over the whole vocabulary."""
    a: int
    b: int
    c: int
    top: list[Neighbour]               # best answers, the three inputs (and special tokens) left out
    top_with_inputs: list[Neighbour]   # the same ranking with nothing left out
    expected: int | None = None        # the answer we hoped for
    expected_rank: int | None = None   # its rank among the answers (1 = best), inputs left out
    expected_cosine: float | None = None
    expected_rank_with_inputs: int | None = None


def analogy_vector(lm, a, b, c) -> torch.Tensor:
    """unit(a) - unit(b) + unit(c) [d_model]: each row is scaled to length 1 first (3CosAdd,
    as word2vec's analogy test does), so one long row cannot dominate."""
    vecs = []
    for q in (a, b, c):
        v, _ = _as_vector(lm, q)
        vecs.append(v / v.norm().clamp_min(1e-12))
    return (vecs[0] - vecs[1] + vecs[2]).cpu()


def analogy(lm, a, b, c, k: int = 10, expected=None) -> Analogy:
    """Solve a - b + c ("king - man + woman"): the entries nearest to the sum by cosine.

    The inputs themselves are left out of ``top`` (as word2vec's test does); the ranking
    with them kept is returned too, since the nearest entry to the sum is often ``a``
    itself. With ``expected`` (an id or a one-token text), its rank is reported both ways.
    """
    ids = [token_id_of(lm, q) for q in (a, b, c)]
    cos = cosine_to_all(lm, analogy_vector(lm, *ids))                   # [vocab]
    specials = special_ids(lm)
    result = dict(a=ids[0], b=ids[1], c=ids[2], top=_top(lm, cos, k, ids + specials),
                  top_with_inputs=_top(lm, cos, k, specials))
    if expected is not None:
        e = token_id_of(lm, expected)
        result.update(expected=e, expected_rank=rank_of(cos, e, ids + specials),
                      expected_cosine=float(cos[e]), expected_rank_with_inputs=rank_of(cos, e, specials))
    return Analogy(**result)


# --------------------------------------------------------------------------- similarity and projection

def cosine_matrix(vectors: torch.Tensor) -> torch.Tensor:
    """Pairwise cosine similarity of the rows of ``vectors`` [n, d] -> [n, n]."""
    v = vectors.detach().float()
    unit = v / v.norm(dim=-1, keepdim=True).clamp_min(1e-12)           # [n, d]
    return (unit @ unit.T).clamp(-1.0, 1.0)                               # [n, n]


@dataclass(frozen=True)
class Projection:
    coords: torch.Tensor          # [n, k] the points on the top k principal axes
    explained: torch.Tensor       # [k] fraction of the points' variance each axis keeps
    components: torch.Tensor      # [k, d] the axes (unit vectors in embedding space)
    mean: torch.Tensor            # [d] subtracted before projecting


def pca(vectors: torch.Tensor, k: int = 2) -> Projection:
    """Principal component analysis of the rows of ``vectors`` [n, d], exactly, by SVD.

    Axes are the directions of largest variance of these points; each axis's sign is
    fixed so that its largest-magnitude coordinate is positive (stable figures).
    """
    x = vectors.detach().double()
    n = x.shape[0]
    k = max(1, min(int(k), n, x.shape[1]))
    mean = x.mean(dim=0)                                                  # [d]
    centered = x - mean                                                   # [n, d]
    U, S, Vh = torch.linalg.svd(centered, full_matrices=False)            # U [n, r], S [r], Vh [r, d]
    coords = U[:, :k] * S[:k]                                             # [n, k]
    signs = torch.sign(coords.gather(0, coords.abs().argmax(dim=0, keepdim=True)))[0]
    signs[signs == 0] = 1
    coords, comps = coords * signs, Vh[:k] * signs[:, None]
    total = (S ** 2).sum()
    explained = (S[:k] ** 2) / total if total > 0 else torch.zeros(k, dtype=x.dtype)
    return Projection(coords.float(), explained.float(), comps.float(), mean.float())


# --------------------------------------------------------------------------- order blindness

@dataclass(frozen=True)
class RowMatch:
    """Which rows of text B equal which rows of text A."""
    tokens_a: list[int]
    tokens_b: list[int]
    match: list[int | None]     # for each position of B, a position of A with an identical row (or None)
    same_multiset: bool         # B's rows are exactly A's rows, rearranged


def same_rows(lm, text_a: str, text_b: str) -> RowMatch:
    """Look up both texts' embedding rows and pair every row of B with an equal row of A.

    "The dog bites the man." and "The man bites the dog." look up the same rows in a
    different order: before any position information, the two inputs are the same bag
    of vectors.
    """
    ids_a, ids_b = lm.encode(text_a), lm.encode(text_b)
    W = lm.decoder.W_E.detach()
    rows_a, rows_b = W[ids_a].float().cpu(), W[ids_b].float().cpu()      # [n_a, d], [n_b, d]
    unused = list(range(len(ids_a)))
    match: list[int | None] = []
    for j in range(len(ids_b)):
        found = None
        for i in unused:
            if torch.equal(rows_a[i], rows_b[j]):
                found = i
                break
        if found is not None:
            unused.remove(found)
        match.append(found)
    same = len(ids_a) == len(ids_b) and all(m is not None for m in match)
    return RowMatch(ids_a, ids_b, match, same)
