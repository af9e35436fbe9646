"""The class store: the same tests on the in-process MemoryStore and on RedisStore against a
real ``redis-server`` (started here on a free loopback port, stopped by its own pid).

Without redis-server the Redis cases are skipped with the reason, except under CI=true,
where they fail: install it with ``apt-get install -y redis-server``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
from contextlib import contextmanager

import pytest

from classroom import store as cs
from deploy.cluster import wait_for_redis
from tools.browser import free_port

REDIS_SERVER = shutil.which("redis-server") or ("/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server") else None)


@contextmanager
def redis_server():
    """A throwaway redis-server on a free loopback port (no persistence); yields its URL."""
    if REDIS_SERVER is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("redis-server is missing under CI: install it with `apt-get install -y redis-server`")
        pytest.skip("redis-server not found: install it with `apt-get install -y redis-server` to run the Redis store tests")
    port = free_port()
    folder = tempfile.mkdtemp(prefix="decoder-lab-redis-")
    proc = subprocess.Popen([REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", folder, "--protected-mode", "yes"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        wait_for_redis(url, proc, time.monotonic() + 20)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def redis_url():
    with redis_server() as url:
        yield url


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.server)])   # redis: a redis-server process
def make_store(request):
    """make_store(**kwargs) -> a fresh, empty store of the parametrized kind."""
    if request.param == "memory":
        return lambda **kw: cs.MemoryStore(**kw)
    url = request.getfixturevalue("redis_url")

    def make(**kw):
        store = cs.RedisStore.from_url(url, **kw)
        store._r.flushdb()
        return store
    return make


def test_codes_are_short_and_unambiguous():
    codes = {cs.new_code() for _ in range(500)}
    assert len(codes) > 490
    for code in codes:
        assert len(code) == cs.CODE_LEN and set(code) <= set(cs.ALPHABET)
    assert not set("01OIL") & set(cs.ALPHABET)
    assert cs.normalize_code(" abc-234 ") == "ABC234"
    for bad in (None, "", "ABC23", "ABC2345", "ABC10O", "ab cd", "<script>", "ＡＢＣ２３４"):
        assert cs.normalize_code(bad) is None, bad


def test_create_publish_and_read(make_store):
    store = make_store()
    code, secret = store.create()
    assert cs.normalize_code(code) == code and len(secret) >= 24
    info = store.get(code)
    assert info is not None and info.view is None and info.created_at <= info.last_active
    v1 = store.publish(code, secret, "attention", {"layer": "3", "prompt": "猫坐在垫子上", "model": "gemma-3-270m"})
    assert (v1.page, v1.version) == ("attention", 1)
    assert store.view(code) == v1
    assert store.view(code).params == {"layer": "3", "prompt": "猫坐在垫子上", "model": "gemma-3-270m"}
    # The same view again does not bump the version (every teacher run publishes).
    assert store.publish(code, secret, "attention", {"model": "gemma-3-270m", "layer": "3", "prompt": "猫坐在垫子上"}).version == 1
    v2 = store.publish(code, secret, "attention", {"layer": "4", "prompt": "猫坐在垫子上", "model": "gemma-3-270m"})
    v3 = store.publish(code, secret, "heads", {"layer": "4", "prompt": "猫坐在垫子上", "model": "gemma-3-270m"})
    assert (v2.version, v3.version) == (2, 3)
    assert store.view(code).page == "heads" and store.view(code).updated_at >= v1.updated_at


def test_only_the_secret_changes_the_class(make_store):
    store = make_store()
    code, secret = store.create()
    store.publish(code, secret, "home", {})
    for wrong in ("", code, secret[:-1] + ("A" if secret[-1] != "A" else "B"), "x" * 40):
        with pytest.raises(cs.NotTeacher):
            store.publish(code, wrong, "tokens", {"prompt": "hijack"})
        with pytest.raises(cs.NotTeacher):
            store.end(code, wrong)
        assert not store.is_teacher(code, wrong)
    assert store.is_teacher(code, secret)
    assert store.view(code).page == "home"
    # Another class's secret does not work either.
    other, other_secret = store.create()
    with pytest.raises(cs.NotTeacher):
        store.publish(code, other_secret, "tokens", {})
    assert other != code


def test_unknown_and_ended_classes(make_store):
    store = make_store()
    assert store.get("ABC234") is None
    with pytest.raises(cs.ClassGone):
        store.view("ABC234")
    with pytest.raises(cs.ClassGone):
        store.publish("ABC234", "secret", "home", {})
    with pytest.raises(cs.ClassGone):
        store.heartbeat("ABC234", "s1")
    assert store.followers("ABC234") == 0
    code, secret = store.create()
    store.end(code, secret)
    assert store.get(code) is None
    with pytest.raises(cs.ClassGone):
        store.end(code, secret)
    store.leave(code, "s1")        # no error


def test_followers_counted_by_recent_heartbeats(make_store):
    store = make_store(heartbeat_window_s=0.6)
    code, secret = store.create()
    assert store.followers(code) == 0
    for follower in ("a", "b", "c"):
        store.heartbeat(code, follower)
    store.heartbeat(code, "a")
    assert store.followers(code) == 3
    store.leave(code, "b")
    assert store.followers(code) == 2
    time.sleep(0.8)
    store.heartbeat(code, "c")
    assert store.followers(code) == 1


def test_idle_classes_expire(make_store):
    store = make_store(idle_ttl_s=1)
    code, secret = store.create()
    kept, kept_secret = store.create()
    time.sleep(0.6)
    store.publish(kept, kept_secret, "home", {})      # the teacher's run keeps a class alive
    time.sleep(0.7)
    assert store.get(code) is None
    assert store.get(kept) is not None
    with pytest.raises(cs.ClassGone):
        store.publish(code, secret, "home", {})
    time.sleep(1.3)
    assert store.get(kept) is None


def test_concurrent_publish_and_follow(make_store):
    """Many threads at once: versions are never lost or repeated, heartbeats all count."""
    store = make_store()
    code, secret = store.create()
    errors = []

    def teacher(i):
        try:
            for n in range(20):
                store.publish(code, secret, "sampling", {"t": f"{i}-{n}"})
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    def student(i):
        try:
            for _ in range(20):
                store.heartbeat(code, f"s{i}")
                store.view(code)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=teacher, args=(i,)) for i in range(4)]
    threads += [threading.Thread(target=student, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    assert store.view(code).version == 80
    assert store.followers(code) == 8


def test_redis_down_is_a_store_error(redis_url):
    store = cs.RedisStore.from_url(f"redis://127.0.0.1:{free_port()}/0")
    with pytest.raises(cs.StoreUnavailable):
        store.create()
    with pytest.raises(cs.StoreUnavailable):
        store.get("ABC234")


def test_store_follows_the_environment(monkeypatch, redis_url):
    monkeypatch.delenv(cs.REDIS_ENV, raising=False)
    cs.reset_store()
    try:
        assert isinstance(cs.store(), cs.MemoryStore)
        assert cs.store() is cs.store()
        cs.reset_store()
        monkeypatch.setenv(cs.REDIS_ENV, redis_url)
        assert isinstance(cs.store(), cs.RedisStore)
        code, _ = cs.store().create()
        assert cs.RedisStore.from_url(redis_url).get(code) is not None    # another process would see it
    finally:
        cs.reset_store()


def test_the_teachers_touch_keeps_the_class_alive_and_only_the_teacher_can_touch(make_store):
    """The teacher's open tab (classroom/follow.py checks in every few seconds) keeps a class whose
    view does not change alive; a student cannot, and a class nobody touched ends."""
    store = make_store(idle_ttl_s=1)
    code, secret = store.create()
    left, left_secret = store.create()
    for _ in range(3):
        time.sleep(0.45)
        store.touch(code, secret)
    assert store.get(code) is not None, "touched every 0.45 s: still here after 1.35 s"
    assert store.get(left) is None, "nobody touched it for 1.35 s: gone"
    with pytest.raises(cs.NotTeacher):
        store.touch(code, "not-the-secret")
    with pytest.raises(cs.ClassGone):
        store.touch(left, left_secret)
    info = store.get(code)
    assert 0 <= store.away_s(info) < 0.5
    assert store.away_s(cs.ClassInfo(code, info.created_at, info.last_active - 75, info.view)) >= 75


def test_memory_store_does_not_sweep_every_class_on_every_call():
    """A call looks at its own class only; the expired ones go at the next sweep (every
    sweep_every_s), so a call's cost does not grow with the number of classes."""
    now = [1000.0]
    store = cs.MemoryStore(idle_ttl_s=100, clock=lambda: now[0], sweep_every_s=300)
    codes = [store.create()[0] for _ in range(500)]
    now[0] = 1050
    kept, kept_secret = store.create()
    now[0] = 1120                                  # the first 500 have expired; no sweep is due before 1300
    assert store.get(codes[0]) is None             # its own class: dropped at once
    assert store.get(kept) is not None
    assert len(store) == 500, "499 expired classes wait for the sweep: this call did not look at them"
    for now[0] in (1140, 1230):                    # the teacher's tab checks in
        store.touch(kept, kept_secret)
    now[0] = 1300                                  # the sweep is due
    store.get("AAAAAA")
    assert len(store) == 1 and store.get(kept) is not None
