"""The architecture lesson's "What to notice", branch by branch, without running the app or a model."""

from types import SimpleNamespace

import pytest

from course.notices import architecture as N

pytestmark = pytest.mark.unit


def big(n):
    return f"<{n:,}>"


def test_embedding_notice_compares_the_two_models():
    a = N.Side("SmolLM2", 49152, 576, 28311552, 134515008)
    b = N.Side("Gemma", 262144, 640, 167772160, 268098176)
    assert N.embedding_notice(a, b, big=big) == ("notice.embedding", dict(
        a="SmolLM2", a_share="21%", a_v="49,152", a_d=576, a_n="<28,311,552>", a_total="<134,515,008>",
        b="Gemma", b_share="63%", b_v="262,144", b_d=640, b_n="<167,772,160>", b_total="<268,098,176>"))


def test_differ_notice():
    assert N.differ_notice(n=7, total=12) == ("notice.differ", {"n": 7, "total": 12})


def test_moe_notice_only_with_experts():
    assert N.moe_notices(name="dense", n_experts=1, experts_per_token=1, total=10, active=10, big=big) == []
    assert N.moe_notices(name="Mixtral", n_experts=8, experts_per_token=2, total=46_700_000_000,
                         active=12_900_000_000, big=big) == [("notice.moe", dict(
                             name="Mixtral", total="<46,700,000,000>", active="<12,900,000,000>", share="28%", k=2,
                             e=8))]


def test_loss_notice_names_the_hardest_and_easiest_next_token():
    found = N.loss_notice(n=5, losses=[2.0, 7.25, 0.004, 7.25], mean=4.1234, label=lambda i: f"`t{i}`")
    assert found == ("notice.loss", dict(n=5, m=4, mean="4.12", hard="`t2`", hard_loss="7.25", easy="`t3`",
                                         easy_loss="0.00"))


def reply(model, ids=10, end=None, writes_question=False, partial=0):
    return SimpleNamespace(model=model, ids=tuple(range(ids)), end_token=end, writes_question=writes_question,
                           partial=partial)


def test_post_notices_stopped_ran_on_repeats_and_bytes():
    found = N.post_notices(reply("chat", ids=8, end="<|im_end|>"), reply("base", ids=36))
    assert found == [("notice.chat_stopped", dict(name="chat", n=7, end="`<|im_end|>`")),
                     ("notice.base_ran_on", dict(name="base", n=36))]
    found = N.post_notices(reply("chat", ids=36, partial=9), reply("base", ids=5, end="<eos>", writes_question=True,
                                                                   partial=2))
    assert found == [("notice.chat_ran_on", dict(name="chat", n=36)),
                     ("notice.base_stopped", dict(name="base", n=4, end="`<eos>`")),
                     ("notice.base_repeats", dict(name="base")),
                     ("notice.bytes", dict(name="chat", k=9, n=36)),
                     ("notice.bytes", dict(name="base", k=2, n=5))]


def test_every_key_is_in_every_catalog():
    from course import i18n
    produced = {"notice.embedding", "notice.differ", "notice.moe", "notice.loss", "notice.chat_stopped",
                "notice.chat_ran_on", "notice.base_stopped", "notice.base_ran_on", "notice.base_repeats",
                "notice.bytes"}
    for lang in ("en", "zh-Hant", "zh-Hans"):
        catalog = i18n.catalog(lang)
        assert [k for k in sorted(produced) if f"architecture.{k}" not in catalog] == [], lang
