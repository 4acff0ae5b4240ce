"""Chapter 10: Learning from human feedback and distillation.

Modules: ``reference`` (NumPy, float64) and ``accelerated`` (PyTorch) mirror each other; ``spec``
lists them for the conformance suite; ``exercises`` holds the checkers; ``widget`` the notebook's
interactive front-ends; ``tasks`` the judged tasks, ``pipeline`` the training loops, ``ppo`` the
pieces of a PPO update, ``study`` the PPO-against-DPO seed study. Nothing is imported eagerly:
``from course_lib.feedback import reference``.
"""
