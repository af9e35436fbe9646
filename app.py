"""Decoder Lab: the router. Language, shared prompt and model status live here; each
lesson is a page in app_pages/ (see docs/PAGES.md)."""

import streamlit as st

from ui import shell, state
from ui.i18n import t

notes = shell.start()
st.set_page_config(page_title=t("app.title"), page_icon=":material/school:", layout="wide")
page = shell.navigation()
try:
    for note in notes:
        st.warning(note, icon=":material/link_off:")
    shell.sidebar()
    shell.model()
    page.run()
finally:
    state.sync_url()
