"""deploy/: app processes behind a real nginx (sticky sessions) with one real redis-server, all
under a real supervisord, all on loopback (deploy/cluster.py).

- A teacher's session on one process and a student's on the other, both through nginx over
  Streamlit's websocket: the student joins by the class code, lands on the teacher's page with
  the teacher's prompt, and follows the teacher's next page.
- The student's app process is killed (SIGKILL, as the kernel's OOM killer would): supervisord
  starts it again, the student reconnects through nginx and keeps following, and nginx, Redis
  and the other app process never stop.
- Redis is killed mid-class: supervisord starts it again, it reads the class back from its
  append-only file, and teacher and student go on.

Skipped with the reason when nginx, redis-server or supervisord is missing, except under
CI=true, where it fails (`apt-get install -y nginx redis-server`; supervisor is in
requirements.txt). AppTest-level follow behaviour is in tests/test_classroom.py, the 2-second
timing in a real browser in tests/browser/test_follow.py; the deploy files that need no process
(compose, Kubernetes, constraints) are checked in tests/test_deploy_files.py.
"""

from __future__ import annotations

import http.server
import os
import re
import signal
import time
import urllib.request

import pytest

from course import i18n
from deploy import cluster as deploy
from tools.protocol import Client

pytestmark = pytest.mark.server

if deploy.missing():
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        raise RuntimeError(f"{deploy.missing()} missing under CI: apt-get install -y nginx redis-server; "
                           "pip install -r requirements.txt -c constraints.txt")
    pytest.skip(f"{', '.join(deploy.missing())} not found: install them with "
                "`apt-get install -y nginx redis-server` and `pip install -r requirements.txt -c constraints.txt` "
                "to run the deploy tests", allow_module_level=True)

COOKIE = deploy.ROUTE_COOKIE
PROMPT = "The teacher's prompt: a cat sat on a mat."
RUN_TIMEOUT = 300
CODE = re.compile(r"`([A-Z2-9]{6})`")


class StickyClient(Client):
    """A protocol client that carries nginx's route cookie (so it lands on a chosen process)
    and notes the page titles it sees."""

    def __init__(self, base: str, cookie: str, timeout: float = RUN_TIMEOUT):
        super().__init__(base, timeout=timeout, cookie=f"{COOKIE}={cookie}")
        self.ws = _Sniffer(self.ws)

    @property
    def titles(self) -> list[str]:
        """The h1 headings (page titles) of every run so far, oldest first."""
        return self.ws.titles


class _Sniffer:
    """The websocket, noting each page title (an h1 heading) that goes by."""

    def __init__(self, ws):
        self._ws = ws
        self.titles: list[str] = []

    def recv(self):
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
        raw = self._ws.recv()
        msg = ForwardMsg()
        msg.ParseFromString(raw)
        if msg.WhichOneof("type") == "delta" and msg.delta.WhichOneof("type") == "new_element":
            element = msg.delta.new_element
            if element.WhichOneof("type") == "heading" and element.heading.tag == "h1":
                self.titles.append(element.heading.body)
        return raw

    def __getattr__(self, name):
        return getattr(self._ws, name)


def ok(result):
    assert result.ok, (result.status, result.exceptions, result.problems)
    return result


def start_class(teacher: StickyClient) -> str:
    """The teacher starts a class on the home page with PROMPT and opens the tokens lesson; its code."""
    ok(teacher.open("home", {"lang": "en", "prompt": PROMPT}))
    started = ok(teacher.click("class_start", "home", {"lang": "en"}))
    codes = [m.group(1) for text in started.markdown for m in CODE.finditer(text)]
    assert codes, started.markdown
    ok(teacher.open("tokens", {"lang": "en"}))
    return codes[0]


ZH = i18n.catalog("zh-Hant")
FOLLOWING = ZH["classroom.following"].split("{code}")[0]


def follows(result, page: str) -> bool:
    """The student's run says it follows the class, on ``page``."""
    return any(FOLLOWING in text and ZH[f"nav.{page}"] in text for text in result.markdown)


