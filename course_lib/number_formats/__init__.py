"""Chapter 12: number formats (IEEE layouts, bit-level decoding and encoding, rounding, fp8, int8, NF4).

Modules: ``reference`` (NumPy, float64) and ``accelerated`` (PyTorch) mirror each other; ``spec``
lists them for the conformance suite; ``exercises`` holds the checkers; ``widget`` the notebook's
interactive front-ends. Nothing is imported eagerly: ``from course_lib.number_formats import reference``.
"""
