"""Where "follow the teacher" classes live: plain Python, no Streamlit.

A class has a short code that students type or scan (``ABC234``), a teacher secret that only
the teacher's session holds (the store keeps its SHA-256, so neither the code nor the store's
contents can change the class), the teacher's current view (page, URL parameters, a version
that grows with every change, when it changed), follower heartbeats, and its created /
last-active times. The teacher is active while their tab is open (every teacher run
publishes, and the teacher's panel checks in with ``touch`` every few seconds); a teacher who
reloads or whose laptop slept takes the class back with the secret kept in their browser
(classroom/follow.py). Students are told when the teacher has been away ``AWAY_S``; the class
ends when the teacher ends it, or after ``idle_ttl_s`` (30 minutes) away: an abandoned class
does not run on for hours.

Two implementations pass the same tests (tests/test_class_store.py):

- ``MemoryStore``: in-process and thread-safe, the default (one server process, no setup);
- ``RedisStore``: in Redis (the ``redis`` client package), chosen by ``store()`` when
  ``DECODER_LAB_REDIS_URL`` is set, so several app processes behind one proxy share classes.
  Keys expire by Redis TTL, so an idle class disappears without anyone cleaning up.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

# No 0/O, 1/I/L, so a code read off a projector is typed right.
ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LEN = 6
HEARTBEAT_WINDOW_S = 10.0          # a follower counts while seen in the last 10 s
IDLE_TTL_S = 30 * 60               # a class whose teacher has been away for 30 minutes ends
AWAY_S = 60.0                      # students are told the teacher is away after a minute without them
SWEEP_EVERY_S = 60.0               # MemoryStore drops expired classes at most this often
REDIS_ENV = "DECODER_LAB_REDIS_URL"
_PREFIX = "decoder-lab:class:"


class ClassStoreError(Exception):
    """Base of the store's errors."""


class ClassGone(ClassStoreError):
    """No class with that code: it never existed, the teacher ended it, or it expired."""


class NotTeacher(ClassStoreError):
    """The secret does not belong to the class: only the teacher's session may change it."""


class StoreUnavailable(ClassStoreError):
    """The store cannot be reached (e.g. Redis is down)."""


@dataclass(frozen=True)
class View:
    """What the teacher shows: a page id, its URL parameters (strings: the prompt, the model,
    the page's controls, ``section`` when the teacher jumped to a part of the page), a version."""
    page: str
    params: dict[str, str]
    version: int
    updated_at: float


@dataclass(frozen=True)
class ClassInfo:
    code: str
    created_at: float
    last_active: float
    view: View | None


def normalize_code(text: str | None) -> str | None:
    """The class code in ``text`` ("abc 234", "ABC-234" -> "ABC234"), or None when it cannot be one."""
    if not isinstance(text, str):
        return None
    code = "".join(ch for ch in text.strip().upper() if ch not in " -_\t")
    if len(code) != CODE_LEN or any(ch not in ALPHABET for ch in code):
        return None
    return code


def new_code() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LEN))


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def _canon(params: dict) -> str:
    return json.dumps({str(k): str(v) for k, v in params.items()}, sort_keys=True, ensure_ascii=False)


class ClassStore:
    """The interface. ``now`` arguments exist for tests; they default to ``time.time()``."""

    idle_ttl_s: float
    heartbeat_window_s: float
    _clock: Callable[[], float]

    def create(self) -> tuple[str, str]:
        """A new class: (code, teacher secret)."""
        raise NotImplementedError

    def get(self, code: str) -> ClassInfo | None:
        """The class, or None when there is none (never existed, ended or expired)."""
        raise NotImplementedError

    def view(self, code: str) -> View | None:
        """The teacher's current view; raises ClassGone when there is no class."""
        info = self.get(code)
        if info is None:
            raise ClassGone(code)
        return info.view

    def publish(self, code: str, secret: str, page: str, params: dict[str, str]) -> View:
        """Set the teacher's view (the version grows only when page or params changed) and
        mark the class active. Raises ClassGone or NotTeacher."""
        raise NotImplementedError

    def heartbeat(self, code: str, follower: str) -> None:
        """A follower is following now. Raises ClassGone."""
        raise NotImplementedError

    def leave(self, code: str, follower: str) -> None:
        """A follower stopped following (no error when the class is gone)."""
        raise NotImplementedError

    def followers(self, code: str) -> int:
        """How many followers were seen in the last ``heartbeat_window_s`` seconds."""
        raise NotImplementedError

    def end(self, code: str, secret: str) -> None:
        """End the class. Raises ClassGone or NotTeacher."""
        raise NotImplementedError

    def is_teacher(self, code: str, secret: str) -> bool:
        raise NotImplementedError

    def touch(self, code: str, secret: str) -> None:
        """The teacher is here (their tab is open): mark the class active without changing its
        view. Raises ClassGone or NotTeacher."""
        raise NotImplementedError

    def away_s(self, info: ClassInfo) -> float:
        """How long the class's teacher has been away, by this store's clock (0 while active)."""
        return max(0.0, self._clock() - info.last_active)


