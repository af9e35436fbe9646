"""The tokens lesson's shared computations: the facts about the whole vocabulary (one walk over
every entry: about 3 s on Gemma's 262,144) and the merge table the worked example reads. Both
are kept per model by lesson_model.analysis.tokenization; the lesson runs no forward pass."""

from __future__ import annotations

from lesson_model.analysis import tokenization as T

N_LONGEST = 8                # longest entries listed in the vocabulary's tabs
DEFAULT_WORD = "strawberry"  # the letter-counting word (and the worked example's)


def facts(lm) -> T.VocabularyFacts:
    """The vocabulary's facts (cached per model)."""
    return T.vocabulary_facts(lm, n_longest=N_LONGEST)


def merge_steps(lm, word: str) -> list[T.MergeStep]:
    """BPE one merge at a time on " word" (the first call reads the model's merge rules once)."""
    return T.bpe_merge_steps(lm, " " + word)


def warm(lm, lang: str) -> None:
    facts(lm)
    merge_steps(lm, DEFAULT_WORD)
