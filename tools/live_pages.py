"""Put the live views ("Type your own text") on the chapter pages of a built website.

    python -m tools.live_pages            # post-process book/_build/html (after a build)

``tools/build_book.py`` runs this after ``jupyter-book build`` and the explorers. Where an
explorer shows outputs computed at build time, a live view runs the course's own trained model
in the reader's browser on whatever the reader types: :mod:`course_lib.gpt.live` exports the
checkpoint in ``data/`` (whatever is there at build time, so a retrained model drops in) as one
ONNX file into ``_live/``, ``onnxruntime-web`` (a pinned npm package, ``tools/build_book.py``)
runs it, and ``tools/live/live.js`` draws it. Each view is a section of its own, placed just
before the chapter's "Exercises" section, between ``<!-- course-live:KEY -->`` markers (a second
run replaces it). It fails, naming the chapter, if the page or its "Exercises" section is
missing, or if onnxruntime-web was not unpacked.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "book" / "_build" / "html"
SCRIPT = Path(__file__).resolve().parent / "live" / "live.js"
ORT = "_vendor/onnxruntime-web/dist"
#: The files of onnxruntime-web the views load (the Emscripten module is also served as .js,
#: so that a server that does not know .mjs still serves it as JavaScript).
ORT_FILES = ("ort.wasm.min.js", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")
#: Our stand-in for onnxruntime-web's module file: it starts the WebAssembly the page compiled.
FACTORY = "ort-wasm-factory.js"
EXERCISES = re.compile(r'<section id="exercises">')


class LivePageError(ValueError):
    """A chapter page where the live view cannot be placed (named in the message)."""


@dataclass(frozen=True)
class LiveView:
    """One chapter's live view: its key, the model files it writes, its HTML."""

    chapter: str
    key: str
    models: Callable[[Path], list[Path]]  # writes the model files into a folder
    body: Callable[[list[Path]], str]  # the view's controls, given the files written
    runs_models: bool = True  # loads onnxruntime-web (the tokenisers do not)
    #: the token ids of the text the view opens with, for the first model (computed at build
    #: time, so that the page's engine runs it while the page loads; live.js uses that result
    #: only if its own tokeniser gives the same ids)
    first_ids: Callable[[], list[int]] | None = None

    def attributes(self, files: list[Path]) -> str:
        if self.runs_models:
            return f'data-model="../_live/{html.escape(files[0].name)}"'
        tables = {f.stem.removeprefix("bpe_"): f"../_live/{f.name}" for f in files}
        return f"data-tables='{html.escape(json.dumps(tables), quote=True)}'"


#: Chapter 8's two models: (file, name, label in the page's selector, the text it opens with)
GPT_MODELS = (
    (
        "gpt_shakespeare_char.onnx",
        "shakespeare_char",
        "the chapter's GPT, pre-trained on Shakespeare",
        "ROMEO:\nBut soft, what light through yonder window",
    ),
    (
        "gpt_incontext_char.onnx",
        "incontext_char",
        "the in-context learner: Shakespeare with secret codes mixed in",
        "Good morrow.\n\ndQ\nmA\ndQ\nxF\nm",
    ),
)


def _gpt_models(folder: Path) -> list[Path]:
    from course_lib.gpt.incontext import load_incontext
    from course_lib.gpt.live import export
    from course_lib.gpt.pretrained import load_pretrained

    models = (load_pretrained(), load_incontext()[:2])
    return [
        export(model, tok, folder / file, name=name)
        for (model, tok), (file, name, _, _) in zip(models, GPT_MODELS, strict=True)
    ]


def _gpt_first_ids() -> list[int]:
    from course_lib.gpt.pretrained import load_pretrained

    model, tok = load_pretrained()
    return tok.encode(GPT_MODELS[0][3])[-model.config.context_length :]


