"""What to notice on the tokens lesson, from the prompt's tokens and the tokenizer's facts.

Each function returns [(catalog key under "tokens.", fields)]; the page translates them
(Lesson.notices). Tokens come in as objects with ``text``, ``id`` and ``bytes`` (Token); the
page passes its own labels (``label``, ``char``, ...) and list joiner (``join``), the tests
plain ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from course.text import code_span

Notice = tuple[str, dict]
Join = Callable[[Iterable[str]], str]


def hex_bytes(data: bytes) -> str:
    return " ".join(f"{b:02X}" for b in data)


def counts_notice(*, chars: int, utf8_bytes: int, tokens: int, chars_per_token: float) -> Notice:
    return "notice.counts", dict(chars=f"{chars:,}", bytes=f"{utf8_bytes:,}", tokens=f"{tokens:,}",
                                 cpt=f"{chars_per_token:.2f}")


def split_notice(*, split: Sequence, sentencepiece: bool, char: Callable[[str], str],
                 code_point: Callable[[str], str]) -> Notice:
    """A character split over byte tokens (``split``: groups with ``text``, ``tokens`` and the
    ``dropped`` bytes no token carries), preferring one that lost no byte; or that none was."""
    if split:
        g = next((g for g in split if not g.dropped), split[0])
        pieces = " + ".join(code_span(tok.text) for tok in g.tokens)
        if g.dropped:   # the only examples lost a byte the vocabulary cannot hold
            return "notice.split_dropped", dict(n=len(split), char=code_point(g.text), pieces=pieces,
                                                dropped=hex_bytes(g.dropped))
        return "notice.split", dict(n=len(split), char=char(g.text), pieces=pieces)
    return ("notice.no_split_sp" if sentencepiece else "notice.no_split"), {}


def longest_notice(*, ordinary: Sequence, label: Callable) -> list[Notice]:
    """The prompt's longest ordinary token in bytes (the lower id on a tie)."""
    if not ordinary:
        return []
    longest = max(ordinary, key=lambda tok: (len(tok.bytes), -tok.id))
    return [("notice.longest", dict(token=label(longest), n=len(longest.bytes)))]


def ids_notice(*, merged: Sequence, label: Callable, rank_is_id_offset: bool, merges_follow_ids: bool,
               merged_first: int | None, n_merges: int, common_rules: int) -> list[Notice]:
    """The merged pieces with the lowest and highest ids, read as the order the merges were
    learned in (only merged pieces have one: single bytes are the starting alphabet)."""
    if len({tok.id for tok in merged}) <= 1:
        return []
    low, high = min(merged, key=lambda tok: tok.id), max(merged, key=lambda tok: tok.id)
    if not rank_is_id_offset and merges_follow_ids:
        return [("notice.ids_sp", dict(low=label(low), low_id=f"{low.id:,}", high=label(high),
                                       high_id=f"{high.id:,}"))]
    if rank_is_id_offset:
        low_rank = low.id - merged_first
        return [("notice.ids_common" if low_rank < common_rules else "notice.ids",
                 dict(low=label(low), low_id=f"{low.id:,}", high=label(high), high_id=f"{high.id:,}",
                      low_rank=f"{low_rank:,}", high_rank=f"{high.id - merged_first:,}", merges=f"{n_merges:,}",
                      limit=f"{common_rules:,}"))]
    return []


def chars_notice(*, char_ids: Sequence[int], total: int, char_first: int | None, example: Callable[[int], str],
                 join: Join) -> list[Notice]:
    """The prompt's single-character pieces (``char_ids``: their ids, one per token) of a
    SentencePiece alphabet whose ids start at ``char_first``, with up to four examples."""
    chars = list(dict.fromkeys(char_ids))
    if not chars or char_first is None:
        return []
    return [("notice.chars_sp", dict(n=len(char_ids), total=total, first=f"{char_first:,}",
                                     examples=join(example(i) for i in chars[:4])))]


def digits_notice(*, n_digits: int) -> list[Notice]:
    return [("notice.digits", dict(n=n_digits))] if n_digits else []


def cost_notice(*, parallel: Sequence[Sequence[int]], zh_chars: tuple[int, int]) -> Notice:
    """The parallel sentences' token counts (each row: English, Traditional, Simplified) and
    the Chinese sentences' characters (Traditional, Simplified)."""
    en, hant, hans = (sum(row[k] for row in parallel) for k in range(3))
    return "notice.cost", dict(en=en, hant=hant, hans=hans, n=len(parallel), ratio_hant=f"{hant / en:.2f}",
                               ratio_hans=f"{hans / en:.2f}", cpt_hant=f"{zh_chars[0] / hant:.2f}",
                               cpt_hans=f"{zh_chars[1] / hans:.2f}")


def letters_notice(*, word: str, letter: str, count: int, pieces: str) -> Notice:
    return "notice.letters", dict(word=word, letter=letter, count=count, pieces=pieces)


def parts_notice(*, char: str, part: str, count: int, char_ids: Sequence[int], part_ids: Sequence[int],
                 join: Join) -> Notice:
    """The Chinese "strawberry": what the model receives for a character made of ``count``
    copies of ``part`` (``char_ids``, ``part_ids``: their token ids, without <bos>). One token:
    an id that says nothing about the parts. Several (byte pieces): whether any of them is one of
    the part's own ids (they never are for UTF-8 bytes of two different characters)."""
    ids = join(f"{i:,}" for i in char_ids)
    part_text = join(f"{i:,}" for i in part_ids)
    fields = dict(char=char, part=part, count=count, id=ids, part_id=part_text, n=len(char_ids))
    if len(char_ids) == 1:
        return "parts.one", fields
    if set(char_ids) & set(part_ids):
        return "parts.shared", fields
    return "parts.pieces", fields


def chat_notices(*, templated: bool, tokens: int, added: int, chat_tokens: int, chat_specials: int, typed: Sequence,
                 bos: str, eos: str, typed_label: Callable, join: Join) -> list[Notice]:
    """What the chat template adds around the prompt (``chat_specials`` special tokens in its
    ``chat_tokens``, ``typed`` of them typed by the learner), or that a base model has none
    (its ``added`` tokens, e.g. <bos>); then the special tokens the learner's text produced."""
    if templated:
        out = [("notice.chat", dict(n=f"{tokens:,}", m=f"{chat_tokens:,}", added=chat_specials - len(typed),
                                    eos=eos))]
    else:
        out = [("notice.no_chat", dict(n=f"{tokens:,}", m=f"{tokens + added:,}", bos=bos, eos=eos))]
    if typed:
        out.append(("notice.chat_typed", dict(n=len(typed), tokens=join(typed_label(tok) for tok in typed[:6]))))
    return out
