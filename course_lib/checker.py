"""The machinery every exercise checker is built from.

A chapter's ``exercises.py`` builds each checker from these pieces: :func:`seeded` for the
random test inputs (the same on every run in a notebook), :func:`check_cases` to run the
learner's function on named cases, :func:`diagnose` / :func:`diagnose_number` to say what is
off, and :func:`first_mistake` to name a known wrong answer ("you forgot the 1/sqrt(d_k)").

**Writing a checker that ``./course grade`` can use** (tools/grade_judge.py). When a class is
graded, a checker runs in the grader's process and the learner's function runs in the
submission's sandboxed process: the function the checker receives is a proxy, and every call
of it sends the arguments across a pipe and brings the result back. So a checker must:

* take the learner's objects as its arguments (``check.NAME(fn1, fn2, value)``) and make every
  input itself; in the worksheet, a checker call names only the learner's objects or literals;
* pass the learner's function *plain data* only: ``None``, ``bool``, ``int``, ``float``,
  ``complex``, ``str``, ``bytes``, tuples, lists, dicts, sets, NumPy arrays of numbers, PyTorch
  tensors, NumPy/PyTorch dtypes, and dataclasses or named tuples defined in ``course_lib``
  (rebuilt from their fields). A model, a tokenizer, an open file or a callback cannot cross:
  pass its weights (``model.parameter_dict()``), its config and the data instead;
* expect back plain data in the same types (a NumPy subclass arrives as a plain array, a
  tensor detached) or, for anything else (a generator, an instance of the learner's class),
  a proxy whose methods, ``len``, indexing and iteration work but which never equals anything
  but itself; changes the function makes to a list, dict, array or tensor argument come back
  into it, as in one process;
* compute every expected value itself: never from something the learner's function returned
  or changed (:func:`check_cases` passes the function copies of each case's arguments);
* draw random inputs from :func:`seeded`, which a grading run seeds afresh
  (:func:`fresh_inputs`), so that answers cannot be hard-coded; keep tolerances wide enough
  for any seed;
* measure memory only with ``tracemalloc`` around the call (``course_lib.measure.
  peak_numpy_memory``): the grader reports the submission's resident growth there.

A predict-then-check exercise calls :func:`check_prediction` with the learner's variable as
its first argument; the grader takes every other argument (``actual``) from its own run of the
worksheet, so ``actual`` must be computed by the worksheet's cells, never from the learner's
own functions. ``tests/test_grade_checkers.py`` grades every chapter's key this way.
"""

from __future__ import annotations

import copy
import html
import math
import re
import sys
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from course_lib.checks import is_tensor


@dataclass
class Outcome:
    """The verdict of a checker: truthy when the exercise is solved; displays itself in Jupyter."""

    title: str
    passed: bool
    details: list[str] = field(default_factory=list)
    exercise: tuple[str, str] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.exercise is None:
            self.exercise = _which_exercise(self.title)

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        head = f"{'✅ Correct' if self.passed else '❌ Not yet'}: {self.title}"
        return "\n".join([head, *(f"   - {d}" for d in self.details)])

    __repr__ = __str__

    def _repr_html_(self) -> str:
        _note_progress(self)  # shown to the learner in a notebook: their progress counts it
        colour = "#0a7d36" if self.passed else "#b3261e"
        items = "".join(f"<li>{html.escape(d)}</li>" for d in self.details)
        verdict = "✅ Correct" if self.passed else "❌ Not yet"
        return (
            f'<div class="course-check" style="border-left:4px solid {colour};padding:4px 10px">'
            f"<b>{verdict}</b>: {html.escape(self.title)}<ul>{items}</ul></div>"
        )


_EXERCISES = re.compile(r"course_lib\.(\w+)\.exercises$")


def _which_exercise(title: str) -> tuple[str, str] | None:
    """(chapter package, checker) of the checker that is making this outcome, from the stack:
    the first ``course_lib.<package>.exercises`` function, else a ``check_prediction`` called
    from a notebook whose ``check`` is a chapter's exercises module."""
    frame = sys._getframe(2)
    predicted = None
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        found = _EXERCISES.match(module)
        if found:
            return found.group(1), frame.f_code.co_name
        if frame.f_code.co_name == "check_prediction" and module == __name__:
            predicted = title.removeprefix("your prediction of ")
        elif predicted is not None:
            check = getattr(frame.f_globals.get("check"), "__name__", "")
            found = _EXERCISES.match(check)
            return (found.group(1), f"prediction: {predicted}") if found else None
        frame = frame.f_back
    return None


