"""Conformance specs for Chapter 1 (matrix multiplication)."""

from __future__ import annotations

from hypothesis import strategies as st

from course_lib.conformance import ALL_DTYPES, Case, Spec, batch_shapes, dims, normal_arrays

#: The mirrored functions of this chapter and how to check them (see course_lib.conformance).
SPECS: list[Spec] = []


@st.composite
def two_matrices(draw: st.DrawFn) -> Case:
    """X (..., n, m) and Y (..., m, k) with independently broadcast batch dimensions."""
    n, m, k = draw(dims), draw(dims), draw(dims)
    batch = draw(batch_shapes)
    # Y gets either the same batch, a broadcastable one (1s), or none at all
    y_batch = draw(st.sampled_from([batch, tuple(1 for _ in batch), ()]))
    X, Y = draw(normal_arrays((*batch, n, m), (*y_batch, m, k)))
    return Case((X, Y))


for _name in ("matmul_entries", "matmul_columns", "matmul_rows", "matmul_outer", "outer_terms"):
    SPECS.append(
        Spec(
            topic="matmul",
            name=_name,
            inputs=two_matrices(),
            dtypes=ALL_DTYPES,
            # rtol/atol for sums of up to 6 products of N(0, 1) numbers
            tolerance={"float16": (1e-2, 2e-2), "bfloat16": (2e-2, 1e-1)},
        )
    )
