"""Streamlit and plotly helpers shared by the lesson pages (pages -> ui -> lesson_model)."""
