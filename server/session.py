"""What the classroom needs from the running script that only Streamlit's runtime gives: whether
a run was cut short, which page it is on, and rerunning one named fragment from another (so
that only server/ touches streamlit.runtime's internals; checked against the pinned Streamlit
by tests/test_classroom.py and the follow-the-teacher browser tests)."""

from __future__ import annotations

from streamlit.runtime.scriptrunner_utils.exceptions import RerunException
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx


def cut_short_by_rerun(exc: BaseException | None) -> bool:
    """Whether ``exc`` is Streamlit stopping this run for a newer one (st.rerun, a widget change)."""
    return isinstance(exc, RerunException)


def running_page_path() -> str | None:
    """The url path of the page this script run is on: the run context's page hash (in a
    fragment run, the one the browser's rerun request carried) looked up in the pages
    st.navigation registered ("" for the default page). None when it cannot be told (no run
    context, pages not registered yet)."""
    ctx = get_script_run_ctx()
    if ctx is None:
        return None
    info = ctx.pages_manager.get_pages().get(ctx.page_script_hash)
    if not info or "url_pathname" not in info:
        return None
    return info["url_pathname"]


def in_fragment_run() -> bool:
    """Whether this run is a fragment's own run (a poll's tick, a click inside a fragment), not a
    full run of the page."""
    ctx = get_script_run_ctx()
    return bool(ctx is not None and ctx.fragment_ids_this_run)


def rerun_fragment(key: str) -> bool:
    """Ask for a run of the fragment drawn with ``st.fragment(key=key)`` once this run ends:
    what ``st.rerun(key)`` does from a widget callback, from a fragment run of another fragment
    (a following student's one poll, classroom/follow.py, redraws the class's question block
    only when the class's question changed). Call it last in the run: it preempts the run at
    its next element. Only from a fragment run: a full run draws every fragment anyway, and
    this would cut it short. False when it asked for nothing (a full run, no such fragment on
    this page, no run context)."""
    from streamlit.errors import StreamlitAPIException
    from streamlit.runtime.scriptrunner_utils.script_requests import RerunData

    ctx = get_script_run_ctx()
    if ctx is None or not ctx.script_requests or not ctx.fragment_ids_this_run:
        return False
    try:
        queue = ctx.fragment_storage.resolve_target(key)
    except StreamlitAPIException:
        return False
    return ctx.script_requests.request_rerun(RerunData(
        query_string=ctx.query_string, page_script_hash=ctx.page_script_hash, fragment_id_queue=queue,
        is_fragment_scoped_rerun=True, cached_message_hashes=ctx.cached_message_hashes,
        context_info=ctx.context_info))
