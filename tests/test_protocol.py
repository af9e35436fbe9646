"""tools/protocol.py's LiveClient, the simulated browser tab of the follow benchmark: how it
tells the runs it saw apart, from the ForwardMsgs a server sends (no server here)."""

from __future__ import annotations

import threading

from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from tools.protocol import UNFINISHED, LiveClient


def tab() -> LiveClient:
    """A LiveClient with no connection: only its message handling."""
    client = object.__new__(LiveClient)
    client.pages, client.page_hash, client.query, client.runs, client.timers = {}, "", {}, [], {}
    client.widget_ids, client.widgets, client.widget_fragments = {}, {}, {}
    client._current, client._cond = None, threading.Condition()
    return client


def new_session(page: str, fragments: tuple[str, ...] = ()) -> ForwardMsg:
    msg = ForwardMsg()
    msg.new_session.page_script_hash = page
    msg.metadata.run.fragment_ids.extend(fragments)
    return msg


def finished(status: int) -> ForwardMsg:
    msg = ForwardMsg()
    msg.script_finished = status
    return msg


def query(string: str) -> ForwardMsg:
    msg = ForwardMsg()
    msg.page_info_changed.query_string = string
    return msg


def test_runs_end_with_their_script_finished():
    client = tab()
    for msg in (new_session("p1"), query("a=1"), finished(ForwardMsg.FINISHED_SUCCESSFULLY),
                new_session("p1", ("poll",)), finished(ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY)):
        client._handle(msg)
    assert [(r.fragment, r.status, r.query) for r in client.runs] == [
        (False, "FINISHED_SUCCESSFULLY", {"a": "1"}), (True, "FINISHED_FRAGMENT_RUN_SUCCESSFULLY", {"a": "1"})]
    assert client.page_hash == "p1"


def test_a_run_whose_script_finished_never_came_ends_when_the_next_begins():
    """Streamlit can drop a full run's script_finished (a fragment timer's rerun reaching a
    ScriptRunner that is shutting down): the run is noted as UNFINISHED, with the query it drew,
    and the fragment run after it as usual."""
    client = tab()
    for msg in (new_session("p1", ("poll",)), query("a=2"), finished(ForwardMsg.FINISHED_EARLY_FOR_RERUN),
                new_session("p1"), new_session("p1", ("poll",)), finished(ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY)):
        client._handle(msg)
    assert [(r.fragment, r.status, r.query) for r in client.runs] == [
        (True, "FINISHED_EARLY_FOR_RERUN", {"a": "2"}), (False, UNFINISHED, {"a": "2"}),
        (True, "FINISHED_FRAGMENT_RUN_SUCCESSFULLY", {"a": "2"})]
    assert client.runs[1].finished <= client.runs[2].started
    assert client.wait_for(lambda run, c: run.status == UNFINISHED, timeout=0) is client.runs[1]
