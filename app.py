"""Decoder Lab: the router. Language, shared prompt and model status live here; each
lesson is a page in app_pages/ (see docs/PAGES.md)."""

# Imported before any session runs its first page: plotly imports pandas lazily inside its
# validators, and many session threads doing that first import at once see a partially
# initialized module (AttributeError on pandas.Series).
import pandas  # noqa: F401
import plotly.graph_objects  # noqa: F401
import streamlit as st

from ui import shell, state
from ui.i18n import t

notes = shell.start()
st.set_page_config(page_title=t("app.title"), page_icon="🎓", layout="wide")
page = shell.navigation()
try:
    for note in notes:
        st.warning(note, icon=":material/link_off:")
    shell.page_style()
    shell.sidebar()
    shell.model()
    try:
        page.run()
    finally:
        shell.lesson_footer(page.url_path)
finally:
    state.sync_url()
