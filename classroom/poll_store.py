"""A class's question ("Predict, then see" asked of the class): plain Python, no Streamlit.

The teacher asks the current question (its public form, course.predict.core.Question.public:
no answer in it), following students answer it (anonymous, an optional nickname), the
teacher sees how many answered and, on reveal, every answer; students see the teacher's
reveal only once it is there. A class holds one question at a time: asking again replaces
it and its answers. Everything lives beside the class in its store (memory or Redis) and
ends with it: a call on a class that is gone raises ClassGone and drops what was kept.

Kept apart from classroom/store.py (the class itself) so the two change independently;
``polls(store)`` gives the implementation that matches the store.
"""

from __future__ import annotations

import json
import threading
import time
import weakref
from dataclasses import dataclass

from classroom import store as class_store
from classroom.store import ClassGone, NotTeacher

MAX_ANSWERS = 500              # answers one question keeps (a class is a room, not the internet)
MAX_NICK = 24
MAX_ANSWER_CHARS = 200


@dataclass(frozen=True)
class Poll:
    id: int                    # grows with every question asked in the class
    question: dict             # Question.public()
    state: str                 # "open" or "revealed"
    reveal: dict | None        # what the teacher's reveal shows (answer, why, the class's counts)
    asked_at: float


def clean_answer(answer: dict) -> dict:
    """An answer as kept: its value (an option's index, a number, or short text), an optional
    nickname (trimmed), the student's language."""
    value = answer.get("value")
    if isinstance(value, str):
        value = value[:MAX_ANSWER_CHARS]
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("an answer is a number or text")
    nick = str(answer.get("nick") or "").strip()[:MAX_NICK]
    return {"value": value, "nick": nick, "lang": str(answer.get("lang") or "")[:8], "at": float(answer.get("at") or 0)}


class Polls:
    """The interface; ``who`` is a student's anonymous id (their follow id)."""

    def ask(self, code: str, secret: str, question: dict) -> Poll:
        raise NotImplementedError

    def current(self, code: str) -> Poll | None:
        raise NotImplementedError

    def answer(self, code: str, poll_id: int, who: str, answer: dict) -> bool:
        """Keep (or replace) ``who``'s answer while the question is open; False when it is not
        (revealed, replaced, closed). Raises ClassGone."""
        raise NotImplementedError

    def count(self, code: str, poll_id: int) -> int:
        raise NotImplementedError

    def answers(self, code: str, secret: str, poll_id: int) -> list[dict]:
        """Every answer, oldest first (the teacher only)."""
        raise NotImplementedError

    def reveal(self, code: str, secret: str, poll_id: int, reveal: dict) -> Poll:
        raise NotImplementedError

    def close(self, code: str, secret: str) -> None:
        raise NotImplementedError


class MemoryPolls(Polls):
    def __init__(self, store: class_store.MemoryStore):
        self._store = store
        self._lock = threading.Lock()
        self._polls: dict[str, Poll] = {}
        self._answers: dict[str, dict[str, dict]] = {}
        self._next: dict[str, int] = {}

    def _live(self, code: str) -> None:
        if self._store.get(code) is None:
            self._drop(code)
            raise ClassGone(code)

    def _drop(self, code: str) -> None:
        self._polls.pop(code, None)
        self._answers.pop(code, None)
        self._next.pop(code, None)

    def _teacher(self, code: str, secret: str) -> None:
        self._live(code)
        if not self._store.is_teacher(code, secret):
            raise NotTeacher(code)

    def ask(self, code, secret, question):
        with self._lock:
            self._teacher(code, secret)
            n = self._next.get(code, 0) + 1
            self._next[code] = n
            poll = Poll(n, json.loads(json.dumps(question)), "open", None, time.time())
            self._polls[code] = poll
            self._answers[code] = {}
            return poll

    def current(self, code):
        with self._lock:
            try:
                self._live(code)
            except ClassGone:
                return None
            return self._polls.get(code)

    def answer(self, code, poll_id, who, answer):
        kept = clean_answer(answer)
        with self._lock:
            self._live(code)
            poll = self._polls.get(code)
            if poll is None or poll.id != poll_id or poll.state != "open":
                return False
            answers = self._answers[code]
            if who not in answers and len(answers) >= MAX_ANSWERS:
                return False
            answers.pop(who, None)
            answers[who] = kept
            return True

    def count(self, code, poll_id):
        with self._lock:
            poll = self._polls.get(code)
            return len(self._answers.get(code, {})) if poll is not None and poll.id == poll_id else 0

    def answers(self, code, secret, poll_id):
        with self._lock:
            self._teacher(code, secret)
            poll = self._polls.get(code)
            if poll is None or poll.id != poll_id:
                return []
            return [dict(a) for a in self._answers[code].values()]

    def reveal(self, code, secret, poll_id, reveal):
        with self._lock:
            self._teacher(code, secret)
            poll = self._polls.get(code)
            if poll is None or poll.id != poll_id:
                raise ClassGone(code)
            poll = Poll(poll.id, poll.question, "revealed", json.loads(json.dumps(reveal)), poll.asked_at)
            self._polls[code] = poll
            return poll

    def close(self, code, secret):
        with self._lock:
            self._teacher(code, secret)
            self._polls.pop(code, None)
            self._answers.pop(code, None)


