"""The entry point: course.py (standard library only, so it runs without bash and before the
virtual environment exists) and ./course, its bash wrapper. Its help is its docstring, unknown
commands fail, the set-up stamp changes with the Python version, the venv's interpreter is found
in both layouts, the PyTorch build is chosen per platform, and no command needs bash.

Nothing here installs anything: set-up is run with --dry-run or against a temporary environment
(COURSE_VENV), never the course's own .venv.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import course
from tools import overlay_venv

ROOT = Path(__file__).resolve().parent.parent
WRAPPER = (ROOT / "course").read_text()
SCRIPT = (ROOT / "course.py").read_text()
# a Python without the venv's packages
BASE_PYTHON = getattr(sys, "_base_executable", sys.executable)


def _course(*args: str, env: dict[str, str] | None = None, python: str = BASE_PYTHON):
    return subprocess.run(
        [python, str(ROOT / "course.py"), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )


def test_help_lists_every_command_and_comes_from_the_header():
    for out in (
        subprocess.run(["bash", str(ROOT / "course"), "help"], capture_output=True, text=True),
        _course("help"),
    ):
        assert out.returncode == 0, out.stderr
        listed = set(re.findall(r"\./course ([a-z]+)", out.stdout))
        assert set(course.COMMANDS) <= listed, f"not in the help: {set(course.COMMANDS) - listed}"
        assert out.stdout.splitlines()[0].startswith("The course's one entry point")
        assert "py course.py lab" in out.stdout  # the Windows command


def test_unknown_command_fails_with_the_usage():
    for out in (
        subprocess.run(["bash", str(ROOT / "course"), "no-such"], capture_output=True, text=True),
        _course("no-such"),
    ):
        assert out.returncode == 2 and "unknown command: no-such" in out.stderr
        assert "./course test" in out.stderr


def test_the_bash_script_is_a_thin_wrapper():
    code = [line for line in WRAPPER.splitlines() if line.strip() and not line.startswith("#")]
    assert len(code) <= 12 and 'exec "$cand" course.py "$@"' in WRAPPER


def test_the_entry_point_needs_only_the_standard_library():
    imported = set(re.findall(r"^(?:from|import) ([a-z_]+)", SCRIPT, flags=re.M))
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported


def test_setup_stamp_covers_requirements_and_the_python_version():
    for part in ("requirements.txt", "requirements-data.txt", "pyproject.toml", "setup.py"):
        assert part in course.STAMPED
    a = course.setup_stamp(sys.executable)
    assert a == course.setup_stamp(sys.executable)
    # another minor version than the one running this test (the GPU machine's python3 is 3.12)
    others = [f"python3.{m}" for m in range(11, 15) if m != sys.version_info.minor]
    other = next((path for path in map(shutil.which, others) if path), None)
    if other:
        assert course.setup_stamp(other) != a


def test_setup_never_calls_sudo():
    assert "sudo" not in (SCRIPT + WRAPPER).replace("never sudo", "")


def test_the_venv_interpreter_is_found_in_both_layouts(tmp_path):
    assert course.venv_python(tmp_path, windows=False) == tmp_path / "bin" / "python"
    assert course.venv_python(tmp_path, windows=True) == tmp_path / "Scripts" / "python.exe"
    for rel in ("bin/python", "Scripts/python.exe"):
        venv = tmp_path / rel.split("/")[0]
        (venv / rel).parent.mkdir(parents=True)
        (venv / rel).write_text("")
        assert overlay_venv.python_of(venv) == venv / rel


@pytest.mark.parametrize(
    ("system", "gpu", "cpu_index"),
    [
        ("Linux", False, True),
        ("Linux", True, False),
        ("Darwin", False, False),
        ("Windows", False, False),
        ("Windows", True, False),
    ],
)
def test_the_torch_build_per_platform(system, gpu, cpu_index):
    plan = course.torch_plan(system, "x86_64", nvidia_gpu=gpu, pin="torch==2.13.0")
    if cpu_index:
        assert plan.pip_args == ("torch==2.13.0", "--index-url", course.TORCH_CPU_INDEX)
        assert plan.index == course.TORCH_CPU_INDEX and "cannot be reached" in plan.fallback
    else:
        assert plan.pip_args == () and plan.index is None  # the requirements' default index
    assert plan.note


def test_the_pinned_torch_is_the_requirements_one():
    assert course.torch_pin() == "torch==2.13.0"


def test_an_unreachable_cpu_index_falls_back_clearly_and_fast(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(course, "VENV", tmp_path / "none")  # no environment: nothing installed
    monkeypatch.setattr(course.platform, "system", lambda: "Linux")
    monkeypatch.setattr(course, "has_nvidia_gpu", lambda: False)
    installs = []
    monkeypatch.setattr(course, "pip", lambda *a, check=True: installs.append(a) or 0)
    monkeypatch.setattr(course, "reachable", lambda url, timeout=5.0: False)
    course.install_torch()
    out = capsys.readouterr().out
    assert installs == [] and f"{course.TORCH_CPU_INDEX} cannot be reached" in out
    monkeypatch.setattr(course, "reachable", lambda url, timeout=5.0: True)
    course.install_torch()
    assert installs == [("torch==2.13.0", "--index-url", course.TORCH_CPU_INDEX)]
    assert "failed" not in capsys.readouterr().out
    monkeypatch.setattr(course, "pip", lambda *a, check=True: 1)  # reachable, but pip fails
    course.install_torch()
    assert "failed (above)" in capsys.readouterr().out  # and set-up goes on


def test_a_blocked_host_is_reported_unreachable_within_the_timeout():
    import time

    start = time.perf_counter()
    assert not course.reachable("http://127.0.0.1:9/", timeout=2.0)  # the discard port: closed
    assert time.perf_counter() - start < 3


def test_setup_dry_run_lists_the_steps_without_running_them(tmp_path):
    env = {**os.environ, "COURSE_VENV": str(tmp_path / "venv")}
    out = _course("setup", "--dry-run", env=env)
    assert out.returncode == 0, out.stderr
    venv_py = str(course.venv_python(tmp_path / "venv"))
    assert f"-m venv {tmp_path / 'venv'}" in out.stdout
    assert f"{venv_py} -m pip install --quiet --no-compile -r requirements.txt" in out.stdout
    assert f"{venv_py} -c" in out.stdout and "compileall" in out.stdout  # compiled once, after
    assert f"{venv_py} -m course_lib.fetch" in out.stdout
    assert not (tmp_path / "venv").exists()


def test_test_forwards_every_argument_to_pytest_unchanged(tmp_path):
    env = {**os.environ, "COURSE_VENV": str(tmp_path / "venv"), "CHROMIUM": "/bin/true"}
    out = _course("--dry-run", "test", "--quick", "-m", "not browser", "tests/x.py", env=env)
    assert out.returncode == 0, out.stderr
    last = out.stdout.strip().splitlines()[-1]
    venv_py = course.venv_python(tmp_path / "venv")
    assert (
        last
        == f'+ {venv_py} -m tools.command pytest -n auto --dist loadscope --quick -m "not browser" tests/x.py'
    )


def _fresh_environment(venv: Path) -> Path:
    """A temporary environment that reuses the installed packages, with a current stamp."""
    python = overlay_venv.make(venv, keep=lambda name: not name.startswith(("course_lib", "__e")))
    (venv / ".setup-stamp").write_text(course.setup_stamp(str(python)) + "\n")
    return python


@pytest.mark.skipif(os.name == "nt", reason="the temporary environment links with symlinks")
def test_the_doctor_runs_with_bash_absent_from_path(tmp_path):
    _fresh_environment(tmp_path / "venv")
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    env = {
        "PATH": str(empty),  # no bash, no sh, no python: only what course.py runs by full path
        "HOME": str(tmp_path),
        "COURSE_VENV": str(tmp_path / "venv"),
        "PYTHONPATH": str(ROOT),
        "COURSE_DEVICE": "cpu",
    }
    assert shutil.which("bash", path=env["PATH"]) is None
    out = _course("doctor", env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "OK    torch on device" in out.stdout and "all checks passed" in out.stdout


def test_the_examples_in_course_py_run():
    import doctest

    assert doctest.testmod(course).failed == 0


def test_the_full_run_checks_the_notebooks_in_a_simulated_colab(tmp_path):
    """On the pinned code path: conftest.py's default (tools/code_paths.py)."""
    env = {**os.environ, "COURSE_VENV": str(tmp_path / "venv"), "CHROMIUM": "/bin/true"}
    out = _course("--dry-run", "test", "-x", env=env)
    assert out.returncode == 0, out.stderr
    last = out.stdout.strip().splitlines()[-1]
    assert last.endswith("--dist loadscope --nbval-colab --durations=40 -x"), last
    assert f" pytest -n {course.full_tier_workers()} --dist" in last, last  # one more than cores
    own_n = _course("--dry-run", "test", "-n", "1", env=env).stdout.strip().splitlines()[-1]
    assert " pytest --dist loadscope " in own_n and own_n.endswith(" -n 1"), own_n
    mine = _course("--dry-run", "test", "--nbval-kernels=native", env=env)
    last = mine.stdout.strip().splitlines()[-1]
    assert last.endswith("loadscope --nbval-colab --durations=40 --nbval-kernels=native"), last
    # where the time went, in CI's log (unless the caller asks for its own)
    own = _course("--dry-run", "test", "--durations=5", env=env)
    assert own.stdout.strip().splitlines()[-1].endswith("--nbval-colab --durations=5"), own.stdout
