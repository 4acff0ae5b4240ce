"""Small challenges of the chapters: ``./course challenge NAME [FILE]`` checks, then times or scores.

    ./course challenge bpe  [FILE]   # chapter 7: train byte-level BPE, 10,000 tokens, on all of
                                     # Shakespeare (5 MB), under a time limit (CS336's setting,
                                     # on the course's own text)
    ./course challenge bleu [FILE]   # chapter 3: corpus BLEU equal to sacrebleu's, then faster?
    ./course challenge int4 [FILE]   # chapter 12: 4-bit weights with the least loss increase
    ./course challenge bpe --quick   # a smaller input (a smoke test)

FILE is an entry: a Python file defining the challenge's function (``challenges/`` holds the
course's entries, with the function each needs in its docstring); without it the course's own
entry runs. **Correctness comes first**: an entry that gives a wrong answer on the check's input
(the merges differ from the course's, the score from sacrebleu's by more than 1e-6, a code
outside 4 bits) is stopped there, with what differed. Then the timed or scored run, beside the
course's entry (and sacrebleu, for ``bleu``) run the same way.

Each entry runs in its own Python process in a temporary folder, under a time limit
(``--limit``): the process imports the file and says it is ready, then the parent times each
call from the moment it sends the task to the moment the answer is written (so imports and
set-up are not timed). Results come back as JSON or ``.npz`` (never pickle). This is a check you
run on your own machine, not a grade: the entry's code runs with your permissions.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
ENTRIES = ROOT / "challenges"
CHALLENGES = {
    "bpe": ("train_bpe", ENTRIES / "bpe_course.py", 120.0),
    "bleu": ("corpus_bleu", ENTRIES / "bleu_course.py", 60.0),
    "int4": ("quantise", ENTRIES / "int4_absmax.py", 60.0),
}
SPECIAL = "<|endoftext|>"


class EntryError(Exception):
    """The entry failed: it did not import, raised, answered wrongly or ran past its limit."""


class Entry:
    """One entry's process: :meth:`call` sends a task and times it until the answer is written."""

    def __init__(self, path: Path, function: str, limit: float, workdir: Path) -> None:
        self.path, self.limit, self.workdir = Path(path).resolve(), limit, workdir
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tools.challenge_child", str(self.path), function],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=workdir,
            env=env,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self._expect("ready", max(limit, 60.0))

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put("error the entry's process ended")

    def _expect(self, word: str, timeout: float) -> None:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            self.close()
            raise EntryError(f"{self.path.name} ran past the limit of {timeout:.0f} s") from None
        if line != word:
            raise EntryError(f"{self.path.name}: {line.removeprefix('error ')}")

    def call(
        self, args: list[Any], kind: str, arrays: dict[int, np.ndarray] | None = None
    ) -> tuple[Any, float]:
        out = self.workdir / f"out_{time.monotonic_ns()}"
        paths = {}
        for i, a in (arrays or {}).items():
            p = self.workdir / f"arg{i}_{time.monotonic_ns()}.npy"
            np.save(p, a)
            paths[str(i)] = str(p)
        out_file = out.with_suffix(".npz" if kind == "arrays" else ".json")
        task = {"args": args, "arrays": paths, "kind": kind, "out": str(out_file)}
        assert self.proc.stdin is not None
        t0 = time.perf_counter()
        self.proc.stdin.write(json.dumps(task) + "\n")
        self.proc.stdin.flush()
        self._expect("done", self.limit)
        seconds = time.perf_counter() - t0
        if kind == "arrays":
            with np.load(out_file, allow_pickle=False) as z:
                return [z[k] for k in sorted(z.files, key=lambda k: int(k.split("_")[1]))], seconds
        return json.loads(out_file.read_text()), seconds

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


# ------------------------------------------------------------------------------ bpe
def _corpus(quick: bool) -> str:
    from course_lib.bpe.corpus import sample, shakespeare_files

    if quick:
        return sample(200_000)
    works = [
        p.read_text(encoding="utf-8").replace("\r\n", "\n").strip() for p in shakespeare_files()
    ]
    return SPECIAL.join(works) + "\n"


