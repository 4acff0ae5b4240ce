"""Chapter 2: softmax (stability, log-sum-exp, temperature, top-k/top-p, Jacobian, online softmax, cross-entropy).

Modules: ``reference`` (NumPy, float64) and ``accelerated`` (PyTorch) mirror each other; ``spec``
lists them for the conformance suite; ``exercises`` holds the checkers; ``widget`` the notebook's
interactive front-ends. Nothing is imported eagerly: ``from course_lib.softmax import reference``.
"""
