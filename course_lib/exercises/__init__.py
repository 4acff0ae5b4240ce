"""Exercise checkers, one module per chapter: ``from course_lib.exercises import matmul as check``.

A checker takes the learner's function, runs it on random and edge-case inputs against the
reference, and returns an :class:`~course_lib.exercises._checker.Outcome` that says in plain words
what is wrong (shape, transposed, scaled, NaN, an exception) or confirms the solution. Pass
``require=True`` (as the hidden solution cells do) to raise ``AssertionError`` on a failure.
"""