# Redis: the question in a hash ``decoder-lab:class:<code>:poll`` and the answers in a hash
# ``...:<code>:answers`` (who -> JSON), each with the class's TTL; the checks and the change in
# one step on the server.
_ANSWER = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('HGET', KEYS[2], 'id') ~= ARGV[1] or redis.call('HGET', KEYS[2], 'state') ~= 'open' then return 0 end
if redis.call('HEXISTS', KEYS[3], ARGV[2]) == 0 and redis.call('HLEN', KEYS[3]) >= tonumber(ARGV[4]) then return 0 end
redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
redis.call('EXPIRE', KEYS[3], redis.call('TTL', KEYS[1]))
return 1
"""
_ASK = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('HGET', KEYS[1], 'secret') ~= ARGV[1] then return -2 end
local n = redis.call('HINCRBY', KEYS[1], 'polls', 1)
redis.call('DEL', KEYS[2], KEYS[3])
redis.call('HSET', KEYS[2], 'id', n, 'question', ARGV[2], 'state', 'open', 'asked', ARGV[3])
redis.call('EXPIRE', KEYS[2], redis.call('TTL', KEYS[1]))
return n
"""
_REVEAL = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('HGET', KEYS[1], 'secret') ~= ARGV[1] then return -2 end
if redis.call('HGET', KEYS[2], 'id') ~= ARGV[2] then return -1 end
redis.call('HSET', KEYS[2], 'state', 'revealed', 'reveal', ARGV[3])
redis.call('EXPIRE', KEYS[2], redis.call('TTL', KEYS[1]))
return 1
"""


class RedisPolls(Polls):
    def __init__(self, store: class_store.RedisStore):
        self._store = store
        r = store._r
        self._r = r
        self._answer = r.register_script(_ANSWER)
        self._ask = r.register_script(_ASK)
        self._reveal = r.register_script(_REVEAL)

    @staticmethod
    def _keys(code: str) -> list[str]:
        base = class_store._PREFIX + code
        return [base, base + ":poll", base + ":answers"]

    def _call(self, fn, *args, **kwargs):
        return self._store._call(fn, *args, **kwargs)

    def ask(self, code, secret, question):
        now = time.time()
        n = self._store._check(self._call(self._ask, keys=self._keys(code),
                                          args=[class_store._hash(secret or ""), json.dumps(question), repr(now)]),
                               code)
        return Poll(int(n), question, "open", None, now)

    def current(self, code):
        base, poll_key, answers_key = self._keys(code)
        pipe = self._r.pipeline()
        pipe.exists(base)
        pipe.hgetall(poll_key)
        alive, data = self._call(pipe.execute)
        if not alive:                       # the class ended (or expired): its question ends with it
            if data:
                self._call(self._r.delete, poll_key, answers_key)
            return None
        if not data or "id" not in data:
            return None
        reveal = json.loads(data["reveal"]) if data.get("reveal") else None
        return Poll(int(data["id"]), json.loads(data["question"]), data.get("state", "open"), reveal,
                    float(data.get("asked") or 0))

    def answer(self, code, poll_id, who, answer):
        kept = json.dumps(clean_answer(answer), ensure_ascii=False)
        result = self._call(self._answer, keys=self._keys(code), args=[str(poll_id), who, kept, MAX_ANSWERS])
        return self._store._check(result, code) == 1

    def count(self, code, poll_id):
        poll_key, answers_key = self._keys(code)[1:]
        pipe = self._r.pipeline()
        pipe.hget(poll_key, "id")
        pipe.hlen(answers_key)
        current, n = self._call(pipe.execute)
        return int(n) if current == str(poll_id) else 0

    def answers(self, code, secret, poll_id):
        if not self._store.is_teacher(code, secret):
            raise NotTeacher(code) if self._store.get(code) is not None else ClassGone(code)
        poll = self.current(code)
        if poll is None or poll.id != poll_id:
            return []
        rows = [json.loads(v) for v in self._call(self._r.hvals, self._keys(code)[2])]
        return sorted(rows, key=lambda a: a.get("at", 0))

    def reveal(self, code, secret, poll_id, reveal):
        self._store._check(self._call(self._reveal, keys=self._keys(code),
                                      args=[class_store._hash(secret or ""), str(poll_id), json.dumps(reveal)]), code)
        poll = self.current(code)
        if poll is None:
            raise ClassGone(code)
        return poll

    def close(self, code, secret):
        if not self._store.is_teacher(code, secret):
            raise NotTeacher(code) if self._store.get(code) is not None else ClassGone(code)
        self._call(self._r.delete, *self._keys(code)[1:])


_POLLS: "weakref.WeakKeyDictionary[class_store.ClassStore, Polls]" = weakref.WeakKeyDictionary()
_POLLS_LOCK = threading.Lock()


def polls(store: class_store.ClassStore | None = None) -> Polls:
    """The question store beside ``store`` (default: this process's class store)."""
    store = class_store.store() if store is None else store     # (an empty MemoryStore is falsy: len 0)
    with _POLLS_LOCK:
        found = _POLLS.get(store)
        if found is None:
            found = RedisPolls(store) if isinstance(store, class_store.RedisStore) else MemoryPolls(store)
            _POLLS[store] = found
        return found
