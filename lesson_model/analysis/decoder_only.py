"""What a decoder-only model keeps and drops, read from the loaded model's modules.

    facts = decoder_only_facts(lm)

The original Transformer (Vaswani et al., 2017) is an encoder-decoder: an encoder reads the
whole source text with attention in both directions, and each decoder block has a second
attention, cross-attention, whose keys and values come from the encoder. A decoder-only model
keeps the decoder's stack alone: one embedding table, blocks with one causal self-attention
and one MLP each, and no module that reads another text.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lesson_model.decoder import Attention


@dataclass(frozen=True)
class DecoderOnlyFacts:
    n_blocks: int
    attention_per_block: list[int]     # Attention modules in each block (1 each: no cross-attention)
    encoder_modules: list[str]         # module names that mention an encoder or cross-attention
    causal: bool                       # every layer's mask forbids a query from reading a later key
    embedding_tables: int              # parameters shaped [vocab, d_model]: the one table it reads text through
    total_params: int


def decoder_only_facts(lm) -> DecoderOnlyFacts:
    dec = lm.decoder
    names = [name for name, _ in dec.named_modules()]
    per_block = [sum(isinstance(m, Attention) for m in block.modules()) for block in dec.blocks]
    q, k = torch.arange(4), torch.arange(4)
    causal = all(not bool(block.attn.allowed(q, k).triu(1).any()) for block in dec.blocks)
    vocab, d = lm.cfg.vocab_size, lm.cfg.d_model
    tables = sum(1 for _, p in dec.named_parameters() if tuple(p.shape) == (vocab, d))
    return DecoderOnlyFacts(len(dec.blocks), per_block,
                            [n for n in names if "encoder" in n.lower() or "cross" in n.lower()],
                            causal, tables, lm.param_counts()["total"])
