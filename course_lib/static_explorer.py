"""Explorers that respond on the static website: every output precomputed at build time.

A chapter's widget calls a pure render function of the course (:mod:`course_lib.interact`).
On the website no Python runs, so an :class:`Explorer` names that same function and a small
grid of control settings (a slider becomes a few stops, a menu its options, a text box a few
example texts); :func:`precompute` calls the function once per setting, and
:func:`explorer_html` writes real controls (``<input type=range>``, ``<select>``) with a short
script of our own that shows the stored output of the current setting. There is one source of
truth (the course's function), no kernel, no server and no request off the page: the outputs
travel inside the page, gzip-compressed and base64-encoded, and the browser unpacks them with
its built-in ``DecompressionStream``. The output element carries the setting in ``data-key``
and the number the explorer is about in ``data-value`` (JSON), so a test can read what is shown.

>>> ex = Explorer(
...     "double", "Doubling",
...     (Control("x", "x", (1, 2, 3)),),
...     render=lambda x: f"<b>{2 * x}</b>",
...     value=lambda x: 2 * x,
... )
>>> data = precompute(ex)
>>> data["outputs"], data["table"], data["values"]
(['<b>2</b>', '<b>4</b>', '<b>6</b>'], {'0': 0, '1': 1, '2': 2}, {'0': 2, '1': 4, '2': 6})
>>> decode_outputs(explorer_html(ex)) == data["outputs"]
True
"""

from __future__ import annotations

import base64
import gzip
import html
import itertools
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CHAPTERS",
    "chapter_explorer",
    "Control",
    "Explorer",
    "decode_outputs",
    "decode_payload",
    "explorer_html",
    "key_of",
    "page_html",
    "precompute",
    "settings",
]

KINDS = ("slider", "select")

# Each chapter's explorer module (``CALL``: the text of the notebook call whose frozen widget the
# website replaces; ``explorer()``: its :class:`Explorer`). tools/build_book.py reads this.
CHAPTERS = {
    "01_matmul": "course_lib.matmul.explorer",
    "02_softmax": "course_lib.softmax.explorer",
    "03_text_metrics": "course_lib.text_metrics.explorer",
    "04_attention": "course_lib.attention.explorer",
    "05_transformer_block": "course_lib.block.residual_explorer",
    "05_transformer_block_stacks": "course_lib.block.explorer",
    "06_positional_encodings": "course_lib.positions.explorer",
    "07_bpe": "course_lib.bpe.explorer",
    "08_gpt": "course_lib.gpt.explorer",
    "08_gpt_practice": "course_lib.gpt.explorer_practice",
    "09_bert": "course_lib.bert.masking_explorer",
    "09_bert_training": "course_lib.bert.explorer",
    "10_feedback_distillation": "course_lib.feedback.explorer",
    "11_long_sequences": "course_lib.long_sequences.explorer",
    "12_number_formats": "course_lib.number_formats.explorer",
    "12_number_formats_quantisation": "course_lib.number_formats.quantisation_explorer",
    "13_peft": "course_lib.peft.explorer",
    "13_peft_prompts": "course_lib.peft.explorer_prompts",
}


def chapter_explorer(chapter: str) -> tuple[str, Explorer]:
    """(the notebook call it replaces, the explorer) of a chapter, e.g. ``"02_softmax"``."""
    import importlib

    if chapter not in CHAPTERS:
        raise ValueError(
            f"no explorer for chapter {chapter!r}; explorers exist for {list(CHAPTERS)}"
        )
    module = importlib.import_module(CHAPTERS[chapter])
    return module.CALL, module.explorer()


@dataclass(frozen=True)
class Control:
    """One control: the keyword ``name`` the render function takes, and its stops.

    ``kind`` is ``"slider"`` (an ``<input type=range>`` over the stops, in order) or
    ``"select"`` (a menu). ``labels`` are what the page shows for each stop (default: the stop's
    ``str``); ``default`` is the stop shown first (default: the first).
    """

    name: str
    label: str
    stops: tuple[Any, ...]
    default: Any = None
    kind: str = "slider"
    labels: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"name must be a Python identifier, got {self.name!r}")
        if not isinstance(self.stops, tuple) or not self.stops:
            raise ValueError(f"stops of {self.name!r} must be a non-empty tuple")
        if self.kind not in KINDS:
            raise ValueError(f"kind of {self.name!r} must be one of {KINDS}, got {self.kind!r}")
        if self.default is not None and self.default not in self.stops:
            raise ValueError(
                f"default of {self.name!r} must be one of its stops {self.stops}, "
                f"got {self.default!r}"
            )
        if self.labels is not None and len(self.labels) != len(self.stops):
            raise ValueError(
                f"labels of {self.name!r} must have one entry per stop ({len(self.stops)}), "
                f"got {len(self.labels)}"
            )

    @property
    def default_index(self) -> int:
        return 0 if self.default is None else self.stops.index(self.default)

    def label_of(self, index: int) -> str:
        return self.labels[index] if self.labels is not None else str(self.stops[index])


