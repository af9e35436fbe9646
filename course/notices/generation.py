"""What to notice on the generation lesson, from this run's numbers.

Each notice is a (catalog key under "generation.", fields) pair; a field that is itself such a
pair is translated first (a count in words, how a token was chosen), and a list of pairs is one
bullet whose sentences run together (join_sentences). Sizes in bytes come already formatted
(``kb``, ``per``, ``full``); ``big`` writes a large count in words in the page's language.
"""

from __future__ import annotations

from collections.abc import Callable

Notice = tuple[str, dict]
Bullet = Notice | list[Notice]


def count(kind: str, n: int) -> Notice:
    """'1 token' / '24 tokens' (kind: tokens, new, positions, passes, kv_heads)."""
    return (f"count.{kind}_one" if n == 1 else f"count.{kind}"), dict(n=f"{n:,}")


def how_chosen(*, greedy: bool, rank: int, seed: int) -> Notice:
    """How the step's token was chosen: greedily, or drawn (its rank among the candidates)."""
    return ("how.greedy", {}) if greedy else ("how.sampled", dict(rank=rank, seed=seed))


def start_notice(*, n_prompt: int) -> Notice:
    """Step 0: nothing generated yet."""
    return ("notice.start_one" if n_prompt == 1 else "notice.start"), dict(n=f"{n_prompt:,}")


def step_notices(*, step: int, n_prompt: int, token: str, p_model: float, how: Notice, finished: bool, stop: str | None,
                 max_new: int, cached: int, n_layers: int, kb: str, per: str, full: str, ctx: int,
                 macs_with: float, macs_without: float, big: Callable[[float], str]) -> list[Notice]:
    """Step ``step`` (>= 1): the token chosen (``token``, its label; ``p_model`` the model's own
    probability of it), why generation ended when it did (``finished``: this is the last step;
    ``stop``: "eos" or the limit), what the cache holds (``cached`` positions), and the work the
    cache saves at this step (multiply-adds with and without it)."""
    out = [("notice.step", dict(s=step, token=token, p=f"{p_model:.1%}", n=count("tokens", n_prompt + step - 1),
                                how=how))]
    if finished:
        out.append(("notice.eos" if stop == "eos" else "notice.length",
                    dict(s=step, max=count("new", max_new), token=token)))
    out.append(("notice.kv", dict(n=count("positions", cached), layers=n_layers, kb=kb, per=per, full=full,
                                  ctx=f"{ctx:,}")))
    if step > 1:
        out.append(("notice.work", dict(s=step, n=f"{cached:,}", on=big(macs_with), off=big(macs_without),
                                        ratio=f"{macs_without / macs_with:.1f}")))
    return out


def time_notice(*, n: int, on_ms: float, off_ms: float, identical: bool, params: int,
                big: Callable[[float], str]) -> Notice:
    """The live timing over ``n`` tokens: the median step with and without the cache."""
    key = "notice.time_faster" if off_ms > 1.2 * on_ms else "notice.time_close"
    return key, dict(n=count("tokens", n), on=f"{on_ms:,.0f}", off=f"{off_ms:,.0f}", ratio=f"{off_ms / on_ms:.1f}",
                     params=big(params), same=("notice.same", {}) if identical else ("notice.not_same", {}))


def spec_notices(*, draft_layers: int, n_layers: int, draft_len: int, accepted: int, proposed: int, rate: float,
                 full_passes: int, n_new: int, cost: float, greedy: bool, equal: bool) -> list[Bullet]:
    """Speculative decoding: how many guesses the draft got accepted (``rate``), what a guess
    costs (``cost``, a share of a full pass), and, when greedy, whether the output is plain
    greedy decoding's (``equal``)."""
    out: list[Bullet] = [[
        ("notice.spec", dict(k=draft_layers, layers=n_layers, n=count("tokens", draft_len), a=accepted, p=proposed,
                             rate=f"{rate:.0%}", passes=count("passes", full_passes), t=count("tokens", n_new),
                             cost=f"{cost:.0%}")),
        ("notice.spec_weak" if rate < 0.5 else "notice.spec_strong", {}),
    ]]
    if greedy:
        out.append(("notice.spec_equal" if equal else "notice.spec_not_equal", dict(t=count("tokens", n_new))))
    return out
