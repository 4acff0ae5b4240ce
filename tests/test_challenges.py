"""``./course challenge``: correctness first (a wrong entry is stopped with what differed), then
timing or scoring beside the course's entry; each entry in its own process (tiny inputs)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tools import challenge


def _entry(tmp_path, name, code):
    p = tmp_path / name
    p.write_text(code)
    return str(p)


def test_the_course_entries_pass_their_own_challenges_quickly(tmp_path, capsys):
    for name in ("bleu", "int4"):
        out = tmp_path / f"{name}.json"
        assert challenge.main([name, "--quick", "--json", str(out)]) == 0
        result = json.loads(out.read_text())
        assert result["rows"][-1]["entry"].startswith("the course's")
    bleu = json.loads((tmp_path / "bleu.json").read_text())["rows"]
    assert [r["entry"] for r in bleu] == ["bleu_sacrebleu", "the course's (bleu_course.py)"]
    assert bleu[0]["bleu"] == pytest.approx(bleu[1]["bleu"], abs=1e-9)
    assert 0 < json.loads((tmp_path / "int4.json").read_text())["rows"][0]["loss_increase"] < 0.1


def test_a_wrong_bleu_is_stopped_before_it_is_timed(tmp_path, capsys):
    wrong = _entry(
        tmp_path,
        "mine.py",
        "import sacrebleu\n"
        "def corpus_bleu(h, r):\n"
        "    return sacrebleu.corpus_bleu(h, r, smooth_method='none').score\n",
    )
    assert challenge.main(["bleu", wrong, "--quick"]) == 1
    out = capsys.readouterr().out
    assert "NOT CORRECT" in out and "sacrebleu's is" in out and "exp smoothing" in out


@pytest.mark.parametrize(
    "body, words",
    [
        ("return np.full(w.shape, 16, np.uint8), s, s", "4 bits (0..15), got a 16"),
        ("return w, s, s", "codes must be uint8"),
        ("raise RuntimeError('oops')", "RuntimeError: oops"),
    ],
)
def test_an_int4_entry_in_the_wrong_format_says_what_is_wrong(tmp_path, capsys, body, words):
    code = (
        "import numpy as np\n"
        "def quantise(w):\n"
        "    s = np.ones((w.shape[0], w.shape[1] // 64), np.float16)\n"
        f"    {body}\n"
    )
    assert challenge.main(["int4", _entry(tmp_path, "q.py", code), "--quick"]) == 1
    assert words in capsys.readouterr().out


def test_the_int4_format_reads_back_codes_times_scale_plus_offset():
    w = np.zeros((2, 64), np.float32)
    codes = np.arange(128, dtype=np.uint8).reshape(2, 64) % 16
    scale = np.full((2, 1), 0.5, np.float16)
    back = challenge.check_int4(w, [codes, scale, np.full((2, 1), -4, np.float16)])
    np.testing.assert_array_equal(back, codes * 0.5 - 4)


def test_bpe_wrong_ties_and_a_limit(tmp_path, capsys):
    ties = _entry(
        tmp_path,
        "bpe.py",
        "from course_lib.bpe.train import train_bpe as t\n"
        "def train_bpe(p, v, s):\n"
        "    vocab, merges = t(p, v, s)\n"
        "    return vocab, merges[:3] + [merges[4], merges[3]] + merges[5:]\n",
    )
    assert challenge.main(["bpe", ties, "--quick"]) == 1
    assert "merge 3 is" in capsys.readouterr().out
    slow = _entry(tmp_path, "slow.py", "import time\ndef train_bpe(p, v, s):\n    time.sleep(30)\n")
    assert challenge.main(["bpe", slow, "--quick", "--limit", "1"]) == 1
    assert "ran past the limit of 1 s" in capsys.readouterr().out
