"""Where the course is published, and everything that derives from it.

    python -m tools.publish            # say where the course is published; exit 1 if a notebook's
                                       # Colab set-up cell is out of date
    python -m tools.publish --write    # (re)write the set-up cell of every notebook (.py and .ipynb)

The one setting is ``[tool.course]`` in ``pyproject.toml``: ``repository`` (the URL of the
repository) and ``ref`` (the branch or tag learners get). From it derive:

* the website's repository, issue and launch (Binder, Colab) buttons, and its footer with the
  version (:func:`configure_sphinx`, run by the Sphinx extension in ``tools/build_book.py``, so
  ``book/_config.yml`` names no URL);
* the Colab set-up cell at the top of every notebook (:func:`setup_cell`), which installs
  ``course-lib[course]`` from that repository and ref and fetches the chapter's data.

A fork edits the two values and runs ``python course.py publish`` (or ``./course publish``); the
set-up cells have no output, so the notebooks need no re-execution. Standard library only, plus
``nbformat`` for writing the ``.ipynb`` files.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
TAG = "colab-setup"
#: The set-up cell's tags: removed from the website, and known to conftest.py, which has nbval
#: ignore what the cell prints (nothing, except in the simulated Colab of ``pytest
#: --nbval-colab``: pip's and set-up's messages).
CELL_TAGS = ("remove-cell", TAG)
#: The jupytext header line of the set-up cell: those tags, and folded in Lab.
CELL_HEADER = f"# %% tags={json.dumps(list(CELL_TAGS))} " + 'jupyter={"source_hidden": true}'
LICENCE_FILES = ("LICENSE", "LICENSE-CONTENT")


@dataclass(frozen=True)
class Published:
    """Where the course is published (``[tool.course]`` of ``pyproject.toml``) and its version."""

    repository: str
    ref: str
    version: str

    @property
    def pip_source(self) -> str:
        """What ``pip install "course-lib[course] @ <this>"`` installs on Colab."""
        return f"git+{self.repository}@{self.ref}"

    def file_url(self, path: str) -> str:
        """The web page of a file of the repository at :attr:`ref`."""
        return f"{self.repository}/blob/{self.ref}/{path}"


def published(root: Path = ROOT) -> Published:
    """Read the setting; a clear error if it is missing or not an https URL."""
    data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    table = data.get("tool", {}).get("course", {})
    repository, ref = table.get("repository"), table.get("ref")
    if not isinstance(repository, str) or not re.fullmatch(r"https://[^\s\"']+[^/]", repository):
        raise ValueError(
            "pyproject.toml: [tool.course] repository must be the https URL of the repository "
            f"(no trailing slash), got {repository!r}"
        )
    if not isinstance(ref, str) or not re.fullmatch(r"[A-Za-z0-9._/-]+", ref):
        raise ValueError(f"pyproject.toml: [tool.course] ref must be a branch or tag, got {ref!r}")
    return Published(repository, ref, data["project"]["version"])


def setup_cell(chapter: str, where: Published | None = None) -> str:
    """The source of a notebook's Colab set-up cell (without its jupytext header line).

    Outside Colab it does nothing. On Colab it installs the course library with the ``course``
    extra from the published repository and calls :func:`course_lib.colab.setup`, which fetches
    the chapter's data. ``COURSE_COLAB=1`` forces it on and ``COURSE_SOURCE`` replaces the
    repository (``file:///path/to/checkout``): the simulated-Colab test uses both.
    """
    if not re.fullmatch(r"\d\d_[a-z0-9_]+", chapter):
        raise ValueError(f"chapter must look like 08_gpt, got {chapter!r}")
    where = published() if where is None else where
    return f"""\
# Google Colab only (elsewhere this cell does nothing): install the course library, then fetch
# this chapter's data.
import os
import subprocess
import sys

if "google.colab" in sys.modules or os.environ.get("COURSE_COLAB") == "1":
    url = "{where.pip_source}"
    spec = f"course-lib[course] @ {{os.environ.get('COURSE_SOURCE', url)}}"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", spec], check=True)
    import course_lib.colab

    course_lib.colab.setup("{chapter}")"""


def _header_end(text: str) -> int:
    """Index just after the jupytext YAML header (``# ---`` ... ``# ---``) and its blank line."""
    m = re.match(r"# ---\n(?:#.*\n)*?# ---\n\n?", text)
    if not m:
        raise ValueError("not a jupytext py:percent file with a YAML header")
    return m.end()


def write_py(path: Path, where: Published | None = None) -> bool:
    """Insert or update the set-up cell of one ``.py`` source; True if the file changed."""
    text = path.read_text(encoding="utf-8")
    start = _header_end(text)
    cell = f"{CELL_HEADER}\n{setup_cell(path.stem, where)}\n\n"
    rest = text[start:]
    first_line = rest.split("\n", 1)[0]
    if first_line.startswith("# %%") and f'"{TAG}"' in first_line:  # any earlier version
        nxt = rest.find("\n# %%", len(first_line))
        rest = rest[nxt + 1 :] if nxt >= 0 else ""
    new = text[:start] + cell + rest
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def _cell_metadata() -> dict:
    """The ``.ipynb`` metadata of the set-up cell (what :data:`CELL_HEADER` says in the ``.py``)."""
    return {"jupyter": {"source_hidden": True}, "tags": list(CELL_TAGS)}


def _owned(metadata: dict) -> dict:
    """The part of a cell's metadata that :func:`_cell_metadata` sets (not the run's timings)."""
    return {key: metadata.get(key) for key in ("jupyter", "tags")}


def write_ipynb(path: Path, where: Published | None = None) -> bool:
    """Insert or update the set-up cell of one executed ``.ipynb``; True if the file changed.

    The cell does nothing outside Colab and has no output, so the other cells' stored outputs
    stay what an execution gives; a new cell is numbered 1 and the others shift by one, as
    a top-to-bottom run numbers them. After merging a notebook that lacks the cell, this puts
    it back without re-executing the notebook."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    source = setup_cell(path.stem, where)
    first = nb.cells[0] if nb.cells else None
    if first is not None and TAG in first.metadata.get("tags", []):
        if first.source == source and _owned(first.metadata) == _cell_metadata():
            return False
        first.source = source
        first.metadata.update(_cell_metadata())
    else:
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata = _cell_metadata()
        code = [c for c in nb.cells if c.cell_type == "code"]
        if all(isinstance(c.execution_count, int) for c in code):
            # number the cells as one top-to-bottom run with the new cell first would
            for c in code:
                c.execution_count += 1
            cell.execution_count = 1
        nb.cells.insert(0, cell)
    nbformat.write(nb, path)
    return True


def stale_cells(where: Published | None = None) -> list[str]:
    """Notebooks whose first cell is not the set-up cell the setting gives."""
    import nbformat

    bad = []
    for src in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py")):
        text = src.read_text(encoding="utf-8")
        want = f"{CELL_HEADER}\n{setup_cell(src.stem, where)}\n\n"
        if not text[_header_end(text) :].startswith(want):
            bad.append(src.name)
        nb_path = src.with_suffix(".ipynb")
        if nb_path.exists():
            cells = nbformat.read(nb_path, as_version=4).cells
            first = cells[0] if cells else None
            if first is None or (first.source, _owned(first.metadata)) != (
                setup_cell(src.stem, where),
                _cell_metadata(),
            ):
                bad.append(nb_path.name)
    return bad


# -- the website (called by the Sphinx extension in tools/build_book.py) -------------------


def footer_html(where: Published) -> str:
    """The site's footer: the version and the two licences, linked in the repository."""
    code, content = (where.file_url(name) for name in LICENCE_FILES)
    return (
        f"Version {where.version}. "
        f'Code under the <a href="{code}">MIT licence</a>; '
        f'prose and figures under <a href="{content}">CC BY 4.0</a>.'
    )


def theme_options(where: Published | None = None) -> dict[str, object]:
    """The sphinx-book-theme options that derive from the setting."""
    where = published() if where is None else where
    return {
        "repository_url": where.repository,
        "repository_branch": where.ref,
        "path_to_docs": "",
        "use_repository_button": True,
        "use_issues_button": True,
        "extra_footer": footer_html(where),
    }


def configure_sphinx(app, config) -> None:
    """Sphinx ``config-inited`` handler: fill in the options :func:`theme_options` derives."""
    config.html_theme_options = {**(config.html_theme_options or {}), **theme_options()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--write", action="store_true", help="(re)write every notebook's Colab set-up cell"
    )
    args = parser.parse_args(argv)
    try:
        where = published()
    except (ValueError, KeyError) as exc:  # no or a malformed [tool.course] in pyproject.toml
        parser.error(f"{exc} (see the README, 'Publishing the course and forks')")
    print(f"published at {where.repository} ({where.ref}), version {where.version}")
    if args.write:
        for src in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py")):
            changed = write_py(src, where)
            nb = src.with_suffix(".ipynb")
            changed = (write_ipynb(nb, where) if nb.exists() else False) or changed
            print(f"{src.stem}: {'updated' if changed else 'up to date'}")
        return 0
    stale = stale_cells(where)
    for name in stale:
        print(f"{name}: its Colab set-up cell is missing or out of date (run with --write)")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
