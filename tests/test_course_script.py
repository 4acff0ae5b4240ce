"""The ./course entry point: its help is its header, unknown commands fail, and the set-up stamp
changes with the Python version (a venv made for another Python must be rebuilt)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = (ROOT / "course").read_text()


def _commands_handled() -> set[str]:
    case = SCRIPT[SCRIPT.index('case "$cmd" in') :]
    return {m for m in re.findall(r"^  ([a-z]+)\)", case, flags=re.M)}


def test_help_lists_every_command_and_comes_from_the_header():
    out = subprocess.run(["bash", str(ROOT / "course"), "help"], capture_output=True, text=True)
    assert out.returncode == 0
    listed = set(re.findall(r"\./course ([a-z]+)", out.stdout))
    assert _commands_handled() <= listed, f"not in the help: {_commands_handled() - listed}"
    assert out.stdout.splitlines()[0].startswith("The course's one entry point")


def test_unknown_command_fails_with_the_usage():
    out = subprocess.run(["bash", str(ROOT / "course"), "no-such"], capture_output=True, text=True)
    assert out.returncode == 2 and "unknown command: no-such" in out.stderr
    assert "./course test" in out.stderr


def test_setup_stamp_covers_requirements_and_the_python_version():
    stamp_line = next(line for line in SCRIPT.splitlines() if line.strip().startswith("want=$("))
    for part in ("requirements.txt", "requirements-data.txt", "pyproject.toml", "setup.py"):
        assert part in stamp_line
    assert "sys.version" in stamp_line


def test_setup_never_calls_sudo():
    assert "sudo" not in SCRIPT.replace("never sudo", "")
