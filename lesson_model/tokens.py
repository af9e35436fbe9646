"""Tokens as the learner should see them: id, the raw bytes they stand for, a display form
and the span of characters of the input they came from.

Two vocabulary styles are read:
- Byte-level BPE (GPT-2 style, as SmolLM2 uses) writes each byte as a printable stand-in
  character ("Ġ" is the byte 0x20, a space). We undo that to get the real bytes, so a
  Chinese character split across two tokens shows up as two byte pieces such as <E5 A4>.
- SentencePiece style (as Gemma uses) keeps characters as they are, writes a space as "▁"
  and spells a character missing from its vocabulary as byte-fallback pieces "<0xE5>". Its
  normalizer turns every space into "▁" before anything else, so a "▁" typed in the text
  reaches the model as a space: the tokens of " " and of "▁" are the same.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer


@dataclass(frozen=True)
class Token:
    id: int
    bytes: bytes      # the raw UTF-8 bytes this token stands for (for a special token: its literal text)
    text: str         # display form: the decoded text, or "<E5 A4>" for bytes that split a character
    start: int        # character span in the input text: text[start:end] contains this token
    end: int
    special: bool = False
    added: bool = False   # put there by the tokenizer (the <bos> before the text), not read from the text

    @property
    def is_partial(self) -> bool:
        """True when the token holds only part of a character's UTF-8 bytes."""
        return not self.special and _decodes_cleanly(self.bytes) is None


@lru_cache(maxsize=1)
def byte_decoder() -> dict[str, int]:
    """The GPT-2 table from stand-in characters back to bytes."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    codes = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            codes.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, codes)}


def _decodes_cleanly(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def is_byte_piece(piece: str) -> bool:
    """A SentencePiece byte-fallback entry: "<0xE5>" stands for the single byte E5."""
    return len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">") and \
        all(c in "0123456789ABCDEFabcdef" for c in piece[3:5])


def bytes_as_text(data: bytes) -> str:
    """Display form of a token's bytes: the text when they are whole characters, else <E5 A4>."""
    text = _decodes_cleanly(data)
    if text is not None:
        return text
    return "<" + " ".join(f"{b:02X}" for b in data) + ">"