def challenge_bpe(entry: Path, limit: float, quick: bool, tmp: Path) -> dict[str, Any]:
    from course_lib.bpe.corpus import sample
    from course_lib.bpe.train import train_bpe

    small = tmp / "check.txt"
    small.write_text(sample(30_000) + SPECIAL + sample(5_000), encoding="utf-8")
    expected = [[a.hex(), b.hex()] for a, b in train_bpe(small, 600, [SPECIAL])[1]]
    big = tmp / "corpus.txt"
    big.write_text(_corpus(quick), encoding="utf-8")
    vocab = 1000 if quick else 10_000
    rows = []
    course = CHALLENGES["bpe"][1]
    for name, path in _entries(entry, course):
        e = Entry(path, "train_bpe", limit, tmp)
        try:
            got, _ = e.call([str(small), 600, [SPECIAL]], "merges")
            _same_merges(got, expected, "the check (35,000 characters, 600 tokens)")
            merges, seconds = e.call([str(big), vocab, [SPECIAL]], "merges")
        finally:
            e.close()
        rows.append({"entry": name, "seconds": seconds, "merges": merges})
    ref = rows[-1]["merges"]
    for r in rows[:-1]:
        _same_merges(
            r["merges"], ref, f"the timed run ({big.stat().st_size:,} bytes, {vocab:,} tokens)"
        )
    return {
        "what": f"byte-level BPE, {vocab:,} tokens, "
        + ("the first 200,000 characters" if quick else f"{SPECIAL} between works")
        + f", {big.stat().st_size / 1e6:.1f} MB",
        "rows": [{"entry": r["entry"], "seconds": round(r["seconds"], 2)} for r in rows],
        "limit_s": limit,
    }


def _same_merges(got: list, expected: list, where: str) -> None:
    for i, (g, x) in enumerate(zip(got, expected, strict=False)):
        if list(g) != list(x):
            show = [bytes.fromhex(h) for h in g], [bytes.fromhex(h) for h in x]
            raise EntryError(
                f"wrong merges in {where}: merge {i} is {tuple(show[0])}, the course's is "
                f"{tuple(show[1])} (ties go to the lexicographically greater pair)"
            )
    if len(got) != len(expected):
        raise EntryError(f"{len(got)} merges in {where}, expected {len(expected)}")


# ------------------------------------------------------------------------------ bleu
def _bleu_inputs(repeats: int) -> list[tuple[list[str], list[list[str]]]]:
    from course_lib.text_metrics.dataset import load_translation_eval

    ev = load_translation_eval()
    streams = [list(s) for s in zip(*ev.references, strict=True)]
    cases = [(list(hyp), streams) for hyp in ev.systems.values()]
    cases.append((["", "the"], [["a b c d", "the"]]))  # an empty hypothesis, a one-word one
    cases.append((["the cat is here now ."], [["the cat was here today ."]]))  # no 3- or 4-gram
    systems = cases[: len(ev.systems)]
    hyps = [h for _ in range(repeats) for hyp, _ in systems for h in hyp]
    refs = [[r for _ in range(repeats) for _ in systems for r in s] for s in streams]
    return cases + [(hyps, refs)]


def challenge_bleu(entry: Path, limit: float, quick: bool, tmp: Path) -> dict[str, Any]:
    import sacrebleu

    cases = _bleu_inputs(2 if quick else 60)
    *checks, (hyps, refs) = cases
    rows = []
    for name, path in _entries(entry, CHALLENGES["bleu"][1], ENTRIES / "bleu_sacrebleu.py"):
        e = Entry(path, "corpus_bleu", limit, tmp)
        try:
            for k, (h, r) in enumerate(checks):
                got, _ = e.call([h, r], "float")
                want = sacrebleu.corpus_bleu(h, r).score
                if not abs(got - want) <= 1e-6:
                    raise EntryError(
                        f"{name}: BLEU {got!r} on check {k} ({len(h)} sentences), sacrebleu's is "
                        f"{want!r} (defaults: 13a tokens, exp smoothing, BLEU-4, 0-100)"
                    )
            times = [e.call([hyps, refs], "float") for _ in range(3)]
        finally:
            e.close()
        rows.append(
            {"entry": name, "seconds": round(min(t for _, t in times), 3), "bleu": times[0][0]}
        )
    return {
        "what": f"corpus BLEU of {len(hyps):,} sentences, 3 references, best of 3",
        "rows": rows,
        "limit_s": limit,
    }


# ------------------------------------------------------------------------------ int4
def _model_and_windows(quick: bool):
    import torch

    from course_lib.gpt.data import split_ids, validation_windows
    from course_lib.gpt.pretrained import load_pretrained

    model, tok = load_pretrained()
    from course_lib.gpt.data import shakespeare_file

    _, val = split_ids(tok.encode(shakespeare_file().read_text(encoding="utf-8")))
    x, y = validation_windows(val, model.config.context_length)
    n = 32 if quick else 256
    return model, x[:n], y[:n], torch


def _loss(model, x, y, torch) -> float:
    with torch.no_grad():
        logits = model(x)
        return float(
            torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        )


