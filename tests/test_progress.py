"""A learner's progress: recorded when a checker's verdict is shown, reported per chapter."""

from __future__ import annotations

import numpy as np
import pytest

from course_lib import progress
from course_lib.checker import check_prediction
from course_lib.matmul import exercises as check
from tools.progress import chapter_exercises, exercise_keys, main, report


@pytest.fixture
def record_file(tmp_path, monkeypatch):
    path = tmp_path / "progress.json"
    monkeypatch.setenv("COURSE_PROGRESS_FILE", str(path))
    monkeypatch.setenv("COURSE_PROGRESS", "on")
    return path


def _right(W):
    return np.asarray(W).T


def _wrong(W):
    return np.asarray(W)


def test_solved_then_failed_then_solved_again(record_file):
    check.linear_weight(_right)._repr_html_()  # shown in a notebook
    assert progress.load()["matmul"]["linear_weight"]["passed"] is True
    check.linear_weight(_wrong)._repr_html_()
    entry = progress.load()["matmul"]["linear_weight"]
    assert entry["passed"] is False and entry["attempts"] == 2
    check.linear_weight(_right)._repr_html_()
    entry = progress.load()["matmul"]["linear_weight"]
    assert entry["passed"] is True and entry["attempts"] == 3 and entry["when"].endswith("+00:00")


def test_only_a_shown_verdict_counts_and_off_means_off(record_file, monkeypatch):
    check.linear_weight(_right)  # computed, never shown: e.g. a test or require=True
    assert progress.load() == {}
    monkeypatch.setenv("COURSE_PROGRESS", "off")
    check.linear_weight(_right)._repr_html_()
    assert progress.load() == {}


def test_a_prediction_in_a_notebook_is_known_by_its_chapter(record_file):
    ns = {"check": check, "check_prediction": check_prediction}
    exec("out = check_prediction((2, 3), (2, 3), what='the shape')", ns)  # a notebook cell
    assert ns["out"].exercise == ("matmul", "prediction: the shape")
    ns["out"]._repr_html_()
    assert progress.load()["matmul"]["prediction: the shape"]["passed"] is True
    alone = {"check_prediction": check_prediction}  # no chapter's checkers in sight
    exec("out = check_prediction(1, 1, what='x')", alone)
    assert alone["out"].exercise is None


def test_reset_forgets_everything(record_file, capsys):
    progress.record("matmul", "layer_flops", True)
    assert main(["--reset"]) == 0
    assert "removed" in capsys.readouterr().out and progress.load() == {}
    assert progress.reset() is False


def test_bad_input_is_named(record_file):
    with pytest.raises(TypeError, match="non-empty strings"):
        progress.record("", "x", True)


def test_the_report_counts_each_chapters_checked_exercises(record_file, capsys):
    from pathlib import Path

    chapter = Path(__file__).resolve().parent.parent / "notebooks" / "01_matmul.ipynb"
    package, exercises = chapter_exercises(chapter)
    assert package == "matmul"
    assert [e.keys for e in exercises] == [
        ["outer_product_sum"],
        ["linear_weight"],
        ["layer_flops"],
        ["prediction: the shape"],
    ]
    record = {"matmul": {"linear_weight": {"passed": True}, "layer_flops": {"passed": False}}}
    text = report([chapter], record)
    assert text.splitlines()[0].startswith("01_matmul                     1/4   left: ")
    assert "The FLOPs of a linear layer" in text and text.splitlines()[-1].endswith("1/4")
    assert "all done" in report(
        [chapter], {"matmul": {k: {"passed": True} for e in exercises for k in e.keys}}
    )
    assert exercise_keys("check_prediction(p, 3)") is None
