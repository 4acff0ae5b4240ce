"""A race any learner can enter (chapter 8): recipe files, race records, their audit, the board.

A learner writes a recipe (a small TOML or Python file of :class:`~course_lib.gpt.config.Recipe`
fields, optionally on top of one of the course's recipes) and races it with ``./course race
FILE`` (:mod:`tools.race`) against the course's ``baseline`` recipe (nanoGPT's README recipe in
the course's code) on the same machine, in the same run, in turns (:func:`course_lib.gpt.race.race`),
to the validation loss the reference ends with, over at least three seeds. The score is the
ratio of the two times, measured side by side: fair across hardware in a way a time alone is not.

A **record** (one JSON file per recipe raced) holds the speed-up with its spread over the seeds,
the time to the target, tokens per second, the machine (CPU model, threads, GPU), the software,
the recipe and its hash, and the exact command. :func:`audit` lists what is wrong with a record
(fewer than three seeds, a claimed speed-up its runs do not give, a changed evaluation, a
speed-up within the reference's noise); :func:`board_html` renders a class's records as one
accessible HTML page, one table per track (:func:`track`); :func:`records_page` is the website's
page of the course's own records.

The rules (also in the README, "The race"):

1. the data, the tokenizer, the split and the evaluation (every prediction of the whole
   validation split, at the reference's context length of 64) are fixed: a recipe that changes
   ``context_length`` changes the evaluation and is refused;
2. the reference runs in the same process, in turns with the entrant, so both see the same load;
3. at least three seeds; the speed-up is their mean, its spread half their range;
4. a record beats the previous one only if its lower end (mean - spread) is above the previous
   one's upper end (mean + spread): more than the noise.
"""

from __future__ import annotations

import ast
import dataclasses
import datetime as _dt
import hashlib
import html
import json
import os
import platform
import statistics
import sys
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from course_lib.gpt.config import RECIPES, Recipe

__all__ = [
    "FORMAT",
    "REFERENCE",
    "audit",
    "board_html",
    "collect",
    "compare",
    "export_recipes",
    "load_recipe",
    "machine",
    "make_record",
    "recipe_hash",
    "recipe_toml",
    "records_page",
    "software",
    "summarise",
    "track",
]

FORMAT = "course-race-record/1"
#: the course's reference recipe: every record's speed-up is against it
REFERENCE = "baseline"
MIN_SEEDS = 3
_FIELDS = {f.name: f for f in dataclasses.fields(Recipe)}


# ------------------------------------------------------------------------------ recipe files
def _recipe_from_mapping(d: dict[str, Any], default_name: str, where: str) -> Recipe:
    """A recipe from a mapping of fields, on top of ``base`` (one of the course's recipes)."""
    d = dict(d)
    base_name = d.pop("base", REFERENCE)
    if base_name not in RECIPES:
        raise ValueError(
            f"{where}: base = {base_name!r} is not one of the course's {list(RECIPES)}"
        )
    unknown = sorted(set(d) - set(_FIELDS))
    if unknown:
        raise ValueError(
            f"{where}: unknown recipe fields {unknown}; the fields are {sorted(_FIELDS)} "
            "(and 'base')"
        )
    if "betas" in d:
        d["betas"] = tuple(d["betas"])
    d.setdefault("name", default_name)
    try:
        return dataclasses.replace(RECIPES[base_name], **d)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{where}: {err}") from None


def _literal_python(path: Path) -> dict[str, Any]:
    """The ``RECIPE = {...}`` (or ``dict(...)``, ``Recipe(...)``) of a Python file, read without
    running it: only literal values are allowed, so a recipe file cannot run code."""
    source = path.read_text(encoding="utf-8")
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as err:
        raise ValueError(f"{path}: not valid Python ({err.msg}, line {err.lineno})") from None
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "RECIPE"
        ):
            value = node.value
            try:
                if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
                    if value.func.id not in ("dict", "Recipe") or value.args:
                        raise ValueError("only dict(...) or Recipe(...) with keyword arguments")
                    return {k.arg: ast.literal_eval(k.value) for k in value.keywords if k.arg}
                out = ast.literal_eval(value)
            except ValueError as err:
                raise ValueError(
                    f"{path}: RECIPE must be a literal dict (or dict(...)/Recipe(...) with literal "
                    f"keyword values): {err}"
                ) from None
            if not isinstance(out, dict):
                raise ValueError(f"{path}: RECIPE must be a dict, got {type(out).__name__}")
            return out
    raise ValueError(f"{path}: no top-level RECIPE = {{...}} assignment")