@dataclass(frozen=True)
class Explorer:
    """A chapter's explorer for the website.

    ``render(**setting)`` returns the HTML the chapter's widget shows for that setting (the
    course's own function); ``value(**setting)``, optional, returns the number or short text
    the page exposes in ``data-value`` (JSON-serialisable), for tests and screen readers.
    """

    key: str
    title: str
    controls: tuple[Control, ...]
    render: Callable[..., str]
    value: Callable[..., Any] | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", self.key):
            raise ValueError(f"key must be lower-case letters, digits and '-', got {self.key!r}")
        names = [c.name for c in self.controls]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"controls must be at least one, with distinct names, got {names}")

    @property
    def size(self) -> int:
        """How many settings the grid has."""
        n = 1
        for c in self.controls:
            n *= len(c.stops)
        return n

    @property
    def default_setting(self) -> dict[str, Any]:
        return {c.name: c.stops[c.default_index] for c in self.controls}


def key_of(indices: tuple[int, ...] | list[int]) -> str:
    """The key of a setting: the stop index of each control, joined by '-'.

    >>> key_of((0, 3, 1))
    '0-3-1'
    """
    return "-".join(str(i) for i in indices)


def settings(ex: Explorer) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every (key, setting) of the grid, in order."""
    ranges = [range(len(c.stops)) for c in ex.controls]
    for idx in itertools.product(*ranges):
        yield key_of(idx), {c.name: c.stops[i] for c, i in zip(ex.controls, idx, strict=True)}


def precompute(ex: Explorer) -> dict[str, Any]:
    """Call the render function on the whole grid.

    Returns ``outputs`` (the distinct HTML outputs), ``table`` (setting key -> index into
    ``outputs``) and ``values`` (setting key -> ``value(**setting)``, when the explorer has one).
    """
    if not isinstance(ex, Explorer):
        raise TypeError(f"ex must be an Explorer, got {type(ex).__name__}")
    outputs: list[str] = []
    seen: dict[str, int] = {}
    table: dict[str, int] = {}
    values: dict[str, Any] = {}
    for key, setting in settings(ex):
        out = ex.render(**setting)
        if not isinstance(out, str):
            raise TypeError(f"{ex.key}: render must return HTML text, got {type(out).__name__}")
        table[key] = seen.setdefault(out, len(outputs))
        if table[key] == len(outputs):
            outputs.append(out)
        if ex.value is not None:
            values[key] = ex.value(**setting)
    return {"outputs": outputs, "table": table, "values": values}


EXPLORER_CSS = """
.course-explorer { border: 1px solid var(--pst-color-border, #ccc); border-radius: 6px;
  padding: 0.6em 1em; margin: 1em 0; }
.course-explorer-controls { display: flex; flex-wrap: wrap; gap: 0.4em 1.4em;
  margin-bottom: 0.6em; align-items: center; }
.course-explorer-controls label { display: inline-flex; gap: 0.5em; align-items: center; }
.course-explorer-controls select { color: var(--pst-color-text-base, #222);
  background: var(--pst-color-surface, #fff); border: 1px solid var(--pst-color-border, #999);
  border-radius: 4px; padding: 0.1em 0.3em; }
.course-explorer-controls output { font-family: monospace; min-width: 3em; }
.course-explorer-note { font-size: 0.85em; color: var(--pst-color-text-muted, #555);
  margin: 0.4em 0 0 0; }
.course-explorer-output { overflow-x: auto; background: #fff; color: #222; padding: 0.3em; }
.course-explorer-output :is(caption, th, td, label, summary, code) { color: inherit; }
"""

# One script for every explorer on a page (it marks each one it has wired: data-ready).
EXPLORER_JS = """
(function () {
  "use strict";
  function unpack(b64) {
    var bytes = Uint8Array.from(atob(b64), function (c) { return c.charCodeAt(0); });
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text().then(JSON.parse);
  }
  function wire(root) {
    if (root.getAttribute("data-ready")) return;
    root.setAttribute("data-ready", "loading");
    var data = JSON.parse(root.querySelector("script.course-explorer-data").textContent);
    var out = root.querySelector(".course-explorer-output");
    var controls = Array.prototype.slice.call(root.querySelectorAll("[data-control]"));
    if (typeof DecompressionStream === "undefined") {
      root.querySelector(".course-explorer-note").textContent =
        "This browser cannot unpack the stored outputs; the first setting is shown.";
      controls.forEach(function (c) { c.disabled = true; });
      root.setAttribute("data-ready", "unsupported");
      return;
    }
    unpack(data.outputs).then(function (outputs) {
      function show() {
        var key = controls.map(function (c) { return c.value; }).join("-");
        controls.forEach(function (c) {
          var shown = root.querySelector("output[for='" + c.id + "']");
          if (shown) {
            shown.textContent = data.labels[c.getAttribute("data-control")][+c.value];
          }
          if (c.type === "range") {
            c.setAttribute("aria-valuetext", data.labels[c.getAttribute("data-control")][+c.value]);
          }
        });
        out.innerHTML = outputs[data.table[key]];  // the course's own HTML, made at build time
        out.setAttribute("data-key", key);
        if (key in data.values) out.setAttribute("data-value", JSON.stringify(data.values[key]));
        if (window.MathJax && window.MathJax.typesetPromise) window.MathJax.typesetPromise([out]);
      }
      controls.forEach(function (c) { c.addEventListener("input", show); });
      show();
      root.setAttribute("data-ready", "yes");
    });
  }
  function all() {
    document.querySelectorAll(".course-explorer").forEach(wire);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", all);
  else all();
})();
"""


def _compress(obj: Any) -> str:
    raw = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return base64.b64encode(gzip.compress(raw, compresslevel=9, mtime=0)).decode("ascii")


def _json_in_script(obj: Any) -> str:
    """JSON that is safe inside ``<script>``: no ``</`` can close the element."""
    return json.dumps(obj, separators=(",", ":")).replace("</", "<\\/")


def _control_html(ex: Explorer, c: Control) -> str:
    cid = f"course-explorer-{ex.key}-{c.name}"
    i = c.default_index
    label = html.escape(c.label)
    if c.kind == "slider":
        return (
            f'<label for="{cid}">{label} <input type="range" id="{cid}" data-control="{c.name}" '
            f'min="0" max="{len(c.stops) - 1}" step="1" value="{i}" '
            f'aria-valuetext="{html.escape(c.label_of(i))}">'
            f'<output for="{cid}">{html.escape(c.label_of(i))}</output></label>'
        )
    options = "".join(
        f'<option value="{k}"{" selected" if k == i else ""}>{html.escape(c.label_of(k))}</option>'
        for k in range(len(c.stops))
    )
    return (
        f'<label for="{cid}">{label} <select id="{cid}" data-control="{c.name}">'
        f"{options}</select></label>"
    )


def explorer_html(ex: Explorer, data: dict[str, Any] | None = None, *, script: bool = True) -> str:
    """The explorer as one self-contained HTML fragment (style, controls, output, data, script).

    ``data`` is :func:`precompute`'s result (computed here if not given). The first setting's
    output is written into the page as it is, so the page shows it even before the script runs.
    """
    data = precompute(ex) if data is None else data
    default_key = key_of(tuple(c.default_index for c in ex.controls))
    first = data["outputs"][data["table"][default_key]]
    value = data["values"].get(default_key)
    payload = {
        "outputs": _compress(data["outputs"]),
        "table": data["table"],
        "values": data["values"],
        "labels": {c.name: [c.label_of(k) for k in range(len(c.stops))] for c in ex.controls},
    }
    controls = "".join(_control_html(ex, c) for c in ex.controls)
    value_attr = (
        f' data-value="{html.escape(json.dumps(value), quote=True)}"' if value is not None else ""
    )
    note = ex.note or (
        f"Computed when the website was built: {ex.size} settings, "
        f"{len(data['outputs'])} distinct outputs, by the same course_lib function the notebook's "
        "widget calls. Run the notebook for any other value."
    )
    parts = [
        f'<div class="course-explorer" id="course-explorer-{ex.key}" data-explorer="{ex.key}">',
        f"<style>{EXPLORER_CSS}</style>",
        f'<p class="course-explorer-title"><strong>{html.escape(ex.title)}</strong></p>',
        f'<div class="course-explorer-controls">{controls}</div>',
        f'<div class="course-explorer-output" role="status" aria-live="polite" '
        f'data-key="{default_key}"{value_attr}>{first}</div>',
        f'<p class="course-explorer-note">{html.escape(note)}</p>',
        f'<script type="application/json" class="course-explorer-data">'
        f"{_json_in_script(payload)}</script>",
    ]
    if script:
        parts.append(f"<script>{EXPLORER_JS}</script>")
    parts.append("</div>")
    return "\n".join(parts)


def decode_payload(fragment: str) -> dict[str, Any]:
    """The data stored in an :func:`explorer_html` fragment, outputs unpacked (for tests).

    Raises ValueError if the fragment holds no explorer data.
    """
    m = re.search(
        r'<script type="application/json" class="course-explorer-data">(.*?)</script>',
        fragment,
        re.S,
    )
    if m is None:
        raise ValueError("fragment holds no course-explorer-data script")
    payload = json.loads(m.group(1))
    raw = gzip.decompress(base64.b64decode(payload["outputs"]))
    payload["outputs"] = json.loads(raw.decode("utf-8"))
    return payload


def decode_outputs(fragment: str) -> list[str]:
    """The outputs stored in an :func:`explorer_html` fragment (for tests)."""
    return decode_payload(fragment)["outputs"]


def page_html(fragment: str, title: str = "Explorer") -> str:
    """A standalone HTML page around an explorer fragment (for tests and previews)."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title></head>\n<body>\n{fragment}\n</body></html>\n"
    )
