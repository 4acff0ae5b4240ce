"""A throw-away virtual environment that reuses installed packages instead of installing them.

``make(dest, site_packages=...)`` creates a venv at ``dest`` (``bin/`` or ``Scripts\\``, as the
platform has it) with no packages of its own; a ``.pth`` file makes it see a folder of links to
the entries of ``site_packages`` that ``keep`` accepts. It takes a second, not the minutes and
gigabytes of a real install, so tests can run the course's entry point and a simulated Colab
in a *fresh* environment: one without ``course_lib`` (and whatever else ``keep`` leaves out),
where ``pip install`` puts new packages into ``dest`` and finds the linked ones already there.
Linux and macOS (symbolic links); the tests that use it say so.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

__all__ = ["make", "python_of", "shared_site_packages"]


def shared_site_packages() -> Path:
    """The site-packages folder of the running interpreter (the course's .venv in the tests)."""
    return Path(sysconfig.get_path("purelib"))


def python_of(venv: Path) -> Path:
    """The interpreter of ``venv`` in either layout."""
    for rel in ("bin/python", "Scripts/python.exe"):
        if (venv / rel).exists():
            return venv / rel
    raise FileNotFoundError(f"{venv} has neither bin/python nor Scripts/python.exe")


def make(
    dest: Path,
    *,
    site_packages: Path | None = None,
    keep: Callable[[str], bool] = lambda name: True,
) -> Path:
    """Create the environment and return its interpreter."""
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(dest)], check=True)
    python = python_of(dest)
    own = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    source = site_packages or shared_site_packages()
    overlay = dest / "overlay"
    overlay.mkdir()
    for entry in sorted(source.iterdir()):
        if entry.suffix != ".pth" and keep(entry.name):
            os.symlink(entry, overlay / entry.name)
    Path(own, "overlay.pth").write_text(f"{overlay}\n")
    return python
