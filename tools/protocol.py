"""A Streamlit session driven over its websocket, as the browser drives it (no browser).

Used by the server's own warm-up (server/warmup.py: it opens every lesson once at start-up),
tests/test_server_load.py (a class opening pages at once) and bench/bench_class.py (latency of
a class). Streamlit is pinned (requirements.txt) and this speaks its 1.67
protocol: a BackMsg.rerun_script with the page's url_path as page_name (and widget states
for a changed widget), then ForwardMsgs until script_finished.

    with Client(base) as student:
        first = student.open("attention", {"lang": "en", "prompt": "The cat"})
        again = student.set_text("prompt", "A new prompt", "attention", {"lang": "en"})
        first.seconds, first.exceptions, again.payload_bytes
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from urllib.parse import urlencode

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
