"""The tools behind ``./course lab`` and the lecturers' pages (no browser, fast)."""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path

import pytest
import yaml

from tools import lab, lecturers

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = [p.stem for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))]


# -- ./course lab ------------------------------------------------------------------------------


@pytest.fixture
def busy_port():
    """A port on 127.0.0.1 that something listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((lab.HOST, 0))
        s.listen()
        yield s.getsockname()[1]


def test_free_port_skips_a_busy_one(busy_port: int) -> None:
    assert not lab.port_is_free(busy_port)
    assert lab.free_port(busy_port) > busy_port
    assert lab.port_is_free(lab.free_port())


def test_a_taken_port_gives_a_clear_message(busy_port: int, capsys) -> None:
    assert lab.main(["--no-browser", "--port", str(busy_port)]) == 1
    err = capsys.readouterr().err
    assert f"port {busy_port} on 127.0.0.1 is already in use" in err
    assert f"./course lab --port {busy_port + 1}" in err


def test_an_unknown_chapter_names_the_chapters() -> None:
    with pytest.raises(SystemExit, match="no chapter 'nope'; the chapters are: 01_matmul"):
        lab.main(["nope", "--no-browser"])


def test_the_url_carries_the_token_and_the_chapter(tmp_path: Path) -> None:
    server = lab.LabServer(tmp_path, 8999)
    url = server.url("notebooks/01_matmul.ipynb")
    assert url == f"http://127.0.0.1:8999/lab/tree/notebooks/01_matmul.ipynb?token={server.token}"
    assert len(server.token) == 48
    cmd = server.command()
    assert "--ServerApp.port=8999" in cmd and "--ServerApp.port_retries=0" in cmd
    assert "--ServerApp.ip=127.0.0.1" in cmd and "--no-browser" in cmd


def test_a_server_for_the_tests_starts_its_kernels_on_a_code_path(tmp_path: Path) -> None:
    assert lab.LabServer(tmp_path, 8999, code_path="pinned").env()["OMP_NUM_THREADS"] == "1"
    learner = lab.LabServer(tmp_path, 8999).env()  # ./course lab: this machine's own kernels
    assert learner.get("OMP_NUM_THREADS") == os.environ.get("OMP_NUM_THREADS")


def test_test_settings_are_written_where_jupyterlab_reads_them(tmp_path: Path) -> None:
    lab.write_settings(tmp_path, lab.TEST_SETTINGS)
    tracker = tmp_path / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    assert json.loads(tracker.read_text()) == {"windowingMode": "none"}


# -- the lecturers' pages and the status page --------------------------------------------------


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("pages")
    lecturers.write_pages(out / "lecturers", out / "status.md")
    return out


def test_every_chapter_has_teaching_notes() -> None:
    notes = yaml.safe_load(lecturers.NOTES.read_text(encoding="utf-8"))
    missing = [c for c in CHAPTERS if not notes.get(c, {}).get("misconceptions")]
    assert not missing, f"book/lecturers/notes.yml has no misconceptions for {missing}"
    unknown = set(notes) - set(CHAPTERS)
    assert not unknown, f"notes.yml names chapters that do not exist: {sorted(unknown)}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_lecturer_page(pages: Path, chapter: str) -> None:
    text = (pages / "lecturers" / f"{chapter}.md").read_text(encoding="utf-8")
    for part in ("## Learning outcomes", "## A 50-minute lecture", "## Misconceptions"):
        assert part in text
    assert f"./course handouts {chapter}" in text
    assert f"../../slides/{chapter}.slides.html" in text
    ch = lecturers.read_chapter(ROOT / "notebooks" / f"{chapter}.ipynb")
    assert ch.outcomes, f"{chapter}: no outcomes found after 'After this chapter you can'"
    assert sum(m for m, _, _ in lecturers.lecture_plan(ch)) <= lecturers.LECTURE_MIN


def test_status_page_lists_every_chapter(pages: Path) -> None:
    text = (pages / "status.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| \[.*?\]\(\.\./notebooks/(\w+)\.ipynb\)", text, re.M)
    assert rows == CHAPTERS


def test_status_flags_a_notebook_with_an_error(tmp_path: Path) -> None:
    nb = {
        "cells": [
            {"cell_type": "markdown", "source": "# T\n", "metadata": {}},
            {
                "cell_type": "code",
                "source": "1/0",
                "metadata": {},
                "execution_count": 2,
                "outputs": [{"output_type": "error", "ename": "ZeroDivisionError"}],
            },
        ],
    }
    path = tmp_path / "99_x.ipynb"
    path.write_text(json.dumps(nb))
    ch = lecturers.read_chapter(path)
    assert not ch.clean
    assert any("error output" in p for p in ch.problems)
    assert any("not numbered 1..n" in p for p in ch.problems)


def test_cell_seconds_reads_nbclient_timestamps() -> None:
    cell = {
        "metadata": {
            "execution": {
                "iopub.execute_input": "2026-01-01T00:00:01.000000Z",
                "shell.execute_reply": "2026-01-01T00:00:03.500000Z",
            }
        }
    }
    assert lecturers.cell_seconds(cell) == pytest.approx(2.5)
    assert lecturers.cell_seconds({"metadata": {}}) == 0.0


@pytest.mark.parametrize("module", ["tools.lecturers", "tools.slides"])
def test_doctests_of_the_tools(module: str) -> None:
    """tools/ is not among pytest's testpaths: run its examples here."""
    import doctest
    import importlib

    result = doctest.testmod(
        importlib.import_module(module), optionflags=doctest.NORMALIZE_WHITESPACE
    )
    assert result.attempted > 0 and result.failed == 0


def test_the_chapters_whose_widgets_run_in_lab_cover_every_kind_of_control():
    """tests/test_lab.py WIDGETS_RUN: its chapters' stored widgets hold every kind of control
    of the course's widgets but the selection slider (a control: every widget model that is not
    a layout, a style, a box, static text or a progress bar, so a new kind counts), and the
    quiz's chapter is one of them."""
    from tests.browser import QUIZ_LAB_CHAPTER
    from tests.test_lab import WIDGETS_RUN

    not_controls = {"Layout", "HBox", "VBox", "Box", "HTML", "HTMLMath", "Label", "Output",
                    "FloatProgress", "IntProgress"}  # fmt: skip

    def kinds(chapter: str) -> set[str]:
        nb = json.loads((ROOT / "notebooks" / f"{chapter}.ipynb").read_text(encoding="utf-8"))
        state = nb["metadata"]["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
        names = {m["model_name"].removesuffix("Model") for m in state.values()}
        return {n for n in names if n not in not_controls and not n.endswith("Style")}

    every = set().union(*(kinds(c) for c in CHAPTERS))
    assert every - set().union(*(kinds(c) for c in WIDGETS_RUN)) == {"SelectionSlider"}
    assert QUIZ_LAB_CHAPTER in WIDGETS_RUN and WIDGETS_RUN <= set(CHAPTERS)