def poll_until_on(student: StickyClient, code: str, page: str, timeout: float = 60):
    """The student's polls (each a rerun with the class in the URL, as the browser's) until the
    student is on the teacher's ``page``; the last run."""
    deadline = time.monotonic() + timeout
    while True:
        polled = ok(student.open("tokens", {"lang": "zh-Hant", "class": code}))
        if follows(polled, page):
            assert student.titles[-1] == ZH[f"nav.{page}"], student.titles
            return polled
        assert time.monotonic() < deadline, polled.markdown
        time.sleep(0.5)


def internal(headers, c) -> list[str]:
    """Response headers that name an internal address (an app process's port) or an upstream."""
    return [f"{k}: {v}" for k, v in headers.items()
            if "upstream" in k.lower() or "127.0.0.1" in v or any(f":{port}" in v for port in c.app_ports)]


def test_a_student_on_another_process_follows_the_teacher_through_nginx():
    with deploy.cluster(apps=2) as c:
        # nginx is sticky: the same cookie always reaches the same process; two cookies that
        # reach the two processes put the teacher on one and the student on the other.
        routes = deploy.routes(c, 2)
        (teacher_up, teacher_cookie), (student_up, student_cookie) = routes.items()
        assert {teacher_up, student_up} == {f"127.0.0.1:{p}" for p in c.app_ports}
        assert all(deploy.upstream_of(c, teacher_cookie) == teacher_up for _ in range(5))
        response = urllib.request.urlopen(f"{c.base}/", timeout=10)
        assert COOKIE in (response.headers["Set-Cookie"] or "")
        # No response tells a client where the app processes are, nor nginx's version.
        for path in ("/", "/_stcore/health", "/_stcore/host-config"):
            request = urllib.request.Request(f"{c.base}{path}", headers={"Cookie": f"{COOKIE}={student_cookie}"})
            with urllib.request.urlopen(request, timeout=10) as response:
                assert not internal(response.headers, c), (path, dict(response.headers))
                assert response.headers.get("Server", "nginx") == "nginx", dict(response.headers)

        with StickyClient(c.base, teacher_cookie) as teacher, StickyClient(c.base, student_cookie) as student:
            code = start_class(teacher)

            # The student (on the other process, in Traditional Chinese) joins by the link.
            joined = ok(student.open("home", {"lang": "zh-Hant", "class": code}))
            assert follows(joined, "tokens"), joined.markdown
            assert student.titles[-1] == ZH["nav.tokens"], student.titles      # on the teacher's page
            from classroom.store import RedisStore
            store = RedisStore.from_url(c.redis_url)
            view = store.view(code)
            assert view.page == "tokens" and view.params["prompt"] == PROMPT

            # The teacher moves on; the student's next poll follows.
            ok(teacher.open("attention", {"lang": "en"}))
            assert store.view(code).page == "attention"
            poll_until_on(student, code, "attention")
            assert store.followers(code) == 1          # the student's poll is a heartbeat
            teacher_sees = ok(teacher.open("attention", {"lang": "en"}))
            assert any("**1**" in text for text in teacher_sees.markdown), teacher_sees.markdown