@dataclass
class _Class:
    secret_hash: str
    created_at: float
    last_active: float
    view: View | None = None
    seen: dict[str, float] = field(default_factory=dict)


class MemoryStore(ClassStore):
    """Classes in this process (a dict behind a lock). A call looks at its own class only; the
    expired ones are swept out at most every ``sweep_every_s`` seconds, so the cost of a call does
    not grow with the number of classes."""

    def __init__(self, *, idle_ttl_s: float = IDLE_TTL_S, heartbeat_window_s: float = HEARTBEAT_WINDOW_S,
                 clock: Callable[[], float] = time.time, sweep_every_s: float = SWEEP_EVERY_S):
        self.idle_ttl_s = idle_ttl_s
        self.heartbeat_window_s = heartbeat_window_s
        self._clock = clock
        self._lock = threading.Lock()
        self._classes: dict[str, _Class] = {}
        self._sweep_every_s = sweep_every_s
        self._next_sweep = clock() + sweep_every_s

    def _live(self, code: str) -> _Class | None:
        """The class if it has not expired (caller holds the lock); drops it when it has, and
        every expired class when the sweep is due."""
        now = self._clock()
        if now >= self._next_sweep:
            self._next_sweep = now + self._sweep_every_s
            for other in [c for c, k in self._classes.items() if now - k.last_active >= self.idle_ttl_s]:
                del self._classes[other]
        klass = self._classes.get(code)
        if klass is not None and now - klass.last_active >= self.idle_ttl_s:
            del self._classes[code]
            return None
        return klass

    def __len__(self) -> int:
        """Classes held, expired ones not yet swept included."""
        with self._lock:
            return len(self._classes)

    def _owned(self, code: str, secret: str) -> _Class:
        klass = self._live(code)
        if klass is None:
            raise ClassGone(code)
        if not hmac.compare_digest(klass.secret_hash, _hash(secret or "")):
            raise NotTeacher(code)
        return klass

    def create(self) -> tuple[str, str]:
        secret = secrets.token_urlsafe(24)
        with self._lock:
            while True:
                code = new_code()
                if self._live(code) is None:
                    break
            now = self._clock()
            self._classes[code] = _Class(_hash(secret), now, now)
        return code, secret

    def get(self, code: str) -> ClassInfo | None:
        with self._lock:
            klass = self._live(code)
            if klass is None:
                return None
            return ClassInfo(code, klass.created_at, klass.last_active, klass.view)

    def publish(self, code: str, secret: str, page: str, params: dict[str, str]) -> View:
        params = {str(k): str(v) for k, v in params.items()}
        with self._lock:
            klass = self._owned(code, secret)
            now = self._clock()
            klass.last_active = now
            old = klass.view
            if old is None or old.page != page or old.params != params:
                klass.view = View(page, params, (old.version if old else 0) + 1, now)
            return klass.view

    def heartbeat(self, code: str, follower: str) -> None:
        with self._lock:
            klass = self._live(code)
            if klass is None:
                raise ClassGone(code)
            klass.seen[follower] = self._clock()

    def leave(self, code: str, follower: str) -> None:
        with self._lock:
            klass = self._live(code)
            if klass is not None:
                klass.seen.pop(follower, None)

    def followers(self, code: str) -> int:
        with self._lock:
            klass = self._live(code)
            if klass is None:
                return 0
            since = self._clock() - self.heartbeat_window_s
            for follower in [f for f, at in klass.seen.items() if at < since]:
                del klass.seen[follower]
            return len(klass.seen)

    def end(self, code: str, secret: str) -> None:
        with self._lock:
            self._owned(code, secret)
            del self._classes[code]

    def is_teacher(self, code: str, secret: str) -> bool:
        with self._lock:
            try:
                self._owned(code, secret)
            except ClassStoreError:
                return False
            return True

    def touch(self, code: str, secret: str) -> None:
        with self._lock:
            self._owned(code, secret).last_active = self._clock()


# The checks and the change of a publish / end in one atomic step on the Redis server.
_PUBLISH = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('HGET', KEYS[1], 'secret') ~= ARGV[1] then return -2 end
redis.call('HSET', KEYS[1], 'active', ARGV[4])
local version = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if redis.call('HGET', KEYS[1], 'page') ~= ARGV[2] or redis.call('HGET', KEYS[1], 'params') ~= ARGV[3] then
  version = version + 1
  redis.call('HSET', KEYS[1], 'page', ARGV[2], 'params', ARGV[3], 'version', version, 'updated', ARGV[4])
