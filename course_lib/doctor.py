"""Environment check: ``python -m course_lib.doctor [--browser]``.

Prints one OK/FAIL line per requirement, then the device PyTorch code will use and why, and
exits with status 1 if anything failed. ``--browser`` also looks for the Chromium that the
website's browser test drives.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import sys
from importlib import metadata
from pathlib import Path

from course_lib.paths import repo_root

#: What to run to fix a missing or wrong package, with or without bash
SETUP_HINT = (
    "run ./course setup (without bash: python course.py setup; Windows: py course.py setup)"
)
#: The pinned requirements of the repository checkout (None for a plain install of the package).
REQUIREMENTS = None if repo_root() is None else repo_root() / "requirements.txt"


def pinned_requirements(path: Path | None = None) -> dict[str, str]:
    """Read ``name==version`` lines of a requirements file into ``{normalised name: version}``.

    ``path`` defaults to :data:`REQUIREMENTS`, looked up when called.
    """
    path = REQUIREMENTS if path is None else path
    if path is None:
        raise FileNotFoundError(
            "requirements.txt was not found: the doctor checks a repository checkout of the course"
        )
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
        if not m:
            raise ValueError(f"{path.name}: {line!r} is not pinned as name==version")
        pins[normalise(m.group(1))] = m.group(2)
    return pins


def normalise(name: str) -> str:
    """PEP 503 name normalisation: ``ml_dtypes`` and ``ML-Dtypes`` are the same package."""
    return re.sub(r"[-_.]+", "-", name).lower()


def find_chromium() -> str | None:
    """Path of a Chromium or Chrome executable, or None. ``CHROMIUM`` overrides the search.

    Looks for a system browser first, then for the Chromium that ``playwright install chromium``
    puts in the user's cache (set-up falls back to it where apt is not available).
    """
    named = os.environ.get("CHROMIUM")
    if named:  # honoured if it names an executable (a path, or a name on PATH), else nothing
        return shutil.which(named) or (named if os.path.isfile(named) else None)
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    for path in (
        "/Applications/Chromium.app/Contents/MacOS/Chromium",
        "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
    ):
        if os.path.exists(path):
            return path
    return playwright_chromium()


def playwright_chromium() -> str | None:
    """The executable of Playwright's own Chromium if it has been installed, else None."""
    try:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            path = p.chromium.executable_path
    except Exception:  # playwright missing or its driver failing: no browser from it
        return None
    return path if path and os.path.exists(path) else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--browser", action="store_true", help="also check for Chromium")
    args = parser.parse_args(argv)
    failures = 0

    def line(ok: bool, what: str, detail: str) -> None:
        nonlocal failures
        failures += not ok
        print(f"{'OK  ' if ok else 'FAIL'}  {what:<22} {detail}")

    v = sys.version_info
    line(v >= (3, 11), "python", f"{platform.python_version()} (need >= 3.11)")
    pins = pinned_requirements()
    data = None if REQUIREMENTS is None else REQUIREMENTS.with_name("requirements-data.txt")
    if data is not None and data.is_file():
        pins |= pinned_requirements(data)
    for name, want in pins.items():
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            line(False, name, f"not installed (want {want}); {SETUP_HINT}")
            continue
        ok = have.split("+")[0] == want.split("+")[0]
        line(ok, name, have if ok else f"{have} installed, {want} pinned; {SETUP_HINT}")
    try:
        import torch

        from course_lib.device import describe_device, get_device

        device = get_device()
        x = torch.ones(2, 2, device=device)
        ok = bool(torch.allclose((x @ x).cpu(), torch.full((2, 2), 2.0)))
        line(ok, "torch on device", describe_device())
    except Exception as exc:  # report, don't crash: this is a diagnostic tool
        line(False, "torch on device", f"{type(exc).__name__}: {exc}")
    if args.browser:
        path = find_chromium()
        line(path is not None, "chromium", path or "not found: install chromium or set CHROMIUM")
    print("all checks passed" if not failures else f"{failures} check(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
