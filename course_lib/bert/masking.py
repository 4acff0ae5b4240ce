"""BERT's masking procedure (Devlin et al. 2019, section 3.1; the handwritten notes' "masked" LM).

Choose each ordinary token with probability ``p = 0.15``; of the chosen ones, put ``[MASK]``
in 80%, a random token in 10% and leave 10% unchanged. The loss is computed on the chosen
positions only (their labels are the original tokens; every other label is ``IGNORE``).

One uniform draw ``u`` per position decides everything: ``u < 0.8 p`` is a ``[MASK]``,
``0.8 p <= u < 0.9 p`` a random token, ``0.9 p <= u < p`` unchanged, and ``u >= p`` not chosen
(:func:`corrupt`). A random replacement is drawn from the ordinary tokens only: a ``[CLS]``,
``[SEP]``, ``[PAD]`` or ``[MASK]`` in the middle of a text would be a signal the model never sees
at fine-tuning time (and a ``[PAD]`` would even be hidden from attention by the padding mask).

Why not always ``[MASK]``? BERT's appendix C.2 measured it: fine-tuning was "surprisingly
robust" to the choice (MNLI 84.3 with 100% ``[MASK]`` against 84.2 with 80/10/10), and the
clearest harm was in the feature-based use of the vectors (NER 94.0 against 94.9). The reason
the authors give: ``[MASK]`` never occurs after pre-training, so a model that only learned
"predict where you see ``[MASK]``" has less reason to build good vectors for ordinary tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from course_lib.bert.inputs import IGNORE
from course_lib.checks import check_int, check_real

__all__ = ["MaskingStats", "corrupt", "mask_tokens", "masking_draws", "masking_stats"]


def corrupt(
    tokens: Any,
    u: Any,
    random_ids: Any,
    *,
    mask_id: int,
    special_ids: Sequence[int] = (),
    p: float = 0.15,
    split: tuple[float, float, float] = (0.8, 0.1, 0.1),
) -> tuple[np.ndarray, np.ndarray]:
    """BERT's corruption from one uniform draw per position: ``(inputs, labels)``, each (..., L).

    ``u`` (..., L) holds uniform draws in [0, 1) and ``random_ids`` (..., L) the ordinary token
    each position would get if it is replaced by a random one. A position whose token is not in
    ``special_ids`` is chosen when ``u < p``: ``[MASK]`` when ``u < split[0] p``, its random id
    when ``u < (split[0] + split[1]) p``, unchanged otherwise. ``labels`` holds the original token
    at chosen positions and ``IGNORE`` (-100) elsewhere.

    >>> x, y = corrupt([5, 6, 7, 8, 9], [0.01, 0.13, 0.14, 0.5, 0.01], [20, 21, 22, 23, 24],
    ...                mask_id=4, special_ids=[9])
    >>> x.tolist(), y.tolist()
    ([4, 21, 7, 8, 9], [5, 6, 7, -100, -100])
    """
    t, u, r = np.asarray(tokens), np.asarray(u, dtype=float), np.asarray(random_ids)
    if t.dtype.kind not in "iu" or r.dtype.kind not in "iu":
        raise TypeError(f"tokens and random_ids must hold integer ids, got {t.dtype} and {r.dtype}")
    if u.shape != t.shape or r.shape != t.shape:
        raise ValueError(
            f"u and random_ids must have the shape of tokens {t.shape}, got {u.shape} and {r.shape}"
        )
    check_real(p, "p", low=0.0, high=1.0)
    if len(split) != 3 or min(split) < 0 or abs(sum(split) - 1) > 1e-9:
        raise ValueError(f"split must be three probabilities that sum to 1, got {tuple(split)}")
    u = np.where(np.isin(t, list(special_ids)), 1.0, u)  # (..., L): a special is never chosen
    chosen = u < p  # the positions the loss asks about
    to_mask = u < split[0] * p
    to_random = ~to_mask & (u < (split[0] + split[1]) * p)
    inputs = np.where(to_mask, mask_id, np.where(to_random, r, t))
    return inputs, np.where(chosen, t, IGNORE)


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

    Draws one uniform number per position and a random ordinary id (in ``[0, vocab_size)``, not
    in ``special_ids`` and not ``mask_id``) per position from ``rng``, then applies
    :func:`corrupt`: each position whose token is not special is chosen with probability ``p``
    (independently, as Hugging Face's data collator does) and becomes ``[MASK]``, a random token
    or stays itself in proportions ``split``.

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
    if t.size and (t.min() < 0 or t.max() >= vocab_size):
        raise ValueError(f"tokens must lie in [0, {vocab_size - 1}], got {t.min()} to {t.max()}")
    u, random_ids = masking_draws(t.shape, rng, mask_id=mask_id, vocab_size=vocab_size,
                                  special_ids=special_ids)  # fmt: skip
    return corrupt(t, u, random_ids, mask_id=mask_id, special_ids=special_ids, p=p, split=split)


def masking_draws(
    shape: tuple[int, ...],
    rng: np.random.Generator,
    *,
    mask_id: int,
    vocab_size: int,
    special_ids: Sequence[int] = (),
) -> tuple[np.ndarray, np.ndarray]:
    """The draws :func:`mask_tokens` makes for tokens of ``shape``: one uniform number per
    position ``u`` and the ordinary id each position would get as a random replacement.

    >>> u, r = masking_draws((2, 3), np.random.default_rng(0), mask_id=4, vocab_size=6,
    ...                      special_ids=(0, 1))
    >>> u.shape, sorted(set(r.ravel().tolist()) - {2, 3, 5})
    ((2, 3), [])
    """
    ordinary = np.setdiff1d(np.arange(vocab_size), [*special_ids, mask_id])  # replacements
    u = rng.random(shape)  # (..., L): one draw decides chosen / [MASK] / random / unchanged
    random_ids = ordinary[rng.integers(0, len(ordinary), size=shape)]  # (..., L)
    return u, random_ids


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
