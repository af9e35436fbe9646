"""Pure figure builders: numbers (and the page's translation function) in, a figure out. No
Streamlit and no session state (tests/test_layering.py); the look is course/figures/style.py."""
