"""Lesson 11, architecture vs weights: the model card of a loaded model (read from its config,
its tokenizer, its registry entry and its real tensors), the training loss at every position of
one forward pass, and the instruct-vs-base comparison (the same question through a chat
template and as a plain continuation, greedy).

    from lesson_model.analysis import architecture as AR
    rows = AR.model_card(lm)                      # [CardRow(key="heads", variant="gqa", facts={...}), ...]
    AR.differing(AR.model_card(a), AR.model_card(b))   # the row keys whose facts differ
    loss = AR.position_losses(lm, ids, logits)    # [pos - 1]: -log p(next token) at every position
    AR.post_training(lm, question, 36)            # a Reply: the prompt as fed, the greedy tokens, the stop

Nothing here is typed in per model: every fact is read from ``lm``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from ..tokens import bytes_as_text
from .params import ArchConfig, count_params, model_breakdown


# --------------------------------------------------------------------------- the model card

@dataclass(frozen=True)
class CardRow:
    """One row of the card: ``key`` names the property, ``lesson`` the page that explains it,
    ``variant`` which wording fits (e.g. "gqa" / "mqa"), ``facts`` the numbers it quotes."""
    key: str
    lesson: str
    variant: str
    facts: dict = field(default_factory=dict)

    def same_as(self, other: "CardRow") -> bool:
        return self.variant == other.variant and self.facts == other.facts


CARD_KEYS = ("training", "tokenizer", "d_model", "layers", "heads", "d_head", "d_ff", "activation",
             "norms", "qk_norm", "position", "window", "tied", "embed_scale", "context", "params")


def rope_base(rope) -> float:
    """The RoPE base a RotaryEmbedding was built with, read back from its frequencies
    (inv_freq[i] = base ** (-2i / d_head))."""
    inv = rope.inv_freq.double()
    d_head = 2 * inv.numel()
    base = float(inv[1]) ** (-d_head / 2)
    return float(f"{base:.3g}")        # float32 frequencies: 3 significant digits are exact for 10^k bases


def _layers_text(layers) -> str:
    return ", ".join(str(i) for i in layers)


def model_card(lm) -> list[CardRow]:
    """The card rows of a loaded model, in CARD_KEYS order, computed from lm (its config,
    tokenizer, bundled entry and tensors)."""
    cfg, dec, tok = lm.cfg, lm.decoder, lm.tokenizer
    vocab, d_model = (int(n) for n in dec.W_E.shape)
    n_layers = len(dec.blocks)
    attn, mlp = dec.blocks[0].attn, dec.blocks[0].mlp
    q_width, kv_width = int(attn.W_Q.shape[1]), int(attn.W_K.shape[1])
    d_head = cfg.d_head
    n_heads, n_kv = q_width // d_head, kv_width // d_head
    d_ff = int(mlp.down_proj.shape[0])
    block = dec.blocks[0]
    n_norms = sum(1 for name in ("ln1", "ln2", "ln1_post", "ln2_post") if getattr(block, name, None) is not None)
    bases = [rope_base(dec.rope_for(layer)) for layer in range(n_layers)]
    windows = [cfg.window(layer) for layer in range(n_layers)]
    sliding = [i for i, w in enumerate(windows) if w is not None]
    full = [i for i, w in enumerate(windows) if w is None]
    instruct = bool(lm.bundled.instruct) if lm.bundled is not None else tok.chat_template is not None
    total = model_breakdown(lm).total

    rows = [
        CardRow("training", "generation", "instruct" if instruct else "base",
                {"chat": tok.chat_template is not None}),
        CardRow("tokenizer", "tokens", "byte_bpe" if tok.byte_level else "sentencepiece",
                {"vocab": vocab, "bos": tok.bos_id is not None}),
        CardRow("d_model", "embeddings", "plain", {"d": d_model}),
        CardRow("layers", "residual", "plain", {"n": n_layers}),
        CardRow("heads", "heads", "mha" if n_kv == n_heads else "mqa" if n_kv == 1 else "gqa",
                {"q": n_heads, "kv": n_kv, "group": n_heads // n_kv}),
        CardRow("d_head", "attention", "equal" if n_heads * d_head == d_model else "wider",
                {"dh": d_head, "width": n_heads * d_head, "d": d_model}),
        CardRow("d_ff", "ffn", "plain", {"f": d_ff, "ratio": round(d_ff / d_model, 2)}),
        CardRow("activation", "ffn", cfg.activation, {}),
        CardRow("norms", "residual", "sandwich" if cfg.post_norms else "pre", {"n": n_norms}),
        CardRow("qk_norm", "attention", "on" if getattr(attn, "q_norm", None) is not None else "off", {}),
        CardRow("position", "position", "one_base" if len(set(bases)) == 1 else "two_bases",
                {"base": max(bases), "local": min(bases)}),
        CardRow("window", "attention", "sliding" if sliding else "global",
                {"window": next((w for w in windows if w is not None), 0), "n_sliding": len(sliding),
                 "n_full": len(full), "full": _layers_text(full), "n": n_layers}),
        CardRow("tied", "embeddings", "on" if cfg.tie_embeddings else "off", {}),
        CardRow("embed_scale", "embeddings", "on" if cfg.embed_scale else "off",
                {"scale": round(math.sqrt(d_model), 1)}),
        CardRow("context", "generation", "plain", {"n": cfg.max_position}),
        CardRow("params", "ffn", "plain", {"total": total}),
    ]
    assert tuple(r.key for r in rows) == CARD_KEYS
    return rows


def differing(a: list[CardRow], b: list[CardRow]) -> set[str]:
    """The keys of the rows on which two cards differ."""
    return {x.key for x, y in zip(a, b) if not x.same_as(y)}


# --------------------------------------------------------------------------- the calculator

# The calculator's bounds: a field outside them is refused with a reason (the page's widgets use
# the same bounds, so a URL value outside them is clamped with a note).
LIMITS: dict[str, tuple[int, int]] = {
    "n_layers": (1, 512), "d_model": (1, 65_536), "n_heads": (1, 1_024), "n_kv_heads": (1, 1_024),
    "d_head": (1, 2_048), "d_ff": (1, 524_288), "vocab_size": (1, 2_000_000),
    "n_experts": (1, 1_024), "experts_per_token": (1, 1_024),
}


def problems(cfg: ArchConfig) -> list[tuple[str, dict]]:
    """Why a configuration cannot be counted, as (reason, fields) pairs; [] when it can.
    Reasons: "range" (a field outside LIMITS), "kv_gt_heads", "heads_divide", "experts"."""
    found = []
    for name, (lo, hi) in LIMITS.items():
        value = getattr(cfg, name)
        if not isinstance(value, int) or not lo <= value <= hi:
            found.append(("range", {"field": name, "value": value, "lo": lo, "hi": hi}))
    if found:
        return found
    if cfg.n_kv_heads > cfg.n_heads:
        found.append(("kv_gt_heads", {"kv": cfg.n_kv_heads, "q": cfg.n_heads}))
    elif cfg.n_heads % cfg.n_kv_heads:
        found.append(("heads_divide", {"kv": cfg.n_kv_heads, "q": cfg.n_heads}))
    if cfg.experts_per_token > cfg.n_experts:
        found.append(("experts", {"k": cfg.experts_per_token, "e": cfg.n_experts}))
    return found


BYTES_PER_PARAM = {"fp32": 4.0, "bf16": 2.0, "int4": 0.5}


def memory_bytes(n_params: int) -> dict[str, float]:
    """The weights' size at each storage format (int4: half a byte per weight, scales ignored)."""
    return {fmt: n_params * b for fmt, b in BYTES_PER_PARAM.items()}