def test_a_killed_app_process_is_restarted_and_its_student_reconnects_and_follows():
    with deploy.cluster(apps=2) as c:
        (teacher_up, teacher_cookie), (student_up, student_cookie) = deploy.routes(c, 2).items()
        student_app = f"app{c.app_ports.index(int(student_up.rsplit(':', 1)[1]))}"
        teacher_app = f"app{c.app_ports.index(int(teacher_up.rsplit(':', 1)[1]))}"
        with StickyClient(c.base, teacher_cookie) as teacher:
            code = start_class(teacher)
            student = StickyClient(c.base, student_cookie)
            try:
                assert follows(ok(student.open("home", {"lang": "zh-Hant", "class": code})), "tokens")
                before = c.pids()
                assert all(before.values()), before

                # The student's process dies at once, as the kernel's OOM killer kills it.
                os.kill(before[student_app], signal.SIGKILL)
                killed = time.monotonic()
                student.timeout = 30
                student.ws.settimeout(30)
                with pytest.raises(Exception):      # the student's websocket is gone with it
                    student.open("tokens", {"lang": "zh-Hant", "class": code})
            finally:
                student.close()

            # The browser reconnects (same route cookie): nginx passes it to a live process.
            student = StickyClient(c.base, student_cookie)
            try:
                reconnected = time.monotonic() - killed
                back = ok(student.open("tokens", {"lang": "zh-Hant", "class": code}))
                assert follows(back, "tokens"), back.markdown
                ok(teacher.open("attention", {"lang": "en"}))
                poll_until_on(student, code, "attention")
                following = time.monotonic() - killed
            finally:
                student.close()
            # nginx logs a websocket when it closes: the student's two, before and after the kill.
            deadline = time.monotonic() + 10
            while len(streams := [line for line in deploy.access_log(c.run_dir).read_text("utf-8").splitlines()
                                  if "/_stcore/stream" in line and f"route={student_cookie} " in line]) < 2:
                assert time.monotonic() < deadline, streams
                time.sleep(0.1)
            print(f"student following again {following:.1f} s after the kill (websocket reconnected after "
                  f"{reconnected:.2f} s to {'the other' if deploy.answered_by(streams[-1]) == teacher_up else 'its own'} "
                  "process)")

            # supervisord started the killed process again; nothing else stopped.
            new_pid = c.wait_running(student_app, timeout=240, other_than=before[student_app])
            print(f"{student_app} answering again {time.monotonic() - killed:.1f} s after the kill")
            after = c.pids()
            assert after[student_app] == new_pid != before[student_app]
            for name in ("nginx", "redis", teacher_app):
                assert after[name] == before[name], (name, before, after)
            assert {info["state"] for info in c.processes().values()} == {"RUNNING"}, c.processes()
            assert c.supervisor.poll() is None
            # The route cookie reaches the restarted process again, and the teacher's session
            # (on the other process) never noticed.
            assert deploy.upstream_of(c, student_cookie) == student_up
            ok(teacher.open("tokens", {"lang": "en"}))
            with StickyClient(c.base, student_cookie) as student:
                poll_until_on(student, code, "tokens")


def test_a_redis_restart_mid_class_keeps_the_class():
    from classroom.store import RedisStore, StoreUnavailable

    with deploy.cluster(apps=1) as c:
        with StickyClient(c.base, "teacher") as teacher, StickyClient(c.base, "student") as student:
            code = start_class(teacher)
            assert follows(ok(student.open("home", {"lang": "zh-Hant", "class": code})), "tokens")
            before = c.pids()

            # Redis dies at once (SIGKILL: no shutdown save); supervisord starts it again and it
            # reads the class back from its append-only file.
            os.kill(before["redis"], signal.SIGKILL)
            killed = time.monotonic()
            c.wait_running("redis", timeout=60, other_than=before["redis"])
            store = RedisStore.from_url(c.redis_url)
            deadline = time.monotonic() + 30
            while True:
                try:
                    view = store.view(code)
                    break
                except StoreUnavailable:            # still loading its append-only file
                    assert time.monotonic() < deadline
                    time.sleep(0.2)
            print(f"redis back with the class {time.monotonic() - killed:.2f} s after the kill")
            assert view is not None and view.page == "tokens" and view.params["prompt"] == PROMPT
            assert (run_files := sorted(p.name for p in c.run_dir.glob("appendonlydir/*"))), run_files

            # The class goes on: the teacher moves on, the student follows.
            ok(teacher.open("attention", {"lang": "en"}))
            assert store.view(code).page == "attention"
            poll_until_on(student, code, "attention")
            after = c.pids()
            assert after["redis"] != before["redis"]
            assert {name: after[name] for name in ("nginx", "app0")} == {name: before[name] for name in ("nginx", "app0")}