def _choices(key: str, options: list[tuple[str, str, str]]) -> str:
    """The labelled selector of a view's shipped models: (value, label, the text it opens with);
    the reader's own files join it when opened."""
    items = "\n".join(
        f'    <option value="{html.escape(value)}" data-example="{html.escape(example)}"'
        f"{' selected' if i == 0 else ''}>{html.escape(label)}</option>"
        for i, (value, label, example) in enumerate(options)
    )
    return f"""\
<div class="course-live-row">
  <label for="{key}-model">Model</label>
  <select id="{key}-model" class="course-live-choice">
{items}
  </select>
</div>"""


def _gpt_body(files: list[Path]) -> str:
    k = "course-live-gpt"
    urls = ["shipped"] + [f"../_live/{f.name}" for f in files[1:]]  # the first opens at once
    choices = _choices(k, [(u, m[2], m[3]) for u, m in zip(urls, GPT_MODELS, strict=True)])
    return f"""\
<p>The chapter's character-level models, running in this page on what you type: nothing is
sent anywhere. The page runs the files <code>course_lib.gpt.live.export</code> wrote from the
checkpoints in <code>data/gpt/</code>, with <code>onnxruntime-web</code>; the numbers are
PyTorch's to within 1e-4. Two models ship: the GPT this chapter pre-trains on Shakespeare, and
the small in-context learner trained on Shakespeare with secret codes mixed in (a code gives
four lower-case letters an upper-case one, one example a line: after <code>dQ</code> in the
prompt, <code>d</code> is followed by <code>Q</code>).</p>
{choices}
<p class="course-live-model"></p>
<div class="course-live-row">
  <label for="{k}-text">Your text (the models know the characters of Shakespeare's plays)</label>
  <textarea id="{k}-text" class="course-live-text" rows="3" spellcheck="false">\
{html.escape(GPT_MODELS[0][3])}</textarea>
</div>
<p class="course-live-status" role="status" aria-live="polite">Loading the model…</p>
<h3 id="{k}-next-title">What comes next</h3>
<div class="course-live-next"></div>
<h3 id="{k}-attn-title">Where each head looks</h3>
<div class="course-live-row">
  <label for="{k}-position">Position whose attention is shown</label>
  <input id="{k}-position" class="course-live-position" type="range" min="1" max="1" value="1">
  <output class="course-live-position-value" for="{k}-position"></output>
</div>
<p class="course-live-note">Every head of every layer: how much weight the chosen position gives
each earlier character (the bar under it; hover for the number).</p>
<div class="course-live-attention"></div>
<h3>Generate</h3>
<div class="course-live-controls">
  <label>temperature (0: greedy)
    <input class="course-live-temperature" type="number" min="0" max="5" step="0.1" value="0.8">
  </label>
  <label>top-k (0: off)
    <input class="course-live-topk" type="number" min="0" step="1" value="0"></label>
  <label>top-p (1: off)
    <input class="course-live-topp" type="number" min="0.01" max="1" step="0.05" value="0.9">
  </label>
  <label>characters <input class="course-live-length" type="number" min="1" max="1000"
    step="1" value="200"></label>
  <label>seed <input class="course-live-seed" type="number" min="0" step="1" value="0"></label>
  <button type="button" class="course-live-generate">Generate</button>
</div>
<pre class="course-live-generated" aria-live="polite" tabindex="0"
  aria-label="Generated text"></pre>
<h3>Bring your own model</h3>
<p>A model you trained in the notebook opens here too: write it with
<code>course_lib.gpt.live.export(model, tokenizer, "my_gpt.onnx")</code> and open the file: it
joins the models above. It is read by this browser and goes nowhere.</p>
<div class="course-live-controls">
  <label>Open your own model (.onnx)
    <input class="course-live-file" type="file" accept=".onnx"></label>
</div>"""


BERT_EXAMPLE = "Call me Ishmael. Some years ago I went to [MASK]."


def _bert_first_ids() -> list[int]:
    from course_lib.bert.data import tokenizer
    from course_lib.bert.live import encode_masked

    return encode_masked(tokenizer(), BERT_EXAMPLE)


def _bert_models(folder: Path) -> list[Path]:
    from course_lib.bert.data import tokenizer
    from course_lib.bert.live import export
    from course_lib.bert.pretrain_long import load_checkpoint

    model, _ = load_checkpoint()
    return [export(model, tokenizer(), folder / "bert_small_mlm.onnx", name="small_mlm")]


