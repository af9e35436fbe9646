"""What to notice on the big-picture lesson, from the live demo's numbers.

Each function returns [(catalog key under "home.", fields)]; the page translates them
(Lesson.notices). Token labels come in already formatted (a code span).
"""

from __future__ import annotations

Notice = tuple[str, dict]


def demo_notices(*, chars: int, n_all: int, top_token: str, top_is_piece: bool, top_p: float, top_n: int,
                 covered: float, vocab: int, n_tokens: int, layers: int, entropy_bits: float,
                 added: int = 0) -> list[Notice]:
    """The prompt's length in characters and tokens (``n_all``: before the page's cap, counting
    the ``added`` tokens the tokenizer put before the text, Gemma's <bos>, which no character
    of the prompt makes: the count says them apart, as the tokens page does), the top
    candidate (a byte piece says so), how much the ``top_n`` shown cover, one position per token
    (``n_tokens``: the tokens run), and the spread of the scores."""
    return [
        ("notice.tokens_bos", dict(chars=f"{chars:,}", n=f"{n_all - added:,}", total=f"{n_all:,}")) if added else
        ("notice.tokens", dict(chars=f"{chars:,}", n=f"{n_all:,}")),
        ("notice.top_piece" if top_is_piece else "notice.top", dict(token=top_token, p=f"{top_p:.0%}")),
        ("notice.cover", dict(k=top_n, p=f"{covered:.0%}", rest=f"{vocab - top_n:,}")),
        ("notice.positions" if n_tokens > 1 else "notice.positions_one",
         dict(n=n_tokens, layers=layers, vocab=f"{vocab:,}")),
        ("notice.entropy", dict(bits=f"{entropy_bits:.1f}")),
    ]
