"""A learner's own record of the exercises they have solved, kept on their machine.

Each time a checker's verdict is shown in a notebook, :func:`record` writes the exercise, whether
it passed and when, to ``progress.json`` in the course's cache folder (``course_lib.paths``;
``COURSE_PROGRESS_FILE`` overrides the file). Nothing leaves the machine. ``./course progress``
prints passed/total per chapter and what is left; ``./course progress --reset`` forgets it all.
``COURSE_PROGRESS=off`` turns recording off (the tests and the notebook runs set it).

An exercise is known by its checker: ``("softmax", "stable_softmax")`` for
``check.stable_softmax(...)`` in the chapter whose checkers are ``course_lib.softmax.exercises``,
``("softmax", "prediction: the variance")`` for ``check_prediction(..., what="the variance")``.

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "progress.json")
>>> record("softmax", "stable_softmax", False, path=path)
>>> record("softmax", "stable_softmax", True, path=path)
>>> entry = load(path)["softmax"]["stable_softmax"]
>>> entry["passed"], entry["attempts"]
(True, 2)
>>> record("softmax", "stable_softmax", False, path=path)  # the latest verdict counts
>>> entry = load(path)["softmax"]["stable_softmax"]
>>> entry["passed"], entry["solved_before"]
(False, True)
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["enabled", "load", "progress_file", "record", "reset"]


def enabled() -> bool:
    """False when ``COURSE_PROGRESS`` is off, 0, false or no."""
    return os.environ.get("COURSE_PROGRESS", "on").strip().lower() not in {
        "off",
        "0",
        "false",
        "no",
    }


def progress_file() -> Path:
    """Where the record lives."""
    if os.environ.get("COURSE_PROGRESS_FILE"):
        return Path(os.environ["COURSE_PROGRESS_FILE"])
    from course_lib.paths import cache_dir

    return cache_dir() / "progress.json"


def load(path: str | os.PathLike | None = None) -> dict[str, dict[str, dict]]:
    """The record: ``{chapter package: {exercise: {"passed", "when", "attempts",
    "solved_before"}}}``; ``passed`` is the latest verdict, ``solved_before`` whether an earlier
    one passed (a solved exercise whose latest check failed is shown as failing again)."""
    path = Path(path) if path is not None else progress_file()
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def record(
    chapter: str, exercise: str, passed: bool, *, path: str | os.PathLike | None = None
) -> None:
    """Note one verdict; the latest one counts, and the attempts are counted."""
    if not isinstance(chapter, str) or not isinstance(exercise, str) or not chapter or not exercise:
        raise TypeError(
            f"chapter and exercise must be non-empty strings, got {chapter!r}, {exercise!r}"
        )
    path = Path(path) if path is not None else progress_file()
    data = load(path)
    entry = data.setdefault(chapter, {}).setdefault(exercise, {"attempts": 0})
    entry.update(
        passed=bool(passed),
        solved_before=bool(entry.get("solved_before") or entry.get("passed")),
        when=datetime.now(UTC).isoformat(timespec="seconds"),
        attempts=int(entry.get("attempts", 0)) + 1,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".progress-")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, path)  # atomic: a crash never leaves half a file


def reset(path: str | os.PathLike | None = None) -> bool:
    """Forget everything; True if there was a record."""
    path = Path(path) if path is not None else progress_file()
    try:
        path.unlink()
        return True
    except FileNotFoundError:
        return False