def kv_values_per_token(cfg: ArchConfig) -> int:
    """Numbers the KV cache keeps per token: a key and a value of d_head for every K/V head of
    every layer."""
    return 2 * cfg.n_layers * cfg.n_kv_heads * cfg.d_head


def calculate(cfg: ArchConfig) -> dict:
    """Everything the calculator shows for one configuration (raises ValueError when
    problems(cfg) is not empty)."""
    bad = problems(cfg)
    if bad:
        raise ValueError(f"cannot count this configuration: {bad}")
    c = count_params(cfg)
    kv = kv_values_per_token(cfg)
    return {"count": c, "parts": dict(c.parts), "total": c.total, "active": c.active,
            "shares": {k: v / c.total for k, v in c.parts.items()},
            "memory": memory_bytes(c.total), "memory_active": memory_bytes(c.active),
            "kv_values": kv, "kv_bytes": {"fp32": 4 * kv, "bf16": 2 * kv}}


# --------------------------------------------------------------------------- training in one picture

def position_losses(ids, logits: torch.Tensor) -> torch.Tensor:
    """The training loss at every position of one forward pass: -log p(the next token), [pos - 1].
    ``logits`` [1, pos, vocab] (or [pos, vocab]) from one pass; their mean is the training loss
    on this text (position t predicts token t + 1; the causal mask hid it from position t)."""
    ids = torch.as_tensor(list(ids), dtype=torch.long)
    logits = logits[0] if logits.dim() == 3 else logits
    if ids.numel() < 2:
        return torch.zeros(0)
    return F.cross_entropy(logits[:-1].float(), ids[1:].to(logits.device), reduction="none").cpu()