end
redis.call('EXPIRE', KEYS[1], ARGV[5])
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('EXPIRE', KEYS[2], ARGV[5]) end
return version
"""
_END = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('HGET', KEYS[1], 'secret') ~= ARGV[1] then return -2 end
redis.call('DEL', KEYS[1], KEYS[2])
return 1
"""
_TOUCH = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('HGET', KEYS[1], 'secret') ~= ARGV[1] then return -2 end
redis.call('HSET', KEYS[1], 'active', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('EXPIRE', KEYS[2], ARGV[3]) end
return 1
"""
_HEARTBEAT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('EXPIRE', KEYS[2], redis.call('TTL', KEYS[1]))
return 1
"""


class RedisStore(ClassStore):
    """Classes in Redis: a hash ``decoder-lab:class:<code>`` (secret hash, times, view) and a
    sorted set ``...:<code>:seen`` (follower -> last heartbeat), both with the idle TTL."""

    def __init__(self, client, *, idle_ttl_s: float = IDLE_TTL_S, heartbeat_window_s: float = HEARTBEAT_WINDOW_S,
                 clock: Callable[[], float] = time.time):
        import redis
        self._errors = (redis.RedisError, OSError)
        self._r = client
        self.idle_ttl_s = idle_ttl_s
        self.heartbeat_window_s = heartbeat_window_s
        self._clock = clock
        self._publish = client.register_script(_PUBLISH)
        self._end = client.register_script(_END)
        self._heartbeat = client.register_script(_HEARTBEAT)
        self._touch = client.register_script(_TOUCH)

    @classmethod
    def from_url(cls, url: str, **kwargs) -> "RedisStore":
        import redis
        client = redis.Redis.from_url(url, decode_responses=True, socket_timeout=5, socket_connect_timeout=5,
                                      health_check_interval=30)
        return cls(client, **kwargs)

    def _ttl(self) -> int:
        return max(1, int(round(self.idle_ttl_s)))

    @staticmethod
    def _keys(code: str) -> list[str]:
        return [_PREFIX + code, _PREFIX + code + ":seen"]

    def _call(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except self._errors as exc:
            raise StoreUnavailable(str(exc)) from exc

    @staticmethod
    def _check(result: int, code: str) -> int:
        if result == -1:
            raise ClassGone(code)
        if result == -2:
            raise NotTeacher(code)
        return result

    def create(self) -> tuple[str, str]:
        secret = secrets.token_urlsafe(24)
        now = repr(self._clock())
        while True:
            code = new_code()
            key = self._keys(code)[0]
            if self._call(self._r.hsetnx, key, "secret", _hash(secret)):
                break
        pipe = self._r.pipeline()
        pipe.hset(key, mapping={"created": now, "active": now, "version": 0})
        pipe.expire(key, self._ttl())
        self._call(pipe.execute)
        return code, secret

    def get(self, code: str) -> ClassInfo | None:
        data = self._call(self._r.hgetall, self._keys(code)[0])
        if not data or "secret" not in data:
            return None
        view = None
        if data.get("page") is not None:
            view = View(data["page"], json.loads(data.get("params") or "{}"), int(data.get("version") or 0),
                        float(data.get("updated") or 0))
        return ClassInfo(code, float(data.get("created") or 0), float(data.get("active") or 0), view)

    def publish(self, code: str, secret: str, page: str, params: dict[str, str]) -> View:
        params = {str(k): str(v) for k, v in params.items()}
        now = self._clock()
        version = self._check(self._call(self._publish, keys=self._keys(code),
                                         args=[_hash(secret or ""), page, _canon(params), repr(now), self._ttl()]), code)
        info = self.get(code)
        if info is None or info.view is None:
            raise ClassGone(code)
        return info.view if info.view.version == version else View(page, params, version, now)

    def heartbeat(self, code: str, follower: str) -> None:
        self._check(self._call(self._heartbeat, keys=self._keys(code), args=[follower, repr(self._clock())]), code)

    def leave(self, code: str, follower: str) -> None:
        self._call(self._r.zrem, self._keys(code)[1], follower)

    def followers(self, code: str) -> int:
        seen = self._keys(code)[1]
        pipe = self._r.pipeline()
        pipe.zremrangebyscore(seen, "-inf", f"({self._clock() - self.heartbeat_window_s!r}")
        pipe.zcard(seen)
        return int(self._call(pipe.execute)[1])

    def end(self, code: str, secret: str) -> None:
        self._check(self._call(self._end, keys=self._keys(code), args=[_hash(secret or "")]), code)

    def is_teacher(self, code: str, secret: str) -> bool:
        stored = self._call(self._r.hget, self._keys(code)[0], "secret")
        return stored is not None and hmac.compare_digest(stored, _hash(secret or ""))

    def touch(self, code: str, secret: str) -> None:
        self._check(self._call(self._touch, keys=self._keys(code),
                               args=[_hash(secret or ""), repr(self._clock()), self._ttl()]), code)


_STORE: ClassStore | None = None
_STORE_LOCK = threading.Lock()


def store() -> ClassStore:
    """This process's store: Redis when DECODER_LAB_REDIS_URL is set, else in memory."""
    global _STORE
    with _STORE_LOCK:
        if _STORE is None:
            url = os.environ.get(REDIS_ENV, "").strip()
            _STORE = RedisStore.from_url(url) if url else MemoryStore()
        return _STORE


def reset_store(new: ClassStore | None = None) -> None:
    """Replace this process's store (tests)."""
    global _STORE
    with _STORE_LOCK:
        _STORE = new
