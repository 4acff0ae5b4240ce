"""Chapter 9: BERT: masked language models and encoder tasks.

Modules: ``reference`` (NumPy, float64) and ``accelerated`` (PyTorch) mirror each other; ``spec``
lists them for the conformance suite; ``exercises`` holds the checkers; ``widget`` the notebook's
interactive front-ends. Nothing is imported eagerly: ``from course_lib.bert import reference``.
"""
