"""Tokenization facts, read from the tokenizer itself (lesson 1).

    counts = text_counts(lm, "The cat sat")         # characters, UTF-8 bytes, tokens
    facts = vocabulary_facts(lm)                    # size, id ranges, longest entries
    groups = character_groups(lm.tokenize(text), text)   # byte pieces with their character

Nothing here is hard-coded about one model: id ranges and the longest entries are found by
walking the vocabulary, so SmolLM2's byte-level BPE and Gemma's SentencePiece-style BPE
(characters, "▁" for a space, <0xE5> byte fallback) each give their own facts.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections import Counter
from dataclasses import dataclass
from dataclasses import replace

import torch

from lesson_model.tokens import Token, byte_decoder, bytes_as_text, is_byte_piece


# --------------------------------------------------------------------------- counts

@dataclass(frozen=True)
class TextCounts:
    """How long one text is, measured three ways."""
    chars: int          # Unicode characters (code points)
    utf8_bytes: int     # bytes in its UTF-8 encoding
    tokens: int         # tokens the model's tokenizer makes of the text itself
    added: int = 0      # tokens the tokenizer puts around it (Gemma's <bos>), not counted in ``tokens``

    @property
    def chars_per_token(self) -> float:
        """Characters per token (0 for an empty text): higher means cheaper text."""
        return self.chars / self.tokens if self.tokens else 0.0

    @property
    def bytes_per_token(self) -> float:
        return self.utf8_bytes / self.tokens if self.tokens else 0.0


def text_counts(lm, text: str) -> TextCounts:
    """Characters, UTF-8 bytes and tokens of ``text`` (the empty text counts 0 of each).

    The <bos> a tokenizer puts first (Gemma's) is counted apart, in ``added``, so the
    count is what the text itself costs and two texts compare fairly."""
    if not text:
        return TextCounts(chars=0, utf8_bytes=0, tokens=0)
    ids = lm.encode(text)
    added = int(lm.tokenizer.leading_bos(ids, text))
    return TextCounts(chars=len(text), utf8_bytes=len(text.encode("utf-8")), tokens=len(ids) - added, added=added)


# --------------------------------------------------------------------------- tokens and characters

@dataclass(frozen=True)
class CharacterGroup:
    """A run of tokens and the characters they spell together.

    Usually one token and its own text. When a character's UTF-8 bytes are split over
    several byte tokens (a Chinese character, an emoji), the group holds all of those
    tokens and the character(s) they make up, e.g. tokens <E7>, <8C>, <AB> -> "猫".
    """
    tokens: tuple[Token, ...]
    text: str           # the characters of the input these tokens spell
    start: int          # character span in the input
    end: int
    dropped: bytes = b""   # bytes of these characters that no token carries (no vocabulary entry)

    @property
    def split(self) -> bool:
        """True when the characters needed more than one token (byte pieces)."""
        return len(self.tokens) > 1


def _not_carried(chars: bytes, carried: bytes) -> bytes:
    """The bytes of ``chars`` left out of ``carried`` (a subsequence of it), in order."""
    out, i = bytearray(), 0
    for b in chars:
        if i < len(carried) and carried[i] == b:
            i += 1
        else:
            out.append(b)
    return bytes(out)


def character_groups(tokens: list[Token], text: str) -> list[CharacterGroup]:
    """Group tokens so that every group spells whole characters of ``text``.

    A token holding part of a character (``Token.is_partial``) is merged with its
    neighbours until the bytes join into whole characters, or until the next token starts
    in a later character: when the tokenizer dropped a byte with no vocabulary entry (the
    lead byte F1 of U+40000), the bytes left never join, and the group holds just the
    tokens of that character, with the missing bytes in ``dropped``. Tokens whose spans do
    not come from the text (a BOS the tokenizer added) form groups of their own.
    """
    groups: list[CharacterGroup] = []
    pending: list[Token] = []

    def close() -> None:
        start, end = pending[0].start, max(t.end for t in pending)
        chars = text[start:end]
        groups.append(CharacterGroup(tuple(pending), chars, start, end,
                                     _not_carried(chars.encode("utf-8"), b"".join(t.bytes for t in pending))))
        pending.clear()

    for tok in tokens:
        if pending:
            start, end = pending[0].start, max(t.end for t in pending)
            if end > start and tok.start >= end:     # tok begins a later character: the run is over
                close()
        if pending:
            pending.append(tok)
        elif tok.is_partial:
            pending.append(tok)
        else:
            groups.append(CharacterGroup((tok,), text[tok.start:tok.end] if tok.end > tok.start else tok.text,
                                         tok.start, tok.end))
            continue
        # Close the pending run once its bytes decode to whole characters.
        try:
            b"".join(t.bytes for t in pending).decode("utf-8")
        except UnicodeDecodeError:
            continue
        close()
    if pending:   # a text cut in the middle of a character (e.g. capped tokens), or dropped bytes
        close()
    return groups


def split_characters(tokens: list[Token], text: str) -> list[CharacterGroup]:
    """Only the groups where one character (or a few) needed several byte tokens."""
    return [g for g in character_groups(tokens, text) if g.split]


def letter_counts(tokens: list[Token], letter: str) -> list[tuple[Token, int]]:
    """How many times ``letter`` occurs in each token's text (case-insensitive).

    The model never sees these counts: it sees one id per token, not the letters inside.
    """
    letter = letter.lower()
    return [(tok, 0 if tok.special else tok.bytes.decode("utf-8", errors="ignore").lower().count(letter))
            for tok in tokens]


def has_chat_template(lm) -> bool:
    """Whether the model comes with a chat template (an instruct model such as SmolLM2-Instruct
    does; a base model such as Gemma 3 270M does not)."""
    return bool(lm.tokenizer.chat_template)


def chat_tokens(lm, user_text: str, system: str | None = None) -> tuple[str, list[Token]]:
    """``user_text`` wrapped in the model's chat template, as text and as tokens.

    Returns (rendered template, its tokens). Special tokens such as <|im_start|> are
    single tokens marked ``special``. Without ``system`` the template's own default
    system message (if it has one) is used, exactly as the instruct model sees it.
    Raises ValueError for a model without a chat template (see `has_chat_template`).
    """
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user_text}]
    rendered = lm.chat_template(messages, add_generation_prompt=True)
    return rendered, lm.tokenize(rendered)


def typed_special_tokens(lm, text: str) -> list[Token]:
    """The special tokens that ``text`` itself produces.

    The tokenizer matches each special token's literal text anywhere in its input, so
    typing ``<|im_start|>`` gives the very id the chat template writes (1 for SmolLM2), and
    typing ``<bos>`` or ``<start_of_turn>`` gives Gemma's ids 2 and 105.
    Text pasted into a chat can therefore close the user's message and open a fake new
    one: one form of prompt injection. The <bos> the tokenizer itself puts first is not
    counted: the text did not write it.
    """
    return [tok for tok in lm.tokenize(text) if tok.special and not tok.added]


def literal_tokens(lm, text: str) -> list[Token]:
    """``text`` tokenized with special-token matching turned off: ``<|im_start|>`` becomes
    ordinary pieces (``<``, ``|``, ``im``...), as a server should tokenize untrusted text
    (TokenizerView.encode_literal).
    """
    ids = lm.tokenizer.encode_literal(text)
    return lm.tokenizer.tokens(ids, text)


# --------------------------------------------------------------------------- the vocabulary

@dataclass(frozen=True)
class IdRange:
    """A contiguous range of ids, inclusive at both ends."""
    first: int
    last: int

    @property
    def count(self) -> int:
        return self.last - self.first + 1


@dataclass(frozen=True)
class VocabularyFacts:
    size: int                                   # entries, special tokens included
    special: tuple[tuple[int, str], ...]        # (id, text) of every special token
    special_range: IdRange | None               # when the special ids are contiguous
    byte_range: IdRange | None                  # single-byte entries (the BPE alphabet), when contiguous
    n_single_bytes: int                         # how many single-byte entries exist
    merged_range: IdRange | None                # entries made by merges, when contiguous
    n_merges: int                               # merge rules in the tokenizer (0 if not BPE)
    first_merges: tuple[tuple[str, str], ...]   # the first merge rules learned (display text)
    first_merge_ids: tuple[int, ...]            # the entry each of those rules makes
    longest: tuple[tuple[int, str, int], ...]   # (id, text, bytes) of the longest entries
    longest_words: tuple[tuple[int, str, int], ...]   # longest entries made of letters only
    length_counts: tuple[tuple[int, int], ...]  # (length in bytes, how many entries) for every length
    missing_bytes: tuple[int, ...] = ()         # byte values with no single-byte entry (the tokenizer drops them)
    n_added: int = 0                            # added entries that are not special (Gemma: runs of newlines, <table>...)
    n_chars: int = 0                            # single characters that are not bytes (SentencePiece's alphabet)
    char_range: IdRange | None = None           # those characters' ids, when contiguous
    n_merged: int = 0                           # entries of more than one symbol (made by merges)
    merged_block: IdRange | None = None         # the longest contiguous run of merged ids
    rank_is_id_offset: bool = False             # merge rule n makes entry merged_range.first + n (byte-level BPE)
    merges_follow_ids: bool = False             # merge rules are ranked by the id of the entry they make


def _contiguous(ids: list[int]) -> IdRange | None:
    if not ids:
        return None
    ids = sorted(ids)
    return IdRange(ids[0], ids[-1]) if ids[-1] - ids[0] + 1 == len(ids) else None


def _merges(tokenizer) -> list[tuple[str, str]]:
    """The BPE merge rules, in rank order (pieces as the vocabulary writes them)."""
    model = json.loads(tokenizer.to_str()).get("model", {})
    if model.get("type") != "BPE":
        return []
    out = []
    for rule in model.get("merges", []):
        left, right = rule.split(" ", 1) if isinstance(rule, str) else rule
        out.append((left, right))
    return out


def _longest_run(ids: list[int]) -> IdRange | None:
    """The longest run of consecutive ids in ``ids``."""
    best, start, prev = None, None, None
    for i in sorted(ids):
        if prev is None or i != prev + 1:
            start = i
        if best is None or i - start > best.last - best.first:
            best = IdRange(start, i)
        prev = i
    return best


def piece_kind(lm, token_id: int) -> str:
    """What a vocabulary entry is: "special", "added" (an added entry that is not special),
    "byte" (one raw byte), "char" (one character of a SentencePiece alphabet) or "merged"."""
    view = lm.tokenizer
    if token_id in view.special_ids:
        return "special"
    if token_id in view.added_ids:
        return "added"
    if view.is_byte_piece(token_id):
        return "byte"
    if view.byte_level:
        return "merged"
    return "char" if len(view.tokenizer.id_to_token(token_id) or "") == 1 else "merged"


_FACTS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_FACTS_LOCK = threading.Lock()


def vocabulary_facts(lm, n_longest: int = 8) -> VocabularyFacts:
    """Facts about the vocabulary found by walking all of it once (cached per model)."""
    with _FACTS_LOCK:
        hit = _FACTS.get(lm)
        if hit is not None and len(hit.longest) >= n_longest:
            return _trim(hit, n_longest)
    view = lm.tokenizer
    size = view.vocab_size
    special_ids = sorted(view.special_ids)
    pieces = [view.token_bytes(i) for i in range(size)]                      # raw bytes of every entry
    kinds = [piece_kind(lm, i) for i in range(size)]
    singles = [i for i in range(size) if kinds[i] == "byte"]
    chars = [i for i in range(size) if kinds[i] == "char"]
    if view.byte_level:   # byte-level BPE: every entry that is not special is bytes (the added ones too)
        merged = [i for i in range(size) if len(pieces[i]) > 1 and i not in view.special_ids]
    else:
        merged = [i for i in range(size) if kinds[i] == "merged"]
    table = byte_decoder()

    def shown(piece: str) -> str:
        if view.byte_level:
            return bytes_as_text(bytes(table[c] for c in piece if c in table))
        return piece.replace("▁", " ")

    merges = _merges(view.tokenizer)
    made = [view.tokenizer.token_to_id(a + b) for a, b in merges]            # the entry each rule makes
    merged_range = _contiguous(merged)
    rank_is_id_offset = bool(merges) and merged_range is not None and merged_range.count == len(merges) and \
        all(m == merged_range.first + r for r, m in enumerate(made))
    merges_follow_ids = bool(merges) and all(m is not None for m in made) and \
        all(x <= y for x, y in zip(made, made[1:]))
    learned = [(rule, m) for rule, m in zip(merges, made) if m not in view.added_ids]   # rules the BPE can use
    ordinary = [i for i in range(size) if i not in view.special_ids]
    by_length = sorted(ordinary, key=lambda i: (-len(pieces[i]), i))
    words = [i for i in by_length if (t := pieces[i].decode("utf-8", "replace").strip()) and t.isalpha() and t.isascii()]
    keep = max(n_longest, 8)
    facts = VocabularyFacts(
        size=size,
        special=tuple((i, bytes_as_text(pieces[i])) for i in special_ids),
        special_range=_contiguous(special_ids),
        byte_range=_contiguous(singles),
        n_single_bytes=len(singles),
        merged_range=merged_range,
        n_merges=len(merges),
        first_merges=tuple((shown(a), shown(b)) for (a, b), _ in learned[:keep]),
        first_merge_ids=tuple(m for _, m in learned[:keep]),
        longest=tuple((i, bytes_as_text(pieces[i]), len(pieces[i])) for i in by_length[:keep]),
        longest_words=tuple((i, bytes_as_text(pieces[i]), len(pieces[i])) for i in words[:keep]),
        length_counts=tuple(sorted(Counter(len(pieces[i]) for i in ordinary).items())),
        missing_bytes=tuple(sorted(set(range(256)) - {pieces[i][0] for i in singles})) if view.byte_level else (),
        n_added=len(view.added_ids - view.special_ids),
        n_chars=len(chars),
        char_range=_contiguous(chars),
        n_merged=len(merged),
        merged_block=_longest_run(merged),
        rank_is_id_offset=rank_is_id_offset,
        merges_follow_ids=merges_follow_ids,
    )
    with _FACTS_LOCK:
        _FACTS[lm] = facts
    return _trim(facts, n_longest)


def _trim(facts: VocabularyFacts, n: int) -> VocabularyFacts:
    return replace(facts, longest=facts.longest[:n], longest_words=facts.longest_words[:n],
                   first_merges=facts.first_merges[:n], first_merge_ids=facts.first_merge_ids[:n])


def single_token_id(lm, text: str) -> int | None:
    """The id of ``text`` when the tokenizer makes exactly one token of it, else None."""
    ids = lm.encode(text)
    if lm.tokenizer.leading_bos(ids, text):
        ids = ids[1:]
    return ids[0] if len(ids) == 1 else None


# --------------------------------------------------------------------------- BPE, one merge at a time

@dataclass(frozen=True)
class MergeStep:
    pieces: tuple[str, ...]        # the word's pieces after this step (display text)
    merged: tuple[str, str] | None  # the pair joined in this step (None for the starting symbols)
    rank: int | None               # the merge rule's rank: 0 = learned first (byte-level BPE; None otherwise)
    piece_id: int | None = None    # the id of the entry this step made


_RANKS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _merge_ranks(lm) -> dict[tuple[str, str], int]:
    with _FACTS_LOCK:
        ranks = _RANKS.get(lm)
        if ranks is None:
            ranks = {pair: r for r, pair in enumerate(_merges(lm.tokenizer.tokenizer))}
            _RANKS[lm] = ranks
        return ranks


def _to_symbols(data: bytes) -> list[str]:
    """Bytes in the byte-level BPE stand-in alphabet ("Ġ" for a space...)."""
    table = {b: c for c, b in byte_decoder().items()}
    return [table[b] for b in data]


def _shown(symbol: str) -> str:
    table = byte_decoder()
    return bytes_as_text(bytes(table[c] for c in symbol))


def bpe_merge_steps(lm, word: str, max_steps: int = 64) -> list[MergeStep]:
    """BPE on one word, the way the tokenizer does it.

    Byte-level BPE (SmolLM2): start from the word's bytes and repeatedly join the adjacent
    pair whose merge rule was learned earliest. ``word`` should be a single pre-token (a word
    with at most one leading space, no inner spaces or punctuation breaks).

    SentencePiece style (Gemma): spaces become "▁", the word starts as its characters (a
    character missing from the vocabulary as its byte-fallback pieces, which never merge),
    and each step joins the adjacent pair that makes the entry with the lowest id: Gemma's
    merge rules are ranked by the id of the entry they make (``merges_follow_ids``).

    The last step's pieces are exactly the tokenizer's tokens; [] when they would not be
    (another kind of tokenizer, or a word the tokenizer splits before BPE).
    """
    if not lm.tokenizer.byte_level:
        return _sentencepiece_steps(lm, word, max_steps)
    ranks = _merge_ranks(lm)
    if not ranks:
        return []
    symbols = _to_symbols(word.encode("utf-8"))
    steps = [MergeStep(tuple(_shown(s) for s in symbols), None, None)]
    while len(symbols) > 1 and len(steps) <= max_steps:
        best, best_rank = None, None
        for i in range(len(symbols) - 1):
            r = ranks.get((symbols[i], symbols[i + 1]))
            if r is not None and (best_rank is None or r < best_rank):
                best, best_rank = i, r
        if best is None:
            break
        pair = (symbols[best], symbols[best + 1])
        symbols = symbols[:best] + [pair[0] + pair[1]] + symbols[best + 2:]
        steps.append(MergeStep(tuple(_shown(s) for s in symbols), (_shown(pair[0]), _shown(pair[1])), best_rank,
                               lm.tokenizer.tokenizer.token_to_id(pair[0] + pair[1])))
    return steps


def _sentencepiece_steps(lm, word: str, max_steps: int) -> list[MergeStep]:
    view = lm.tokenizer
    if not vocabulary_facts(lm).merges_follow_ids:
        return []
    vocab_id = view.tokenizer.token_to_id

    def shown(symbol: str) -> str:
        return bytes_as_text(bytes([int(symbol[3:5], 16)])) if is_byte_piece(symbol) else symbol.replace("▁", " ")

    symbols: list[str] = []
    for ch in word.replace(" ", "▁"):
        i = vocab_id(ch)
        if i is not None and i not in view.added_ids:
            symbols.append(ch)
        else:     # not in the alphabet: its UTF-8 bytes, as byte-fallback pieces
            symbols.extend(f"<0x{b:02X}>" for b in ch.encode("utf-8"))
    steps = [MergeStep(tuple(shown(s) for s in symbols), None, None)]
    while len(symbols) > 1 and len(steps) <= max_steps:
        best, best_id = None, None
        for i in range(len(symbols) - 1):
            if is_byte_piece(symbols[i]) or is_byte_piece(symbols[i + 1]):
                continue
            made = vocab_id(symbols[i] + symbols[i + 1])
            if made is not None and made not in view.added_ids and (best_id is None or made < best_id):
                best, best_id = i, made
        if best is None:
            break
        pair = (symbols[best], symbols[best + 1])
        symbols = symbols[:best] + [pair[0] + pair[1]] + symbols[best + 2:]
        steps.append(MergeStep(tuple(shown(s) for s in symbols), (shown(pair[0]), shown(pair[1])), None, best_id))
    # Only a faithful replay is shown: the tokenizer's own tokens must come out.
    ids = lm.encode(word)
    if view.leading_bos(ids, word):
        ids = ids[1:]
    if [vocab_id(s) for s in symbols] != ids:
        return []
    return steps


# --------------------------------------------------------------------------- finishing a split character

def finish_characters(lm, ids: list[int], candidates: list[int], max_extra: int = 3) -> dict[int, list[int]]:
    """For each candidate next token, the tokens to append so that the text still ends in whole
    characters: ``[candidate]`` for a token that is whole characters, and for a byte piece
    (the <E6 88> of 我) the piece followed by the model's own greedy choices until the bytes
    join (``[<E6 88>, <91>]``), at most ``max_extra`` more. Returns {candidate: token ids}.

    The prompt runs once with a KV cache; each candidate then costs a few one-token steps.
    """
    def broken(seq: list[int]) -> int:
        return lm.decode(seq).count("\ufffd")

    base = broken(list(ids))
    out: dict[int, list[int]] = {}
    pending = [c for c in dict.fromkeys(int(c) for c in candidates)]
    for c in pending:
        if c in lm.tokenizer.special_ids or broken([*ids, c]) <= base:
            out[c] = [c]
    todo = [c for c in pending if c not in out]
    if not todo:
        return out
    from lesson_model.decoder import Hooks, KVCache

    decoder = lm.decoder
    cache = KVCache(decoder.cfg.n_layers)
    prompt = lm.to_ids(list(ids))                       # [1, pos]; begins with <bos> (LessonModel.check_input)
    with torch.inference_mode():
        decoder(prompt, Hooks(names=()), kv_cache=cache, last_only=True)
        n = len(cache)
        for c in todo:
            cache.crop(n)
            seq = [c]
            for _ in range(max_extra):
                logits = decoder(torch.tensor([[seq[-1]]], device=lm.device), Hooks(names=()), kv_cache=cache,
                                 last_only=True)[0, -1]                                   # [vocab]
                seq.append(int(logits.argmax()))
                if broken([*ids, *seq]) <= base:
                    break
            out[c] = seq
    return out