def _bert_body(files: list[Path]) -> str:
    k = "course-live-bert"
    choices = _choices(k, [("shipped", "the chapter's pre-trained BERT", BERT_EXAMPLE)])
    return f"""\
<p>The small BERT this chapter pre-trains with the masked-language-model objective on
Shakespeare and <em>Moby-Dick</em>, fills the <code>[MASK]</code>s of what you type, in this page:
nothing is sent anywhere. The page runs the file <code>course_lib.bert.live.export</code> wrote
from the checkpoint in <code>data/bert/</code>, with <code>onnxruntime-web</code>.</p>
<p><strong>Its tokenizer is a byte-level BPE, not BERT's WordPiece.</strong> The model was
pre-trained on the ids of chapter 7's byte-level BPE (trained on the same two texts, with
<code>[PAD]</code>, <code>[CLS]</code>, <code>[SEP]</code> and <code>[MASK]</code> added; a
byte-level vocabulary has no unknown words, so no <code>[UNK]</code>), and a model reads only
the ids it was trained on: the WordPiece vocabulary of the chapter's WordPiece section is not
one this model has seen. So a word's first token carries the space before it: " whales" is
<code>␣wha</code> <code>les</code> here, where WordPiece marks a piece inside a word with
<code>##</code>.</p>
{choices}
<p class="course-live-model"></p>
<div class="course-live-row">
  <label for="{k}-text">Your text (write [MASK] where the model should guess)</label>
  <textarea id="{k}-text" class="course-live-text" rows="3" spellcheck="false">\
{html.escape(BERT_EXAMPLE)}</textarea>
</div>
<p class="course-live-status" role="status" aria-live="polite">Loading the model…</p>
<h3>What the model puts in each [MASK]</h3>
<div class="course-live-fills"></div>
<h3>Where each head looks</h3>
<div class="course-live-row">
  <label for="{k}-position">Position whose attention is shown</label>
  <input id="{k}-position" class="course-live-position" type="range" min="1" max="1" value="1">
  <output class="course-live-position-value" for="{k}-position"></output>
</div>
<p class="course-live-note">Every head of every layer: how much weight the chosen token gives
each token of the input, before and after it (the bar under it; hover for the number).</p>
<div class="course-live-attention"></div>
<h3>Bring your own model</h3>
<p>A BERT you pre-trained in the notebook opens here too: write it with
<code>course_lib.bert.live.export(model, tokenizer, "my_bert.onnx")</code> and open the file: it
joins the model above. It is read by this browser and goes nowhere.</p>
<div class="course-live-controls">
  <label>Open your own model (.onnx)
    <input class="course-live-file" type="file" accept=".onnx"></label>
</div>"""


def _bpe_models(folder: Path) -> list[Path]:
    from course_lib.bpe.analysis import tokenizer_from_merges
    from course_lib.bpe.explorer import merges
    from course_lib.bpe.gpt2_files import load_gpt2
    from course_lib.bpe.live import tokenizer_table

    out = []
    for name, tok in (
        ("course", tokenizer_from_merges(list(merges()))),
        ("gpt2", load_gpt2()),
    ):
        path = folder / f"bpe_{name}.json"
        path.write_text(json.dumps(tokenizer_table(tok), separators=(",", ":")), encoding="utf-8")
        out.append(path)
    return out