def load_recipe(spec: str | os.PathLike) -> Recipe:
    """A recipe from a ``.toml`` or ``.py`` file, or one of the course's recipes by name.

    A TOML file holds the fields at its top level (or under ``[recipe]``); a Python file assigns
    ``RECIPE = {...}``, which is read as a literal and never run. ``base`` names the course's
    recipe the fields change (default ``baseline``); ``name`` defaults to the file's stem.

    >>> load_recipe("fast") == RECIPES["fast"]
    True
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = Path(d) / "mine.toml"
    ...     _ = p.write_text('base = "modern"\\nlr = 4e-3\\n')
    ...     r = load_recipe(p)
    >>> r.name, r.lr, r.positions
    ('mine', 0.004, 'rope')
    """
    text = str(spec)
    if text in RECIPES and not Path(text).exists():
        return RECIPES[text]
    path = Path(spec)
    if not path.is_file():
        raise FileNotFoundError(
            f"no recipe file {text!r} (and it is not one of the course's recipes {list(RECIPES)})"
        )
    if path.suffix == ".toml":
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as err:
            raise ValueError(f"{path}: not valid TOML ({err})") from None
        data = data.get("recipe", data)
    elif path.suffix == ".py":
        data = _literal_python(path)
    else:
        raise ValueError(f"{path}: a recipe is a .toml or .py file, got {path.suffix!r}")
    return _recipe_from_mapping(data, path.stem, str(path))


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return repr(v)


def recipe_toml(recipe: Recipe, comment: str = "") -> str:
    """A recipe as a TOML file (every field, so that it reads the same whatever the defaults).

    >>> text = recipe_toml(RECIPES["fast"])
    >>> tomllib.loads(text)["optimizer"], tomllib.loads(text)["betas"]
    ('muon', [0.9, 0.99])
    """
    lines = [f"# {line}" if line else "#" for line in comment.splitlines()]
    lines += [f"{k} = {_toml_value(v)}" for k, v in recipe.to_dict().items()]
    return "\n".join(lines) + "\n"


