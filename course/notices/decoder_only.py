"""What the architecture lesson says about the loaded model as a decoder-only model, from the
facts read off its modules (lesson_model.analysis.decoder_only). Returns [(key under
"architecture.", fields)]."""

from __future__ import annotations

from collections.abc import Sequence

Notice = tuple[str, dict]


def decoder_only_notices(*, model: str, n_blocks: int, attention_per_block: Sequence[int],
                         encoder_modules: Sequence[str], causal: bool, embedding_tables: int) -> list[Notice]:
    out: list[Notice] = []
    if not encoder_modules and set(attention_per_block) == {1}:
        out.append(("dec.no_encoder", dict(model=model, n=n_blocks)))
    else:
        out.append(("dec.has_extra", dict(model=model, n=len(encoder_modules), most=max(attention_per_block))))
    out.append(("dec.causal" if causal else "dec.not_causal", dict(model=model)))
    out.append(("dec.one_table" if embedding_tables == 1 else "dec.tables", dict(n=embedding_tables)))
    return out
