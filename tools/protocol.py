"""A Streamlit session driven over its websocket, as the browser drives it (no browser).

Used by the server's own warm-up (server/warmup.py: it opens every lesson once at start-up),
tests/test_server_load.py (a class opening pages at once), bench/bench_class.py (latency of
a class) and bench/bench_follow.py (students following a teacher). Streamlit is pinned
(requirements.txt) and this speaks its 1.67 protocol: a BackMsg.rerun_script with the page's
url_path as page_name (and widget states for a changed widget), then ForwardMsgs until
script_finished.

``Client`` waits for the run it asked for. ``LiveClient`` is an open tab instead: a thread
reads every ForwardMsg as it comes, and the fragment timers run as the browser's do
(Streamlit 1.67's frontend, App.handleAutoRerun: a ``st.fragment(run_every=...)`` sends an
``auto_rerun`` message; the browser then sends a rerun_script with that fragment_id,
is_auto_rerun, the current page's script hash and query string every ``interval`` seconds,
keeps a running timer when the same fragment and interval come again, drops a fragment's
timer on ``stop_auto_rerun``, and drops every timer when a full run starts). Each run the
server makes is noted (``Run``), whoever asked for it.

    with Client(base) as student:
        first = student.open("attention", {"lang": "en", "prompt": "The cat"})
        again = student.set_text("prompt", "A new prompt", "attention", {"lang": "en"})
        first.seconds, first.exceptions, again.payload_bytes
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode

HOME = "home"


@dataclass
class Result:
    """One script run as the client saw it."""
    page: str
    seconds: float = 0.0
    status: str = ""                                     # ScriptFinishedStatus name, "" if none came
    exceptions: list[str] = field(default_factory=list)  # "Type: message" of each exception element
    problems: list[str] = field(default_factory=list)    # page not found, compile error, time out
    payload_bytes: int = 0                               # bytes of every ForwardMsg of the run
    markdown: list[str] = field(default_factory=list)    # the body of every markdown element
    progress: list[tuple[int, str]] = field(default_factory=list)   # (percent, text) of every progress bar update

    @property
    def ok(self) -> bool:
        return self.status == "FINISHED_SUCCESSFULLY" and not self.exceptions and not self.problems


def _elements(forward_msg):
    """The elements a ForwardMsg delta adds (a new element, or the elements of a transient one)."""
    delta = forward_msg.delta
    kind = delta.WhichOneof("type")
    if kind == "new_element":
        return [delta.new_element]
    if kind == "new_transient":
        return list(getattr(delta.new_transient, "elements", []))
    return []


class Client:
    """One browser tab's session on a running server (``base`` like http://127.0.0.1:8501)."""

    def __init__(self, base: str, timeout: float = 300.0, cookie: str | None = None):
        """``cookie``: a Cookie header's value to send with the websocket handshake (a load
        balancer's sticky-route cookie, say)."""
        import websocket  # websocket-client, pinned in requirements.txt

        self.timeout = timeout
        url = base.replace("http://", "ws://", 1) + "/_stcore/stream"
        self.ws = websocket.create_connection(url, subprotocols=["streamlit"], timeout=timeout,
                                              suppress_origin=True, cookie=cookie)
        self.widget_ids: dict[str, str] = {}   # widget key -> element id, from the runs seen so far

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.ws.close()

    def open(self, page: str, query: dict | None = None) -> Result:
        """Run ``page`` with the URL parameters ``query`` (a first view, or a page switch)."""
        return self._rerun(page, query or {}, widgets=())

    def set_text(self, key: str, value: str, page: str, query: dict | None = None) -> Result:
        """Type ``value`` into the text widget with ``key`` (seen in an earlier run) and rerun."""
        from streamlit.proto.WidgetStates_pb2 import WidgetState

        widget = WidgetState(id=self.widget_ids[key], string_value=value)
        return self._rerun(page, query or {}, widgets=(widget,))

    def set_slider(self, key: str, value: float, page: str, query: dict | None = None) -> Result:
        """Move the (single-value) slider with ``key`` to ``value`` and rerun."""
        from streamlit.proto.WidgetStates_pb2 import WidgetState

        widget = WidgetState(id=self.widget_ids[key])
        widget.double_array_value.data.append(float(value))
        return self._rerun(page, query or {}, widgets=(widget,))

    def click(self, key: str, page: str, query: dict | None = None) -> Result:
        """Press the button with ``key`` (seen in an earlier run) and rerun."""
        from streamlit.proto.WidgetStates_pb2 import WidgetState

        widget = WidgetState(id=self.widget_ids[key], trigger_value=True)
        return self._rerun(page, query or {}, widgets=(widget,))

    def _rerun(self, page: str, query: dict, widgets) -> Result:
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        back = BackMsg()
        back.rerun_script.query_string = urlencode(query)
        back.rerun_script.page_name = "" if page == HOME else page
        for widget in widgets:
            back.rerun_script.widget_states.widgets.append(widget)
        result = Result(page)
        start = time.monotonic()
        deadline = start + self.timeout
        self.ws.send_binary(back.SerializeToString())
        while time.monotonic() < deadline:
            raw = self.ws.recv()
            result.payload_bytes += len(raw)
            msg = ForwardMsg()
            msg.ParseFromString(raw)
            kind = msg.WhichOneof("type")
            if kind == "delta":
                for element in _elements(msg):
                    what = element.WhichOneof("type")
                    if what == "exception":
                        result.exceptions.append(f"{element.exception.type}: {element.exception.message}".strip())
                    elif what == "markdown":
                        result.markdown.append(element.markdown.body)
                    elif what == "progress":
                        result.progress.append((element.progress.value, element.progress.text))
                    elif what is not None:
                        widget_id = getattr(getattr(element, what), "id", "")
                        if isinstance(widget_id, str) and widget_id.startswith("$$ID-"):
                            self.widget_ids[widget_id.rsplit("-", 1)[-1]] = widget_id
            elif kind == "page_not_found":
                result.problems.append("page not found")
            elif kind == "session_event" and msg.session_event.WhichOneof("type") == "script_compilation_exception":
                result.problems.append("script compilation error")
            elif kind == "script_finished":
                status = ForwardMsg.ScriptFinishedStatus.Name(msg.script_finished)
                if status != "FINISHED_EARLY_FOR_RERUN":      # a rerun the script asked for runs on
                    result.status = status
                    result.seconds = time.monotonic() - start
                    return result
        result.problems.append(f"no script_finished within {self.timeout:g} s")
        result.seconds = time.monotonic() - start
        return result


