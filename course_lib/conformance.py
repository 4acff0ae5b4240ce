"""The conformance framework: every mirrored function, listed once, checked by one suite.

A chapter folder ``course_lib/<chapter>/`` lists its mirrored functions in ``spec.py``, one
:class:`Spec` per function in a module-level list ``SPECS``::

    SPECS = [Spec(topic="matmul", name="matmul_rows", inputs=two_matrices())]

``tests/test_conformance.py`` finds every chapter's ``spec.py`` (:func:`load_all`) and runs, for
every spec and every dtype it lists, the NumPy reference ``course_lib.<chapter>.reference.<name>``
and the PyTorch implementation ``course_lib.<chapter>.accelerated.<name>`` on the same random
inputs (drawn by hypothesis); they must agree within the dtype's tolerance. It also checks that
both functions exist with the same signature, and runs ``torch.autograd.gradcheck`` on the
PyTorch side in float64.

Inputs are drawn as float64 NumPy arrays. The PyTorch side receives the floating ones (positional
or keyword) converted to the dtype under test on the course device; the reference receives *those
same rounded values* back in float64, so that the comparison measures the error of the
computation, not of the input.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

#: (rtol, atol) per dtype, used unless a spec overrides them.
DEFAULT_TOLERANCE: Mapping[str, tuple[float, float]] = {
    "float64": (1e-10, 1e-12),
    "float32": (1e-4, 1e-5),
    "float16": (1e-2, 1e-2),
    "bfloat16": (5e-2, 5e-2),
}

#: Every floating dtype the suite knows, widest first.
ALL_DTYPES = ("float64", "float32", "float16", "bfloat16")

TORCH_DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}


@dataclass(frozen=True)
class Case:
    """One set of arguments for a mirrored function: arrays are float64 NumPy arrays."""

    args: tuple[Any, ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Spec:
    """How to check one mirrored function.

    Attributes:
        topic: the chapter folder that holds ``reference.py`` and ``accelerated.py`` (``"matmul"``).
        name: the function's public name, the same on both sides.
        inputs: a hypothesis strategy that draws a :class:`Case`.
        dtypes: the torch dtypes to test the accelerated side in.
        tolerance: ``{dtype: (rtol, atol)}`` overriding :data:`DEFAULT_TOLERANCE`.
        gradcheck: run ``torch.autograd.gradcheck`` on the accelerated side (float64 inputs).
        float_args: indices of positional arguments that are data (converted to the test dtype);
            ``None`` means every floating NumPy array argument.
        widens_16bit: float16/bfloat16 inputs give float32 outputs (computed and kept in float32,
            as quantisers do); otherwise every floating output keeps the input's dtype.
    """

    topic: str
    name: str
    inputs: st.SearchStrategy[Case]
    dtypes: tuple[str, ...] = ("float64", "float32")
    tolerance: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    gradcheck: bool = True
    float_args: tuple[int, ...] | None = None
    widens_16bit: bool = False

    @property
    def key(self) -> str:
        return f"{self.topic}.{self.name}"

    def output_dtype(self, dtype: str) -> torch.dtype:
        """The dtype the PyTorch side must return floating outputs in, for inputs of ``dtype``."""
        if self.widens_16bit and dtype in ("float16", "bfloat16"):
            return torch.float32
        return TORCH_DTYPES[dtype]

    def tol(self, dtype: str) -> tuple[float, float]:
        return self.tolerance.get(dtype, DEFAULT_TOLERANCE[dtype])

    def functions(self) -> tuple[Callable[..., Any], Callable[..., Any]]:
        ref = importlib.import_module(f"course_lib.{self.topic}.reference")
        acc = importlib.import_module(f"course_lib.{self.topic}.accelerated")
        return getattr(ref, self.name), getattr(acc, self.name)


def chapters_with_specs() -> list[str]:
    """The chapter folders of ``course_lib`` that have a ``spec.py``, sorted."""
    import course_lib

    return sorted(
        info.name
        for info in pkgutil.iter_modules(course_lib.__path__)
        if info.ispkg and importlib.util.find_spec(f"course_lib.{info.name}.spec") is not None
    )


def load_all() -> list[Spec]:
    """Every chapter's ``SPECS``, checked for duplicates and unknown dtypes, sorted by key."""
    specs: dict[str, Spec] = {}
    for chapter in chapters_with_specs():
        module = importlib.import_module(f"course_lib.{chapter}.spec")
        for spec in module.SPECS:
            if spec.key in specs:
                raise ValueError(f"{spec.key} is listed twice in the conformance specs")
            if spec.topic != chapter:
                raise ValueError(f"{spec.key} is listed in course_lib/{chapter}/spec.py")
            unknown = [d for d in spec.dtypes if d not in TORCH_DTYPES]
            if unknown:
                raise ValueError(f"{spec.key}: unknown dtype {unknown[0]!r}; use {ALL_DTYPES}")
            specs[spec.key] = spec
    return [specs[k] for k in sorted(specs)]