def _bpe_body(files: list[Path]) -> str:
    k = "course-live-bpe"
    course = files[0].read_text(encoding="utf-8").replace("</", "<\\/")
    return f"""\
<p>Chapter 7's tokenisers on what you type, in this page: the byte-level BPE this chapter
trains (1,744 merges learned from Shakespeare: the explorer's <code>merges_2000</code>) and GPT-2's own
(50,000 merges). The page runs the same two steps as <code>course_lib.bpe.tokenizer</code> (GPT-2's
pre-tokenisation pattern, then the merges in the order they were learned) from tables the build
wrote; the tokens are <code>Tokenizer.encode</code>'s, checked on many texts in a real browser.</p>
<div class="course-live-row">
  <label for="{k}-tokenizer">Tokenizer</label>
  <select id="{k}-tokenizer" class="course-live-tokenizer">
    <option value="course" selected>the chapter's BPE (2,000 tokens, Shakespeare)</option>
    <option value="gpt2">GPT-2 (50,257 tokens)</option>
  </select>
</div>
<div class="course-live-row">
  <label for="{k}-text">Your text</label>
  <textarea id="{k}-text" class="course-live-text" rows="3" spellcheck="false">Shall I compare \
thee to a summer's day? Transformers tokenise text: 東京, 서울, 🤗, 3.14159.</textarea>
</div>
<p class="course-live-status" role="status" aria-live="polite">Loading the tokenizer…</p>
<p class="course-live-count" aria-live="polite"></p>
<div class="course-live-tokens" aria-label="The tokens of your text"></div>
<details><summary>The ids</summary><p class="course-live-idlist"></p></details>
<script type="application/json" data-name="course">{course}</script>"""


VIEWS = {
    "07_bpe": LiveView("07_bpe", "bpe", _bpe_models, _bpe_body, runs_models=False),
    "08_gpt": LiveView("08_gpt", "gpt", _gpt_models, _gpt_body, first_ids=_gpt_first_ids),
    "09_bert": LiveView("09_bert", "bert", _bert_models, _bert_body, first_ids=_bert_first_ids),
}
TITLES = {
    "bert": "Type your own text: the chapter's BERT fills in the blanks, live",
    "bpe": "Type your own text: the chapter's tokenisers, live",
    "gpt": "Type your own text: the chapter's GPT, live",
}

CSS = """\
.course-live { border: 1px solid var(--pst-color-border, #ccc); border-radius: 6px;
  padding: 0.8em 1em; margin: 1.5em 0; }
.course-live textarea { width: 100%; font-family: var(--pst-font-family-monospace, monospace);
  color: var(--pst-color-text-base, #222); background: var(--pst-color-surface, #fff);
  border: 1px solid var(--pst-color-border, #999); border-radius: 4px; padding: 0.4em; }
.course-live input, .course-live button { color: var(--pst-color-text-base, #222);
  background: var(--pst-color-surface, #fff); border: 1px solid var(--pst-color-border, #999);
  border-radius: 4px; }
.course-live input[type=number] { width: 5em; }
.course-live-row { margin: 0.4em 0; }
.course-live-row label { display: block; font-weight: 600; }
.course-live-controls { display: flex; flex-wrap: wrap; gap: 0.6em 1.2em; align-items: end;
  margin: 0.4em 0; }
.course-live-status, .course-live-note, .course-live-model { font-size: 0.9em;
  color: var(--pst-color-text-muted, #555); }
.course-live-table { border-collapse: collapse; font-size: 0.9em; }
.course-live-table caption { caption-side: top; text-align: left;
  color: var(--pst-color-text-muted, #555); }
.course-live-table td, .course-live-table th { padding: 0.1em 0.6em; }
.course-live-table td:nth-child(3) { width: 12em; }
.course-live-num { text-align: right; font-variant-numeric: tabular-nums; }
.course-live-token, .course-live-cells, .course-live-generated {
  font-family: var(--pst-font-family-monospace, monospace); }
.course-live-bar { display: inline-block; height: 0.8em; min-width: 1px;
  background: var(--pst-color-primary, #1a6fb0); }
.course-live-heads { display: grid; gap: 2px; }
.course-live-head { display: flex; gap: 0.6em; align-items: end; }
.course-live-label { flex: 0 0 4.5em; font-size: 0.8em; color: var(--pst-color-text-muted, #555); }
.course-live-cells { white-space: pre; overflow-x: auto; }
.course-live-cell { display: inline-block; min-width: 0.6em; text-align: center;
  padding-bottom: 12px; background: linear-gradient(to top,
  var(--pst-color-primary, #1a6fb0) calc(var(--w) * 10px), transparent 0); }
.course-live-generated { white-space: pre-wrap; min-height: 3em; }
.course-live-tokens { font-family: var(--pst-font-family-monospace, monospace);
  line-height: 2; white-space: pre-wrap; word-break: break-all; }
.course-live-tok { border: 1px solid var(--pst-color-primary, #1a6fb0); border-radius: 3px;
  padding: 0 1px; margin: 0 1px; }
.course-live-tok1 { border-style: dashed; }
.course-live-idlist { font-family: var(--pst-font-family-monospace, monospace); font-size: 0.85em;
  word-break: break-all; }
"""