def _note_progress(outcome: Outcome) -> None:
    """Record a shown verdict in the learner's progress file (course_lib.progress)."""
    from course_lib import progress

    if outcome.exercise is None or not progress.enabled():
        return
    try:
        progress.record(*outcome.exercise, outcome.passed)
    except OSError:
        pass  # a read-only cache folder never breaks an exercise


_RUN_SEED: int | None = None  # set by a grading run: fresh inputs that cannot be hard-coded


def fresh_inputs(run_seed: int | None) -> None:
    """Make :func:`seeded` mix ``run_seed`` into every checker's seed (``./course grade`` does,
    once per grading run); ``None`` restores the fixed inputs of a notebook."""
    global _RUN_SEED
    _RUN_SEED = None if run_seed is None else int(run_seed)


def seeded(seed: int) -> np.random.Generator:
    """The generator of a checker's random inputs: a fixed seed, so feedback is reproducible
    (in a grading run, the seed mixed with the run's own: see :func:`fresh_inputs`).

    >>> int(seeded(0).integers(100)) == int(seeded(0).integers(100))
    True
    """
    return np.random.default_rng(seed if _RUN_SEED is None else [seed, _RUN_SEED])


def first_mistake(
    got: Any, mistakes: Iterable[tuple[Any, str]], *, rtol: float = 1e-6, atol: float = 1e-8
) -> str | None:
    """The hint of the first known wrong answer that ``got`` equals, or None.

    ``mistakes`` holds ``(wrong answer, hint)`` pairs, most telling first; arrays are compared
    by shape and values.

    >>> first_mistake([2.0, 4.0], [(np.array([1.0, 2.0]), "unscaled"), (np.array([2.0, 4.0]), "doubled")])
    'doubled'
    >>> first_mistake([0.0], [(np.array([1.0]), "off by one")]) is None
    True
    """
    arr = to_array(got)
    if arr is None:
        return None
    for wrong, hint in mistakes:
        w = np.asarray(wrong, dtype=np.float64)
        if arr.shape == w.shape and np.allclose(arr, w, rtol=rtol, atol=atol):
            return hint
    return None


def to_array(x: Any) -> np.ndarray | None:
    """The learner's output as a float64 array, or None if it is not numeric array-like."""
    if is_tensor(x):
        x = x.detach().cpu()
        x = x.double() if x.is_floating_point() else x
        return x.numpy().astype(np.float64)
    try:
        arr = np.asarray(x)
    except Exception:
        return None
    if arr.dtype.kind not in "biuf":
        return None
    return arr.astype(np.float64)


def diagnose(
    got: Any, expected: np.ndarray, *, rtol: float = 1e-6, atol: float = 1e-8
) -> str | None:
    """Compare an output with the expected array; return None if it matches, else what is off.

    >>> print(diagnose(np.ones((3, 2)), np.ones((2, 3))))
    the result has shape (3, 2) but should have shape (2, 3): it looks transposed
    >>> print(diagnose(2 * np.eye(2), np.eye(2)))
    the values are off by a constant factor: yours are 2 times the expected ones
    >>> diagnose(np.eye(2), np.eye(2)) is None
    True
    """
    expected = np.asarray(expected, dtype=np.float64)
    if got is None:
        return "the function returned None: did you forget a `return` statement?"
    arr = to_array(got)
    if arr is None:
        return f"the function returned a {type(got).__name__}, not an array of numbers"
    if arr.shape != expected.shape:
        msg = f"the result has shape {arr.shape} but should have shape {expected.shape}"
        if arr.ndim >= 2 and arr.shape == expected.swapaxes(-1, -2).shape:
            msg += ": it looks transposed"
        elif arr.size == expected.size:
            msg += (
                ": the right number of values, arranged wrongly (a reshape instead of a transpose?)"
            )
        return msg
    if not np.all(np.isfinite(arr)) and np.all(np.isfinite(expected)):
        return "the result contains NaN or inf where every expected value is finite"
    if np.allclose(arr, expected, rtol=rtol, atol=atol):
        return None
    if (
        arr.ndim >= 2
        and arr.shape[-1] == arr.shape[-2]
        and np.allclose(arr, expected.swapaxes(-1, -2), rtol=rtol, atol=atol)
    ):
        return "the result is the transpose of the expected one"
    flat_e, flat_a = expected.ravel(), arr.ravel()
    nz = np.abs(flat_e) > 1e-12
    if nz.any():
        ratio = flat_a[nz] / flat_e[nz]
        if np.allclose(ratio, ratio[0], rtol=1e-6) and not np.isclose(ratio[0], 1):
            r = ratio[0]
            return f"the values are off by a constant factor: yours are {r:.4g} times the expected ones"
    err = np.abs(arr - expected)
    idx = np.unravel_index(int(np.argmax(err)), err.shape)
    return (
        f"wrong values: at index {tuple(int(i) for i in idx)} you return {arr[idx]:.6g} "
        f"but the expected value is {expected[idx]:.6g}"
    )