def export_recipes(folder: str | os.PathLike) -> list[Path]:
    """The course's recipes as TOML files in ``folder`` (examples to copy and change)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, recipe in RECIPES.items():
        path = folder / f"{name}.toml"
        comment = (
            f"The course's `{name}` recipe (course_lib.gpt.config.RECIPES), exported by\n"
            "./course race --export. Copy it, change a field, and race it: ./course race FILE"
        )
        path.write_text(recipe_toml(recipe, comment), encoding="utf-8")
        out.append(path)
    return out


def recipe_hash(recipe: Recipe) -> str:
    """The first 16 hex digits of the SHA-256 of the recipe's fields but its name (what trains).

    >>> recipe_hash(RECIPES["fast"]) == recipe_hash(dataclasses.replace(RECIPES["fast"], name="x"))
    True
    >>> recipe_hash(RECIPES["fast"]) == recipe_hash(RECIPES["modern"])
    False
    """
    fields = {k: v for k, v in recipe.to_dict().items() if k != "name"}
    blob = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def changes(recipe: dict[str, Any], base: str = REFERENCE) -> dict[str, Any]:
    """The fields in which a recipe (a :meth:`Recipe.to_dict`) differs from the course's ``base``.

    >>> changes(RECIPES["modern"].to_dict())["positions"]
    'rope'
    """
    ref = RECIPES[base].to_dict()
    return {k: v for k, v in recipe.items() if k not in ("name", "compile") and ref.get(k, v) != v}


# ------------------------------------------------------------------------------ the machine
def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    if sys.platform == "darwin":
        import subprocess

        try:
            out = subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True
            )
            if out.stdout.strip():
                return out.stdout.strip()
        except OSError:
            pass
    return platform.processor() or platform.machine() or "unknown"


def machine(device: str = "cpu") -> dict[str, Any]:
    """Where a race runs: CPU model, cores, threads, the device and its name, Colab or not."""
    import torch

    info: dict[str, Any] = {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "os": f"{platform.system()} {platform.release()}",
        "device": device,
        "gpu": None,
        "colab": "COLAB_RELEASE_TAG" in os.environ or "google.colab" in sys.modules,
    }
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name()
    elif device == "mps":
        info["gpu"] = "Apple MPS"
    return info


def software() -> dict[str, str]:
    """The versions a record was made with."""
    import numpy
    import torch

    out = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
    }
    try:
        import subprocess

        root = Path(__file__).resolve().parents[2]
        rev = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        )
        if rev.returncode == 0:
            out["course"] = rev.stdout.strip()
    except OSError:
        pass
    return out


#: GPUs in data centres (the rest are consumer cards, or Colab's when run there)
_DATA_CENTRE = (
    "A100",
    "H100",
    "H200",
    "H800",
    "A800",
    "B200",
    "GH200",
    "L40",
    "V100",
    "A10",
    "A40",
)


def track(m: dict[str, Any]) -> str:
    """The board's track of a machine: CPU by thread count, Apple MPS, Colab GPU, data-centre GPU,
    consumer GPU.

    >>> track({"device": "cpu", "threads": 2})
    'CPU, 2 threads'
    >>> track({"device": "cuda", "gpu": "Tesla T4", "colab": True})
    'Colab GPU'
    >>> track({"device": "cuda", "gpu": "NVIDIA H200", "colab": False})
    'Data-centre GPU'
    """
    device = str(m.get("device", "cpu"))
    if device == "cpu":
        n = m.get("threads", 1)
        return f"CPU, {n} thread{'s' if n != 1 else ''}"
    if device == "mps":
        return "Apple MPS"
    if m.get("colab"):
        return "Colab GPU"
    name = str(m.get("gpu") or "")
    if any(tag in name for tag in _DATA_CENTRE):
        return "Data-centre GPU"
    return "Consumer GPU"


# ------------------------------------------------------------------------------ records
def _spread(xs: list[float]) -> float:
    return (max(xs) - min(xs)) / 2 if xs else float("nan")


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean and half-range over the seeds of the speed-up and time to the target (every seed
    must have reached it, else the speed-up is ``None``).

    >>> s = summarise([{"speed_up": 2.0, "seconds": 10.0, "reached": True, "tokens_per_s": 5.0},
    ...                {"speed_up": 2.4, "seconds": 8.0, "reached": True, "tokens_per_s": 7.0}])
    >>> s["speed_up"], s["speed_up_spread"], s["seconds_to_target"], s["tokens_per_s"]
    (2.2, 0.2, 9.0, 6.0)
    """
    done = [r for r in runs if r["reached"]]
    ok = bool(runs) and len(done) == len(runs)
    ups = [r["speed_up"] for r in done]
    secs = [r["seconds"] for r in done]
    return {
        "speed_up": round(statistics.mean(ups), 3) if ok else None,
        "speed_up_spread": round(_spread(ups), 3) if ok else None,
        "seconds_to_target": round(statistics.mean(secs), 2) if ok else None,
        "seconds_spread": round(_spread(secs), 2) if ok else None,
        "tokens_per_s": round(statistics.mean(r["tokens_per_s"] for r in runs), 1)
        if runs
        else None,
        "reached": f"{len(done)}/{len(runs)}",
    }