# The status of a run whose script_finished never came: the next run's new_session did.
# Streamlit 1.67 drops a finished run's script_finished when a rerun request (a fragment timer's)
# reaches the session while its ScriptRunner is shutting down: the session starts a new
# ScriptRunner and ignores the old one's last events (streamlit/runtime/app_session.py,
# AppSession.request_rerun, whose comment describes it; streamlit issue 9921). Everything the run
# drew did arrive; a browser skips only that run's cleanup of elements it did not draw again.
UNFINISHED = "NO_SCRIPT_FINISHED"


@dataclass
class Run:
    """One script run a LiveClient saw, from its new_session to its script_finished (or, when
    Streamlit dropped that, to the next run's new_session: status UNFINISHED)."""
    started: float                       # time.time() when its new_session came
    page_hash: str
    fragment: bool                       # a fragment run (the follow poll), not a full run
    finished: float | None = None
    fragment_ids: list[str] = field(default_factory=list)   # the fragments a fragment run ran
    status: str = ""
    query: dict = field(default_factory=dict)      # the URL's query after the run
    exceptions: list[str] = field(default_factory=list)
    markdown: list[str] = field(default_factory=list)
    alerts: list[tuple[str, str]] = field(default_factory=list)   # (format: "SUCCESS", "INFO"..., body)
    widgets: list[str] = field(default_factory=list)     # the keys of the widgets it drew


