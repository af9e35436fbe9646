"""The big-picture lesson's "What to notice", branch by branch, without running the app or a model."""

import pytest

from course.notices import home as N

pytestmark = pytest.mark.unit


def demo(**changes):
    args = dict(chars=1234, n_all=300, top_token="`·Paris`", top_is_piece=False, top_p=0.8123, top_n=10,
                covered=0.9351, vocab=49152, n_tokens=256, layers=30, entropy_bits=1.234)
    return N.demo_notices(**(args | changes))


def test_a_whole_token_on_top_and_many_positions():
    assert demo() == [
        ("notice.tokens", {"chars": "1,234", "n": "300"}),
        ("notice.top", {"token": "`·Paris`", "p": "81%"}),
        ("notice.cover", {"k": 10, "p": "94%", "rest": "49,142"}),
        ("notice.positions", {"n": 256, "layers": 30, "vocab": "49,152"}),
        ("notice.entropy", {"bits": "1.2"}),
    ]


def test_a_byte_piece_on_top_and_a_single_token():
    found = demo(top_is_piece=True, n_tokens=1, n_all=1, chars=5, top_n=3, covered=0.5, vocab=262144)
    assert [key for key, _ in found] == ["notice.tokens", "notice.top_piece", "notice.cover", "notice.positions_one",
                                         "notice.entropy"]
    assert found[1][1] == {"token": "`·Paris`", "p": "81%"}
    assert found[2][1] == {"k": 3, "p": "50%", "rest": "262,141"}
    assert found[3][1] == {"n": 1, "layers": 30, "vocab": "262,144"}


def test_every_key_is_in_every_catalog():
    """Each key a branch returns exists in the lesson's catalog, in every language."""
    from course import i18n
    produced = {key for key, _ in demo() + demo(top_is_piece=True, n_tokens=1)}
    assert len(produced) == 7
    for lang in ("en", "zh-Hant", "zh-Hans"):
        catalog = i18n.catalog(lang)
        assert [k for k in produced if f"home.{k}" not in catalog] == [], lang


def test_tokens_count_says_bos_apart():
    """Gemma: the tokenizer puts <bos> before the text; the count says so (13 tokens plus <bos>,
    14 in all, as the tokens page counts), never 14 tokens "made of" the prompt's characters."""
    assert demo(n_all=14, added=1)[0] == ("notice.tokens_bos", {"chars": "1,234", "n": "13", "total": "14"})
    assert demo(n_all=14)[0] == ("notice.tokens", {"chars": "1,234", "n": "14"})
