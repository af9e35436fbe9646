"""Decoder Lab: the router. Language, shared prompt and model status live here; each
lesson is a page in app_pages/ (see docs/PAGES.md)."""

# Imported before any session runs its first page: plotly imports pandas lazily inside its
# validators, and many session threads doing that first import at once see a partially
# initialized module (AttributeError on pandas.Series).
import pandas  # noqa: F401
import plotly.graph_objects  # noqa: F401
import streamlit as st

from classroom import follow as classroom
from classroom import poll  # noqa: F401  (registers the class's side of Predict, then see)
from classroom import presenter, shell
from course import state
from course.i18n import t
from server import warmup
from server.models import script_slot

warmup.start()                         # once per process: a server started without server.serve warms up now
notes = shell.start()
st.set_page_config(page_title=t("app.title"), page_icon="🎓", layout="wide",
                   initial_sidebar_state=presenter.sidebar_state())
page = shell.navigation()
try:
    for note in notes:
        st.warning(note, icon=":material/link_off:")
    shell.page_style()
    presenter.begin(page.url_path)     # presenter mode's CSS and header (prompt, Previous / Next)
    shell.sidebar()
    classroom.panel()                  # follow the teacher: join, follow, or teach a class
    shell.model(page.url_path)
    try:
        # A few lesson scripts at a time (server.serve); the rest wait their turn, except the teacher's.
        with script_slot(first=classroom.teaching() is not None):
            page.run()
    finally:
        shell.lesson_footer(page.url_path)
        presenter.finish()             # "Share this view" with this run's exact URL
finally:
    classroom.after_run(page.url_path)   # a teacher's run publishes its view
    state.sync_url()
