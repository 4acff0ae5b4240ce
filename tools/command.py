"""How ``./course`` runs a command's module: ``python -m tools.command MODULE [ARG ...]``.

The module runs as ``python -m MODULE ARG ...`` would run it. Where it stops because something it
needs is not there (a Python package, a program, a file, the network), the command ends with one
line that names what is missing and what to do, not a Python traceback; ``COURSE_DEBUG=1`` shows
the traceback. The commands say what they need where they can (a browser, a kernel, Landlock,
a nanoGPT checkout, the registries); this is the floor under them. Any other exception is a bug
and keeps its traceback.

>>> missing(ModuleNotFoundError("No module named 'jupyterlab'", name="jupyterlab"))
"the Python package 'jupyterlab' is missing (./course doctor checks the environment, ./course setup repairs it)"
>>> missing(ValueError("a bug")) is None
True
"""

from __future__ import annotations

import os
import runpy
import sys

HINT = "./course doctor checks the environment, ./course setup repairs it"


def missing(exc: BaseException) -> str | None:
    """One line for an exception that means something needed is not there, else None."""
    import urllib.error

    if isinstance(exc, ModuleNotFoundError) and exc.name:
        return f"the Python package {exc.name!r} is missing ({HINT})"
    if isinstance(exc, ImportError):
        return f"{exc} ({HINT})"
    if isinstance(exc, urllib.error.URLError):
        return f"a download failed ({exc.reason}); the package registries (PyPI, npm) must be reachable"
    if isinstance(exc, ConnectionError | TimeoutError):
        return f"a connection failed ({exc})"
    if isinstance(exc, FileNotFoundError):
        return f"{exc.filename or 'a file or program'} is not there ({exc.strerror or exc})"
    if isinstance(exc, PermissionError):
        return f"no permission to use {exc.filename or 'a file'} ({exc.strerror or exc})"
    if isinstance(exc, IsADirectoryError | NotADirectoryError | FileExistsError):
        return f"{exc.filename}: {exc.strerror}"
    return None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        print("usage: python -m tools.command MODULE [ARG ...]", file=sys.stderr)
        return 2
    name, args = argv[0], argv[1:]
    sys.argv = [name, *args]
    try:
        runpy.run_module(name, run_name="__main__", alter_sys=True)
    except Exception as exc:
        line = missing(exc)
        if line is None or os.environ.get("COURSE_DEBUG"):
            raise
        print(f"error: {line} (COURSE_DEBUG=1 shows where)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
