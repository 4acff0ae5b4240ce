"""course_lib: the library behind the Transformers notebook course.

A folder per chapter (``course_lib.matmul``, ``course_lib.attention``, ...), shared modules at the
root. Every numerical building block of a chapter exists twice, under the same name and
signature:

* ``course_lib.<chapter>.reference``: a NumPy reference written to be read next to the equation
  it implements (float64, loops where a loop teaches);
* ``course_lib.<chapter>.accelerated``: a PyTorch implementation that is batched,
  device-agnostic, dtype-preserving and autograd-friendly.

Each chapter's ``spec.py`` lists the pairs, and one test suite (``course_lib.conformance``)
checks that they agree.

Importing the package imports no third-party module: the four helpers below load on first use,
so the NumPy half of the course runs where PyTorch is not installed (and
:mod:`course_lib.optional` explains what to do when a PyTorch cell runs there).
"""

from __future__ import annotations

import importlib
from importlib import metadata

from course_lib.optional import explain_missing_torch

__all__ = ["describe_device", "device_for", "get_device", "seed_everything"]
_LAZY = {
    "describe_device": "course_lib.device",
    "device_for": "course_lib.device",
    "get_device": "course_lib.device",
    "seed_everything": "course_lib.seed",
}

try:  # the version pyproject.toml declares, as installed
    __version__ = metadata.version("course-lib")
except metadata.PackageNotFoundError:  # imported from a checkout that was never installed
    __version__ = "0+unknown"

explain_missing_torch()  # a clear message, not a bare ImportError, where PyTorch is missing


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'course_lib' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
