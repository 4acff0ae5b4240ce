"""./course grade: reading worksheets, the plain-data format, output hygiene, the judge's parts.

The grading of real (honest and hostile) classes is in tests/test_grade_hostile.py, the
sandbox's layers in tests/test_grade_sandbox.py, and every chapter's checkers through the
grader's boundary in tests/test_grade_checkers.py.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import traceback
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

from course_lib import checker
from tools import grade_wire as wire
from tools.grade import (
    clean,
    csv_cell,
    display_names,
    export_problems,
    main,
    read_sheet,
    split_checks,
)
from tools.grade_judge import checker_imports, parse_call, static_references
from tools.grade_remote import RemoteFunction, RemoteObject, _exception
from tools.handouts import worksheet

ROOT = Path(__file__).resolve().parent.parent
CHAPTER = ROOT / "notebooks" / "01_matmul.ipynb"
LABELS = ["ex-matmul-outer", "ex-matmul-debug", "ex-matmul-flops", "ex-matmul-predict"]


# -- reading worksheets ---------------------------------------------------------------------


def test_split_checks_takes_out_every_top_level_checker_statement():
    code, calls = split_checks(
        "x = 1\ncheck.f(g, require=True)\nassert check_prediction(p, 3, what='w').passed\n"
        "def h():\n    check.f(g)\n"
    )
    assert calls == ["check.f(g)", "check_prediction(p, 3, what='w')"]
    assert code.splitlines() == ["x = 1", "", "", "def h():", "    check.f(g)"]


def test_a_cell_too_deep_for_the_parser_is_kept_as_it_is():
    deep = '"x"' + ".a" * 200_000
    assert split_checks(deep) == (deep, [])


def test_the_worksheet_grades_every_exercise_with_a_checker():
    sheet = read_sheet(worksheet(nbformat.read(CHAPTER, as_version=4)))
    assert sheet.graded == LABELS
    assert sheet.calls["ex-matmul-outer"] == ["check.outer_product_sum(outer_matmul)"]


@pytest.mark.parametrize(
    "chapter", sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9]*.ipynb"))
)
def test_the_key_holds_every_solution_of_its_chapter_and_the_hand_out_none(chapter):
    nb = nbformat.read(ROOT / "notebooks" / f"{chapter}.ipynb", as_version=4)
    key, hand_out = worksheet(nb, solutions=True), worksheet(nb)
    starts = [c.source for c in nb.cells if "{solution-start}" in c.source]
    assert [c.source for c in key.cells if "{solution-start}" in c.source] == starts
    assert not any("solution" in c.metadata.get("tags", []) for c in hand_out.cells)


def test_a_notebook_of_20000_cells_is_read_in_linear_time():
    nb = json.loads(nbformat.writes(worksheet(nbformat.read(CHAPTER, as_version=4))))
    nb["cells"] += [
        {"cell_type": "code", "metadata": {}, "source": f"x{i} = {i}", "outputs": []}
        for i in range(20_000)
    ]
    assert len(read_sheet(nb).cells) > 20_000  # the judge reads plain JSON


def test_a_notebook_that_is_not_one_is_refused_with_a_reason():
    for bad in ({}, {"cells": 3}, {"cells": [1, 2]}, {"cells": [{"cell_type": "markdown"}]}):
        with pytest.raises(ValueError):
            read_sheet(bad)


# -- the plain-data format ------------------------------------------------------------------


def _roundtrip(value):
    return wire.decode(json.loads(json.dumps(wire.encode(value))))


def test_plain_values_come_back_in_exact_types():
    values = [
        None, True, 3, -2**80, 1.5, float("-inf"), "é\ud800", b"\x00\xff", bytearray(b"ab"),
        (1, (2.0, "x")), [1, [2]], {"a": 1, (1, 2): [3], None: b"k"}, {1, 2}, frozenset({"a"}),
        1 + 2j, Ellipsis, np.float32(1.25), np.int8(-3), np.dtype("<f4"),
        torch.float16, torch.device("cpu"),
    ]  # fmt: skip
    for v in values:
        back = _roundtrip(v)
        assert type(back) is type(v) and (back == v or back is v), v
    nan = _roundtrip(float("nan"))
    assert type(nan) is float and nan != nan


def test_arrays_and_tensors_come_back_with_dtype_shape_and_values():
    for a in (np.arange(12, dtype=">i4").reshape(3, 4).T, np.zeros((0, 3)), np.array(["ab", "c"])):
        back = _roundtrip(a)
        assert type(back) is np.ndarray and back.dtype == a.dtype and np.array_equal(back, a)
    for t in (
        torch.arange(6.0).reshape(2, 3).T,
        torch.ones(2, dtype=torch.bfloat16),
        torch.empty(0, 2),
    ):
        back = _roundtrip(t)
        assert type(back) is torch.Tensor and back.dtype == t.dtype and torch.equal(back, t)
    grad = _roundtrip(torch.ones(2, requires_grad=True))
    assert grad.requires_grad and grad.grad_fn is None


def test_what_is_not_plain_data_does_not_cross():
    class Sneaky(int):
        def __eq__(self, other):
            return True

    for value in (Sneaky(3), np.array([object()]), np.zeros(2, dtype=[("a", "f8")]), open, os):
        with pytest.raises(TypeError):
            wire.encode(value)
    assert wire.encode(Sneaky(3), fallback=lambda o: "stand-in") == "stand-in"


@pytest.mark.parametrize(
    "node",
    [
        {"$": "pickle", "v": "gASV"},
        {"$": "a", "dtype": "|O8", "shape": [1], "v": ""},
        {"$": "a", "dtype": "i4,f8", "shape": [1], "v": ""},
        {"$": "a", "dtype": "<f8", "shape": [2], "v": "AAAAAAAAAAA="},  # 8 bytes for 2 values
        {"$": "a", "dtype": "<f8", "shape": [-1], "v": ""},
        {"$": "T", "dtype": "qint8", "shape": [1], "v": "AA==", "grad": False},
        {"$": "o", "cls": "os:system", "v": {}},
        {"$": "o", "cls": "course_lib.nothing:Thing", "v": {}},
        {"$": "t", "v": [1], "extra": 2},
        {"$": "d", "v": [[[1], 2]]},  # a list as a key
        {"$": "r", "id": 1, "type": "function", "call": True},  # no references expected here
        {"$": "re", "mod": "os", "p": "x", "f": 0},
        {"$": "b", "v": "not base64!"},
    ],
)
def test_decoding_refuses_anything_outside_the_format(node):
    with pytest.raises(wire.WireError):
        wire.decode(node)


def test_decoding_bounds_depth_and_size():
    deep: object = 1
    for _ in range(wire.MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(wire.WireError, match="deeper"):
        wire.decode(deep)
    with pytest.raises(wire.WireError, match="values"):
        wire.decode([0] * (wire.MAX_ITEMS + 1))


def test_course_dataclasses_are_rebuilt_from_their_fields():
    from course_lib.gpt.config import GPTConfig

    cfg = GPTConfig(vocab_size=11, context_length=8, n_layers=2, n_heads=2, d_model=8)
    back = _roundtrip(cfg)
    assert type(back) is GPTConfig and back == cfg


def test_frames_refuse_oversized_truncated_and_non_json_messages():
    r, w = os.pipe()
    try:
        os.write(w, struct.pack(">I", wire.MAX_FRAME + 1))
        with pytest.raises(wire.WireError, match="over the limit"):
            wire.read_frame(r, deadline=None)
        os.write(w, struct.pack(">I", 5) + b"{nope")
        with pytest.raises(wire.WireError, match="not JSON"):
            wire.read_frame(r, deadline=None)
        nested = b"[" * 100_000 + b"]" * 100_000
        os.write(w, struct.pack(">I", len(nested)))
        writer = os.fork()
        if writer == 0:
            os.write(w, nested)
            os._exit(0)
        with pytest.raises(wire.WireError):
            wire.read_frame(r, deadline=None)
        os.waitpid(writer, 0)
        os.write(w, struct.pack(">I", 10) + b"{}")
        os.close(w)
        w = -1
        with pytest.raises(EOFError):
            wire.read_frame(r, deadline=None)
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


# -- the judge's parts ------------------------------------------------------------------------


def test_a_checker_call_names_whose_values_come_from_where():
    call = parse_call(
        "x", 0, "check_prediction(prediction, (np.ones(3) @ m).shape, what='s', rtol=0)"
    )
    assert [a.kind for a in call.args] == ["remote", "trusted"]
    assert call.kwargs["what"].kind == "const" and call.kwargs["rtol"].value == 0
    call = parse_call("y", 0, "check.head_losses(a, b, c)")
    assert [a.kind for a in call.args] == ["remote"] * 3 and call.func == "check.head_losses"
    with pytest.raises(ValueError):
        parse_call("z", 0, "print(1)")


def test_only_the_imports_that_bind_the_checkers_are_run_by_the_judge():
    setup = "import numpy as np\nfrom course_lib.matmul import exercises as check\nx = 1\n"
    setup += "from course_lib.checker import check_prediction\nimport os"
    assert checker_imports(setup).splitlines() == [
        "from course_lib.matmul import exercises as check",
        "from course_lib.checker import check_prediction",
    ]


def test_use_of_the_course_reference_is_found_in_the_code():
    setup = "import course_lib.matmul.reference as ref\nfrom course_lib.plotting import heatmap"
    cells = [
        "def outer_matmul(X, Y):\n    return ref.matmul_outer(X, Y)",
        "heatmap(1)",
        "m = __import__('course_lib.matmul.reference')",
        "src = open('../notebooks/01_matmul.ipynb').read()",
    ]
    found = static_references(cells, setup)
    assert "course_lib.matmul.reference.matmul_outer" in found
    assert "dynamic code: __import__()" in found
    assert any("reads files" in f for f in found)
    assert not any("plotting" in f for f in found)


def test_an_exception_of_the_learner_is_raised_here_as_the_built_in_it_derives_from():
    exc = _exception({"type": "NotImplementedError", "bases": ["NotImplementedError",
                      "RuntimeError", "Exception", "BaseException"], "args": None,
                      "msg": "", "line": 7})  # fmt: skip
    assert type(exc) is NotImplementedError
    mine = _exception({"type": "MyError", "bases": ["ValueError", "Exception"], "args":
                       wire.encode(("bad", 3)), "msg": "x", "line": 12})  # fmt: skip
    assert isinstance(mine, ValueError) and type(mine).__name__ == "MyError"
    assert mine.args == ("bad", 3)
    assert traceback.extract_tb(mine.__traceback__)[-1].lineno == 12
    gone = _exception({"type": "SystemExit", "bases": ["SystemExit", "BaseException"],
                       "args": None, "msg": "0", "line": 0})  # fmt: skip
    assert isinstance(gone, Exception)  # a checker's `except Exception` catches it
    assert checker.call(lambda: (_ for _ in ()).throw(mine))[1].startswith("it raised MyError")


class _FakeSession:
    def __init__(self):
        self.requests = []

    def request(self, op, **fields):
        self.requests.append((op, fields))
        raise TypeError("no such thing in the submission")

    def send(self, value):
        return wire.encode(value)


def test_a_proxy_never_hands_numpy_a_dunder_of_the_submission():
    session = _FakeSession()
    obj = RemoteObject(session, wire.Ref(1, "generator", False))
    assert checker.to_array(obj) is None  # np.asarray asks for __array__ & co.: refused here
    assert all(op != "getattr" or not f["name"].startswith("__") for op, f in session.requests)
    assert obj != obj.__class__(session, wire.Ref(1)) and obj == obj and not callable(obj)
    assert callable(RemoteFunction(session, wire.Ref(2, "function", True)))
    with pytest.raises(AttributeError):
        obj.__array_interface__  # noqa: B018
    import copy

    assert copy.deepcopy(obj) is obj


# -- checker.py's part ------------------------------------------------------------------------


def test_a_grading_run_draws_fresh_inputs_and_a_notebook_the_fixed_ones():
    fixed = checker.seeded(5).standard_normal(3)
    checker.fresh_inputs(123)
    try:
        fresh = checker.seeded(5).standard_normal(3)
    finally:
        checker.fresh_inputs(None)
    assert not np.allclose(fixed, fresh)
    assert np.allclose(checker.seeded(5).standard_normal(3), fixed)


def test_a_function_that_changes_its_inputs_cannot_change_its_case():
    def cheat(x):
        x[:] = 0  # make the expected value match a zero answer
        return np.zeros_like(x)

    outcome = checker.check_cases("t", cheat, [("a case", (np.ones(3),), np.ones(3))])
    assert not outcome.passed


# -- output hygiene ---------------------------------------------------------------------------


def test_control_characters_escapes_and_bidi_overrides_are_removed():
    hostile = "ok\x1b[2J\x1b]0;title\x07\nline\r\x9b31m\u202egnp.exe\u200b\x00end"
    out = clean(hostile)
    assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in out)
    assert "\u202e" not in out and "\u200b" not in out and out.endswith("end")


def test_csv_cells_that_a_spreadsheet_would_run_are_neutralised():
    for text in ("=cmd|' /C calc'!A0", "+1+1", "-2+3", "@SUM(1)"):
        assert csv_cell(text).startswith("'")
    assert csv_cell("fine") == "fine"


def test_duplicate_file_names_are_told_apart_or_refused(tmp_path):
    a, b = tmp_path / "a" / "alice.ipynb", tmp_path / "b" / "alice.ipynb"
    assert display_names([a, b]) == ["a/alice.ipynb", "b/alice.ipynb"]
    assert display_names([a, tmp_path / "bob.ipynb"]) == ["alice.ipynb", "bob.ipynb"]
    assert export_problems([a, b], None, None) == []
    assert "alice" in export_problems([a, b], None, tmp_path / "canvas.csv")[0]
    assert export_problems([tmp_path / "...ipynb"], tmp_path / "gs", None)
    assert export_problems([tmp_path / ".hidden.ipynb"], tmp_path / "gs", None)


def test_bad_arguments_are_named(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["01_matmul", str(tmp_path / "missing.ipynb")])
    assert "no such submission file(s)" in capsys.readouterr().err
    (tmp_path / "a.ipynb").write_text("{}")
    with pytest.raises(SystemExit):
        main(["01_matmul", str(tmp_path / "a.ipynb"), "--cell-timeout", "0"])
    assert "--cell-timeout must be positive" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["01_matmul"])
    assert "--check-sandbox" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="neither a notebook file nor a chapter name"):
        main(["99_nothing", str(tmp_path / "a.ipynb")])
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "a.ipynb").write_text("{}")
    with pytest.raises(SystemExit):
        main(
            [
                "01_matmul",
                str(tmp_path / "a.ipynb"),
                str(tmp_path / "x" / "a.ipynb"),
                "--canvas",
                "c.csv",
            ]
        )
    assert "used more than once" in capsys.readouterr().err


def test_a_failure_of_the_grader_itself_costs_one_row_not_the_class(monkeypatch, tmp_path):
    from tools import grade
    from tools import sandbox as sb

    sheet = read_sheet(worksheet(nbformat.read(CHAPTER, as_version=4)))

    class Judge:  # a judge process that fails on one submission, then cannot be restarted
        started = 0

        def __init__(self, config):
            self.start()

        def start(self):
            Judge.started += 1
            if Judge.started > 1:
                raise RuntimeError("the grader's judge process did not start")

        def run(self, task, seconds):
            if task["task"] != "grade":
                return {}
            if "boom" in task["path"]:
                raise ValueError("\x1b[2Jbad answer")
            results = {lb: (True, "") for lb in sheet.graded}
            return {"submission": task["name"], "seconds": 0.1, "status": "ok",
                    "results": results, "edited": [], "cell_errors": [], "sandbox": "test",
                    "flags": [], "leftover": ""}  # fmt: skip

        kill = close = lambda self: None

    monkeypatch.setattr(grade, "_Worker", Judge)
    monkeypatch.setattr(sb, "plan", lambda **k: sb.Plan(linux=True))
    paths = [tmp_path / f"{n}.ipynb" for n in ("a", "boom", "c", "d")]
    seen = []
    rows = grade.grade_class(sheet, paths, grade.Limits(), 1, on_row=seen.append)
    assert [r.submission for r in rows] == ["a.ipynb", "boom.ipynb", "c.ipynb", "d.ipynb"]
    assert rows[0].passed == len(sheet.graded) and len(seen) == 4
    assert "the grader failed on it (ValueError: [2Jbad answer)" in rows[1].status
    assert all("no judge process was left" in r.status for r in rows[2:])


def test_on_windows_the_grader_refuses_with_a_reason(monkeypatch, capsys):
    monkeypatch.setattr(sys, "platform", "win32")
    with pytest.raises(SystemExit):
        main(["--check-sandbox"])
    assert "WSL 2" in capsys.readouterr().err


def test_without_a_sandbox_every_missing_layer_says_nothing_holds():
    from tools import sandbox as sb

    bare = sb.Plan(linux=True, subreaper=True)
    said = {what: (ok, how) for what, ok, how in sb.describe(bare)}
    for what in ("writes only in its own folder", "dangerous system calls refused",
                 "no network (TCP, UDP, raw, unix sockets)"):  # fmt: skip
        assert said[what][0] is False and said[what][1].startswith("nothing"), said[what]
    mac = {what: ok for what, ok, _ in sb.describe(sb.Plan())}  # macOS, --no-sandbox
    assert not mac["nothing outlives its grading"]
    assert mac["verdicts computed outside the submission"]


def test_a_checker_that_works_without_end_stops_its_judge_with_a_message():
    import json as json_
    import time as time_

    from tools.grade_judge import Watchdog

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        dog = Watchdog(limit=0.3)
        dog.watch(os.fdopen(w, "w"))
        dog.arm("ex-regex")
        while True:  # a checker stuck on the learner's data
            pass
    os.close(w)
    started = time_.monotonic()
    _, status = os.waitpid(pid, 0)
    line = os.read(r, 4096).decode()
    os.close(r)
    assert os.waitstatus_to_exitcode(status) == 70 and time_.monotonic() - started < 30
    assert "ex-regex" in json_.loads(line)["error"]
