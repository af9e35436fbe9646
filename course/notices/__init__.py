"""What to notice, one module per lesson: pure functions from a run's results to a list of
(catalog key under "<lesson>.notice.", fields); the page translates and draws them. No
Streamlit, no session state: each branch is unit-tested in tests/test_notices_<lesson>.py."""
