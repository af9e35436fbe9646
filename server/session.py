"""The two things the classroom needs to know about the running script that only Streamlit's
runtime can tell (so that only server/ touches streamlit.runtime's internals; checked against
the pinned Streamlit by tests/test_classroom.py and the follow-the-teacher browser tests)."""

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