class LiveClient:
    """One open browser tab on a running server: reads every ForwardMsg in a thread of its own,
    runs the fragment timers as the browser does, and notes every run (``runs``). ``open`` asks
    for a page as a link opens it; ``wait_for`` waits for a finished full run that satisfies a
    test. Times are time.time() (one clock for every client of a benchmark)."""

    def __init__(self, base: str, timeout: float = 300.0, cookie: str | None = None):
        """``cookie``: as Client's (deploy/'s nginx sends a tab with a route cookie to that process)."""
        import websocket  # websocket-client, pinned in requirements.txt
        # Imported here, before this tab's threads start: two threads importing streamlit at once deadlock.
        from streamlit.proto import BackMsg_pb2, ForwardMsg_pb2, WidgetStates_pb2  # noqa: F401

        url = base.replace("http://", "ws://", 1) + "/_stcore/stream"
        self.ws = websocket.create_connection(url, subprotocols=["streamlit"], timeout=timeout,
                                              suppress_origin=True, cookie=cookie)
        self.timeout = timeout
        self.pages: dict[str, str] = {}          # page script hash -> url path ("" for the default page)
        self.page_hash = ""
        self.query: dict[str, str] = {}
        self.runs: list[Run] = []
        self.fragment_reruns = 0                 # auto reruns this tab's timers sent
        self.timers: dict[str, tuple[float, float]] = {}    # fragment id -> (interval, next due)
        self.widget_ids: dict[str, str] = {}
        self.widgets: dict[str, object] = {}     # widget key -> its element's proto (options, range), the latest seen
        self.widget_fragments: dict[str, str] = {}   # widget key -> the fragment that drew it ("" outside one)
        self.error: BaseException | None = None
        self._current: Run | None = None
        self._cond = threading.Condition()
        self._closed = False
        self._send_lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._tick, daemon=True).start()

    def __enter__(self) -> LiveClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        try:
            self.ws.close()
        except Exception:  # noqa: BLE001 - closing a socket the server may have closed
            pass

    def page(self, page_hash: str | None = None) -> str | None:
        """The page id of a script hash (this tab's current page by default): "home" for the default page."""
        path = self.pages.get(self.page_hash if page_hash is None else page_hash)
        return None if path is None else (path or HOME)

    def _send(self, back) -> None:
        with self._send_lock:
            self.ws.send_binary(back.SerializeToString())

    def open(self, page: str, query: dict | None = None) -> float:
        """Ask for ``page`` with the URL parameters ``query`` as a link or a click on the
        navigation does; returns when it was asked (time.time())."""
        from streamlit.proto.BackMsg_pb2 import BackMsg

        back = BackMsg()
        back.rerun_script.query_string = urlencode(query or {})
        hashes = {(path or HOME): h for h, path in self.pages.items()}
        if page in hashes:
            back.rerun_script.page_script_hash = hashes[page]
        else:
            back.rerun_script.page_name = "" if page == HOME else page
        asked = time.time()
        self._send(back)
        return asked

    def set_widget(self, key: str, **value) -> float:
        """Change the widget with ``key`` (seen in an earlier run) as the browser does, e.g.
        ``set_widget("prompt", string_value="...")``, ``set_widget("layer", double_array_value=[3])``
        (a slider), ``set_widget("class_start", trigger_value=True)`` (a button); a rerun of the
        current page. Returns when it was asked (time.time())."""
        from streamlit.proto.BackMsg_pb2 import BackMsg

        back = BackMsg()
        back.rerun_script.query_string = urlencode(self.query)
        back.rerun_script.page_script_hash = self.page_hash
        back.rerun_script.widget_states.widgets.append(self._widget_state(key, value))
        asked = time.time()
        self._send(back)
        return asked

    def _widget_state(self, key: str, value: dict):
        """Widget ``key``'s state as the browser sends it (``value``: field -> value, e.g.
        ``{"double_array_value": [3]}`` or ``{"trigger_value": True}``)."""
        from streamlit.proto.WidgetStates_pb2 import WidgetState

        widget = WidgetState(id=self.widget_ids[key])
        for name, v in value.items():
            if name.endswith("_array_value"):
                getattr(widget, name).data.extend(v)
            else:
                setattr(widget, name, v)
        return widget

    def set_fragment_widgets(self, fragment_id: str, widgets: dict[str, dict]) -> float:
        """Rerun fragment ``fragment_id`` with these widgets' values, as a click on a button
        inside a fragment does (``widgets``: key -> value as in set_widget, e.g.
        ``{"answer": {"double_array_value": [3]}, "send": {"trigger_value": True}}``). Returns
        when it was asked (time.time())."""
        from streamlit.proto.BackMsg_pb2 import BackMsg

        back = BackMsg()
        back.rerun_script.query_string = urlencode(self.query)
        back.rerun_script.page_script_hash = self.page_hash
        back.rerun_script.fragment_id = fragment_id
        for key, value in widgets.items():
            back.rerun_script.widget_states.widgets.append(self._widget_state(key, value))
        asked = time.time()
        self._send(back)
        return asked

    def _rerun_fragment(self, fragment_id: str) -> None:
        from streamlit.proto.BackMsg_pb2 import BackMsg

        back = BackMsg()
        back.rerun_script.query_string = urlencode(self.query)
        back.rerun_script.page_script_hash = self.page_hash
        back.rerun_script.fragment_id = fragment_id
        back.rerun_script.is_auto_rerun = True
        self.fragment_reruns += 1
        self._send(back)

    def _tick(self) -> None:
        """The browser's setInterval for each fragment with run_every."""
        while True:
            with self._cond:
                if self._closed:
                    return
                now = time.time()
                due = [fid for fid, (_, at) in self.timers.items() if at <= now]
                for fid in due:
                    interval, at = self.timers[fid]
                    self.timers[fid] = (interval, at + interval)
                wait = min((at for _, at in self.timers.values()), default=now + 0.05) - now
            for fid in due:
                try:
                    self._rerun_fragment(fid)
                except Exception as exc:  # noqa: BLE001 - the tab is gone
                    self.error = exc
                    return
            time.sleep(min(max(wait, 0.001), 0.05))

    def _read(self) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        try:
            while not self._closed:
                raw = self.ws.recv()
                if not raw:
                    continue
                msg = ForwardMsg()
                msg.ParseFromString(raw)
                self._handle(msg)
        except Exception as exc:  # noqa: BLE001 - reported by wait_for
            if not self._closed:
                self.error = exc
            with self._cond:
                self._cond.notify_all()

    def _handle(self, msg) -> None:
        kind = msg.WhichOneof("type")
        now = time.time()
        with self._cond:
            if kind == "new_session":
                if self._current is not None:
                    self._close(self._current, UNFINISHED, now)
                fragments = list(msg.metadata.run.fragment_ids)
                if not fragments:
                    self.timers.clear()          # a full run: the browser drops every timer
                    self.page_hash = msg.new_session.page_script_hash
                self._current = Run(now, msg.new_session.page_script_hash, bool(fragments), fragment_ids=fragments)
            elif kind == "navigation":
                for page in msg.navigation.app_pages:
                    self.pages[page.page_script_hash] = page.url_pathname
                if msg.navigation.page_script_hash:      # the page st.navigation ran (new_session may name the main script)
                    self.page_hash = msg.navigation.page_script_hash
                    if self._current is not None:
                        self._current.page_hash = self.page_hash
            elif kind == "page_info_changed":
                self.query = dict(parse_qsl(msg.page_info_changed.query_string, keep_blank_values=True))
            elif kind == "auto_rerun":
                fid, interval = msg.auto_rerun.fragment_id, msg.auto_rerun.interval
                if fid and self.timers.get(fid, (None,))[0] != interval:
                    self.timers[fid] = (interval, now + interval)
            elif kind == "stop_auto_rerun":
                for fid in msg.stop_auto_rerun.fragment_ids:
                    self.timers.pop(fid, None)
            elif kind == "delta" and self._current is not None:
                for element in _elements(msg):
                    what = element.WhichOneof("type")
                    if what == "exception":
                        self._current.exceptions.append(f"{element.exception.type}: {element.exception.message}")
                    elif what == "markdown":
                        self._current.markdown.append(element.markdown.body)
                    elif what == "alert":
                        from streamlit.proto.Alert_pb2 import Alert

                        self._current.alerts.append((Alert.Format.Name(element.alert.format), element.alert.body))
                    elif what is not None:
                        widget_id = getattr(getattr(element, what), "id", "")
                        if isinstance(widget_id, str) and widget_id.startswith("$$ID-"):
                            key = widget_id.rsplit("-", 1)[-1]
                            self.widget_ids[key] = widget_id
                            self.widgets[key] = getattr(element, what)
                            self.widget_fragments[key] = msg.delta.fragment_id
                            self._current.widgets.append(key)
            elif kind == "script_finished" and self._current is not None:
                from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

                self._close(self._current, ForwardMsg.ScriptFinishedStatus.Name(msg.script_finished), now)

    def _close(self, run: Run, status: str, now: float) -> None:
        """``run`` has ended (with self._cond held): note it and wake the waiters."""
        self._current = None
        run.finished, run.status, run.query = now, status, dict(self.query)
        self.runs.append(run)
        self._cond.notify_all()

    def wait_for(self, test, since: float = 0.0, timeout: float | None = None, fragments: bool = False) -> Run | None:
        """The first finished full run (finished after ``since``) for which ``test(run, client)``
        holds, waiting up to ``timeout`` seconds; None when none came. ``fragments``: fragment
        runs count too."""
        deadline = time.time() + (self.timeout if timeout is None else timeout)
        with self._cond:
            while True:
                for run in self.runs:
                    if (fragments or not run.fragment) and run.finished >= since and test(run, self):
                        return run
                left = deadline - time.time()
                if left <= 0 or self._closed or self.error is not None:
                    return None
                self._cond.wait(min(left, 0.5))