def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, str | None]:
    """Call the learner's function; return (result, None) or (None, a description of the error)."""
    try:
        return fn(*args, **kwargs), None
    except NotImplementedError:
        return None, "the function is not implemented yet (it raises NotImplementedError)"
    except Exception as exc:
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        return None, f"it raised {type(exc).__name__}: {exc} (line {frame.lineno})"


def _copies(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Copies of a case's arguments, so that a function that changes its inputs cannot change
    the case it is compared on."""
    try:
        return copy.deepcopy(tuple(args))
    except Exception:
        return tuple(args)


def check_cases(
    title: str,
    fn: Callable[..., Any],
    cases: Iterable[tuple[str, tuple[Any, ...], Any]],
    *,
    compare: Callable[[Any, Any], str | None] = diagnose,
    require: bool = False,
    success: str = "",
) -> Outcome:
    """Run ``fn`` on each ``(description, args, expected)`` case and stop at the first failure."""
    if not callable(fn):
        outcome = Outcome(title, False, [f"expected a function, got {type(fn).__name__}"])
    else:
        outcome = Outcome(title, True, [success] if success else [])
        n = 0
        for description, args, expected in cases:
            n += 1
            got, error = call(fn, *_copies(args))
            problem = error or compare(got, expected)
            if problem:
                outcome = Outcome(title, False, [f"on {description}: {problem}"])
                break
        else:
            outcome.details.append(f"passed all {n} test cases")
    if require and not outcome.passed:
        raise AssertionError(str(outcome))
    return outcome


def diagnose_number(got: Any, want: float, mistakes: dict[str, float] | None = None) -> str | None:
    """Compare a scalar answer with ``want``; name the mistake when it equals a known wrong value.

    ``mistakes`` maps a hint to the value that mistake produces.

    >>> diagnose_number(0.5, 0.5) is None
    True
    >>> print(diagnose_number(1.0, 0.5, {"you forgot to halve": 1.0}))
    you return 1, the right value is 0.5: you forgot to halve
    >>> print(diagnose_number("0.5", 0.5))
    return a number, got str
    """
    if isinstance(got, bool | str | bytes):
        return f"return a number, got {type(got).__name__}"
    try:
        value = float(got)
    except (TypeError, ValueError):
        return f"return a number, got {type(got).__name__}"
    if math.isclose(value, want, rel_tol=1e-9, abs_tol=1e-12):
        return None
    message = f"you return {value:.6g}, the right value is {want:.6g}"
    for hint, wrong in (mistakes or {}).items():
        if math.isclose(value, wrong, rel_tol=1e-9, abs_tol=1e-12):
            return f"{message}: {hint}"
    return message


def check_prediction(
    prediction: Any,
    actual: Any,
    *,
    what: str,
    rtol: float = 0.05,
    atol: float = 0.0,
    explanation: str = "",
) -> Outcome:
    """A predict-then-check exercise: compare what the learner wrote down with what ran.

    ``prediction`` is the learner's answer (a number, a string, a bool, a tuple such as a shape,
    or an array); ``actual`` the computed one. Numbers count as right within ``rtol``/``atol``
    (a prediction is an estimate); everything else must be equal. ``None`` means "not predicted
    yet". The verdict says both values and, once the prediction is in, ``explanation``.

    >>> check_prediction(None, 4, what="the number of heads").passed
    False
    >>> print(check_prediction(3.9, 4.0, what="the variance", explanation="d_k = 4"))
    ✅ Correct: your prediction of the variance
       - you predicted 3.9; the cell computed 4
       - d_k = 4
    >>> check_prediction((2, 3), (3, 2), what="the shape").passed
    False
    """
    title = f"your prediction of {what}"
    if prediction is None or prediction is ...:
        return Outcome(title, False, ["write your prediction first (replace None), then run"])
    if isinstance(actual, bool | str | tuple) or isinstance(prediction, bool | str | tuple):
        right = prediction == actual
    else:
        a, p = to_array(actual), to_array(prediction)
        right = (
            a is not None
            and p is not None
            and a.shape == p.shape
            and bool(np.allclose(p, a, rtol=rtol, atol=atol))
        )

    def show(x: Any) -> str:
        return f"{x:.4g}" if isinstance(x, float) else str(x)

    details = [f"you predicted {show(prediction)}; the cell computed {show(actual)}"]
    if explanation:
        details.append(explanation)
    return Outcome(title, bool(right), details)
