"""classroom/limits.py: a sliding window per client for wrong class codes and new classes."""

from __future__ import annotations

import pytest

from classroom import limits

pytestmark = pytest.mark.unit


def test_a_key_is_blocked_after_its_limit_and_free_again_when_the_window_slides():
    now = [0.0]
    lim = limits.Limiter(3, 60, clock=lambda: now[0])
    for t in (0, 10, 20):
        now[0] = t
        assert not lim.blocked("a")
        lim.add("a")
    assert lim.blocked("a") and not lim.blocked("b"), "one key's events do not count for another"
    assert lim.wait_s("a") == pytest.approx(40)    # the event at 0 leaves the window at 60
    now[0] = 59.9
    assert lim.blocked("a")
    now[0] = 60
    assert not lim.blocked("a") and lim.wait_s("a") == 0
    lim.add("a")
    assert lim.blocked("a")                        # 10, 20, 60
    assert not lim.blocked(None) and lim.wait_s(None) == 0
    lim.add(None)                                  # an unknown client counts nothing


def test_the_limiter_forgets_the_oldest_clients_first():
    lim = limits.Limiter(1, 60, clock=lambda: 0.0, max_keys=3)
    for key in "abcd":
        lim.add(key)
    assert not lim.blocked("a"), "a was forgotten to make room for d"
    assert lim.blocked("d") and lim.blocked("c")


def test_the_limits_leave_room_for_a_class_behind_one_router():
    """30 students behind one address each mistype a code once: none is blocked; one session
    guessing is stopped after JOIN_FAILS."""
    assert limits.JOIN_FAILS_PER_ADDRESS >= 30 + limits.JOIN_FAILS
    assert 5 <= limits.JOIN_FAILS <= 20 and limits.JOIN_WINDOW_S >= 60