def view_html(view: LiveView, files: list[Path]) -> str:
    """The section for ``view`` (its script tags included)."""
    key = f"course-live-{view.key}"
    return f"""\
<section class="course-live" id="{key}" data-kind="{view.key}" {view.attributes(files)}
  data-state="loading" aria-labelledby="{key}-title">
<style>{CSS}</style>
<h2 id="{key}-title">{html.escape(TITLES[view.key])}</h2>
{view.body(files)}
<noscript><p>The live view needs JavaScript.</p></noscript>
<script src="../_live/live.js"></script>
</section>"""


def marker(key: str) -> tuple[str, str]:
    return f"<!-- course-live:{key} -->", f"<!-- /course-live:{key} -->"


#: The page's ``<head>`` starts the live view's engine before the chapter is read: a worker
#: (``tools/live/worker.js``) that downloads the model and onnxruntime-web's WebAssembly,
#: compiles the WebAssembly while it streams in (``WebAssembly.compileStreaming``), builds the
#: model's session and runs it on the view's opening text (its ids computed here), all beside
#: the page's main thread, which meanwhile lays out the chapter. ``live.js`` takes the worker
#: over (``courseLive.boot``) with the messages it sent so far. It is the first thing in the
#: ``<head>``: a script after the stylesheets would wait for them. Not from ``file://``, where
#: a page can start no worker.
BOOT = """\
(function (urls) {
  if (location.protocol === "file:" || !window.Worker || !window.WebAssembly) return;
  var live = window.courseLive = window.courseLive || { views: {}, timings: {}, marks: {} };
  var abs = function (u) { return new URL(u, location.href).href; };
  live.marks.head = performance.now();
  var worker = new Worker(abs(urls.worker)), got = [];
  live.boot = { worker: worker, messages: got };
  worker.onmessage = function (e) { got.push(e.data); };
  worker.onerror = function (e) {
    got.push({ op: "error", seq: 0,
               message: "the live view's worker failed: " + (e.message || "it did not start") });
  };
  worker.postMessage({ op: "boot", ort: abs(urls.ort), wasm: abs(urls.wasm),
                       factory: abs(urls.factory), model: abs(urls.model), ids: urls.ids });
})(URLS);"""


def preload(view: LiveView, files: list[Path]) -> str:
    """The script for the page's ``<head>`` (:data:`BOOT`) that starts the view's engine and
    its model while the page is read; empty for a view without a model."""
    if not view.runs_models:
        return ""
    urls = {
        "worker": "../_live/worker.js",
        "ort": f"../{ORT}/ort.wasm.min.js",
        "wasm": f"../{ORT}/ort-wasm-simd-threaded.wasm",
        "factory": f"../_live/{FACTORY}",
        "model": f"../_live/{files[0].name}",
        "ids": view.first_ids() if view.first_ids else [0],
    }
    return "<script>\n" + BOOT.replace("URLS", json.dumps(urls)) + "\n</script>"


def place(page: str, chapter: str, key: str, fragment: str, head: str = "") -> str:
    """``page`` with ``fragment`` just before its "Exercises" section (or in place of the one an
    earlier run put there) and ``head`` at the end of its ``<head>``; raises
    :class:`LivePageError` naming ``chapter`` if it cannot."""
    if head:
        page = _place_head(page, chapter, key, head)
    begin, end = marker(key)
    wrapped = f"{begin}\n{fragment}\n{end}\n"
    if begin in page:
        i, j = page.index(begin), page.index(end) + len(end) + 1
        return page[:i] + wrapped + page[j:]
    found = list(EXERCISES.finditer(page))
    if len(found) != 1:
        raise LivePageError(
            f"{chapter}: expected one 'Exercises' section (<section id=\"exercises\">) to put "
            f"the live view before, found {len(found)}"
        )
    i = found[0].start()
    return page[:i] + wrapped + page[i:]


