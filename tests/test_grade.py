"""./course grade: a class's worksheets marked in separate, confined processes.

The class is chapter 1's worksheet. Each hostile submission is the solutions key with one cell
made to misbehave, so the other exercises show that the run went on.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import nbformat
import pytest

from tools.grade import Limits, grade_class, main, read_sheet, split_checks
from tools.handouts import worksheet
from tools.sandbox import landlock_abi

ROOT = Path(__file__).resolve().parent.parent
CHAPTER = ROOT / "notebooks" / "01_matmul.ipynb"
LABELS = ["ex-matmul-outer", "ex-matmul-debug", "ex-matmul-flops", "ex-matmul-predict"]
needs_landlock = pytest.mark.skipif(landlock_abi() < 1, reason="no Landlock on this kernel")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sheets():
    chapter = nbformat.read(CHAPTER, as_version=4)
    return worksheet(chapter), worksheet(chapter, solutions=True)


def _with_cell(nb, code: str, after_label: str | None = None):
    """A copy of ``nb`` with a code cell added after the first code cell of ``after_label``'s
    exercise (or at the end)."""
    out = nbformat.from_dict(nb)
    cell = nbformat.v4.new_code_cell(code)
    if after_label is None:
        out.cells.append(cell)
        return out
    at = next(i for i, c in enumerate(out.cells) if f":label: {after_label}" in c.source)
    at = next(i for i in range(at, len(out.cells)) if out.cells[i].cell_type == "code")
    out.cells.insert(at + 1, cell)
    return out


def _write(folder: Path, name: str, nb) -> Path:
    path = folder / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


def test_split_checks_takes_out_every_top_level_checker_statement():
    code, calls = split_checks(
        "x = 1\ncheck.f(g, require=True)\nassert check_prediction(p, 3, what='w').passed\n"
        "def h():\n    check.f(g)\n"
    )
    assert calls == ["check.f(g)", "check_prediction(p, 3, what='w')"]
    assert code.splitlines() == ["x = 1", "", "", "def h():", "    check.f(g)"]


def test_the_worksheet_grades_every_exercise_with_a_checker(sheets):
    sheet = read_sheet(sheets[0])
    assert sheet.graded == LABELS
    assert sheet.calls["ex-matmul-outer"] == ["check.outer_product_sum(outer_matmul)"]


@needs_landlock
def test_a_simulated_class(sheets, tmp_path):
    """Right, wrong, broken and hostile submissions: each recorded, and the run goes on."""
    hand_out, key = sheets
    sentinel = tmp_path / "precious.txt"
    sentinel.write_text("keep me")
    subs = {
        "key": key,
        "untouched": hand_out,
        "raises": _with_cell(key, "raise RuntimeError('boom')", "ex-matmul-outer"),
        "loops": _with_cell(key, "while True:\n    pass", "ex-matmul-outer"),
        "hogs": _with_cell(key, "hog = bytearray(64 * 2**30)", "ex-matmul-debug"),
        "deletes": _with_cell(
            key,
            f"import os\nopen('mine.txt', 'w').write('ok')\nos.remove({str(sentinel)!r})",
            "ex-matmul-flops",
        ),
        "escapes": _with_cell(
            key, f"open({str(tmp_path / 'dropped.txt')!r}, 'w').write('x')", "ex-matmul-flops"
        ),
        "prints": _with_cell(key, "print('x' * 50_000_000)", "ex-matmul-debug"),
        "kills": _with_cell(key, "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)"),
        "edits": _with_cell(  # a wrong answer behind a checker call replaced by a fake verdict
            hand_out,
            "def outer_matmul(X, Y):\n    return X\nprint('✅ Correct')",
            "ex-matmul-outer",
        ),
        "patches": _with_cell(
            key,
            "from course_lib.matmul import exercises as ex\nex.layer_flops = lambda fn, **kw: True",
        ),
    }
    paths = [_write(tmp_path, name, nb) for name, nb in subs.items()]
    # the edited submission also rewrites its checker call
    edits = nbformat.read(paths[-2], as_version=4)
    for cell in edits.cells:
        if cell.cell_type == "code" and "check.outer_product_sum(outer_matmul)" in cell.source:
            cell.source = cell.source.replace("check.outer_product_sum(outer_matmul)", "print(1)")
    nbformat.write(edits, paths[-2])

    sheet = read_sheet(hand_out)
    rows = grade_class(sheet, paths, Limits(cell_timeout=3, total_timeout=60, memory_mb=1024), 2)
    by = {Path(r.submission).stem: r for r in rows}

    def passed(name):
        return [by[name].results[lb][0] for lb in LABELS]

    assert passed("key") == [True] * 4 and by["key"].edited == []
    assert passed("untouched") == [False] * 4
    assert "NotImplementedError" in by["untouched"].results["ex-matmul-outer"][1]
    for name in ["raises", "loops", "hogs", "deletes", "escapes", "prints"]:
        assert passed(name) == [True] * 4, (name, by[name].results, by[name].cell_errors)
        assert by[name].status == "ok"
    assert "RuntimeError: boom" in by["raises"].cell_errors[0]
    assert "longer than its limit of 3 s" in by["loops"].cell_errors[0]
    assert "memory" in by["hogs"].cell_errors[0]
    assert "PermissionError" in by["deletes"].cell_errors[0] and sentinel.read_text() == "keep me"
    assert "PermissionError" in by["escapes"].cell_errors[0]
    assert not (tmp_path / "dropped.txt").exists()
    assert "PermissionError" in by["kills"].cell_errors[0] and passed("kills") == [True] * 4
    assert by["edits"].edited == ["ex-matmul-outer"] and passed("edits") == [False] * 4
    assert passed("patches") == [False] * 4
    assert "replaced course_lib.matmul.exercises.layer_flops" in by["patches"].results[LABELS[0]][1]
    assert all(r.sandbox >= 1 for r in rows)


@needs_landlock
def test_a_submission_that_never_yields_is_stopped_and_the_class_goes_on(sheets, tmp_path):
    _, key = sheets
    # one call into C that never returns to the interpreter, so the per-cell alarm cannot
    # interrupt it: only the total limit stops it
    stubborn = _with_cell(key, "total = sum(range(10**15))")
    paths = [_write(tmp_path, "stubborn", stubborn), _write(tmp_path, "key", key)]
    rows = grade_class(read_sheet(key), paths, Limits(cell_timeout=2, total_timeout=20), 1)
    assert "total time limit of 20 s" in rows[0].status
    assert [ok for ok, _ in rows[0].results.values()] == [False] * 4
    assert [ok for ok, _ in rows[1].results.values()] == [True] * 4


@needs_landlock
def test_the_command_writes_the_csv_and_the_exports(sheets, tmp_path, capsys):
    hand_out, key = sheets
    paths = [_write(tmp_path, "alice", key), _write(tmp_path, "bob", hand_out)]
    bad = tmp_path / "carol.ipynb"
    bad.write_text("not a notebook")
    out = tmp_path / "grades.csv"
    args = ["01_matmul", *map(str, paths), str(bad), "--out", str(out), "--jobs", "2"]
    args += ["--gradescope", str(tmp_path / "gs"), "--canvas", str(tmp_path / "canvas.csv")]
    assert main(args) == 0
    rows = list(csv.DictReader(out.open()))
    assert [r["submission"] for r in rows] == ["alice.ipynb", "bob.ipynb", "carol.ipynb"]
    assert [r["passed"] for r in rows] == ["4", "0", "0"]
    assert (
        rows[1]["ex-matmul-outer"] == "fail"
        and "NotImplementedError" in rows[1]["ex-matmul-outer message"]
    )
    assert "not a readable notebook" in rows[2]["status"]
    text = capsys.readouterr().out
    assert "ex-matmul-outer: 1/3 passed; most common failure:" in text
    gs = json.loads((tmp_path / "gs" / "alice" / "results.json").read_text())
    assert gs["score"] == 4.0 and len(gs["tests"]) == 4 and gs["tests"][0]["max_score"] == 1.0
    canvas = list(csv.reader((tmp_path / "canvas.csv").open()))
    assert (
        canvas[0][3] == "SIS Login ID"
        and canvas[1][5] == "4"
        and canvas[2][3:6] == ["alice", "", "4"]
    )


def test_bad_arguments_are_named(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["01_matmul", str(tmp_path / "missing.ipynb")])
    assert "no such submission file(s)" in capsys.readouterr().err
    (tmp_path / "a.ipynb").write_text("{}")
    with pytest.raises(SystemExit):
        main(["01_matmul", str(tmp_path / "a.ipynb"), "--cell-timeout", "0"])
    assert "--cell-timeout must be positive" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="neither a notebook file nor a chapter name"):
        main(["99_nothing", str(tmp_path / "a.ipynb")])


def test_without_landlock_the_grader_refuses_unless_told(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr("tools.sandbox.landlock_abi", lambda: 0)
    (tmp_path / "a.ipynb").write_text("{}")
    with pytest.raises(SystemExit):
        main(["01_matmul", str(tmp_path / "a.ipynb")])
    assert "no Landlock sandbox" in capsys.readouterr().err


def test_confine_checks_its_limits():
    from tools.sandbox import confine

    with pytest.raises(ValueError, match="memory_mb=0"):
        confine("/tmp", memory_mb=0, cpu_seconds=1)
