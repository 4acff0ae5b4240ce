"""Where the course's files live: its own data, and the cache of files fetched at set-up.

* :func:`data_dir` is the repository's ``data/`` folder: small files the project makes itself
  (see ``data/README.md``). It ships inside the package as ``course_lib._data`` (see
  ``setup.py``), so the same call works in an editable install (the folder itself, writable) and
  after ``pip install`` of the repository (a copy). ``COURSE_DATA_DIR`` overrides it.
* :func:`cache_dir` holds third-party files that set-up fetches from package registries (never
  committed): ``.cache/`` in a repository checkout, else ``~/.cache/transformers-course``.
  ``COURSE_CACHE`` overrides it.

>>> data_path("translation_eval", "manifest.json").name
'manifest.json'
>>> data_path("no_such_file.txt")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
FileNotFoundError: course data file no_such_file.txt is missing from ...
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

__all__ = ["cache_dir", "data_dir", "data_path", "repo_root"]


def repo_root() -> Path | None:
    """The repository checkout this package is imported from, or None for a plain install."""
    root = Path(__file__).resolve().parent.parent
    return root if (root / "pyproject.toml").is_file() and (root / "data").is_dir() else None


def data_dir() -> Path:
    """The folder of the project's own data files."""
    if "COURSE_DATA_DIR" in os.environ:
        return Path(os.environ["COURSE_DATA_DIR"])
    root = repo_root()
    if root is not None:
        return root / "data"
    spec = importlib.util.find_spec("course_lib._data")  # a namespace package: the data folder
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("course_lib was installed without its data (course_lib._data)")
    return Path(next(iter(spec.submodule_search_locations)))


def data_path(*parts: str, must_exist: bool = True) -> Path:
    """A file under :func:`data_dir`; a clear error if it should exist and does not."""
    path = data_dir().joinpath(*parts)
    if must_exist and not path.exists():
        raise FileNotFoundError(
            f"course data file {'/'.join(parts)} is missing from {data_dir()}; see data/README.md "
            "for how each file is made"
        )
    return path


def cache_dir() -> Path:
    """The folder for files fetched at set-up (created if missing)."""
    if "COURSE_CACHE" in os.environ:
        path = Path(os.environ["COURSE_CACHE"])
    else:
        root = repo_root()
        path = (
            root / ".cache" if root is not None else Path.home() / ".cache" / "transformers-course"
        )
    path.mkdir(parents=True, exist_ok=True)
    return path
