"""A class's race board: ``./course leaderboard RECORDS... --out board.html``.

    ./course leaderboard race_records/ --out board.html
    ./course leaderboard submissions/*/record.json --title "Class of 2027" --out board.html

RECORDS are record files written by ``./course race`` or folders holding them (searched for
``*.json``; a lecturer collects them the way they collect worksheets, one file or folder per
learner: the entrant's name is the record's ``--name``, else its file's stem, else its folder's
name). The board is one self-contained HTML page (no scripts, no requests to other hosts):
one table per track (CPU by thread count, Apple MPS, Colab GPU, data-centre GPU, consumer GPU),
sorted by speed-up, each row with its flags (:func:`course_lib.gpt.records.audit`) and its
details (changes, runs, machine, software, command). A summary is printed too.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from course_lib.gpt.records import board_html, collect

    parser = argparse.ArgumentParser(
        prog="./course leaderboard", description=__doc__.split("\n")[0]
    )
    parser.add_argument("records", nargs="+", help="record files or folders of them")
    parser.add_argument("--out", default="board.html", help="the HTML file to write")
    parser.add_argument("--title", default="Race board", help="the page's title")
    args = parser.parse_args(argv)
    try:
        records = collect(args.records)
    except (FileNotFoundError, ValueError) as err:
        print(f"leaderboard: {err}", file=sys.stderr)
        return 2
    Path(args.out).write_text(board_html(records, args.title), encoding="utf-8")
    for rec in sorted(records, key=lambda r: (r["track"], -(r.get("speed_up") or 0))):
        up = rec.get("speed_up")
        score = "did not finish" if up is None else f"{up:.2f}x ± {rec['speed_up_spread']:.2f}"
        flags = f"  [{len(rec['flags'])} flag(s)]" if rec["flags"] else ""
        print(f"{rec['track']:<18} {rec['entrant']:<20} {rec['recipe_name']:<16} {score}{flags}")
    print(f"{len(records)} record(s) -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
