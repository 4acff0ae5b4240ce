"""Conformance specs for Chapter 2 (softmax and its relatives)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from course_lib.conformance import (
    ALL_DTYPES,
    Case,
    Spec,
    batch_shapes,
    dims,
    normal_arrays,
    seeded_rng,
)
from course_lib.softmax import reference as ref

#: The mirrored functions of this chapter and how to check them (see course_lib.conformance).
SPECS: list[Spec] = []

TOPIC = "softmax"


def _mask(draw: st.DrawFn, x: np.ndarray, axis: int) -> np.ndarray:
    """Set some entries to -inf and, sometimes, one whole slice along ``axis``."""
    rng = seeded_rng(draw)
    x = np.where(rng.random(x.shape) < 0.3, -np.inf, x)
    if draw(st.booleans()):  # one fully masked slice
        idx = tuple(slice(None) if d == axis % x.ndim else 0 for d in range(x.ndim))
        x[idx] = -np.inf
    return x


@st.composite
def logits(
    draw: st.DrawFn,
    masked: bool = True,
    scales: tuple[float, ...] = (0.1, 1.0, 5.0, 30.0),
    batch: st.SearchStrategy[tuple[int, ...]] = batch_shapes,
) -> tuple[np.ndarray, int]:
    """Logits of shape (..., K), a random axis and scale, and (if ``masked``) -inf entries.

    Scales up to 30 would make the naive formula overflow in float16 (its limit is 11.09).
    """
    shape = (*draw(batch), draw(dims))
    (x,) = draw(normal_arrays(shape, scale=draw(st.sampled_from(scales))))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    if masked and draw(st.booleans()):
        x = _mask(draw, x, axis)
    return x, axis


@st.composite
def exact_logits(draw: st.DrawFn, masked: bool = True) -> tuple[np.ndarray, int]:
    """Logits that are multiples of 1/4 in [-10, 10]: exact in every dtype, with many ties.

    The filters make discrete keep/drop decisions; with inputs every dtype represents exactly,
    both sides decide on the same numbers, and ties are decided the same way (all kept).
    """
    shape = (*draw(st.lists(st.integers(1, 3), max_size=1).map(tuple)), draw(dims))
    rng = seeded_rng(draw)
    x = rng.integers(-40, 41, size=shape) / 4.0
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    if masked and draw(st.booleans()):
        x = _mask(draw, x, axis)
    return x, axis


def _safe_p(draw: st.DrawFn, probs: np.ndarray, axis: int) -> float:
    """A p at least 1e-3 away from every cumulative probability of every slice (or 1.0).

    Top-p compares cumulative sums with p: a p closer than rounding error to one of them
    would make the two sides' decisions a coin toss, so the suite avoids those p.
    """
    cums = np.cumsum(-np.sort(-np.moveaxis(probs, axis, -1), axis=-1), axis=-1).ravel()
    grid = np.linspace(0.02, 0.98, 49)
    ok = [p for p in grid if np.min(np.abs(cums - p)) > 1e-3]
    return float(draw(st.sampled_from(ok))) if ok else 1.0


_temperatures = st.sampled_from([0.0, 0.25, 0.5, 1.0, 2.0, 10.0, float("inf")])


@st.composite
def tempered(draw: st.DrawFn) -> Case:
    x, axis = draw(logits())
    return Case((x,), {"temperature": draw(_temperatures), "axis": axis})


@st.composite
def top_k_case(draw: st.DrawFn) -> Case:
    x, axis = draw(exact_logits())
    return Case((x,), {"k": draw(st.integers(1, x.shape[axis] + 1)), "axis": axis})


@st.composite
def top_p_case(draw: st.DrawFn) -> Case:
    x, axis = draw(exact_logits())
    return Case((x,), {"p": _safe_p(draw, ref.softmax(x, axis), axis), "axis": axis})


@st.composite
def sampling_case(draw: st.DrawFn) -> Case:
    x, axis = draw(exact_logits())
    t = draw(_temperatures)
    k = draw(st.one_of(st.none(), st.integers(1, x.shape[axis])))
    p = None
    if draw(st.booleans()):
        kept = x if k is None else ref.top_k_filter(x, k, axis)
        p = _safe_p(draw, ref.softmax_with_temperature(kept, t, axis), axis)
    return Case((x,), {"temperature": t, "top_k": k, "top_p": p, "axis": axis})


@st.composite
def with_axis(draw: st.DrawFn, masked: bool = True, scales=(0.1, 1.0, 5.0, 30.0)) -> Case:
    x, axis = draw(logits(masked=masked, scales=scales))
    return Case((x,), {"axis": axis})


@st.composite
def elementwise(draw: st.DrawFn) -> Case:
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple))
    return Case(draw(normal_arrays(shape, scale=draw(st.sampled_from([1.0, 10.0])))))


@st.composite
def vjp_case(draw: st.DrawFn) -> Case:
    x, axis = draw(logits())
    (g,) = draw(normal_arrays(x.shape))
    return Case((x, g), {"axis": axis})


@st.composite
def chunked(draw: st.DrawFn, masked: bool = True) -> Case:
    x, axis = draw(logits(masked=masked))
    return Case((x,), {"chunk_size": draw(st.integers(1, x.shape[axis] + 1)), "axis": axis})


@st.composite
def two_states(draw: st.DrawFn) -> Case:
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=2).map(tuple))
    m1, m2, a1, a2 = draw(normal_arrays(shape, shape, shape, shape, scale=3.0))
    l1, l2 = np.exp(a1), np.exp(a2)  # normalisers are positive
    return Case((m1, l1, m2, l2))


@st.composite
def classification(draw: st.DrawFn) -> Case:
    x, axis = draw(logits(masked=False))
    out_shape = x.shape[: axis % x.ndim] + x.shape[axis % x.ndim + 1 :]
    rng = seeded_rng(draw)
    t = rng.integers(0, x.shape[axis], size=out_shape)
    if t.size > 1 and draw(st.booleans()):
        t.ravel()[1:][rng.random(t.size - 1) < 0.3] = -100  # ignored targets (never all)
    reduction = draw(st.sampled_from(["mean", "sum", "none"]))
    return Case((x, t), {"axis": axis, "reduction": reduction})


# Probabilities live in [0, 1]: the absolute tolerance is what matters, and float16/bfloat16
# round their *outputs* to 3 and 2 significant digits. Log-domain outputs grow with the scale
# of the logits (up to about 4 * 30), so their tolerance is mostly relative.
PROB_TOL = {"float16": (1e-2, 2e-3), "bfloat16": (2e-2, 1e-2)}
LOG_TOL = {"float16": (1e-2, 2e-2), "bfloat16": (2e-2, 1e-1)}
# Jacobian and VJP entries are products of two probabilities (and a N(0,1) gradient)
DERIV_TOL = {"float16": (1e-2, 4e-3), "bfloat16": (5e-2, 2e-2)}


def _spec(name: str, inputs, tol, **kw) -> None:
    SPECS.append(
        Spec(topic=TOPIC, name=name, inputs=inputs, dtypes=ALL_DTYPES, tolerance=tol, **kw)
    )


_spec("softmax", with_axis(), PROB_TOL)
# The log-domain outputs are -inf at masked entries, and gradcheck's finite differences of -inf
# are NaN, so these are drawn unmasked here; their masking is compared on both sides in
# tests/test_softmax.py.
_spec("log_softmax", with_axis(masked=False), LOG_TOL)
_spec("logsumexp", with_axis(masked=False), LOG_TOL)
_spec("online_softmax_stats", chunked(masked=False), LOG_TOL)
_spec("cross_entropy", classification(), LOG_TOL)
# The naive formula overflows in float16 beyond 11.09: keep its logits small (|x| < 6 or so).
_spec("naive_softmax", with_axis(masked=False, scales=(0.1, 1.0)), PROB_TOL)
_spec("sigmoid", elementwise(), PROB_TOL)
_spec("softmax_with_temperature", tempered(), PROB_TOL)
_spec("sampling_probs", sampling_case(), PROB_TOL)
_spec("softmax_jacobian", with_axis(), DERIV_TOL)
_spec("softmax_vjp", vjp_case(), DERIV_TOL)
_spec("online_softmax", chunked(), PROB_TOL)
_spec("merge_softmax_stats", two_states(), LOG_TOL)
# The filters return logits with -inf where an entry is dropped: finite differences of -inf
# are NaN, and a keep/drop decision has no derivative (sampling is never differentiated), so
# no gradcheck; their outputs are compared exactly (the inputs are exact in every dtype).
_EXACT = {d: (0.0, 0.0) for d in ALL_DTYPES}
_spec("top_k_filter", top_k_case(), _EXACT, gradcheck=False)
_spec("top_p_filter", top_p_case(), _EXACT, gradcheck=False)
