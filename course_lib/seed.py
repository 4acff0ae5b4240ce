"""One call seeds every random number generator the course uses."""

from __future__ import annotations

import random

import numpy as np

from course_lib.checks import check_int


def seed_everything(seed: int = 0) -> np.random.Generator:
    """Seed Python's ``random``, NumPy's legacy global state and PyTorch (all devices; skipped
    where PyTorch is not installed, so the NumPy chapters run without it).

    Returns a fresh ``numpy.random.Generator`` seeded with ``seed``: prefer it over the global
    NumPy state in new code.

    >>> import torch
    >>> rng = seed_everything(42)
    >>> a = (rng.integers(0, 100), torch.randint(0, 100, ()).item())
    >>> import torch
    >>> rng = seed_everything(42)
    >>> a == (rng.integers(0, 100), torch.randint(0, 100, ()).item())
    True
    """
    seed = check_int(seed, "seed", low=0)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    try:
        import torch
    except ImportError:  # the NumPy half of the course: nothing else to seed
        return np.random.default_rng(seed)
    torch.manual_seed(seed)  # also seeds CUDA and MPS generators
    return np.random.default_rng(seed)