CHARSET = re.compile(r"<meta charset=[^>]*>")


def _place_head(page: str, chapter: str, key: str, head: str) -> str:
    """``head`` first in the page's ``<head>``, just after its ``<meta charset>``: an inline
    script after the stylesheets would wait until they have loaded."""
    begin, end = marker(key + "-head")
    wrapped = f"{begin}\n{head}\n{end}\n"
    if begin in page:  # an earlier run's: taken out, and put where it goes now
        i, j = page.index(begin), page.index(end) + len(end) + 1
        page = page[:i] + page[j:]
    found = CHARSET.search(page)
    if found is None or page.find("</head>") < found.end():
        raise LivePageError(f"{chapter}: no <meta charset> in the page's <head>")
    return page[: found.end()] + "\n" + wrapped + page[found.end() :]


def add_live_views(
    html_dir: Path = HTML, chapters: list[str] | None = None, *, verbose: bool = False
) -> dict[str, dict]:
    """Export each chapter's model into ``_live/`` and place its view; returns what was added
    (bytes of the model files and of the page's section, seconds)."""
    import torch

    missing = [f for f in ORT_FILES if not (html_dir / ORT / f).is_file()]
    if missing:
        raise LivePageError(
            f"onnxruntime-web is not in {html_dir / ORT} ({missing}): build with "
            "python -m tools.build_book, which unpacks it"
        )
    live = html_dir / "_live"
    live.mkdir(exist_ok=True)
    shutil.copyfile(SCRIPT, live / "live.js")
    for name in (FACTORY, "worker.js"):
        shutil.copyfile(SCRIPT.with_name(name), live / name)
    # the Emscripten module, as .js: dynamic import() needs a JavaScript MIME type
    shutil.copyfile(
        html_dir / ORT / "ort-wasm-simd-threaded.mjs", live / "ort-wasm-simd-threaded.js"
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    report = {}
    try:
        for chapter in chapters or list(VIEWS):
            view = VIEWS[chapter]
            path = html_dir / "notebooks" / f"{chapter}.html"
            if not path.is_file():
                raise LivePageError(f"{chapter}: no built page at {path}")
            start = time.perf_counter()
            files = view.models(live)
            fragment = view_html(view, files)
            page = path.read_text(encoding="utf-8")
            placed = place(page, chapter, view.key, fragment, head=preload(view, files))
            path.write_text(placed, encoding="utf-8")
            report[chapter] = {
                "model_bytes": sum(f.stat().st_size for f in files),
                "page_bytes": len(fragment.encode("utf-8")),
                "seconds": time.perf_counter() - start,
            }
            if verbose:
                r = report[chapter]
                print(
                    f"   live view {chapter}: model {r['model_bytes'] / 1e6:.1f} MB, section "
                    f"{r['page_bytes'] / 1024:.0f} KiB, {r['seconds']:.1f} s",
                    flush=True,
                )
    finally:
        torch.set_num_threads(threads)
    return report


def site_bytes(html_dir: Path = HTML) -> int:
    """Bytes the live views add to the site: ``_live/`` and onnxruntime-web."""
    folders = [html_dir / "_live", html_dir / "_vendor" / "onnxruntime-web"]
    return sum(f.stat().st_size for d in folders if d.is_dir() for f in d.rglob("*") if f.is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", help="only these chapters (default: all)")
    args = parser.parse_args(argv)
    try:
        add_live_views(HTML, args.chapters or None, verbose=True)
    except LivePageError as err:
        print(f"error: {err}")
        return 1
    print(f"   live views: {site_bytes(HTML) / 1e6:.1f} MB in _live/ and {ORT}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