def check_int4(w: np.ndarray, out: list[np.ndarray]) -> np.ndarray:
    """The weight an int4 answer reads back as, after checking its format (else EntryError)."""
    if len(out) != 3:
        raise EntryError(f"quantise must return (codes, scale, offset), got {len(out)} values")
    codes, scale, offset = out
    rows, cols = w.shape
    want = {
        "codes": (codes, w.shape, np.uint8),
        "scale": (scale, (rows, cols // 64), np.float16),
        "offset": (offset, (rows, cols // 64), np.float16),
    }
    for name, (a, shape, dtype) in want.items():
        if a.shape != shape or a.dtype != dtype:
            raise EntryError(
                f"{name} must be {np.dtype(dtype).name} of shape {shape}, got {a.dtype.name} {a.shape}"
            )
    if codes.max() > 15:
        raise EntryError(f"codes must fit in 4 bits (0..15), got a {int(codes.max())}")
    if not (np.isfinite(scale).all() and np.isfinite(offset).all()):
        raise EntryError("scale and offset must be finite")
    g = codes.reshape(rows, cols // 64, 64).astype(np.float32)
    back = g * scale.astype(np.float32)[..., None] + offset.astype(np.float32)[..., None]
    return back.reshape(rows, cols)


def _rows_by_input(w, like=None):
    """A weight as (outputs, inputs), groups along the inputs: ``W.T`` for (in, out), each head's
    (d, d_head) transposed and stacked for (heads, d, d_head); with ``like``, the inverse.

    >>> import torch
    >>> w = torch.arange(24.).reshape(2, 3, 4)
    >>> bool((_rows_by_input(_rows_by_input(w), like=w) == w).all()), tuple(_rows_by_input(w).shape)
    (True, (8, 3))
    """
    if like is None:
        return w.T if w.ndim == 2 else w.transpose(1, 2).reshape(-1, w.shape[1])
    if like.ndim == 2:
        return w.T
    h, d, dh = like.shape
    return w.reshape(h, dh, d).transpose(1, 2)


def challenge_int4(entry: Path, limit: float, quick: bool, tmp: Path) -> dict[str, Any]:
    model, x, y, torch = _model_and_windows(quick)
    base = _loss(model, x, y, torch)
    names = [n for n, p in model.named_parameters() if n.startswith("blocks.") and ".w_" in n]
    original = {n: p.detach().clone() for n, p in model.named_parameters()}
    rows = []
    for name, path in _entries(entry, CHALLENGES["int4"][1]):
        e = Entry(path, "quantise", limit, tmp)
        total = 0.0
        try:
            with torch.no_grad():
                params = dict(model.named_parameters())
                for n in names:
                    w = _rows_by_input(original[n]).numpy().astype(np.float32)
                    out, seconds = e.call([None], "arrays", {0: w})
                    total += seconds
                    back = torch.from_numpy(check_int4(w, out))
                    params[n].copy_(_rows_by_input(back, like=original[n]))
            loss = _loss(model, x, y, torch)
        finally:
            e.close()
            with torch.no_grad():
                for n, p in model.named_parameters():
                    p.copy_(original[n])
        rows.append(
            {"entry": name, "seconds": round(total, 2), "loss_increase": round(loss - base, 4)}
        )
    return {
        "what": f"the chapter-8 GPT's {len(names)} block weights at 4 bits + a float16 scale and "
        f"offset per 64 weights (4.5 bits); loss on {len(x)} validation windows, float32 "
        f"{base:.4f}",
        "rows": rows,
        "limit_s": limit,
    }


# ------------------------------------------------------------------------------ the command
def _entries(entry: Path, course: Path, *more: Path) -> list[tuple[str, Path]]:
    """The learner's entry (if not the course's), then the others, the course's last."""
    out = [] if entry.resolve() == course.resolve() else [(f"yours ({entry.name})", entry)]
    return out + [(p.stem, p) for p in more] + [(f"the course's ({course.name})", course)]


RUN = {"bpe": challenge_bpe, "bleu": challenge_bleu, "int4": challenge_int4}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="./course challenge", description=__doc__.split("\n")[0])
    parser.add_argument("name", choices=sorted(CHALLENGES))
    parser.add_argument("entry", nargs="?", default=None, help="your entry (a .py file)")
    parser.add_argument("--limit", type=float, default=None, help="seconds per call")
    parser.add_argument("--quick", action="store_true", help="a smaller input (smoke test)")
    parser.add_argument("--json", default=None, help="also write the result here")
    args = parser.parse_args(argv)
    function, course, limit = CHALLENGES[args.name]
    entry = Path(args.entry) if args.entry else course
    if not entry.is_file():
        print(
            f"challenge: no entry file {str(entry)!r} (copy one from challenges/)", file=sys.stderr
        )
        return 2
    limit = args.limit or limit
    with tempfile.TemporaryDirectory(prefix=f"challenge_{args.name}_") as d:
        try:
            result = RUN[args.name](entry, limit, args.quick, Path(d))
        except EntryError as err:
            print(f"{args.name}: NOT CORRECT (or not finished): {err}")
            return 1
    print(f"{args.name}: {result['what']}; every entry was checked correct first")
    for row in result["rows"]:
        extra = "".join(f", {k} {v}" for k, v in row.items() if k not in ("entry", "seconds"))
        over = " (over the limit)" if row["seconds"] > result["limit_s"] else ""
        print(f"  {row['entry']:<32} {row['seconds']:>9.3f} s{over}{extra}")
    if args.json:
        Path(args.json).write_text(json.dumps({"challenge": args.name, **result}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
