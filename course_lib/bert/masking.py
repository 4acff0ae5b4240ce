"""BERT's masking procedure (Devlin et al. 2019, section 3.1; the handwritten notes' "masked" LM).

Choose each ordinary token with probability ``p = 0.15``; of the chosen ones, put ``[MASK]``
in 80%, a random token in 10% and leave 10% unchanged. The loss is computed on the chosen
positions only (their labels are the original tokens; every other label is ``IGNORE``).

Why not always ``[MASK]``? ``[MASK]`` never appears when the model is fine-tuned, so a model
that only learned "predict where you see ``[MASK]``" would have no reason to build a good
representation of ordinary tokens. Leaving some chosen tokens unchanged (and making some
random) means any position may be one the loss asks about, so every output has to carry
its token's meaning in context.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from course_lib.bert.inputs import IGNORE
from course_lib.checks import check_int, check_real

__all__ = ["MaskingStats", "mask_tokens", "masking_stats"]


def mask_tokens(
    tokens: Any,
    rng: np.random.Generator,
    *,
    mask_id: int,
    vocab_size: int,
    special_ids: Sequence[int] = (),
    p: float = 0.15,
    split: tuple[float, float, float] = (0.8, 0.1, 0.1),
) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(inputs, labels)`` for masked-LM training of integer ``tokens`` (..., L).

    Each position whose token is not in ``special_ids`` is chosen with probability ``p``
    (independently, as Hugging Face's data collator does); a chosen position becomes
    ``mask_id`` with probability ``split[0]``, a uniformly random id in ``[0, vocab_size)``
    with probability ``split[1]`` and stays as it is with ``split[2]``. ``labels`` holds the
    original token at chosen positions and ``IGNORE`` (-100) elsewhere.

    >>> rng = np.random.default_rng(0)
    >>> x, y = mask_tokens(np.arange(5, 25), rng, mask_id=4, vocab_size=30)
    >>> int((y != IGNORE).sum()), sorted(int(v) for v in set(x[y != IGNORE]) - set(range(5, 25)))
    (4, [4])
    >>> mask_tokens([1, 2], rng, mask_id=4, vocab_size=30, split=(0.5, 0.5, 0.5))
    Traceback (most recent call last):
    ...
    ValueError: split must be three probabilities that sum to 1, got (0.5, 0.5, 0.5)
    """
    t = np.asarray(tokens)
    if t.dtype.kind not in "iu":
        raise TypeError(f"tokens must hold integer ids, got dtype {t.dtype}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    check_int(vocab_size, "vocab_size", low=2)
    check_int(mask_id, "mask_id", low=0, high=vocab_size - 1)
    check_real(p, "p", low=0.0, high=1.0)
    if len(split) != 3 or min(split) < 0 or abs(sum(split) - 1) > 1e-9:
        raise ValueError(f"split must be three probabilities that sum to 1, got {tuple(split)}")
    if t.size and (t.min() < 0 or t.max() >= vocab_size):
        raise ValueError(f"tokens must lie in [0, {vocab_size - 1}], got {t.min()} to {t.max()}")
    ordinary = ~np.isin(t, list(special_ids))
    chosen = (rng.random(t.shape) < p) & ordinary  # which positions the loss will ask about
    action = rng.random(t.shape)  # one draw decides [MASK] / random / unchanged
    to_mask = chosen & (action < split[0])
    to_random = chosen & (action >= split[0]) & (action < split[0] + split[1])
    inputs = t.copy()
    inputs[to_mask] = mask_id
    inputs[to_random] = rng.integers(0, vocab_size, size=int(to_random.sum()))
    labels = np.where(chosen, t, IGNORE)
    return inputs, labels


class MaskingStats(dict):
    """Fractions measured on one masked batch: ``chosen`` (of ordinary tokens), and, of the
    chosen, ``mask``, ``random`` (changed to another id) and ``unchanged``."""


def masking_stats(
    tokens: Any, inputs: Any, labels: Any, mask_id: int, special_ids=()
) -> MaskingStats:
    """Measure what a masking did; a random replacement that drew the same id counts as unchanged.

    >>> masking_stats([5, 6, 7, 8], [4, 6, 9, 8], [5, IGNORE, 7, 8], mask_id=4)
    {'chosen': 0.75, 'mask': 0.3333333333333333, 'random': 0.3333333333333333, 'unchanged': 0.3333333333333333}
    """
    t, x, y = np.asarray(tokens), np.asarray(inputs), np.asarray(labels)
    ordinary = ~np.isin(t, list(special_ids))
    chosen = y != IGNORE
    n = max(int(chosen.sum()), 1)
    is_mask = chosen & (x == mask_id)
    return MaskingStats(
        chosen=float(chosen.sum() / max(int(ordinary.sum()), 1)),
        mask=float(is_mask.sum() / n),
        random=float((chosen & ~is_mask & (x != t)).sum() / n),
        unchanged=float((chosen & (x == t)).sum() / n),
    )
