"""LessonModel: one loaded model (decoder + tokenizer) with the calls the lessons use."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .decoder import Decoder, Hooks, KVCache
from .generation import generate_steps
from .tokens import Token, TokenizerView, bytes_as_text


class Captures(Mapping):
    """The tensors one run captured, by hook name, in the order the forward pass reached them.

    A read-only mapping. Each head's write (blocks.{L}.attn.hook_result, n_heads times the size
    of the attention output) is filled in when first read, from the same run's hook_z, with the
    einsum the forward pass would use (Attention.head_results), unless a hook function changes
    it during the pass. So a full capture holds the big per-head tensors only for layers that
    are actually looked at, and capturing never changes how the pass computes its output.
    """

    def __init__(self, order: list[str], tensors: dict[str, torch.Tensor],
                 deferred: dict[str, Callable[[], torch.Tensor]] | None = None, hold: bool = True):
        self._order = order
        self._tensors = tensors
        self._deferred = dict(deferred or {})
        self._hold = hold       # False: a deferred entry is computed at every read, never held (a shared cache's size stays put)

    def __getitem__(self, name: str) -> torch.Tensor:
        tensor = self._tensors.get(name)
        if tensor is None:
            make = self._deferred.get(name)
            if make is None:
                raise KeyError(name)
            tensor = make()
            if self._hold:
                self._tensors[name] = tensor        # two threads may both compute it: same value
        return tensor

    def __contains__(self, name) -> bool:
        return name in self._tensors or name in self._deferred

    def __iter__(self):
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)

    def __repr__(self) -> str:
        return f"Captures({len(self)} hook points)"

    def held_bytes(self) -> int:
        """Bytes of the tensors held right now (deferred entries not yet read count as nothing)."""
        return sum(t.numel() * t.element_size() for t in self._tensors.values())


def continue_capture(name: str, before: torch.Tensor, after: torch.Tensor, n_start: int) -> torch.Tensor:
    """One hook point's capture over a whole sequence, joined from a run over its start
    (``before``: its first n_start positions, or more) and a pass that continued from that
    run's KV cache of them (``after``: the positions that follow, LessonModel.run with
    kv_cache). The same tensor a pass over the whole sequence captures, up to float rounding:
    under the causal mask no position depends on a later one.

    Attention scores and patterns are [batch, heads, q_pos, k_pos]: the earlier queries' rows
    get the later keys as masked, -inf scores and 0 weights, as a whole pass gives them. Every
    other hook point is [batch, pos, ...]."""
    if name.endswith((".hook_attn_scores", ".hook_pattern")):
        n_new = after.shape[2]                                                    # after: [batch, heads, n_new, n_start + n_new]
        masked = float("-inf") if name.endswith(".hook_attn_scores") else 0.0
        rows = F.pad(before[:, :, :n_start, :n_start], (0, n_new), value=masked)  # [batch, heads, n_start, n_start + n_new]
        return torch.cat([rows, after], dim=2)
    return torch.cat([before[:, :n_start], after], dim=1)                         # [batch, n_start + n_new, ...]


@dataclass
class Run:
    """What one forward pass produced."""
    ids: torch.Tensor                  # [batch, pos]
    logits: torch.Tensor | None        # [batch, pos, vocab] (None with unembed=False)
    cache: Mapping[str, torch.Tensor]  # captured hook points, by name (a Captures)
    final: torch.Tensor | None = None  # [batch, pos, d_model] after the final norm, with unembed=False


class LessonModel:
    def __init__(self, decoder: Decoder, tokenizer: TokenizerView, name: str):
        self.decoder = decoder
        self.tokenizer = tokenizer
        self.name = name
        self.cfg = decoder.cfg
        # How the weights were stored before they were dequantized to float32 (set by load_model
        # for a GGUF file): {format: parameters}, e.g. {"Q4_1": ..., "Q8_0": ...}; None otherwise.
        self.bundled = None     # the loading.BUNDLED entry (key, licence, what it reads) for a bundled model
        self.repaired: tuple[str, ...] = ()   # what its load found damaged in the cache and rebuilt
        self.weight_formats: dict[str, int] | None = None
        self.embedding_format: str | None = None
        self._hook_names = decoder.hook_names()
        self._hook_name_set = frozenset(self._hook_names)

    def __repr__(self) -> str:
        return f"LessonModel({self.name!r}, {self.cfg}, device={self.device})"

    @property
    def device(self) -> torch.device:
        return self.decoder.W_E.device

    @property
    def eos_token_ids(self) -> set[int]:
        return self.tokenizer.eos_ids

    @property
    def eos_token_id(self) -> int | None:
        return min(self.eos_token_ids) if self.eos_token_ids else None

    # ------------------------------------------------------------------ text <-> ids

    def tokenize(self, text: str) -> list[Token]:
        """Tokens of text with ids, raw bytes, display text and character spans."""
        return self.tokenizer.tokens(self.tokenizer.encode(text), text)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def decode(self, ids) -> str:
        return self.tokenizer.decode([int(i) for i in ids])

    def token_text(self, token_id: int) -> str:
        """Display text of one vocabulary entry (byte pieces as <E5 A4>)."""
        return bytes_as_text(self.tokenizer.token_bytes(int(token_id)))

    def chat_template(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        """The model's chat template rendered as text, special tokens included."""
        return self.tokenizer.render_chat(messages, add_generation_prompt)

    # ------------------------------------------------------------------ the one rule for inputs
    #
    # Every input this model reads begins with its beginning-of-sequence token when it has one
    # (Gemma's <bos>; SmolLM2 has none), whoever builds it: the tokenizer (encode), a cut prompt
    # (cut), a hand-built list of ids (with_bos). to_ids refuses a fresh input without it, so a
    # path that forgets it fails loudly instead of reporting numbers about an input the model
    # never gets (Gemma without <bos> copies far worse and has no attention sink).

    @property
    def bos_id(self) -> int | None:
        """The id every input of this model begins with, or None when the model has none."""
        return self.tokenizer.bos_id

    def with_bos(self, ids: Sequence[int]) -> list[int]:
        """``ids`` as the model reads them: the model's <bos> first (added when missing)."""
        ids = [int(i) for i in ids]
        if self.bos_id is not None and (not ids or ids[0] != self.bos_id):
            return [self.bos_id] + ids
        return ids

    def cut(self, items: Sequence, cap: int) -> tuple[list, bool]:
        """At most ``cap`` of ``items`` (ids or Tokens, as the tokenizer gave them) and whether
        any were cut. A cut keeps the end of the text, so a lesson continues from where the
        learner stopped, and keeps the model's <bos> first: <bos> and the last cap - 1 tokens."""
        items = list(items)
        if len(items) <= cap:
            return items, False
        first = items[0] if isinstance(items[0], int) else items[0].id
        if self.bos_id is not None and first == self.bos_id:
            if cap < 2:
                raise ValueError("a cut that keeps <bos> needs room for at least one more token")
            return [items[0]] + items[len(items) - (cap - 1):], True
        return items[-cap:], True

    def check_input(self, ids: torch.Tensor) -> None:
        """Raise ValueError when an input [batch, pos] that starts a sequence (no KV cache before
        it) does not begin with the model's <bos> in every row."""
        if self.bos_id is None or ids.shape[-1] == 0:
            return
        if bool((ids[..., 0] != self.bos_id).any()):
            raise ValueError(f"{self.name}: every input begins with <bos> (id {self.bos_id}); this one "
                             f"begins with id {int(ids.reshape(-1, ids.shape[-1])[0, 0])} (LessonModel.with_bos)")

    def to_ids(self, x, continues: bool = False) -> torch.Tensor:
        """A string, a list of ids or a [batch, pos] LongTensor -> LongTensor [batch, pos] on the model's device.
        Unless ``continues`` (the ids follow tokens a KV cache holds), the input must begin with
        the model's <bos> (check_input)."""
        if isinstance(x, str):
            ids = torch.tensor([self.encode(x)], dtype=torch.long)
        elif isinstance(x, torch.Tensor):
            ids = x.long() if x.dim() == 2 else x.long()[None]
        else:
            ids = torch.tensor([list(map(int, x))], dtype=torch.long)
        if ids.shape[-1] == 0:
            raise ValueError("nothing to run: the input has no tokens")
        if ids.shape[-1] > self.cfg.max_position:
            raise ValueError(f"{ids.shape[-1]} tokens is more than the model's context of {self.cfg.max_position}")
        if int(ids.min()) < 0 or int(ids.max()) >= self.cfg.vocab_size:
            raise ValueError("token id out of the vocabulary's range")
        if not continues:
            self.check_input(ids)
        return ids.to(self.device)

    # ------------------------------------------------------------------ forward passes

    def hook_names(self) -> list[str]:
        return list(self._hook_names)

    def run(self, x, names=None, hooks: dict | None = None, last_only: bool = False, unembed: bool = True,
            kv_cache: KVCache | None = None) -> Run:
        """One forward pass with per-call captures and interventions.

        names=None captures every hook point; a list captures just those ([] captures none).
        hooks={name: fn} calls fn(tensor) at that point; a returned tensor replaces it.
        last_only=True: logits for the last position only, [batch, 1, vocab] (the hooks keep every position)
        (with a 262,144-entry vocabulary the unembedding of every position is most of the work).
        unembed=False: no logits; Run.final holds the final-normed stream they would be made from.
        kv_cache: x continues the tokens the cache holds (positions count on from them); the
        captures and logits cover x's positions only, and the cache grows by them
        (continue_capture joins a capture to an earlier run's).
        Nothing is stored on the model, so concurrent calls never see each other's hooks.
        """
        if isinstance(names, str):
            raise KeyError(f"names must be a list of hook names, not the string {names!r}")
        hooks = dict(hooks or {})
        wanted = set(self._hook_names) if names is None else set(names)
        unknown = (wanted | set(hooks)) - self._hook_name_set
        if unknown:
            raise KeyError(f"unknown hook point(s): {sorted(unknown)[:5]}")
        ids = self.to_ids(x, continues=kv_cache is not None and len(kv_cache) > 0)
        if kv_cache is not None and len(kv_cache) + ids.shape[-1] > self.cfg.max_position:
            raise ValueError(f"{len(kv_cache) + ids.shape[-1]} tokens is more than the model's context of {self.cfg.max_position}")

        deferred = self.deferred_results(wanted, hooks)
        z_for_deferred = {n.replace(".hook_result", ".hook_z") for n in deferred}
        context = Hooks(names=(wanted - deferred) | z_for_deferred, fns=hooks)
        with torch.inference_mode():
            out = self.decoder(ids, context, kv_cache=kv_cache, last_only=last_only, unembed=unembed)

        to_cpu = (lambda t: t.cpu()) if self.device.type != "cpu" else (lambda t: t)
        tensors = {k: to_cpu(v) for k, v in context.cache.items() if k in wanted}
        makers = {n: self.head_results_of(n, context.cache[n.replace(".hook_result", ".hook_z")]) for n in deferred}
        order = [n for n in self._hook_names if n in wanted]
        logits, final = (to_cpu(out), None) if unembed else (None, to_cpu(out))
        return Run(ids=to_cpu(ids), logits=logits, cache=Captures(order, tensors, makers), final=final)

    def deferred_results(self, names, hooks: dict | None = None) -> set[str]:
        """The per-head writes (hook_result) among ``names`` that are only looked at (no hook
        function changes them): a run computes them when read, from hook_z; see Captures.
        (On a GPU none: they are computed in the pass, as the cache moves to the CPU.)"""
        if self.device.type != "cpu":
            return set()
        return {n for n in names if n.endswith(".attn.hook_result") and n not in (hooks or {})}

    def head_results_of(self, name: str, z: torch.Tensor):
        """A function computing blocks.{L}.attn.hook_result from that layer's z, when called."""
        attn = self.decoder.blocks[int(name.split(".")[1])].attn

        def make() -> torch.Tensor:
            with torch.inference_mode():
                return attn.head_results(z)                  # [batch, pos, n_heads, d_model]
        return make

    def generate_steps(self, prompt, max_new_tokens: int, **kwargs):
        """Generation one inspectable step at a time; see lesson_model.generation.generate_steps."""
        return generate_steps(self, prompt, max_new_tokens, **kwargs)

    # ------------------------------------------------------------------ the model card

    def param_counts(self) -> dict[str, int]:
        """Parameters by kind; a tied unembedding is the embedding matrix and counts once."""
        counts = {"embedding": 0, "attention": 0, "mlp": 0, "norms": 0, "unembedding": 0}
        for name, p in self.decoder.named_parameters():
            if name == "W_E":
                counts["embedding"] += p.numel()
            elif name == "W_U_untied":
                counts["unembedding"] += p.numel()
            elif name.endswith("norm.weight"):   # ln1/ln2 (+ post-norms), QK-norm, final norm
                counts["norms"] += p.numel()
            elif ".attn." in name:
                counts["attention"] += p.numel()
            elif ".mlp." in name:
                counts["mlp"] += p.numel()
            else:
                counts["norms"] += p.numel()
        counts["total"] = sum(counts.values())
        return counts
