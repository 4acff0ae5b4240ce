"""Where the data lives: a repository checkout, a plain `pip install` of the repository, and the
environment override."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from course_lib import paths

ROOT = Path(__file__).resolve().parent.parent


def test_checkout_uses_the_repository_data_folder():
    assert paths.repo_root() == ROOT
    assert paths.data_dir() == ROOT / "data"
    assert paths.data_path("translation_eval", "manifest.json").is_file()
    with pytest.raises(FileNotFoundError, match="course data file nope.txt is missing"):
        paths.data_path("nope.txt")


def test_environment_overrides(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    assert paths.data_dir() == tmp_path
    monkeypatch.setenv("COURSE_CACHE", str(tmp_path / "cache"))
    assert paths.cache_dir() == tmp_path / "cache" and (tmp_path / "cache").is_dir()


@pytest.mark.slow
def test_a_plain_pip_install_finds_its_data(tmp_path):
    """Build the wheel, install it into an empty folder, import it from there: the data ships
    inside the package as course_lib._data, every file of data/."""
    wheel_dir, site = tmp_path / "wheel", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(wheel_dir), str(ROOT)], check=True)
    wheel = next(wheel_dir.glob("course_lib-*.whl"))
    data = ROOT / "data"
    files = {p.relative_to(data).as_posix() for p in data.rglob("*") if p.is_file()}
    files = {f for f in files if "__pycache__" not in f}
    with zipfile.ZipFile(wheel) as whl:
        shipped = {n.removeprefix("course_lib/_data/") for n in whl.namelist()}
    assert not files - shipped, f"not in the wheel: {sorted(files - shipped)}"
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], check=True)
    code = (
        "from course_lib import paths; print(paths.repo_root()); "
        "print(paths.data_path('translation_eval', 'manifest.json'))"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_DATA_DIR", "PYTHONPATH")}
    env["PYTHONPATH"] = str(site)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    root, manifest = out.stdout.split()
    assert root == "None" and Path(manifest).is_file() and Path(manifest).is_relative_to(site)
