"""The CPU code paths the notebooks run on: the course's portability policy in one place.

A printed number that comes from a matrix product, a reduction or a trained model depends in
its last bits on which kernels computed it, and a rounding edge turns that into a different
printed digit. Three libraries pick their kernels by the CPU they find:

* PyTorch's matrix products are Intel MKL's. MKL takes a different code path on Intel and AMD
  and per instruction set. ``MKL_CBWR`` (conditional numerical reproducibility) fixes it, but on
  a CPU that is not Intel's MKL honours only ``COMPATIBLE`` (SSE2 kernels) and ``AUTO``: a
  request for the ``AVX2`` branch on an AMD EPYC runs ``AUTO`` (``MKL_VERBOSE`` says
  ``CNR:AUTO``), so ``COMPATIBLE`` is the one branch that gives the same bits on both makers.
* PyTorch's own kernels (elementwise maths, reductions, softmax, layer norm, random numbers)
  are compiled per instruction set and chosen at start (``ATEN_CPU_CAPABILITY``: ``avx2``,
  ``avx512``, ``default``); oneDNN's (GELU, convolutions) likewise (``ONEDNN_MAX_CPU_ISA``).
* NumPy's products are OpenBLAS's, whose kernels differ per CPU (``OPENBLAS_CORETYPE``:
  ``Haswell`` on this AMD EPYC and on AVX2 Intel CPUs, ``SkylakeX`` on AVX-512 ones), and NumPy's
  own ufuncs dispatch to AVX2 or AVX-512 loops (``NPY_DISABLE_CPU_FEATURES``).

And every one of them splits reductions by the number of threads. Measured on the course's
slowest machine (AMD EPYC, AVX2; ``benchmarks/test_timings.md`` and the README's "Portable"):
a matrix product changes bits under ``MKL_CBWR=COMPATIBLE``, ``torch.randn`` and softmax under
``ATEN_CPU_CAPABILITY=default``, GELU under ``ONEDNN_MAX_CPU_ISA=SSE41``, NumPy's products
under another ``OPENBLAS_CORETYPE`` and with 1 against 2 threads, and 30 steps of training
under each of these and under 1 against 2 threads.

So the policy:

* :data:`PINNED` is the path every stored output is written under (``./course notebooks``)
  and checked under (nbval, the simulated Colab): one thread, MKL's ``COMPATIBLE`` branch,
  PyTorch's and oneDNN's AVX2 kernels, OpenBLAS's Haswell kernels and NumPy's AVX2 loops, on
  any x86-64 CPU with AVX2 (Intel or AMD, with or without AVX-512). There the stored outputs
  are reproduced bit for bit.
* Elsewhere (Apple silicon, whose BLAS is Apple's Accelerate) no switch reaches the same
  bits: there the printed digits must be ones that do not move, which :data:`ALTERNATE`
  checks. It is another path on the same machine (MKL's own choice for the CPU, PyTorch's
  portable kernels, other OpenBLAS kernels and NumPy loops, two threads): the machine-
  sensitive notebooks must print the same under it (tests/test_portability.py), and
  ``python -m tools.portability`` shows any printed number near its rounding edge.

Standard library only: conftest.py, course.py's helpers and the tools import it cheaply.
"""

from __future__ import annotations

import os
import platform

PINNED = "pinned"
ALTERNATE = "alternate"
NATIVE = "native"
PATHS = (PINNED, ALTERNATE, NATIVE)

#: NumPy's dispatch targets above AVX2 (NumPy 2.4's names; older names are ignored by NumPy)
NUMPY_AVX512 = "X86_V4 AVX512_ICL AVX512_SPR AVX512F AVX512_SKX AVX512_CLX AVX512_CNL"

#: Every variable a path may set: a path's environment unsets the others it leaves out, so
#: that what the caller happens to have set does not leak into it.
KNOBS = (
    "MKL_CBWR",
    "ATEN_CPU_CAPABILITY",
    "ONEDNN_MAX_CPU_ISA",
    "OPENBLAS_CORETYPE",
    "NPY_DISABLE_CPU_FEATURES",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
)


