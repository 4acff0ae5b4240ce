"""How far information travels through a stack of layers that share one attention pattern.

After one layer, position i holds information from the keys of its mask row; after n layers,
from every j joined to i by a path of n steps, each step an allowed (query, key) pair. That is
the boolean n-th power of the mask (a position always sees itself through the residual).
A task that needs position i to read position j (copying, associative recall at a distance)
is impossible for fewer layers than the path needs, whatever the training.

>>> m = np.eye(4, dtype=bool) | np.eye(4, k=-1, dtype=bool)  # each token sees its predecessor
>>> layers_to_reach(m)  # the last token needs 3 layers to hear from the first
3
"""

from __future__ import annotations

from typing import Any

import numpy as np

from course_lib.checks import check_int, fmt_shape

__all__ = ["layers_to_reach", "receptive_field"]


def _square_mask(mask: Any) -> np.ndarray:
    arr = np.asarray(mask.detach().cpu() if hasattr(mask, "detach") else mask)
    if arr.dtype != np.bool_ or arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.size == 0:
        raise ValueError(
            f"mask must be a non-empty square boolean (L, L) array, got {arr.dtype} of shape "
            f"{fmt_shape(arr.shape)}"
        )
    return arr | np.eye(arr.shape[0], dtype=bool)  # the residual: a token keeps what it has


def receptive_field(mask: Any, n_layers: int) -> np.ndarray:
    """(L, L) boolean: True where position i has heard from position j after ``n_layers``.

    >>> receptive_field(np.eye(3, k=-1, dtype=bool), 2).astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]])
    """
    step = _square_mask(mask)
    n = check_int(n_layers, "n_layers", low=1)
    reach = step.copy()
    for _ in range(n - 1):
        reach = (reach.astype(np.int64) @ step.astype(np.int64)) > 0  # one more step
    return reach


def layers_to_reach(mask: Any, query: int = -1, key: int = 0, max_layers: int = 1000) -> int | None:
    """The fewest layers after which ``query`` has heard from ``key`` (None: never).

    >>> layers_to_reach(np.eye(3, dtype=bool)) is None  # nobody looks at anybody else
    True
    """
    step = _square_mask(mask)
    L = step.shape[0]
    q = check_int(
        query % L if isinstance(query, int) and query < 0 else query, "query", low=0, high=L - 1
    )
    k = check_int(key, "key", low=0, high=L - 1)
    heard = step[:, k].copy()  # who has heard from the key after one layer
    for n in range(1, check_int(max_layers, "max_layers", low=1) + 1):
        if heard[q]:
            return n
        new = (step.astype(np.int64) @ heard.astype(np.int64)) > 0
        if (new == heard).all():
            return None  # nothing changes any more
        heard = new
    return None
