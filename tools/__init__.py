"""Clients for measuring the app from outside, used by bench/ and the tests only: Streamlit's
websocket protocol (protocol.py) and a headless-browser harness (browser.py)."""
