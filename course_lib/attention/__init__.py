"""Chapter 4: attention (scaled dot-product, masks, multi-head attention, its cost in L^2).

Modules: ``reference`` (NumPy, float64) and ``accelerated`` (PyTorch) mirror each other; ``spec``
lists them for the conformance suite; ``exercises`` holds the checkers; ``widget`` the notebook's
interactive front-ends. Nothing is imported eagerly: ``from course_lib.attention import reference``.
"""
