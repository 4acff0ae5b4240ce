"""Chapter 1: matrix multiplication (the four views of eqs. 1-3, FLOP counts, measured GFLOP/s).

Modules: ``reference`` (NumPy, float64) and ``accelerated`` (PyTorch) mirror each other; ``spec``
lists them for the conformance suite; ``exercises`` holds the checkers; ``widget`` the notebook's
interactive front-ends. Nothing is imported eagerly: ``from course_lib.matmul import reference``.
"""