def is_x86_64(machine: str | None = None) -> bool:
    """Whether the CPU is x86-64 (Intel or AMD), where the pinned kernels exist."""
    machine = (machine or platform.machine()).lower()
    return machine in ("x86_64", "amd64", "x64")


def has_avx2() -> bool:
    """Whether this CPU has AVX2 and FMA (NumPy's CPU detection; False where unknown)."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:  # NumPy 1.x, or no NumPy
        try:
            from numpy.core._multiarray_umath import __cpu_features__ as features
        except ImportError:
            return False
    return bool(features.get("AVX2")) and bool(features.get("FMA3"))


def threads(n: int) -> dict[str, str]:
    return {k: str(n) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}


def path_env(
    path: str = PINNED, *, machine: str | None = None, avx2: bool | None = None
) -> dict[str, str | None]:
    """The variables a kernel starts with on ``path`` (None: unset it).

    >>> path_env(PINNED, machine="x86_64", avx2=True)["MKL_CBWR"]
    'COMPATIBLE'
    >>> path_env(PINNED, machine="arm64")["OMP_NUM_THREADS"], path_env(PINNED, machine="arm64")["MKL_CBWR"]
    ('1', None)
    >>> path_env(ALTERNATE, machine="x86_64", avx2=True)["ATEN_CPU_CAPABILITY"]
    'default'
    >>> set(path_env(NATIVE).values())
    {None}
    """
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    env: dict[str, str | None] = dict.fromkeys(KNOBS)
    if path == NATIVE:
        return env
    x86 = is_x86_64(machine)
    avx2 = has_avx2() if avx2 is None and x86 else bool(avx2)
    if path == PINNED:
        env |= threads(1)
        if x86 and avx2:
            env |= {
                "MKL_CBWR": "COMPATIBLE",
                "ATEN_CPU_CAPABILITY": "avx2",
                "ONEDNN_MAX_CPU_ISA": "AVX2",
                "OPENBLAS_CORETYPE": "Haswell",
                "NPY_DISABLE_CPU_FEATURES": NUMPY_AVX512,
            }
    else:  # ALTERNATE: a different kernel in every library that has a switch, and two threads
        env |= threads(2)
        # ... that sleep while they wait: beside the tests' other worker on two cores, spinning
        # threads take turns for nothing (it changes no result)
        env["OMP_WAIT_POLICY"] = "PASSIVE"
        if x86:
            env |= {
                "MKL_CBWR": "AUTO",  # MKL's own choice for this CPU, deterministic run to run
                "ATEN_CPU_CAPABILITY": "default",
                "ONEDNN_MAX_CPU_ISA": "SSE41",
                "OPENBLAS_CORETYPE": "Sandybridge",  # AVX kernels: on every AVX2 CPU
                "NPY_DISABLE_CPU_FEATURES": "X86_V3 " + NUMPY_AVX512,  # NumPy's SSE4.2 loops
            }
    return env


def apply(env: dict[str, str], path: str = PINNED, **kwargs) -> dict[str, str]:
    """``env`` (a copy) with ``path``'s variables set and the other knobs unset."""
    out = dict(env)
    for key, value in path_env(path, **kwargs).items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def describe(path: str = PINNED) -> str:
    """One line: the variables ``path`` sets here.

    >>> describe(NATIVE)
    'native: whatever this machine picks (no variable set)'
    """
    env = {k: v for k, v in path_env(path).items() if v is not None}
    if not env:
        return f"{path}: whatever this machine picks (no variable set)"
    short = {NUMPY_AVX512: "<AVX-512>", "X86_V3 " + NUMPY_AVX512: "<AVX2,AVX-512>"}
    shown = " ".join(
        f"{k}={short.get(v, v)}"
        for k, v in env.items()
        if k not in ("MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
    )
    return f"{path}: {shown}"


def current() -> dict[str, str]:
    """The knobs set in this process's environment (for messages)."""
    return {k: os.environ[k] for k in KNOBS if k in os.environ}
