"""Predict, then see: a question whose answer the model computes on the learner's own run.

Pure (no Streamlit): ``core`` holds the question and its scoring, ``builders`` one question
per lesson and lab, computed from the loaded model and the prompt. The block that draws a
question (course/predict_block.py) and the class's poll (classroom/poll.py) only draw.
"""

from course.predict.core import Question, Score, score_choice, score_number, score_token  # noqa: F401
