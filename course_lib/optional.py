"""A clear message where PyTorch is missing, so the NumPy half of the course runs without it.

Chapters 1-4, 6 and 12 have a NumPy reference and exercises that need only NumPy; their PyTorch
twins need ``torch``. :func:`explain_missing_torch` (run when ``course_lib`` is imported) puts a
finder at the *end* of ``sys.meta_path``: Python asks it only after every real finder has failed
to find ``torch``, so where PyTorch is installed it is never consulted and costs nothing; where it
is not, importing ``torch`` (or a module of the course that needs it) raises
``ModuleNotFoundError`` with a message that says what to do, instead of a bare "No module named
'torch'". Asking ``importlib.util.find_spec("torch")`` still answers None, as libraries that
check whether PyTorch is installed expect.

>>> finder = MissingTorch()
>>> finder.find_spec("numpy") is None
True
>>> finder.find_spec("torch.nn")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ModuleNotFoundError: PyTorch is not installed in this environment, and this code needs it (it imports torch.nn). ...
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys

__all__ = ["MESSAGE", "MissingTorch", "explain_missing_torch"]

MESSAGE = (
    "PyTorch is not installed in this environment, and this code needs it (it imports {name}). "
    "The NumPy references and exercises of the course run without it. To install it: "
    "`./course setup` (Windows: `py course.py setup`), or `pip install torch` in this environment."
)


class MissingTorch(importlib.abc.MetaPathFinder):
    """The last finder on ``sys.meta_path``: explains a missing ``torch`` instead of finding it."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch" and not fullname.startswith("torch."):
            return None
        if _probing():  # importlib.util.find_spec("torch"): "is it installed?" gets "no"
            return None
        raise ModuleNotFoundError(MESSAGE.format(name=fullname), name=fullname)


def _probing(depth: int = 16) -> bool:
    """Whether this lookup comes from ``importlib.util.find_spec`` (libraries such as
    transformers ask it whether torch is installed, and expect None) rather than an import."""
    probe = importlib.util.find_spec.__code__
    frame = sys._getframe(1)
    for _ in range(depth):
        if frame is None:
            return False
        if frame.f_code is probe:
            return True
        frame = frame.f_back
    return False


def explain_missing_torch() -> None:
    """Append one :class:`MissingTorch` to ``sys.meta_path`` (idempotent)."""
    if not any(isinstance(f, MissingTorch) for f in sys.meta_path):
        sys.meta_path.append(MissingTorch())
