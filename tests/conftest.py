"""The browser tests' shared fixtures: one Chromium, one website build and one JupyterLab.

Each is made once per pytest process (``scope="session"``). The root conftest.py puts the
browser tests in two xdist work units, "site" (the website and its decks) and "lab" (JupyterLab
and RISE), so that the two workers share them; each unit starts its own Chromium. The website is
built at most once per test run even across workers (a lock and a stamp naming the run), so no
worker deletes the site another one serves.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.browser import QUIZ_LAB_CHAPTER, RISE_CHAPTER, serve, up_to_last_widget

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
BUILD = BOOK / "_build"
NOTEBOOKS = ROOT / "notebooks"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
DEAD_PROXY = "http://127.0.0.1:9"
_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex  # this run, all workers


@pytest.fixture(scope="session")
def browser():
    """A headless Chromium (the system's, or Playwright's), shared by every visit."""
    sync_api = pytest.importorskip("playwright.sync_api")
    from course_lib.doctor import find_chromium

    args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-quic",
        # nothing leaves the machine: every request to another host goes to a proxy that is not
        # there (port 9, discard) and fails at once; 127.0.0.1 bypasses proxies. Visits record
        # such requests (tests/browser.py) without routing each request through Python, which
        # would also switch the browser's cache off.
        f"--proxy-server={DEAD_PROXY}",
    ]
    with sync_api.sync_playwright() as p:
        path = find_chromium()
        launch = {"executable_path": path} if path else {}
        b = p.chromium.launch(args=args, **launch)
        yield b
        b.close()


@pytest.fixture(scope="session")
def site() -> Path:
    """The strict offline website build (``python -m tools.build_book --clean``), once per run;
    fails with its log if it fails. Returns ``book/_build/html``."""
    lock_path = BOOK / "_web_assets" / ".build.lock"  # gitignored; --clean leaves it alone
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    stamp = BUILD / ".built-for-test-run"  # inside _build: --clean removes it
    with open(lock_path, "w") as lock:  # one build at a time (pytest-xdist)
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (stamp.is_file() and stamp.read_text() == _RUN):
            proc = subprocess.run(
                [sys.executable, "-m", "tools.build_book", "--clean"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=1200,
            )
            ARTIFACTS.mkdir(exist_ok=True)
            (ARTIFACTS / "book-build.log").write_text(proc.stdout + proc.stderr, encoding="utf-8")
            if proc.returncode != 0:
                log = (proc.stdout + proc.stderr)[-30000:]
                pytest.fail(f"the strict website build failed:\n{log}", pytrace=False)
            stamp.write_text(_RUN)
    return BUILD / "html"


@pytest.fixture(scope="session")
def site_url(site: Path):
    """The built website served from 127.0.0.1 under the sub-path ``/html/`` (so page-relative
    asset paths are exercised): ``http://127.0.0.1:PORT/html/``."""
    with serve(site.parent) as base:
        yield f"{base}{site.name}/"


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """JupyterLab on a random free port, serving a copy of notebooks/ (and book/ for links).

    Beside each chapter: ``NN_x.widgets.ipynb``, the chapter whose code stops at its last
    widget, its quiz cell run only for :data:`QUIZ_LAB_CHAPTER` (tests/browser.py
    up_to_last_widget; tests/test_lab.py runs it); for
    :data:`RISE_CHAPTER` ``NN_x.rise.ipynb``, the chapter with its slide types
    (tests/test_lab_slides.py presents it); ``probe_error.ipynb`` at the root.
    """
    import nbformat  # here, not at the top: the unit tests run where Jupyter is absent

    from tools import slides
    from tools.lab import TEST_SETTINGS, LabServer

    work = tmp_path_factory.mktemp("lab")
    root = work / "root"
    (root / "notebooks").mkdir(parents=True)
    for path in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"):
        shutil.copy(path, root / "notebooks" / path.name)
        prefix = up_to_last_widget(
            json.loads(path.read_text(encoding="utf-8")),
            keep_quiz=path.stem == QUIZ_LAB_CHAPTER,  # the one chapter whose quiz is run
        )
        if prefix is not None:  # beside the chapter, so that its relative paths still work
            (root / "notebooks" / f"{path.stem}.widgets.ipynb").write_text(
                json.dumps(prefix), encoding="utf-8"
            )
    shutil.copy(NOTEBOOKS / "rise.css", root / "notebooks" / "rise.css")  # RISE's style sheet
    rise = slides.with_slides(nbformat.read(NOTEBOOKS / f"{RISE_CHAPTER}.ipynb", as_version=4))
    nbformat.write(rise, root / "notebooks" / f"{RISE_CHAPTER}.rise.ipynb")
    probe = nbformat.v4.new_notebook()  # for test_the_test_sees_an_error_output
    probe.cells = [nbformat.v4.new_markdown_cell("# Probe"), nbformat.v4.new_code_cell("1 / 0")]
    probe.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(probe, root / "probe_error.ipynb")
    for path in (ROOT / "book").glob("*.md"):
        (root / "book").mkdir(exist_ok=True)
        shutil.copy(path, root / "book" / path.name)
    ARTIFACTS.mkdir(exist_ok=True)
    server = LabServer(
        root,
        state=work / "state",
        settings=TEST_SETTINGS,
        log=ARTIFACTS / "lab-server.log",
        code_path="pinned",  # the kernels as nbval's: one thread each, beside the other worker
    )
    with server:
        yield server
