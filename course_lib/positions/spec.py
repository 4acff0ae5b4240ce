"""Conformance specs for Chapter 6 (positional encodings): NumPy reference vs PyTorch."""

from __future__ import annotations

from hypothesis import strategies as st

from course_lib.conformance import ALL_DTYPES, Case, Spec, batch_shapes, dims, seeded_rng

#: The mirrored functions of this chapter and how to check them (see course_lib.conformance).
SPECS: list[Spec] = []

LAYOUTS = st.sampled_from(["interleaved", "concatenated"])
widths = st.sampled_from([2, 4, 6, 8])  # the encodings need an even width
# sin and cos are in [-1, 1]: the only error is rounding the output (angles are computed in
# float32 at least); positions up to 50 are exact in float16 and bfloat16 when integers.
TRIG_TOL = {"float32": (1e-4, 1e-5), "float16": (1e-2, 2e-3), "bfloat16": (2e-2, 1e-2)}
# sums of up to 6 products of N(0, 1) numbers, as in chapter 1
DOT_TOL = {"float16": (1e-2, 2e-2), "bfloat16": (2e-2, 1e-1)}
# a rotation mixes two N(0, 1) numbers with cos and sin weights
ROT_TOL = {"float16": (1e-2, 1e-2), "bfloat16": (3e-2, 3e-2)}


@st.composite
def positions_case(draw: st.DrawFn) -> Case:
    """Positions of any shape (integers or reals in [0, 50]), a width, a base and a layout."""
    rng = seeded_rng(draw)
    shape = (*draw(batch_shapes), draw(dims))
    pos = rng.integers(0, 51, shape).astype(float)
    if draw(st.booleans()):
        pos = pos + rng.random(shape)  # real positions are allowed too
    base = draw(st.sampled_from([10000.0, 100.0]))
    return Case((pos, draw(widths), base, draw(LAYOUTS)))


@st.composite
def offsets_case(draw: st.DrawFn) -> Case:
    """Offsets (a scalar or a vector, negative allowed), a width, a base and a layout."""
    rng = seeded_rng(draw)
    shape = draw(st.sampled_from([(), (3,), (2, 2)]))
    k = rng.integers(-20, 21, shape).astype(float)
    return Case((k, draw(widths), draw(st.sampled_from([10000.0, 100.0])), draw(LAYOUTS)))


@st.composite
def one_hot_case(draw: st.DrawFn) -> Case:
    rng = seeded_rng(draw)
    L = draw(dims)
    x = rng.standard_normal((*draw(batch_shapes), L, draw(dims)))
    max_len = draw(st.sampled_from([None, L, L + 3]))
    return Case((x, max_len))


@st.composite
def table_case(draw: st.DrawFn) -> Case:
    rng = seeded_rng(draw)
    L, d = draw(dims), draw(dims)
    offset = draw(st.integers(0, 3))
    x = rng.standard_normal((*draw(batch_shapes), L, d))
    table = rng.standard_normal((L + offset + draw(st.integers(0, 3)), d))
    return Case((x, table, offset))


@st.composite
def relative_bias_case(draw: st.DrawFn) -> Case:
    rng = seeded_rng(draw)
    K = draw(st.integers(0, 4))
    values = rng.standard_normal((*draw(batch_shapes), 2 * K + 1))
    return Case((values, draw(dims)))


@st.composite
def alibi_case(draw: st.DrawFn) -> Case:
    rng = seeded_rng(draw)
    slopes = rng.random(draw(st.sampled_from([(), (1,), (4,), (2, 3)])))
    return Case((slopes, draw(dims), draw(st.booleans())))


@st.composite
def relative_key_case(draw: st.DrawFn) -> Case:
    """q (..., L, d) and a relative table (..., 2K+1, d) whose batch broadcasts with q's."""
    rng = seeded_rng(draw)
    batch = draw(batch_shapes)
    L, d, K = draw(dims), draw(dims), draw(st.integers(0, 4))
    t_batch = draw(st.sampled_from([batch, tuple(1 for _ in batch), ()]))
    q = rng.standard_normal((*batch, L, d))
    rel = rng.standard_normal((*t_batch, 2 * K + 1, d))
    return Case((q, rel))


@st.composite
def relative_value_case(draw: st.DrawFn) -> Case:
    rng = seeded_rng(draw)
    L, d_v, K = draw(dims), draw(dims), draw(st.integers(0, 4))
    w = rng.random((*draw(batch_shapes), L, L))
    w = w / w.sum(-1, keepdims=True)  # rows of attention weights
    return Case((w, rng.standard_normal((2 * K + 1, d_v))))


@st.composite
def music_case(draw: st.DrawFn) -> Case:
    """q (..., L, d) and E_r (M, d) or (..., M, d) with M >= L rows (offsets -(M-1)..0)."""
    rng = seeded_rng(draw)
    batch = draw(batch_shapes)
    L, d = draw(dims), draw(dims)
    M = L + draw(st.integers(0, 2))
    e_batch = draw(st.sampled_from([(), batch]))
    return Case((rng.standard_normal((*batch, L, d)), rng.standard_normal((*e_batch, M, d))))


@st.composite
def skew_case(draw: st.DrawFn) -> Case:
    rng = seeded_rng(draw)
    L = draw(dims)
    return Case((rng.standard_normal((*draw(batch_shapes), L, L)),))


@st.composite
def rotary_case(draw: st.DrawFn) -> Case:
    """x (..., L, d) with d even; positions None, integer (L,) or integer (..., L)."""
    rng = seeded_rng(draw)
    batch = draw(batch_shapes)
    L = draw(dims)
    x = rng.standard_normal((*batch, L, draw(widths)))
    kind = draw(st.sampled_from(["default", "vector", "full"]))
    positions = None
    if kind == "vector":
        positions = rng.integers(-5, 40, (L,))  # integer arrays keep their dtype: not data
    elif kind == "full":
        positions = rng.integers(0, 40, (*batch, L))
    return Case((x, positions, draw(st.sampled_from([10000.0, 500.0])), draw(LAYOUTS)))


SPECS.append(
    Spec(
        "positions",
        "sinusoidal_encoding",
        positions_case(),
        dtypes=ALL_DTYPES,
        tolerance=TRIG_TOL,
    )
)
SPECS.append(
    Spec(
        "positions",
        "sinusoidal_shift_matrix",
        offsets_case(),
        dtypes=ALL_DTYPES,
        tolerance=TRIG_TOL,
    )
)
SPECS.append(Spec("positions", "concat_one_hot_positions", one_hot_case(), dtypes=ALL_DTYPES))
SPECS.append(Spec("positions", "add_position_table", table_case(), dtypes=ALL_DTYPES))
SPECS.append(Spec("positions", "relative_bias", relative_bias_case(), dtypes=ALL_DTYPES))
SPECS.append(Spec("positions", "alibi_bias", alibi_case(), dtypes=ALL_DTYPES))
for _name, _inputs in (
    ("relative_key_logits", relative_key_case()),
    ("relative_value_term", relative_value_case()),
    ("relative_logits_naive", music_case()),
    ("relative_logits_skewed", music_case()),
):
    SPECS.append(Spec("positions", _name, _inputs, dtypes=ALL_DTYPES, tolerance=DOT_TOL))
SPECS.append(Spec("positions", "skew", skew_case(), dtypes=ALL_DTYPES))
SPECS.append(
    Spec("positions", "rotary_embedding", rotary_case(), dtypes=ALL_DTYPES, tolerance=ROT_TOL)
)