# --------------------------------------------------------------------------- post-training

@dataclass(frozen=True)
class Reply:
    """One model's greedy answer to a question: ``prompt`` is the text fed (chat-formatted for an
    instruct model), ``ids`` the new tokens, ``stop`` "eos" or "length"."""
    model: str
    chat: bool
    prompt: str
    ids: tuple[int, ...]
    texts: tuple[str, ...]
    stop: str
    end_token: str | None       # the end token it stopped on (e.g. <|im_end|>), None when it ran on
    partial: int                # new tokens that are pieces of a character (bytes), not text
    writes_question: bool       # what it wrote has a line of its own ending in a question mark
    seconds: float

    @property
    def text(self) -> str:
        return "".join(self.texts)

    @property
    def answer(self) -> str:
        """The reply without its end token."""
        return "".join(self.texts[:-1] if self.end_token else self.texts)


def _is_partial(lm, token_id: int) -> bool:
    data = lm.tokenizer.token_bytes(int(token_id))
    try:
        data.decode("utf-8")
        return False
    except UnicodeDecodeError:
        return True


def _writes_question(text: str) -> bool:
    """A line of the text ends with a question mark (? or ？): the model asked a question itself."""
    return any(line.strip().endswith(("?", "？")) for line in text.splitlines())


def post_training(lm, question: str, max_new_tokens: int) -> Reply:
    """The question answered greedily by lm: through its chat template when it has one (an
    instruct model), else as a plain continuation (a base model)."""
    chat = lm.tokenizer.chat_template is not None
    prompt = lm.chat_template([{"role": "user", "content": question}], add_generation_prompt=True) if chat else question
    steps = list(lm.generate_steps(prompt, max_new_tokens, temperature=0.0, n_candidates=1))
    ids = tuple(s.token_id for s in steps)
    stop = steps[-1].stop if steps else "length"
    end = bytes_as_text(lm.tokenizer.token_bytes(ids[-1])) if stop == "eos" else None
    body = lm.decode(ids[:-1] if end else ids)
    return Reply(model=lm.name, chat=chat, prompt=prompt, ids=ids, texts=tuple(s.text for s in steps), stop=stop,
                 end_token=end, partial=sum(_is_partial(lm, i) for i in ids),
                 writes_question=_writes_question(body), seconds=sum(s.seconds for s in steps))