# ----------------------------------------------------------------------------- running a case
def _convert(
    value: Any, is_data: bool, dtype: torch.dtype, device: torch.device, requires_grad: bool
) -> tuple[Any, Any]:
    """One argument as (PyTorch side, reference side).

    A floating array that is data becomes a tensor of the tested dtype; the reference gets its
    rounded values back in float64. Other arrays (masks, indices) keep their dtype.
    """
    if not isinstance(value, np.ndarray):
        return value, value
    if is_data and value.dtype.kind == "f":
        t = torch.as_tensor(value, dtype=dtype, device=device).requires_grad_(requires_grad)
        return t, t.detach().to("cpu", torch.float64).numpy()
    return torch.as_tensor(value, device=device), value


def prepare(
    spec: Spec, case: Case, dtype: str, device: torch.device, requires_grad: bool = False
) -> tuple[tuple[Any, ...], dict[str, Any], tuple[Any, ...], dict[str, Any]]:
    """Return (torch args, torch kwargs, reference args, reference kwargs) for one case."""
    tdtype = TORCH_DTYPES[dtype]
    t_args, r_args = [], []
    for i, a in enumerate(case.args):
        is_data = spec.float_args is None or i in spec.float_args
        t, r = _convert(a, is_data, tdtype, device, requires_grad)
        t_args.append(t)
        r_args.append(r)
    t_kwargs, r_kwargs = {}, {}
    for k, v in case.kwargs.items():
        t_kwargs[k], r_kwargs[k] = _convert(v, spec.float_args is None, tdtype, device, False)
    return tuple(t_args), t_kwargs, tuple(r_args), r_kwargs


def to_numpy(x: Any) -> Any:
    """Convert (nested) outputs to float64 NumPy arrays for comparison."""
    if isinstance(x, torch.Tensor):
        x = x.detach().to("cpu")
        return x.to(torch.float64).numpy() if x.is_floating_point() else x.numpy()
    if isinstance(x, tuple | list):
        return type(x)(to_numpy(v) for v in x)
    if isinstance(x, dict):
        return {k: to_numpy(v) for k, v in x.items()}
    return np.asarray(x)


def assert_agree(ref_out: Any, acc_out: Any, rtol: float, atol: float, what: str) -> None:
    """Assert that two (nested) outputs agree elementwise, NaNs compared as NaNs."""
    ref_np, acc_np = to_numpy(ref_out), to_numpy(acc_out)
    if isinstance(ref_np, tuple | list):
        assert isinstance(acc_np, tuple | list) and len(acc_np) == len(ref_np), (
            f"{what}: the reference returned {len(ref_np)} outputs, PyTorch {acc_np!r}"
        )
        for i, (r, a) in enumerate(zip(ref_np, acc_np, strict=True)):
            assert_agree(r, a, rtol, atol, f"{what}[{i}]")
        return
    if isinstance(ref_np, dict):
        assert set(ref_np) == set(acc_np), f"{what}: keys differ"
        for k in ref_np:
            assert_agree(ref_np[k], acc_np[k], rtol, atol, f"{what}[{k!r}]")
        return
    assert ref_np.shape == acc_np.shape, (
        f"{what}: shapes differ, reference {ref_np.shape} vs PyTorch {acc_np.shape}"
    )
    np.testing.assert_allclose(
        acc_np.astype(np.float64),
        ref_np.astype(np.float64),
        rtol=rtol,
        atol=atol,
        equal_nan=True,
        err_msg=what,
    )


# ----------------------------------------------------------------------- input strategies
def seeded_rng(draw: st.DrawFn) -> np.random.Generator:
    """A NumPy generator seeded from hypothesis, so that a failing case replays exactly."""
    return np.random.default_rng(draw(st.integers(0, 2**32 - 1)))


def normal_arrays(*shapes: tuple[int, ...], scale: float = 1.0) -> st.SearchStrategy[tuple]:
    """Strategy for a tuple of standard-normal float64 arrays of the given shapes (seeded)."""

    @st.composite
    def draw(draw_fn: st.DrawFn) -> tuple[np.ndarray, ...]:
        rng = seeded_rng(draw_fn)
        return tuple(scale * rng.standard_normal(s) for s in shapes)

    return draw()


dims = st.integers(min_value=1, max_value=6)
batch_shapes = st.lists(st.integers(min_value=1, max_value=3), min_size=0, max_size=2).map(tuple)