class _Ok(http.server.BaseHTTPRequestHandler):
    """A stand-in app process for the limits test: "ok" to every GET, at once."""

    protocol_version = "HTTP/1.1"

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


# One browser's first load of the course, as Chromium made it through deploy/'s nginx (home,
# then the tokens lesson; nginx.conf.template's comment): 143 static files and 10 page requests.
FIRST_LOAD = ([f"/static/js/chunk-{i}.js" for i in range(143)]
              + ["/", "/favicon.png", "/tokens", "/tokens", "/tokens"] + ["/_stcore/health", "/_stcore/host-config"] * 2
              + ["/_stcore/health"])


def test_a_class_behind_one_address_stays_under_nginx_limits_and_a_runaway_client_does_not(tmp_path):
    """30 browsers behind one school NAT (all from 127.0.0.1) open the course at the same moment
    through the real nginx config: no request is refused. Then one client asks for pages as
    fast as it can: past the burst, nginx answers 429."""
    import concurrent.futures
    import http.client
    import subprocess
    import threading

    class Stub(http.server.ThreadingHTTPServer):
        request_queue_size = 1024           # nginx opens up to a connection per request in flight
        daemon_threads = True

    stub = Stub(("127.0.0.1", 0), _Ok)
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    for sub in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (tmp_path / sub).mkdir()
        os.chmod(tmp_path / sub, 0o777)
    os.chmod(tmp_path, 0o711)
    port = deploy.free_port()
    conf = tmp_path / "nginx.conf"
    conf.write_text(deploy.render_config(tmp_path, f"127.0.0.1:{port}", [stub.server_address[1]]), "utf-8")
    nginx = subprocess.Popen([deploy.NGINX, "-p", str(tmp_path), "-c", str(conf), "-e", str(tmp_path / "e.log")])
    try:
        deadline = time.monotonic() + 20
        while not deploy._answers(f"http://127.0.0.1:{port}/_stcore/health"):
            assert nginx.poll() is None and time.monotonic() < deadline, (tmp_path / "e.log").read_text()
            time.sleep(0.1)

        def browser(i: int, paths: list[str], connections: int = 6) -> list[int]:
            """One browser: its route cookie, ``paths`` over up to ``connections`` keep-alive connections."""
            def one_connection(share: list[str]) -> list[int]:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                statuses = []
                for path in share:
                    conn.request("GET", path, headers={"Cookie": f"{COOKIE}=browser{i}"})
                    response = conn.getresponse()
                    response.read()
                    statuses.append(response.status)
                    if response.getheader("Connection", "").lower() == "close":
                        conn.close()
                        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                conn.close()
                return statuses
            with concurrent.futures.ThreadPoolExecutor(connections) as pool:
                return [s for part in pool.map(one_connection, [paths[k::connections] for k in range(connections)])
                        for s in part]

        start = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(30) as pool:
            statuses = [s for part in pool.map(lambda i: browser(i, FIRST_LOAD), range(30)) for s in part]
        took = time.monotonic() - start
        print(f"30 first loads from one address: {len(statuses)} requests in {took:.1f} s, "
              f"{statuses.count(429)} refused")
        assert len(statuses) == 30 * len(FIRST_LOAD) and set(statuses) == {200}, (took, statuses.count(429))

        # The same address (loopback) now asks for 3,000 pages as fast as it can: nginx serves
        # what is left of the burst of 600 plus 20 a second, and refuses the rest.
        start = time.monotonic()
        runaway = browser(99, ["/_stcore/health"] * 3000, connections=8)
        took_runaway = time.monotonic() - start
        print(f"a runaway client: {runaway.count(200)} served, {runaway.count(429)} refused in {took_runaway:.1f} s")
        assert set(runaway) == {200, 429} and runaway.count(429) > 1000
        assert runaway.count(200) <= 600 + 20 * (time.monotonic() - start + took + 2)
    finally:
        nginx.terminate()
        nginx.wait(timeout=20)
        stub.shutdown()
