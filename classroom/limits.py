"""Limits on what one client may do to the classes: plain Python, no Streamlit.

A class code has 31^6 (about 890 million) values, so guessing one is already slow; these limits
make it slower still and keep one visitor from filling the store with classes:

- wrong class codes: ``JOIN_FAILS`` per ``JOIN_WINDOW_S`` for one session, and a larger number
  for one network address (a whole class sits behind one school router, and students mistype);
- new classes: ``CREATES`` per ``CREATE_WINDOW_S`` for one network address (or one session when
  the address is not known, e.g. on localhost).

The counts live in this process (several app processes each count their own share).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Hashable

JOIN_FAILS, JOIN_FAILS_PER_ADDRESS, JOIN_WINDOW_S = 10, 60, 60.0
CREATES, CREATE_WINDOW_S = 20, 3600.0
MAX_KEYS = 10_000          # clients remembered at most (the oldest are forgotten first)


class Limiter:
    """At most ``limit`` events per ``window_s`` seconds for each key (a sliding window)."""

    def __init__(self, limit: int, window_s: float, *, clock: Callable[[], float] = time.monotonic,
                 max_keys: int = MAX_KEYS):
        self.limit, self.window_s, self._clock, self._max_keys = limit, window_s, clock, max_keys
        self._events: dict[Hashable, deque] = {}
        self._lock = threading.Lock()

    def _recent(self, key: Hashable, now: float) -> deque:
        events = self._events.get(key)
        if events is None:
            if len(self._events) >= self._max_keys:
                self._events.pop(next(iter(self._events)))
            events = self._events[key] = deque()
        while events and now - events[0] >= self.window_s:
            events.popleft()
        return events

    def blocked(self, key: Hashable) -> bool:
        """True when ``key`` has used up its events in the current window."""
        if key is None:
            return False
        with self._lock:
            return len(self._recent(key, self._clock())) >= self.limit

    def add(self, key: Hashable) -> None:
        """Count one event for ``key`` (None counts nothing)."""
        if key is None:
            return
        with self._lock:
            now = self._clock()
            self._recent(key, now).append(now)

    def wait_s(self, key: Hashable) -> float:
        """Seconds until ``key`` may act again (0 when it may now)."""
        if key is None:
            return 0.0
        with self._lock:
            now = self._clock()
            events = self._recent(key, now)
            return 0.0 if len(events) < self.limit else max(0.0, self.window_s - (now - events[0]))


join_fails_session = Limiter(JOIN_FAILS, JOIN_WINDOW_S)
join_fails_address = Limiter(JOIN_FAILS_PER_ADDRESS, JOIN_WINDOW_S)
creates = Limiter(CREATES, CREATE_WINDOW_S)