def make_record(
    recipe: Recipe,
    runs: list[dict[str, Any]],
    *,
    machine_info: dict[str, Any],
    command: str,
    recipe_file: str | None = None,
    quick: bool = False,
    entrant: str | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A record from the per-seed ``runs`` of one recipe (each: seed, target, reference_seconds,
    seconds, steps, reference_steps, speed_up, tokens_per_s, reached)."""
    record = {
        "format": FORMAT,
        "entrant": entrant,
        "recipe_name": recipe.name,
        "recipe_hash": recipe_hash(recipe),
        "recipe_file": recipe_file,
        "recipe": recipe.to_dict(),
        "changes": changes(recipe.to_dict()),
        "reference": {"name": REFERENCE, "hash": recipe_hash(RECIPES[REFERENCE])},
        "seeds": [r["seed"] for r in runs],
        **summarise(runs),
        "target_val_loss": round(statistics.mean(r["target"] for r in runs), 4),
        "runs": runs,
        "machine": machine_info,
        "track": track(machine_info),
        "software": software(),
        "command": command,
        "created": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "quick": quick,
    }
    record.update(extra or {})
    record["flags"] = audit(record)
    return record


def audit(record: dict[str, Any]) -> list[str]:
    """What is wrong with a record, or worth a reader's caution (an empty list: nothing).

    The speed-up is recomputed from the record's own runs: a record claiming more than its seeds
    allow (above the fastest seed) is marked, as is one whose claim its runs do not give.

    >>> runs = [{"seed": s, "speed_up": u, "seconds": 1.0, "reached": True, "tokens_per_s": 1.0}
    ...         for s, u in [(0, 2.0), (1, 2.2), (2, 2.1)]]
    >>> rec = {"recipe": RECIPES["fast"].to_dict(), "recipe_hash": recipe_hash(RECIPES["fast"]),
    ...        "runs": runs, **summarise(runs)}
    >>> audit(rec)
    []
    >>> audit({**rec, "speed_up": 2.5})[0]
    'claims 2.500x, more than its seeds allow (2.100 ± 0.100, fastest seed 2.200x)'
    """
    flags = []
    runs = record.get("runs") or []
    if len(runs) < MIN_SEEDS:
        flags.append(f"{len(runs)} seed{'s' if len(runs) != 1 else ''}, fewer than {MIN_SEEDS}")
    if record.get("quick"):
        flags.append("a smoke test (--quick): tiny model and budget, not a race")
    recipe = record.get("recipe") or {}
    try:
        r = Recipe.from_dict(recipe)
        if recipe_hash(r) != record.get("recipe_hash"):
            flags.append("its recipe hash does not match its recipe")
        if r.context_length != RECIPES[REFERENCE].context_length:
            flags.append(
                f"changes the evaluation (context_length {r.context_length}, the race's is "
                f"{RECIPES[REFERENCE].context_length})"
            )
    except (TypeError, ValueError) as err:
        flags.append(f"its recipe is not valid ({err})")
    fresh = summarise(runs) if runs else None
    claim = record.get("speed_up")
    if fresh is None or fresh["speed_up"] is None:
        if runs:
            flags.append(f"did not reach the target in every seed ({fresh and fresh['reached']})")
        if claim is not None:
            flags.append(f"claims {claim:.3f}x without runs that reached the target")
        return flags
    mean, spread = fresh["speed_up"], fresh["speed_up_spread"]
    if claim is None:
        flags.append("claims no speed-up")
    elif claim > mean + spread + 5e-4:
        best = max(r["speed_up"] for r in runs)
        flags.append(
            f"claims {claim:.3f}x, more than its seeds allow ({mean:.3f} ± {spread:.3f}, "
            f"fastest seed {best:.3f}x)"
        )
    elif abs(claim - mean) > 5e-4:
        flags.append(f"claims {claim:.3f}x where its runs give {mean:.3f}x")
    if mean - spread <= 1.0 <= mean + spread:
        flags.append("within the noise of the reference (its range includes 1x)")
    return flags


def compare(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Whether ``new`` (a re-run) reproduces ``old``: their ranges (mean ± spread) overlap.

    >>> compare({"speed_up": 2.0, "speed_up_spread": 0.1}, {"speed_up": 2.15, "speed_up_spread": 0.1})
    {'reproduces': True, 'old': '2.000 ± 0.100', 'new': '2.150 ± 0.100', 'gap': 0.15}
    >>> compare({"speed_up": 2.0, "speed_up_spread": 0.1}, {"speed_up": 1.5, "speed_up_spread": 0.1})["reproduces"]
    False
    """
    a, da = old.get("speed_up"), old.get("speed_up_spread")
    b, db = new.get("speed_up"), new.get("speed_up_spread")
    if a is None or b is None:
        ok = a is None and b is None
        return {"reproduces": ok, "old": str(a), "new": str(b), "gap": None}
    gap = round(abs(a - b), 3)
    return {
        "reproduces": gap <= da + db + 5e-4,
        "old": f"{a:.3f} ± {da:.3f}",
        "new": f"{b:.3f} ± {db:.3f}",
        "gap": gap,
    }


def collect(paths: Iterable[str | os.PathLike]) -> list[dict[str, Any]]:
    """The records in ``paths`` (files, or folders searched for ``*.json``, as a lecturer
    collects worksheets); each gains ``source`` (its path) and, if it has none, ``entrant``
    (the file's stem, or its folder's name for ``STUDENT/record.json``-style folders)."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(p.rglob("*.json"))
        elif p.is_file():
            files.append(p)
        else:
            raise FileNotFoundError(f"no record file or folder {str(p)!r}")
    out = []
    for f in files:
        try:
            rec = json.loads(f.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ValueError(f"{f}: not a JSON file ({err})") from None
        if not isinstance(rec, dict) or rec.get("format") != FORMAT:
            if f.parent in map(Path, paths):  # a stray JSON in a folder: skip; a named file: error
                continue
            raise ValueError(f"{f}: not a race record (its format is not {FORMAT!r})")
        rec["source"] = str(f)
        if not rec.get("entrant"):
            rec["entrant"] = (
                f.stem if f.stem not in ("record", rec.get("recipe_name")) else (f.parent.name)
            )
        rec["flags"] = audit(rec)
        out.append(rec)
    return out


# ------------------------------------------------------------------------------ the board
_CSS = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:70rem;padding:0 1rem;
color:#1a1a1a;background:#fff;line-height:1.45}
table{border-collapse:collapse;width:100%;margin:0 0 2rem}
caption{text-align:left;font-weight:600;padding:.4rem 0}
th,td{border:1px solid #888;padding:.35rem .5rem;text-align:left;vertical-align:top}
th{background:#eee}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.flag{color:#8a1c1c}
details summary{cursor:pointer}
a{color:#0b4f9c}
:focus{outline:3px solid #0b4f9c}
"""


def _fmt(x: Any, digits: int = 2, suffix: str = "") -> str:
    return "-" if x is None else f"{x:.{digits}f}{suffix}"


def _rank(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sorted by speed-up (unfinished last), each marked when its range overlaps the one above."""
    done = sorted((r for r in rows if r.get("speed_up") is not None), key=lambda r: -r["speed_up"])
    out = []
    for i, r in enumerate(done):
        tie = False
        if i:
            above = done[i - 1]
            tie = r["speed_up"] + r["speed_up_spread"] >= (
                above["speed_up"] - above["speed_up_spread"]
            )
        out.append({**r, "_tie": tie})
    return out + [{**r, "_tie": False} for r in rows if r.get("speed_up") is None]


def _details(rec: dict[str, Any]) -> str:
    m, sw = rec.get("machine", {}), rec.get("software", {})
    ch = rec.get("changes") or changes(rec.get("recipe", {}))
    changed = ", ".join(f"{k} = {v}" for k, v in ch.items()) or "none (the reference itself)"
    runs = "; ".join(
        f"seed {r['seed']}: {_fmt(r.get('speed_up'), 3, 'x')} "
        f"({_fmt(r.get('seconds'), 1)} s vs {_fmt(r.get('reference_seconds'), 1)} s)"
        for r in rec.get("runs", [])
    )
    items = [
        ("Changes from baseline", changed),
        ("Runs", runs),
        ("Target (validation loss)", _fmt(rec.get("target_val_loss"), 4)),
        (
            "Machine",
            f"{m.get('cpu')}, {m.get('cores')} cores, {m.get('threads')} threads"
            + (f", {m['gpu']}" if m.get("gpu") else ""),
        ),
        ("Software", ", ".join(f"{k} {v}" for k, v in sw.items())),
        ("Recipe hash", rec.get("recipe_hash", "-")),
        ("Command", rec.get("command", "-")),
        ("Made", rec.get("created", "-")),
        ("File", rec.get("source", "-")),
    ]
    body = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(str(v))}</dd>" for k, v in items)
    return f"<details><summary>details</summary><dl>{body}</dl></details>"


def board_html(records: list[dict[str, Any]], title: str = "Race board") -> str:
    """One self-contained, accessible HTML page: a table per track, sorted by speed-up.

    No scripts, no external requests; every table has a caption and header cells with scopes.

    >>> page = board_html([])
    >>> "<table" in page, "http" in page.replace("http-equiv", "")
    (False, False)
    """
    tracks: dict[str, list[dict[str, Any]]] = {}
    for rec in records:
        tracks.setdefault(rec.get("track") or track(rec.get("machine", {})), []).append(rec)
    order = sorted(tracks, key=lambda t: (not t.startswith("CPU"), t))
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body><main>",
        f"<h1>{html.escape(title)}</h1>",
        "<p>Each record races a recipe against the course's <code>baseline</code> recipe on the "
        "same machine, in the same run, to the validation loss the baseline ends with. The "
        "speed-up is the ratio of the two training times (mean ± half the range over the seeds). "
        "A record beats the one above it only when their ranges do not overlap; rows marked "
        "<em>tie</em> are within the noise of the row above. Flags say what is wrong with a "
        "record.</p>",
    ]
    if not records:
        parts.append("<p>No records yet.</p>")
    if order:
        parts.append("<nav aria-label='Tracks'><ul>")
        parts += [
            f'<li><a href="#track-{i}">{html.escape(t)}</a></li>' for i, t in enumerate(order)
        ]
        parts.append("</ul></nav>")
    for i, name in enumerate(order):
        rows = _rank(tracks[name])
        parts.append(
            f'<section aria-labelledby="track-{i}"><h2 id="track-{i}">{html.escape(name)}</h2>'
        )
        parts.append(
            f"<table><caption>{html.escape(name)}: {len(rows)} record"
            f"{'s' if len(rows) != 1 else ''}, fastest first</caption>"
        )
        heads = [
            "Rank",
            "Entrant",
            "Recipe",
            "Speed-up",
            "Time to target (s)",
            "Tokens/s",
            "Seeds",
            "Flags",
            "Details",
        ]
        parts.append(
            "<thead><tr>"
            + "".join(f'<th scope="col">{h}</th>' for h in heads)
            + "</tr></thead><tbody>"
        )
        for k, r in enumerate(rows, 1):
            up = r.get("speed_up")
            speed = (
                "did not finish"
                if up is None
                else (f"{up:.2f}x ± {r['speed_up_spread']:.2f}" + (" (tie)" if r["_tie"] else ""))
            )
            secs = (
                "-"
                if r.get("seconds_to_target") is None
                else (f"{r['seconds_to_target']:.1f} ± {r['seconds_spread']:.1f}")
            )
            flags = "; ".join(r.get("flags") or []) or "none"
            cells = [
                f'<th scope="row">{k if up is not None else "-"}</th>',
                f"<td>{html.escape(str(r.get('entrant') or '-'))}</td>",
                f"<td>{html.escape(str(r.get('recipe_name')))}</td>",
                f'<td class="num">{html.escape(speed)}</td>',
                f'<td class="num">{secs}</td>',
                f'<td class="num">{_fmt(r.get("tokens_per_s"), 0)}</td>',
                f'<td class="num">{html.escape(str(r.get("reached", "-")))}</td>',
                f'<td class="{"flag" if r.get("flags") else ""}">{html.escape(flags)}</td>',
                f"<td>{_details(r)}</td>",
            ]
            parts.append("<tr>" + "".join(cells) + "</tr>")
        parts.append("</tbody></table></section>")
    parts.append("</main></body></html>")
    return "\n".join(parts) + "\n"


# ------------------------------------------------------------------------------ the website page
#: the recipe each of the course's recipes was made from (the record history's order)
PARENT = {"modern": "baseline", "speedrun": "modern", "fast": "modern"}


def _lineage(name: str, fields: dict[str, Any] | None) -> str:
    """What a recipe changed from the one it was made from (the course's), as Markdown.

    >>> _lineage("fast", RECIPES["fast"].to_dict())
    'from `modern`: `decay_steps=400`, `activation=relu2`, `qk_norm=True`, `optimizer=muon`'
    """
    if name == REFERENCE:
        return "the reference: nanoGPT's README recipe in the course's code"
    if not fields:
        return "-"
    parent = PARENT.get(name, REFERENCE)
    diff = changes(fields, parent)
    return f"from `{parent}`: " + (", ".join(f"`{k}={v}`" for k, v in diff.items()) or "nothing")


def records_page(data_dir: str | os.PathLike | None = None) -> str:
    """The website's records page (Markdown): the course's recipes on every machine they were
    measured on, from ``data/gpt`` (the race records, the nanoGPT races on CPU and GPU)."""
    from course_lib.paths import data_path

    base = Path(data_dir) if data_dir is not None else data_path("gpt")
    lines = [
        "# Race records",
        "",
        "The course's training recipes raced on each machine they were measured on, newest "
        "results from `data/gpt/`. The score is a ratio measured in one run on one machine, so "
        "it compares across machines where times alone do not. Enter your own recipe with "
        '`./course race FILE` (the rules are in the README, "The race"; chapter 8, section '
        "8.11, tells the story of these recipes).",
        "",
        "## Against the course's `baseline`",
        "",
    ]
    recs = collect([base / "records"]) if (base / "records").is_dir() else []
    if recs:
        lines += [
            "| machine (track) | recipe | what it changed | speed-up over `baseline` | "
            "time to target, s | seeds | flags |",
            "| --- | --- | --- | ---: | ---: | --- | --- |",
        ]
        for r in sorted(recs, key=lambda r: (r["track"], -(r.get("speed_up") or 0))):
            what = _lineage(r["recipe_name"], r.get("recipe"))
            up = r.get("speed_up")
            speed = "-" if up is None else f"{up:.2f}x ± {r['speed_up_spread']:.2f}"
            secs = (
                "-"
                if r.get("seconds_to_target") is None
                else (f"{r['seconds_to_target']:.1f} ± {r['seconds_spread']:.1f}")
            )
            m = r["machine"]
            where = f"{m.get('cpu')} ({r['track']})"
            flags = "; ".join(r.get("flags") or []) or "-"
            lines.append(
                f"| {where} | `{r['recipe_name']}` | {what} | {speed} | {secs} | "
                f"{r.get('reached')} | {flags} |"
            )
        loads = sorted(
            {tuple(r["load_average"]) for r in recs if r.get("load_average")},
            key=lambda t: [x or 0 for x in t],
        )
        if loads:
            said = "; ".join(f"{a} at the start, {b} at the end" for a, b in loads)
            lines += [
                "",
                f"The machine's load average during these races: {said} (1.0 per busy core; "
                "above the core count, the seconds and even the ratios carry the load).",
            ]
    else:
        lines.append("No records measured yet (`data/gpt/records/`).")
    lines += ["", "## Against nanoGPT's own `train.py`", ""]
    lines += [
        "The same race against nanoGPT's README recipe run by nanoGPT's own code "
        "(`benchmarks/nanogpt_race.py`): the time to nanoGPT's validation loss, mean ± half "
        "the range over two seeds.",
        "",
        "| machine | mode | recipe | what it changed | time to target, s | speed-up over nanoGPT |",
        "| --- | --- | --- | --- | ---: | ---: |",
    ]
    sources = []
    cpu = base / "nanogpt_race.json"
    if cpu.is_file():
        d = json.loads(cpu.read_text(encoding="utf-8"))
        sources.append((f"CPU, {d.get('threads')} threads", "float32, eager", d))
    gpu = base / "nanogpt_race_cuda.json"
    if gpu.is_file():
        d = json.loads(gpu.read_text(encoding="utf-8"))
        for mode in ("eager", "compiled"):
            if mode in d:
                sources.append((d[mode].get("device_name", "GPU"), f"bfloat16, {mode}", d[mode]))
    for where, mode, d in sources:
        for row in d.get("table", []):
            name = row["recipe"]
            fields = d.get("ours", {}).get(name, {}).get("recipe")
            what = "nanoGPT's code" if name.startswith("nanoGPT") else _lineage(name, fields)
            lines.append(
                f"| {where} | {mode} | {name} | {what} | {row['time_to_target_s']} | "
                f"{float(row['speed_up']):.2f}x |"
            )
    lines += [
        "",
        "GPU rows are one run on a lent NVIDIA H200 (`benchmarks/cuda_check.sh`); CPU rows are "
        "this project's 2-core AMD EPYC machine. Measurements on a shared machine carry its "
        "load: the ratios, measured in turns, hold better than the seconds.",
    ]
    return "\n".join(lines) + "\n"
