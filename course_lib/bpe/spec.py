"""Conformance specs of Chapter 7: none.

Byte-pair encoding is a text algorithm with no array maths, so it exists once, in plain Python,
and is checked against tiktoken and Hugging Face tokenizers instead (tests/test_bpe.py).
"""

from course_lib.conformance import Spec

SPECS: list[Spec] = []