class TokenizerView:
    """Wraps a `tokenizers.Tokenizer` and knows how to turn each token back into bytes."""

    def __init__(self, tokenizer: Tokenizer, chat_template: str | None = None,
                 bos_token: str | None = None, add_bos: bool = False,
                 eos_token: str | list[str] | None = None):
        self.tokenizer = tokenizer
        # Every encode takes this lock: encode_literal flips a setting of this one shared tokenizer
        # (a second copy of Gemma's would hold 74 MB), and no other encode may run meanwhile.
        self._encoding = threading.Lock()
        self.chat_template = chat_template
        self.bos_token = bos_token
        self.bos_id = tokenizer.token_to_id(bos_token) if (add_bos and bos_token) else None
        eos_names = [eos_token] if isinstance(eos_token, str) else list(eos_token or [])
        self.eos_token = eos_names[0] if eos_names else None     # the one chat templates write as {{ eos_token }}
        self.eos_ids = {i for i in map(tokenizer.token_to_id, eos_names) if i is not None}   # end-of-sequence ids
        self.vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
        added = tokenizer.get_added_tokens_decoder()
        self.special_ids = {i for i, t in added.items() if t.special}
        self.added_ids = set(added)      # added tokens are stored as their literal text, not byte-level pieces
        self.byte_level = "ByteLevel" in repr(tokenizer.decoder)
        # SentencePiece style: "▁" stands for a space (the normalizer writes every space so).
        self.space_symbol = None if self.byte_level else "▁"
        # Bytes with no vocabulary entry: the tokenizer silently drops them (SmolLM2 lacks 21,
        # among them the control characters 0x04, 0x06, 0x13, 0x14, 0x16 and 0x1D).
        self.missing_bytes = frozenset(b for c, b in byte_decoder().items()
                                       if tokenizer.token_to_id(c) is None) if self.byte_level else frozenset()

    def token_bytes(self, token_id: int) -> bytes:
        piece = self.tokenizer.id_to_token(token_id)
        if piece is None:
            return b""
        if token_id in self.added_ids:
            return piece.encode("utf-8")
        if self.byte_level:
            table = byte_decoder()
            return bytes(table[c] for c in piece if c in table)
        # SentencePiece style: "▁" is a space and <0xE5> is a raw byte.
        if is_byte_piece(piece):
            return bytes([int(piece[3:5], 16)])
        return piece.replace("▁", " ").encode("utf-8")

    def is_byte_piece(self, token_id: int) -> bool:
        """True for an entry that is one raw byte: a byte-fallback piece such as <0xE5>
        (SentencePiece style), or any one-byte entry of a byte-level vocabulary."""
        if token_id in self.added_ids:
            return False
        if self.byte_level:
            return len(self.token_bytes(token_id)) == 1
        return is_byte_piece(self.tokenizer.id_to_token(token_id) or "")

    def leading_bos(self, ids: list[int], text: str | None = None) -> bool:
        """True when ids[0] is the <bos> the tokenizer put before the text (see `encode`), not
        one the text itself wrote as the literal "<bos>" (which also becomes the special id)."""
        if self.bos_id is None or not ids or ids[0] != self.bos_id:
            return False
        return text is None or ids.count(self.bos_id) > text.count(self.bos_token)

    def encode(self, text: str) -> list[int]:
        with self._encoding:
            ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        return ([self.bos_id] if self.bos_id is not None else []) + ids

    def encode_literal(self, text: str) -> list[int]:
        """``text``'s ids with special-token matching turned off (no <bos> added): a typed
        ``<|im_start|>`` becomes ordinary pieces (``<``, ``|``, ``im``...), as a server should
        tokenize untrusted text."""
        with self._encoding:
            before = self.tokenizer.encode_special_tokens
            self.tokenizer.encode_special_tokens = True
            try:
                return self.tokenizer.encode(text, add_special_tokens=False).ids
            finally:
                self.tokenizer.encode_special_tokens = before

    def tokens(self, ids: list[int], text: str | None = None) -> list[Token]:
        """Tokens for ids; with the source text, spans are character offsets into it.

        The <bos> the tokenizer puts first is marked ``added`` and gets an empty span, as
        does any token whose bytes are not next in the text. Bytes the vocabulary cannot
        represent (see `dropped`) are skipped. A SentencePiece-style vocabulary reads a typed
        "▁" as a space: that token's bytes are the space, its span the "▁".
        """
        source = text or ""
        if self.space_symbol and text is not None:   # what the tokenizer read: the same characters, ▁ as a space
            source = text.replace(self.space_symbol, " ")
        raw = source.encode("utf-8") if text is not None else b""
        char_of_byte = _char_index_of_bytes(source)
        out, byte_pos = [], 0
        skip_first = self.leading_bos(list(ids), text)
        for n, token_id in enumerate(ids):
            data = self.token_bytes(token_id)
            if n == 0 and skip_first:
                out.append(Token(token_id, data, bytes_as_text(data), 0, 0, token_id in self.special_ids, added=True))
                continue
            while byte_pos < len(raw) and raw[byte_pos] in self.missing_bytes and token_id not in self.added_ids:
                byte_pos += 1
            if data and raw[byte_pos:byte_pos + len(data)] == data:
                start, end = char_of_byte[byte_pos], char_of_byte[byte_pos + len(data) - 1] + 1
                byte_pos += len(data)
            else:
                start = end = char_of_byte[min(byte_pos, len(char_of_byte) - 1)]
            out.append(Token(token_id, data, bytes_as_text(data), start, end, token_id in self.special_ids))
        return out

    def dropped(self, text: str) -> list[str]:
        """Characters of text that contain a byte with no vocabulary entry (see `dropped_bytes`)."""
        return [ch for ch, _ in self.dropped_bytes(text)]

    def dropped_bytes(self, text: str) -> list[tuple[str, bytes]]:
        """Each distinct character of text that holds bytes with no vocabulary entry, with
        those bytes: the tokenizer drops exactly them and keeps the rest.

        A control character such as U+0004 is one missing byte, so the model never sees it.
        A character of an unassigned plane such as U+40000 (F1 80 80 80) loses only its lead
        byte F1; its other bytes still reach the model, as the byte tokens <80> <80> <80>.
        """
        out = []
        for ch in dict.fromkeys(text):
            missing = bytes(b for b in ch.encode("utf-8") if b in self.missing_bytes)
            if missing:
                out.append((ch, missing))
        return out

    def decode(self, ids: list[int]) -> str:
        return b"".join(self.token_bytes(i) for i in ids).decode("utf-8", errors="replace")

    def render_chat(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        if not self.chat_template:
            raise ValueError("this tokenizer has no chat template")
        return _compile_template(self.chat_template).render(messages=messages, add_generation_prompt=add_generation_prompt,
                                                             bos_token=self.bos_token or "", eos_token=self.eos_token or "")


def _char_index_of_bytes(text: str) -> list[int]:
    """For each UTF-8 byte of text, the index of the character it belongs to (plus a sentinel)."""
    index = []
    for i, ch in enumerate(text):
        index.extend([i] * len(ch.encode("utf-8")))
    index.append(len(text))
    return index


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


@lru_cache(maxsize=8)
def _compile_template(source: str) -> jinja2.Template:
    # The environment transformers renders chat templates in: sandboxed, the same whitespace
    # rules, loop controls, its tojson filter and its raise_exception / strftime_now helpers.
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(source)
