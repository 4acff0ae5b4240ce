"""The race any learner can enter (issue 47): recipe files, records, their audit, verification,
the class board and the website's records page, at tiny budgets (``--quick``)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from course_lib.gpt import records as rec
from course_lib.gpt.config import RECIPES
from tools import leaderboard, race

ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------------------ recipe files
def test_the_shipped_recipe_files_are_the_course_recipes(tmp_path):
    for name, recipe in RECIPES.items():
        assert rec.load_recipe(ROOT / "recipes" / f"{name}.toml") == recipe
    rec.export_recipes(tmp_path)
    for name in RECIPES:
        assert (tmp_path / f"{name}.toml").read_text() == (
            ROOT / "recipes" / f"{name}.toml"
        ).read_text()
    example = rec.load_recipe(ROOT / "recipes" / "example.py")
    assert example == dataclasses.replace(
        RECIPES["fast"], name="example", muon_lr=0.03, warmup_steps=30
    )


def test_a_python_recipe_is_read_never_run(tmp_path):
    marker = tmp_path / "ran"
    p = tmp_path / "evil.py"
    p.write_text(f"open({str(marker)!r}, 'w')\nRECIPE = dict(base='modern', lr=2e-3)\n")
    r = rec.load_recipe(p)
    assert (r.name, r.lr, r.positions) == ("evil", 2e-3, "rope") and not marker.exists()
    p.write_text("RECIPE = {'lr': __import__('os').getpid()}\n")
    with pytest.raises(ValueError, match="literal"):
        rec.load_recipe(p)


@pytest.mark.parametrize(
    "text, words",
    [
        ("lr = 1e-3\nlearning_rate = 2\n", "unknown recipe fields \\['learning_rate'\\]"),
        ('base = "fastest"\n', "base = 'fastest' is not one of"),
        ('optimizer = "sgd"\n', "optimizer"),
        ("lr = [\n", "not valid TOML"),
    ],
)
def test_bad_recipe_files_say_what_is_wrong(tmp_path, text, words):
    p = tmp_path / "r.toml"
    p.write_text(text)
    with pytest.raises(ValueError, match=words):
        rec.load_recipe(p)


def test_missing_and_wrong_kind_of_recipe(tmp_path):
    with pytest.raises(FileNotFoundError, match="not one of the course's recipes"):
        rec.load_recipe(tmp_path / "nope.toml")
    (tmp_path / "r.yaml").write_text("lr: 1\n")
    with pytest.raises(ValueError, match=r"\.toml or \.py"):
        rec.load_recipe(tmp_path / "r.yaml")


# ------------------------------------------------------------------------------ records
def _runs(ups):
    return [
        {
            "seed": s,
            "target": 2.0,
            "speed_up": u,
            "seconds": 10 / u,
            "reference_seconds": 10.0,
            "reached": True,
            "tokens_per_s": 100.0,
        }
        for s, u in enumerate(ups)
    ]


def _record(ups, recipe=RECIPES["fast"], threads=1, device="cpu", gpu=None, **kw):
    m = {
        "cpu": "Test CPU",
        "cores": 2,
        "threads": threads,
        "device": device,
        "gpu": gpu,
        "colab": False,
    }
    return rec.make_record(recipe, _runs(ups), machine_info=m, command="./course race x", **kw)


def test_a_record_has_the_fields_the_issue_names():
    r = _record([2.0, 2.2, 2.1])
    assert r["format"] == rec.FORMAT and r["flags"] == []
    assert (r["speed_up"], r["speed_up_spread"]) == (2.1, 0.1)
    assert r["seconds_to_target"] == pytest.approx(10 * (1 / 2 + 1 / 2.2 + 1 / 2.1) / 3, abs=0.01)
    for key in ("tokens_per_s", "machine", "software", "recipe_hash", "command", "seeds", "track"):
        assert r[key] is not None, key
    assert r["software"]["torch"] and r["machine"]["cpu"] == "Test CPU"
    assert r["recipe_hash"] == rec.recipe_hash(RECIPES["fast"])
    json.dumps(r)  # plain JSON


def test_the_audit_marks_what_a_record_cannot_claim():
    ok = _record([2.0, 2.2, 2.1])
    assert "more than its seeds allow" in rec.audit({**ok, "speed_up": 2.5})[0]
    assert "where its runs give" in rec.audit({**ok, "speed_up": 2.0})[0]
    assert any("hash" in f for f in rec.audit({**ok, "recipe_hash": "0" * 16}))
    two = _record([2.0, 2.2])
    assert two["flags"] == ["2 seeds, fewer than 3"]
    noisy = _record([0.8, 1.3, 1.0])
    assert noisy["flags"] == ["within the noise of the reference (its range includes 1x)"]
    long = _record([2.0, 2.0, 2.0], recipe=dataclasses.replace(RECIPES["fast"], context_length=128))
    assert any("changes the evaluation" in f for f in long["flags"])
    failed = {**ok, "runs": [{**ok["runs"][0], "reached": False, "speed_up": None}]}
    assert any("did not reach" in f for f in rec.audit(failed))


def test_verification_compares_ranges():
    assert rec.compare(_record([2.0, 2.2, 2.1]), _record([2.2, 2.4, 2.3]))["reproduces"]
    assert not rec.compare(_record([2.0, 2.2, 2.1]), _record([1.4, 1.5, 1.45]))["reproduces"]


@pytest.mark.parametrize(
    "m, name",
    [
        ({"device": "cpu", "threads": 1}, "CPU, 1 thread"),
        ({"device": "cpu", "threads": 8}, "CPU, 8 threads"),
        ({"device": "mps", "gpu": "Apple MPS"}, "Apple MPS"),
        ({"device": "cuda", "gpu": "Tesla T4", "colab": True}, "Colab GPU"),
        ({"device": "cuda", "gpu": "NVIDIA A100-SXM4-80GB"}, "Data-centre GPU"),
        ({"device": "cuda", "gpu": "NVIDIA GeForce RTX 4090"}, "Consumer GPU"),
    ],
)
def test_tracks(m, name):
    assert rec.track(m) == name


# ------------------------------------------------------------------------------ the board
def test_the_board_is_one_table_per_track_fastest_first_and_escapes_names(tmp_path):
    folder = tmp_path / "class"
    entries = {
        "ada": _record([3.0, 3.1, 3.2]),
        "bob": _record([3.1, 3.3, 3.2]),  # overlaps ada's range: a tie
        "cy": _record([1.5, 1.6, 1.7], threads=2),
        "<script>x</script>": _record([5.0, 5.2, 5.1], device="cuda", gpu="NVIDIA H100"),
    }
    for name, r in entries.items():
        d = folder / ("evil" if name.startswith("<") else name)
        d.mkdir(parents=True)
        if name.startswith("<"):
            r = {**r, "entrant": name}
        (d / "record.json").write_text(json.dumps(r))
    (folder / "notes.json").write_text("{}")  # a stray JSON in a folder is skipped
    out = tmp_path / "board.html"
    assert leaderboard.main([str(folder), "--out", str(out)]) == 0
    page = out.read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert not re.search(r"(src|href)=[\"']?(https?:)?//", page)
    assert page.count("<table>") == 3  # CPU 1 thread, CPU 2 threads, data-centre GPU
    one = page[page.index("CPU, 1 thread: 2 records") :].split("</table>")[0]
    assert one.index(">bob<") < one.index(">ada<") and "(tie)" in one
    assert '<th scope="col">Speed-up</th>' in page and 'lang="en"' in page
    with pytest.raises(ValueError, match="not a race record"):
        rec.collect([folder / "notes.json"])


def test_the_records_page_reads_the_shipped_measurements():
    page = rec.records_page()
    assert page.startswith("# Race records")
    assert "NVIDIA H200" in page and "4.26x" in page  # nanoGPT races, CPU and GPU
    assert "from `modern`: `decay_steps=400`" in page


# ------------------------------------------------------------------------------ the commands
def test_race_quick_writes_records_and_verify_reruns_them(tmp_path, capsys):
    out = tmp_path / "records"
    toml = tmp_path / "mine.toml"
    toml.write_text('base = "fast"\nmuon_lr = 0.03\n')
    args = [str(toml), "--quick", "--silent", "--out", str(out), "--name", "me"]
    assert race.main(args) == 0
    r = json.loads((out / "mine.json").read_text())
    assert r["quick"] and r["entrant"] == "me" and len(r["runs"]) == 3
    assert r["recipe"]["muon_lr"] == 0.03 and r["recipe_file"] == str(toml)
    assert r["command"].startswith("./course race ") and "--quick" in r["command"]
    assert r["machine"]["threads"] == 1 and r["track"] == "CPU, 1 thread"
    assert any("smoke test" in f for f in r["flags"])
    # a record claiming more than its seeds allow fails verification whatever the re-run gives
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps({**r, "speed_up": r["speed_up"] + r["speed_up_spread"] + 1}))
    code = race.main(["--verify", str(forged), "--silent", "--out", str(tmp_path / "v.json")])
    text = capsys.readouterr().out
    assert code == 1 and "more than its seeds allow" in text and "reproduce" in text
    again = json.loads((tmp_path / "v.json").read_text())
    assert again["verifies"] == str(forged) and "reproduces" in again["verdict"]


def test_race_refuses_a_changed_evaluation_and_bad_files(tmp_path, capsys):
    p = tmp_path / "long.toml"
    p.write_text("context_length = 128\n")
    with pytest.raises(SystemExit, match="evaluation"):
        race.main([str(p), "--quick", "--out", str(tmp_path)])
    assert race.main([str(tmp_path / "missing.toml"), "--quick"]) == 2
    assert "no recipe file" in capsys.readouterr().err
