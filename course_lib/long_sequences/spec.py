"""Conformance specs of Chapter 11: one :class:`~course_lib.conformance.Spec` per mirrored function."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from course_lib.conformance import Case, Spec, batch_shapes, seeded_rng

#: The mirrored functions of this chapter and how to check them (see course_lib.conformance).
SPECS: list[Spec] = []

# Attention outputs are averages of N(0, 1) values with weights from logits of up to 6 terms.
ATTENTION_TOL = {"float32": (1e-4, 1e-5), "float16": (2e-2, 2e-2), "bfloat16": (5e-2, 1e-1)}
_EXACT = {"float64": (0.0, 0.0)}


def _mask_spec(name: str, inputs: st.SearchStrategy[Case]) -> Spec:
    # Masks are boolean functions of integers: nothing to differentiate, no float dtype to vary.
    return Spec(
        "long_sequences", name, inputs, dtypes=("float64",), tolerance=_EXACT, gradcheck=False
    )


@st.composite
def strided_case(draw: st.DrawFn) -> Case:
    L = draw(st.integers(1, 12))
    return Case((L, draw(st.integers(1, L)), draw(st.sampled_from([0, 1, 2]))))


@st.composite
def fixed_case(draw: st.DrawFn) -> Case:
    L = draw(st.integers(1, 12))
    stride = draw(st.integers(1, L))
    return Case((L, stride, draw(st.integers(1, stride)), draw(st.sampled_from([0, 1, 2]))))


@st.composite
def window_case(draw: st.DrawFn) -> Case:
    L = draw(st.integers(1, 12))
    dilation = draw(st.integers(1, 3))
    window = draw(st.integers(0, (L - 1) // dilation))
    return Case((L, window, dilation, draw(st.booleans())))


@st.composite
def global_case(draw: st.DrawFn) -> Case:
    L = draw(st.integers(1, 10))
    idx = draw(st.lists(st.integers(0, L - 1), max_size=3, unique=True))
    return Case((L, np.array(idx, dtype=np.int64)))


@st.composite
def bigbird_case(draw: st.DrawFn) -> Case:
    n = draw(st.integers(1, 10))
    g = draw(st.integers(0, 2))
    r = draw(st.integers(0, max(n - 2 * g - 3, 0)))
    return Case((n, r, g, draw(st.integers(0, 99))))


@st.composite
def layout_case(draw: st.DrawFn) -> Case:
    rng = seeded_rng(draw)
    shape = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    return Case((rng.random(shape) < 0.5, draw(st.integers(1, 3))))


def _qkv(rng: np.random.Generator, batch, L_q: int, L_k: int, d_k: int, d_v: int):
    return (
        rng.standard_normal((*batch, L_q, d_k)),
        rng.standard_normal((*batch, L_k, d_k)),
        rng.standard_normal((*batch, L_k, d_v)),
    )


@st.composite
def sliding_attention_case(draw: st.DrawFn) -> Case:
    rng = seeded_rng(draw)
    L = draw(st.integers(1, 11))
    dilation = draw(st.integers(1, 3))
    window = draw(st.integers(0, (L - 1) // dilation))
    q, k, v = _qkv(rng, draw(batch_shapes), L, L, draw(st.integers(1, 4)), draw(st.integers(1, 3)))
    scale = draw(st.sampled_from([None, 0.5]))
    return Case((q, k, v, window, dilation, draw(st.booleans()), scale))


@st.composite
def block_sparse_case(draw: st.DrawFn) -> Case:
    rng = seeded_rng(draw)
    block = draw(st.integers(1, 3))
    n_q, n_k = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    layout = rng.random((n_q, n_k)) < draw(st.sampled_from([0.4, 0.7, 1.0]))
    q, k, v = _qkv(rng, draw(batch_shapes), n_q * block, n_k * block, draw(st.integers(1, 4)), 2)
    return Case((q, k, v, layout, block, draw(st.booleans()), None))


@st.composite
def flash_case(draw: st.DrawFn) -> Case:
    rng = seeded_rng(draw)
    L_q, L_k = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    q, k, v = _qkv(
        rng, draw(batch_shapes), L_q, L_k, draw(st.integers(1, 4)), draw(st.integers(1, 3))
    )
    return Case(
        (q, k, v, draw(st.booleans()), draw(st.integers(1, 5)), draw(st.sampled_from([None, 0.7])))
    )


@st.composite
def shift_case(draw: st.DrawFn) -> Case:
    rng = seeded_rng(draw)
    L_q = draw(st.integers(1, 5))
    return Case((rng.standard_normal((*draw(batch_shapes), L_q, L_q + draw(st.integers(0, 4)))),))


@st.composite
def xl_case(draw: st.DrawFn) -> Case:
    rng = seeded_rng(draw)
    batch = draw(batch_shapes)
    L_q, M, d = draw(st.integers(1, 5)), draw(st.integers(0, 4)), draw(st.integers(1, 4))
    K = M + L_q
    r_shape = draw(st.sampled_from([(K, d), (*batch, K, d)]))
    return Case(
        (
            rng.standard_normal((*batch, L_q, d)),
            rng.standard_normal((*batch, K, d)),
            rng.standard_normal(r_shape),
            rng.standard_normal(d),
            rng.standard_normal(d),
        )
    )


for _name, _inputs in (
    ("strided_mask", strided_case()),
    ("fixed_mask", fixed_case()),
    ("sliding_window_mask", window_case()),
    ("global_mask", global_case()),
    ("bigbird_layout", bigbird_case()),
    ("expand_layout", layout_case()),
):
    SPECS.append(_mask_spec(_name, _inputs))

_ATTENTION_DTYPES = ("float64", "float32", "float16", "bfloat16")
for _name, _inputs, _float_args in (
    ("sliding_window_attention", sliding_attention_case(), (0, 1, 2)),
    ("block_sparse_attention", block_sparse_case(), (0, 1, 2)),
    ("flash_attention", flash_case(), (0, 1, 2)),
):
    SPECS.append(
        Spec(
            "long_sequences",
            _name,
            _inputs,
            dtypes=_ATTENTION_DTYPES,
            tolerance=ATTENTION_TOL,
            float_args=_float_args,
        )
    )

SPECS.append(
    Spec(
        "long_sequences",
        "rel_shift",
        shift_case(),
        dtypes=_ATTENTION_DTYPES,
        tolerance={d: (0.0, 0.0) for d in _ATTENTION_DTYPES},
    )
)
SPECS.append(
    Spec(
        "long_sequences",
        "xl_relative_logits",
        xl_case(),
        dtypes=("float64", "float32", "bfloat16"),
        tolerance={"float32": (1e-4, 1e-4), "bfloat16": (5e-2, 2e-1)},
    )
)
