"""Conformance specs of Chapter 3: none.

n-grams, BLEU and ROUGE are text algorithms with no array maths, so they exist once, in plain
Python, and are checked against sacrebleu and rouge-score instead (tests/test_text_metrics.py).
"""

from course_lib.conformance import Spec

SPECS: list[Spec] = []
