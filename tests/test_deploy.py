"""deploy/: two app processes behind a real nginx (sticky sessions) with one real redis-server,
all on loopback (deploy/cluster.py). A teacher's session on one process and a student's on the
other, both through nginx over Streamlit's websocket: the student joins by the class code,
lands on the teacher's page with the teacher's prompt, and follows the teacher's next page.

Skipped with the reason when nginx or redis-server is missing, except under CI=true, where it
fails (`apt-get install -y nginx redis-server`). AppTest-level follow behaviour is in
tests/test_classroom.py, the 2-second timing in a real browser in tests/browser/test_follow.py.
"""

from __future__ import annotations

import os
import re
import time
import urllib.request

import pytest

from course import i18n
from deploy import cluster as deploy
from tools.protocol import Client

pytestmark = pytest.mark.server

if deploy.missing():
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        raise RuntimeError(f"{deploy.missing()} missing under CI: apt-get install -y nginx redis-server")
    pytest.skip(f"{', '.join(deploy.missing())} not found: install them with "
                "`apt-get install -y nginx redis-server` to run the deploy test", allow_module_level=True)

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


def test_a_student_on_another_process_follows_the_teacher_through_nginx():
    with deploy.cluster(apps=2) as c:
        # nginx is sticky: the same cookie always reaches the same process; two cookies that
        # reach the two processes put the teacher on one and the student on the other.
        routes = deploy.routes(c.base, 2)
        (teacher_up, teacher_cookie), (student_up, student_cookie) = routes.items()
        assert {teacher_up, student_up} == {f"127.0.0.1:{p}" for p in c.app_ports}
        assert all(deploy.upstream_of(c.base, teacher_cookie) == teacher_up for _ in range(5))
        response = urllib.request.urlopen(f"{c.base}/", timeout=10)
        assert COOKIE in (response.headers["Set-Cookie"] or "")

        with StickyClient(c.base, teacher_cookie) as teacher, StickyClient(c.base, student_cookie) as student:
            ok(teacher.open("home", {"lang": "en", "prompt": PROMPT}))
            started = ok(teacher.click("class_start", "home", {"lang": "en"}))
            codes = [m.group(1) for text in started.markdown for m in CODE.finditer(text)]
            assert codes, started.markdown
            code = codes[0]
            ok(teacher.open("tokens", {"lang": "en"}))

            # The student (on the other process, in Traditional Chinese) joins by the link.
            joined = ok(student.open("home", {"lang": "zh-Hant", "class": code}))
            zh = i18n.catalog("zh-Hant")
            following = zh["classroom.following"].split("{code}")[0]
            assert any(following in text and zh["nav.tokens"] in text for text in joined.markdown), joined.markdown
            assert student.titles[-1] == zh["nav.tokens"], student.titles      # on the teacher's page
            from classroom.store import RedisStore
            store = RedisStore.from_url(c.redis_url)
            view = store.view(code)
            assert view.page == "tokens" and view.params["prompt"] == PROMPT

            # The teacher moves on; the student's next poll follows.
            ok(teacher.open("attention", {"lang": "en"}))
            assert store.view(code).page == "attention"
            deadline = time.monotonic() + 60
            while True:
                polled = ok(student.open("tokens", {"lang": "zh-Hant", "class": code}))
                if any(following in text and zh["nav.attention"] in text for text in polled.markdown):
                    break
                time.sleep(0.5)
                assert time.monotonic() < deadline
            assert student.titles[-1] == zh["nav.attention"], student.titles
            assert store.followers(code) == 1          # the student's poll is a heartbeat
            teacher_sees = ok(teacher.open("attention", {"lang": "en"}))
            assert any("**1**" in text for text in teacher_sees.markdown), teacher_sees.markdown
