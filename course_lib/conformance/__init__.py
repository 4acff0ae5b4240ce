"""The conformance registry: every mirrored function, registered once, checked by one suite.

A chapter adds a module ``course_lib/conformance/<topic>.py`` with one :func:`register` call per
function::

    register(Spec(topic="matmul", name="matmul_rows", inputs=two_matrices()))

``tests/test_conformance.py`` then runs, for every spec and every dtype it lists, the NumPy
reference ``course_lib.reference.<topic>.<name>`` and the PyTorch implementation
``course_lib.accelerated.<topic>.<name>`` on the same random inputs (drawn by hypothesis) and
checks that they agree within the dtype's tolerance; it also checks that both functions exist
with the same signature, and runs ``torch.autograd.gradcheck`` on the PyTorch side in float64.

Inputs are drawn as float64 NumPy arrays. The PyTorch side receives them converted to the
dtype under test on the course device; the reference receives *those same rounded values* back
in float64, so that the comparison measures the error of the computation, not of the input.
"""

from __future__ import annotations

import importlib
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
        topic: module name under ``reference/`` and ``accelerated/`` (e.g. ``"matmul"``).
        name: the function's public name, the same on both sides.
        inputs: a hypothesis strategy that draws a :class:`Case`.
        dtypes: the torch dtypes to test the accelerated side in.
        tolerance: ``{dtype: (rtol, atol)}`` overriding :data:`DEFAULT_TOLERANCE`.
        gradcheck: run ``torch.autograd.gradcheck`` on the accelerated side (float64 inputs).
        float_args: indices of positional arguments that are data (converted to the test dtype);
            ``None`` means every floating NumPy array argument.
    """

    topic: str
    name: str
    inputs: st.SearchStrategy[Case]
    dtypes: tuple[str, ...] = ("float64", "float32")
    tolerance: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    gradcheck: bool = True
    float_args: tuple[int, ...] | None = None

    @property
    def key(self) -> str:
        return f"{self.topic}.{self.name}"

    def tol(self, dtype: str) -> tuple[float, float]:
        return self.tolerance.get(dtype, DEFAULT_TOLERANCE[dtype])

    def functions(self) -> tuple[Callable[..., Any], Callable[..., Any]]:
        ref = importlib.import_module(f"course_lib.reference.{self.topic}")
        acc = importlib.import_module(f"course_lib.accelerated.{self.topic}")
        return getattr(ref, self.name), getattr(acc, self.name)


REGISTRY: dict[str, Spec] = {}


def register(spec: Spec) -> Spec:
    """Add a spec to the registry (one per function; registering twice is an error)."""
    if spec.key in REGISTRY:
        raise ValueError(f"{spec.key} is registered twice in the conformance suite")
    for d in spec.dtypes:
        if d not in TORCH_DTYPES:
            raise ValueError(f"{spec.key}: unknown dtype {d!r}; use one of {list(TORCH_DTYPES)}")
    REGISTRY[spec.key] = spec
    return spec


def load_all() -> list[Spec]:
    """Import every module of this package (each registers its specs) and return all specs."""
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
    return [REGISTRY[k] for k in sorted(REGISTRY)]


# ----------------------------------------------------------------------------- running a case
def _is_data(i: int, value: Any, spec: Spec) -> bool:
    if spec.float_args is not None:
        return i in spec.float_args
    return isinstance(value, np.ndarray) and value.dtype.kind == "f"


def prepare(
    spec: Spec, case: Case, dtype: str, device: torch.device, requires_grad: bool = False
) -> tuple[tuple[Any, ...], dict[str, Any], tuple[Any, ...], dict[str, Any]]:
    """Return (torch args, torch kwargs, reference args, reference kwargs) for one case."""
    tdtype = TORCH_DTYPES[dtype]
    t_args, r_args = [], []
    for i, a in enumerate(case.args):
        if _is_data(i, a, spec):
            t = torch.as_tensor(a, dtype=tdtype, device=device)
            t_args.append(t.requires_grad_(requires_grad))
            r_args.append(t.detach().to("cpu", torch.float64).numpy())
        elif isinstance(a, np.ndarray):  # masks, indices: keep their dtype
            t_args.append(torch.as_tensor(a, device=device))
            r_args.append(a)
        else:
            t_args.append(a)
            r_args.append(a)
    t_kwargs, r_kwargs = {}, {}
    for k, v in case.kwargs.items():
        if isinstance(v, np.ndarray):
            t_kwargs[k] = torch.as_tensor(v, device=device)
        else:
            t_kwargs[k] = v
        r_kwargs[k] = v
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
def normal_arrays(*shapes: tuple[int, ...], scale: float = 1.0) -> st.SearchStrategy[tuple]:
    """Strategy for a tuple of standard-normal float64 arrays of the given shapes (seeded)."""

    @st.composite
    def draw(draw_fn: st.DrawFn) -> tuple[np.ndarray, ...]:
        rng = np.random.default_rng(draw_fn(st.integers(0, 2**32 - 1)))
        return tuple(scale * rng.standard_normal(s) for s in shapes)

    return draw()


dims = st.integers(min_value=1, max_value=6)
batch_shapes = st.lists(st.integers(min_value=1, max_value=3), min_size=0, max_size=2).map(tuple)
