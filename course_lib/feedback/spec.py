"""Conformance specs of Chapter 10: one :class:`~course_lib.conformance.Spec` per mirrored function."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from course_lib.conformance import Case, Spec, batch_shapes, dims, seeded_rng

TOPIC = "feedback"


@st.composite
def logits_and_targets(draw: st.DrawFn, with_mask: bool = False) -> Case:
    """Logits (..., L, V), integer targets (..., L) and (optionally) a 0/1 mask with a 1 in it."""
    rng = seeded_rng(draw)
    shape = (*draw(batch_shapes), draw(dims))
    v = draw(st.integers(2, 7))
    z = 2.0 * rng.standard_normal((*shape, v))
    t = rng.integers(0, v, size=shape)
    if not with_mask:
        return Case((z, t))
    m = (rng.random(shape) < 0.6).astype(np.float64)
    m.reshape(-1)[0] = 1.0
    return Case((z, t, m))


@st.composite
def same_shape(draw: st.DrawFn, n: int, scale: float = 1.0, **kwargs: st.SearchStrategy) -> Case:
    """``n`` normal arrays of one shape, and keyword arguments drawn from ``kwargs``."""
    rng = seeded_rng(draw)
    shape = (*draw(batch_shapes), draw(dims))
    arrays = tuple(scale * rng.standard_normal(shape) for _ in range(n))
    return Case(arrays, {k: draw(s) for k, s in kwargs.items()})


@st.composite
def ppo_inputs(draw: st.DrawFn) -> Case:
    """Log-probabilities a small step apart (ratios near the clip edges) and advantages."""
    rng = seeded_rng(draw)
    shape = (*draw(batch_shapes), draw(dims))
    old = -np.abs(rng.standard_normal(shape))
    new = old + 0.4 * rng.standard_normal(shape)
    return Case(
        (new, old, rng.standard_normal(shape)), {"clip": draw(st.sampled_from([0.1, 0.2, 0.3]))}
    )


@st.composite
def student_teacher(draw: st.DrawFn) -> Case:
    rng = seeded_rng(draw)
    shape = (*draw(batch_shapes), draw(st.integers(2, 7)))
    return Case(
        (2 * rng.standard_normal(shape), 2 * rng.standard_normal(shape)),
        {"temperature": draw(st.sampled_from([0.5, 1.0, 2.0, 4.0]))},
    )


_LOOSE = {"float32": (1e-4, 1e-5)}

#: The mirrored functions of this chapter and how to check them (see course_lib.conformance).
SPECS: list[Spec] = [
    Spec(TOPIC, "token_logprobs", logits_and_targets(), float_args=(0,)),
    Spec(TOPIC, "masked_nll", logits_and_targets(with_mask=True), float_args=(0,)),
    Spec(TOPIC, "pairwise_loss", same_shape(2, scale=3.0)),
    Spec(TOPIC, "kl_penalty", same_shape(2, kind=st.sampled_from(["k1", "k3"]))),
    Spec(TOPIC, "ppo_clip_objective", ppo_inputs(), gradcheck=False, tolerance=_LOOSE),
    Spec(
        TOPIC,
        "gae",
        same_shape(
            2, gamma=st.sampled_from([0.9, 1.0]), lam=st.sampled_from([0.0, 0.5, 0.95, 1.0])
        ),
    ),
    Spec(TOPIC, "dpo_loss", same_shape(4, scale=2.0, beta=st.sampled_from([0.1, 0.5, 2.0]))),
    Spec(TOPIC, "distillation_loss", student_teacher()),
]
