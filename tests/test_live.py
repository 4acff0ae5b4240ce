"""The website's live views (tools/live_pages.py): the exported models equal PyTorch, and the
pages, in a real browser, show what course_lib computes.

The unit tests run the exported file with onnxruntime (Python); the browser tests visit each
live page once on the built site (one visit per page: type a handful of texts, read the numbers
the page shows, compare them with PyTorch), record the load time and each keystroke's update
latency in ``tests/artifacts/live-<chapter>.json`` (reported, not asserted beyond a sanity
bound: the machine is shared) and a screenshot beside it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.browser import Visit

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
TEXTS = (
    "ROMEO:\nBut soft, what light",
    "a",
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n",
)


@pytest.fixture(scope="module")
def gpt():
    from course_lib.gpt.pretrained import load_pretrained

    torch.set_num_threads(1)
    return load_pretrained()


@pytest.fixture(scope="module")
def incontext():
    from course_lib.gpt.incontext import load_incontext

    torch.set_num_threads(1)
    return load_incontext()[:2]


@pytest.fixture(scope="module")
def gpt_file(gpt, tmp_path_factory):
    from course_lib.gpt.live import export

    model, tok = gpt
    return export(model, tok, tmp_path_factory.mktemp("live") / "gpt.onnx")


@pytest.fixture(scope="module")
def own_gpt(tmp_path_factory):
    """A reader's own model: a small random GPT with RoPE, RMSNorm, SwiGLU and a BPE tokenizer
    (chapter 7's, trained on a little Shakespeare), exported as a reader would."""
    from course_lib.bpe.corpus import shakespeare_text
    from course_lib.gpt.config import GPTConfig
    from course_lib.gpt.data import BPETokenizer
    from course_lib.gpt.live import export
    from course_lib.gpt.model import GPT

    tok = BPETokenizer.train(shakespeare_text()[:20_000], vocab_size=300)
    config = GPTConfig(
        300,
        24,
        2,
        2,
        32,
        norm="rms",
        activation="swish",
        gated=True,
        positions="rope",
        tie_head=False,
    )
    model = GPT(config, seed=3).eval()
    path = export(model, tok, tmp_path_factory.mktemp("own") / "my_gpt.onnx", name="my_gpt")
    return model, tok, path


def test_own_model_export_equals_pytorch(own_gpt):
    from course_lib.onnx_export import read_metadata, run

    model, tok, path = own_gpt
    ids = tok.encode("Now is the winter of our discontent")
    out = run(path, ids)
    with torch.no_grad():
        logits = model(torch.tensor([ids]))[0].numpy()
    assert np.abs(out["logits"][0] - logits).max() < 1e-4
    assert read_metadata(path)["tokenizer"]["kind"] == "bpe"


def test_gpt_export_equals_pytorch(gpt, gpt_file):
    from course_lib.gpt.incontext import attention_maps
    from course_lib.onnx_export import read_metadata, run

    model, tok = gpt
    for text in TEXTS:
        ids = tok.encode(text)[-model.config.context_length :]
        out = run(gpt_file, ids)
        with torch.no_grad():
            logits = model(torch.tensor([ids]))[0].numpy()
            maps = torch.stack(attention_maps(model, torch.tensor([ids])), 1)[0].numpy()
        assert out["logits"].shape == (1, len(ids), model.config.vocab_size)
        assert np.abs(out["logits"][0] - logits).max() < 1e-4, text
        assert np.abs(out["attention"] - maps).max() < 1e-5, text
    meta = read_metadata(gpt_file)
    assert meta["kind"] == "gpt" and meta["tokenizer"] == {"kind": "char", "chars": tok.chars}
    assert meta["context_length"] == model.config.context_length
    assert gpt_file.stat().st_size < model.count_parameters() * 2.2  # float16 weights


def test_export_names_bad_input(gpt, tmp_path):
    from course_lib.gpt.live import export
    from course_lib.onnx_export import export_graph, read_metadata

    model, tok = gpt
    with pytest.raises(TypeError, match="course_lib.gpt.model.GPT"):
        export(torch.nn.Linear(2, 2), tok, tmp_path / "x.onnx")
    with pytest.raises(TypeError, match="CharTokenizer or BPETokenizer"):
        export(model, "abc", tmp_path / "x.onnx")
    with pytest.raises(ValueError, match=r"int64 token ids of shape \(1, L\)"):
        export_graph(
            model, torch.zeros(3), tmp_path / "x.onnx", outputs=("y",), dynamic={}, metadata={}
        )
    bare = tmp_path / "bare.onnx"
    export_graph(model, torch.tensor([[1, 2]]), bare, outputs=("y",), dynamic={}, metadata={})
    with pytest.raises(ValueError, match="no 'course' metadata"):
        read_metadata(bare.read_bytes().replace(b"course", b"xourse"))


def test_place_puts_the_view_before_the_exercises_once():
    from tools.live_pages import LivePageError, place

    page = '<main><section id="a">A</section><section id="exercises">E</section></main>'
    once = place(page, "08_gpt", "gpt", "<p>live</p>")
    assert once.index("<p>live</p>") < once.index('id="exercises"')
    assert place(once, "08_gpt", "gpt", "<p>new</p>").count("course-live:gpt -->") == 2
    assert "<p>live</p>" not in place(once, "08_gpt", "gpt", "<p>new</p>")
    with pytest.raises(LivePageError, match="08_gpt: expected one 'Exercises' section"):
        place("<main></main>", "08_gpt", "gpt", "<p>live</p>")


def test_place_puts_the_boot_script_first_in_the_head():
    """The engine's start goes just after <meta charset>, before the stylesheets (an inline
    script after them waits until they have loaded); a second run moves an earlier one there."""
    from tools.live_pages import LivePageError, place

    body = '<section id="exercises">E</section>'
    page = f'<head><meta charset="utf-8" /><link rel="stylesheet" href="a.css"></head>{body}'
    once = place(page, "08_gpt", "gpt", "<p>live</p>", head="<script>boot()</script>")
    assert once.index('<meta charset="utf-8" />') < once.index("boot()") < once.index("a.css")
    begin, end = "<!-- course-live:gpt-head -->", "<!-- /course-live:gpt-head -->"
    older = page.replace("</head>", f"{begin}\nold\n{end}\n</head>")  # where it once went
    again = place(older, "08_gpt", "gpt", "<p>live</p>", head="<script>boot2()</script>")
    assert "old" not in again and again.count("course-live:gpt-head -->") == 2
    assert again.index("boot2()") < again.index("a.css")
    with pytest.raises(LivePageError, match="08_gpt: no <meta charset>"):
        place("<head></head>" + body, "08_gpt", "gpt", "<p>live</p>", head="<script></script>")


# -- in a browser ------------------------------------------------------------------------------


def _percentiles(ms: list[float]) -> dict[str, float]:
    a = np.asarray(ms, dtype=float)
    return {f"p{q}": round(float(np.percentile(a, q)), 1) for q in (50, 95)} | {"n": len(ms)}


def _wait_update(pg, root: str, before: int) -> None:
    pg.wait_for_function(
        f"() => +(document.querySelector('{root}').dataset.updates || 0) > {before}",
        timeout=30_000,
    )


def _updates(pg, root: str) -> int:
    return int(pg.locator(root).get_attribute("data-updates") or 0)


def _type(pg, root: str, text: str, ids: list[int]) -> None:
    """Put ``text`` in the view's box and wait until the page shows the result for ``ids`` (an
    update still running for an earlier text or model does not count); if it never does, the
    caller's comparison of the ids says so."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    want = json.dumps(json.dumps(ids, separators=(",", ":")))  # as JSON.stringify writes them
    pg.locator(f"{root} .course-live-text").fill(text)
    try:
        pg.wait_for_function(
            f"() => document.querySelector('{root}').dataset.ids === {want}"
            f" && document.querySelector('{root}').dataset.state === 'ready'",
            timeout=30_000,
        )
    except PlaywrightTimeout:
        pass


def _open_timed(visit: Visit, url: str, root: str) -> dict:
    """Open ``url`` in ``visit`` and wait for the view's first result; returns when it came
    (ms after the page opened), the performance marks of the load's steps (live.js, worker.js)
    and the CPU seconds the page's renderer had used by then (Chromium's Performance metrics:
    ``ThreadTime`` its main thread, ``ProcessTime`` all its threads, the live view's worker and
    the WebAssembly compiler's included): evidence that does not stretch with a busy machine's
    load the way the wall-clock times do."""
    pg = visit.page
    cdp = visit.context.new_cdp_session(pg)
    cdp.send("Performance.enable")
    opened = time.perf_counter()
    visit.response = pg.goto(url, wait_until="commit", timeout=60_000)
    pg.wait_for_selector(f"{root}[data-updates]", timeout=60_000)
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    cdp.detach()
    pg.wait_for_load_state("load")
    marks = pg.evaluate("() => window.courseLive.marks")
    return {
        "first_result_ms": round(
            pg.evaluate(f"() => window.courseLive.views['{root[1:]}'].first"), 1
        ),
        "marks_ms": {k: round(v, 1) for k, v in sorted(marks.items(), key=lambda kv: kv[1])},
        "cpu_s_at_first_result": {
            "main_thread": round(metrics["ThreadTime"], 3),
            "renderer_all_threads": round(metrics["ProcessTime"], 3),
        },
        "wait_s": round(time.perf_counter() - opened, 2),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def _wait_model(pg, root: str, name: str) -> None:
    """Wait until the view runs the model called ``name`` (its description line names it)."""
    pg.wait_for_function(
        f"() => document.querySelector('{root} .course-live-model').textContent"
        f".startsWith({json.dumps(name)}) && document.querySelector('{root}').dataset.state "
        "=== 'ready'",
        timeout=30_000,
    )


def _gpt_parity(pg, root: str, model, tok, text: str) -> dict:
    """Type ``text``; the page's ids and next-token logits against ``model``'s in PyTorch."""
    ids = tok.encode(text)[-model.config.context_length :]
    _type(pg, root, text, ids)
    shown = json.loads(pg.locator(f"{root} .course-live-next").get_attribute("data-logits"))
    with torch.no_grad():
        logits = model(torch.tensor([ids]))[0, -1].numpy()
    return {
        "same_ids": json.loads(pg.locator(root).get_attribute("data-ids")) == ids,
        "max_abs_logit_diff": float(np.abs(np.asarray(shown) - logits).max()),
    }


@pytest.mark.browser
def test_gpt_page_runs_the_model_live(browser, site_url, gpt, own_gpt, incontext):
    """Chapter 8's page: the next character's logits and every head's attention equal
    PyTorch's for typed texts; greedy generation equals course_lib's; the reader's own model
    and the chapter's second (in-context) model, chosen in the page, equal PyTorch too; load
    (with its breakdown) and keystroke latency recorded."""
    from course_lib.gpt.incontext import attention_maps
    from course_lib.gpt.sampling import generate
    from tools.live_pages import GPT_MODELS

    model, tok = gpt
    root = "#course-live-gpt"
    record: dict = {"chapter": "08_gpt", "texts": []}
    with Visit(browser, None) as visit:
        pg = visit.page
        record |= _open_timed(visit, site_url + "notebooks/08_gpt.html", root)
        box = pg.locator(f"{root} .course-live-text")
        # the first result: the run the worker made while the page loaded
        opening = box.input_value()
        ids = tok.encode(opening)[-model.config.context_length :]
        shown = json.loads(pg.locator(f"{root} .course-live-next").get_attribute("data-logits"))
        with torch.no_grad():
            logits = model(torch.tensor([ids]))[0, -1].numpy()
        record["first_text"] = {
            "same_ids": json.loads(pg.locator(root).get_attribute("data-ids")) == ids,
            "max_abs_logit_diff": float(np.abs(np.asarray(shown) - logits).max()),
        }
        for text in TEXTS:
            before = _updates(pg, root)
            box.fill(text)
            _wait_update(pg, root, before)
            shown = json.loads(pg.locator(f"{root} .course-live-next").get_attribute("data-logits"))
            page_ids = json.loads(pg.locator(root).get_attribute("data-ids"))
            weights = json.loads(
                pg.locator(f"{root} .course-live-attention").get_attribute("data-weights")
            )
            ids = tok.encode(text)[-model.config.context_length :]
            with torch.no_grad():
                logits = model(torch.tensor([ids]))[0, -1].numpy()
                maps = torch.stack(attention_maps(model, torch.tensor([ids])), 1)[0, :, :, -1]
            maps = maps.reshape(-1, len(ids)).numpy()  # (layers * heads, L): the last position
            record["texts"].append(
                {
                    "text": text,
                    "same_ids": page_ids == ids,
                    "max_abs_logit_diff": float(np.abs(np.asarray(shown) - logits).max()),
                    "max_abs_attention_diff": float(np.abs(np.asarray(weights) - maps).max()),
                    "same_top10": json.loads(
                        pg.locator(f"{root} .course-live-next").get_attribute("data-top")
                    )
                    == [int(i) for i in np.argsort(-logits, kind="stable")[:10]],
                }
            )
        # keystrokes: one update each (or one for several, when typed faster than it runs)
        box.fill("KING HENRY:\n")  # the head of the text typed below
        _wait_update(pg, root, _updates(pg, root) - 1)
        pg.evaluate(f"() => {{ window.courseLive.timings['{root[1:]}'] = []; }}")
        box.press("End")
        head, typed = "KING HENRY:\n", "Once more unto the breach, dear friends"
        box.press_sequentially(typed, delay=120)
        pg.wait_for_function(
            f"() => JSON.parse(document.querySelector('{root}').dataset.ids).length === "
            f"{len(head + typed)}",
            timeout=30_000,
        )
        record["keystroke_ms"] = pg.evaluate(f"() => window.courseLive.timings['{root[1:]}']")
        # greedy generation: the same characters as course_lib's generate(temperature=0)
        pg.locator(f"{root} .course-live-temperature").fill("0")
        pg.locator(f"{root} .course-live-length").fill("40")
        pg.locator(f"{root} .course-live-generate").click()
        pg.wait_for_selector(f"{root}[data-generated]", timeout=60_000)
        made = json.loads(pg.locator(f"{root} .course-live-generated").get_attribute("data-ids"))
        prompt = tok.encode(head + typed)
        expected = generate(model, prompt, 40, temperature=0)[len(prompt) :]
        record["greedy_generation_equal"] = made == expected
        # a character the model never saw: named, left out
        before = _updates(pg, root)
        box.fill("naïve")
        _wait_update(pg, root, before)
        record["unknown_status"] = pg.locator(f"{root} .course-live-status").text_content()
        ARTIFACTS.mkdir(exist_ok=True)
        pg.locator(root).screenshot(path=str(ARTIFACTS / "live-08_gpt.png"))
        # bring your own model: the reader's file, opened in the page, runs as in PyTorch
        own, own_tok, own_path = own_gpt
        pg.locator(f"{root} .course-live-file").set_input_files(str(own_path))
        _wait_model(pg, root, "my_gpt")
        record["own_model"] = _gpt_parity(
            pg, root, own, own_tok, "Now is the winter of our discontent"
        )
        # the chapter's second model, from the selector
        choice = pg.locator(f"{root} .course-live-choice")
        record["models_offered"] = choice.locator("option").all_text_contents()
        choice.select_option(f"../_live/{GPT_MODELS[1][0]}")
        _wait_model(pg, root, GPT_MODELS[1][1])
        ic_model, ic_tok = incontext
        record["incontext_model"] = _gpt_parity(pg, root, ic_model, ic_tok, GPT_MODELS[1][3])
        choice.select_option("shipped")
        _wait_model(pg, root, GPT_MODELS[0][1])
        visit.check("08_gpt live view")
    record["keystroke_percentiles_ms"] = _percentiles(record["keystroke_ms"])
    (ARTIFACTS / "live-08_gpt.json").write_text(json.dumps(record, indent=1))
    for t in record["texts"]:
        assert t["same_ids"] and t["same_top10"], t
        assert t["max_abs_logit_diff"] < 1e-4, t
        assert t["max_abs_attention_diff"] < 1e-4, t
    assert record["greedy_generation_equal"], record
    for key in ("first_text", "own_model", "incontext_model"):
        assert record[key]["same_ids"], record[key]
        assert record[key]["max_abs_logit_diff"] < 1e-4, record[key]
    assert len(record["models_offered"]) == 3, record["models_offered"]  # two shipped, one own
    assert "ï" in record["unknown_status"], record["unknown_status"]
    assert record["keystroke_ms"], "no keystroke was measured"
    assert record["keystroke_percentiles_ms"]["p95"] < 5000, record  # a sanity bound only


def _many_texts(n: int = 150) -> list[str]:
    """Texts for the tokenisers: slices of Shakespeare, and the hard cases of GPT-2's pattern
    (contractions, runs of spaces and newlines, digits, accents, CJK, emoji, a special token's
    text, a lone combining mark)."""
    from course_lib.bpe.corpus import shakespeare_text

    rng = np.random.default_rng(7)
    corpus = shakespeare_text()
    hard = [
        "",
        " ",
        "   leading and trailing   ",
        "I'm sure you'll see they've said it's 'quoted' and we'd",
        "tabs\tand\n\nnewlines\r\n  indented\n",
        "3.14159 and 1,000,000 and ٣٤ and Ⅻ",
        "naïve café résumé Ångström",
        "東京は日本の首都です。서울은 한국의 수도입니다.",
        "emoji 🤗🚀 and flags 🇫🇷 and a ZWJ 👩‍💻",
        "<|endoftext|> is plain text here",
        "e\u0301 combining, \u00a0no-break space, \u2003em space",
        "!!!??? ... --- ***",
    ]
    slices = []
    for _ in range(n - len(hard)):
        start = int(rng.integers(0, len(corpus) - 400))
        slices.append(corpus[start : start + int(rng.integers(1, 400))])
    return hard + slices


@pytest.mark.browser
def test_bpe_page_tokenises_as_course_lib(browser, site_url):
    """Chapter 7's page: the page's tokens equal Tokenizer.encode's on many texts, for the
    chapter's BPE and for GPT-2's; typed text updates the shown tokens."""
    from course_lib.bpe.analysis import tokenizer_from_merges
    from course_lib.bpe.explorer import merges
    from course_lib.bpe.gpt2_files import load_gpt2

    tokenizers = {"course": tokenizer_from_merges(list(merges())), "gpt2": load_gpt2()}
    texts = _many_texts()
    root = "#course-live-bpe"
    record: dict = {"chapter": "07_bpe", "texts": len(texts)}
    with Visit(browser, site_url + "notebooks/07_bpe.html") as visit:
        pg = visit.page
        pg.wait_for_selector(f"{root}[data-updates]", timeout=60_000)
        record["first_result_ms"] = round(
            pg.evaluate(f"() => window.courseLive.views['{root[1:]}'].first"), 1
        )
        pg.locator(f"{root} .course-live-tokenizer").select_option("gpt2")
        pg.wait_for_function(f"() => document.querySelector('{root}').dataset.tokenizer === 'gpt2'")
        for name, tok in tokenizers.items():
            got = pg.evaluate(
                f"""async (texts) => {{
                  const tok = await window.courseLive.views['{root[1:]}'].tokenizers['{name}'];
                  const t0 = performance.now();
                  const ids = texts.map(t => tok.encode(t).ids);
                  return [ids, performance.now() - t0];
                }}""",
                texts,
            )
            want = [tok.encode(t, allowed_special=set(), disallowed_special=()) for t in texts]
            record[f"{name}_equal"] = sum(a == b for a, b in zip(got[0], want, strict=True))
            record[f"{name}_first_difference"] = next(
                (
                    {"text": t, "page": a, "course_lib": b}
                    for t, a, b in zip(texts, got[0], want, strict=True)
                    if a != b
                ),
                None,
            )
            record[f"{name}_ms_all_texts"] = round(got[1], 1)
        # typed: the tokens shown
        pg.evaluate(f"() => {{ window.courseLive.timings['{root[1:]}'] = []; }}")
        box = pg.locator(f"{root} .course-live-text")
        box.fill("")
        typed = "To be, or not to be: that is the question."
        box.press_sequentially(typed, delay=80)
        pg.wait_for_function(
            f"() => JSON.parse(document.querySelector('{root}').dataset.ids || '[]').length"
            f" === {len(tokenizers['gpt2'].encode(typed))}",
            timeout=30_000,
        )
        record["typed_equal"] = json.loads(pg.locator(root).get_attribute("data-ids")) == (
            tokenizers["gpt2"].encode(typed)
        )
        record["keystroke_ms"] = pg.evaluate(f"() => window.courseLive.timings['{root[1:]}']")
        ARTIFACTS.mkdir(exist_ok=True)
        pg.locator(root).screenshot(path=str(ARTIFACTS / "live-07_bpe.png"))
        visit.check("07_bpe live view")
    record["keystroke_percentiles_ms"] = _percentiles(record["keystroke_ms"])
    (ARTIFACTS / "live-07_bpe.json").write_text(json.dumps(record, indent=1))
    assert record["course_equal"] == len(texts), record["course_first_difference"]
    assert record["gpt2_equal"] == len(texts), record["gpt2_first_difference"]
    assert record["typed_equal"], record
    assert record["keystroke_percentiles_ms"]["p95"] < 5000, record  # a sanity bound only


BERT_TEXTS = (
    "Call me Ishmael. Some years ago I went to [MASK].",
    "To be, or not to [MASK]: that is the [MASK].",
    "The [MASK] whale swam in the [MASK] sea, and [CLS] is only text here.",
)


@pytest.fixture(scope="module")
def bert():
    from course_lib.bert.data import tokenizer
    from course_lib.bert.pretrain_long import load_checkpoint

    torch.set_num_threads(1)
    return load_checkpoint()[0], tokenizer()


def test_bert_export_equals_pytorch(bert, tmp_path):
    from course_lib.bert.live import export, fill
    from course_lib.onnx_export import read_metadata, run

    model, tok = bert
    path = export(model, tok, tmp_path / "bert.onnx")
    for text in BERT_TEXTS:
        f = fill(model, tok, text)
        out = run(path, f["ids"])
        assert np.abs(out["logits"][0] - f["logits"].numpy()).max() < 1e-4, text
        maps = model.attention_maps(torch.tensor([f["ids"]]))[0].detach().numpy()
        assert np.abs(out["attention"] - maps).max() < 1e-5, text
    assert read_metadata(path)["kind"] == "bert"
    with pytest.raises(ValueError, match="reads at most"):
        fill(model, tok, "word " * 200)


@pytest.fixture(scope="module")
def own_bert(tmp_path_factory):
    """A reader's own BERT: a small random one (1 layer, width 32) with the chapter's tokenizer,
    exported as a reader would."""
    from course_lib.bert.config import BertConfig, bert_block
    from course_lib.bert.data import tokenizer
    from course_lib.bert.live import export
    from course_lib.bert.model import Bert
    from course_lib.bert.train import VOCAB_SIZE

    config = BertConfig(vocab_size=VOCAB_SIZE, max_len=40, n_layers=1, block=bert_block(32, 2))
    model = Bert(config, seed=5).eval()
    path = export(model, tokenizer(), tmp_path_factory.mktemp("own") / "my_bert.onnx")
    return model, path


def _bert_shown(pg, root: str, model, tok, text: str) -> dict:
    """What the page shows for ``text`` (already typed) against ``model`` in PyTorch: the ids,
    each [MASK]'s logits and top 5, every head's attention from the first mask."""
    from course_lib.bert.live import fill

    fills = pg.locator(f"{root} .course-live-fills")
    shown = json.loads(fills.get_attribute("data-logits"))
    top = json.loads(fills.get_attribute("data-top"))
    weights = json.loads(pg.locator(f"{root} .course-live-attention").get_attribute("data-weights"))
    ref = fill(model, tok, text)
    masks = sorted(ref["top"])
    with torch.no_grad():
        maps = model.attention_maps(torch.tensor([ref["ids"]]))[0, :, :, masks[0]]
    return {
        "text": text,
        "same_ids": json.loads(pg.locator(root).get_attribute("data-ids")) == ref["ids"],
        "same_masks": sorted(int(m) for m in shown) == masks,
        "max_abs_logit_diff": max(
            float(np.abs(np.asarray(shown[str(m)]) - ref["logits"][m].numpy()).max()) for m in masks
        ),
        "same_top5": all(top[str(m)] == [i for i, _ in ref["top"][m]] for m in masks),
        "max_abs_attention_diff": float(
            np.abs(np.asarray(weights) - maps.reshape(-1, len(ref["ids"])).numpy()).max()
        ),
    }


@pytest.mark.browser
def test_bert_page_fills_the_masks_as_pytorch(browser, site_url, bert, own_bert):
    """Chapter 9's page: each [MASK]'s logits within 1e-4 of PyTorch's, the same ids and the
    same top-5 ranking; every head's attention from the first mask; the same for a reader's
    own BERT opened from disk; load (with its breakdown) and keystroke latency recorded."""
    from course_lib.bert.live import fill
    from tools.live_pages import BERT_EXAMPLE

    model, tok = bert
    root = "#course-live-bert"
    record: dict = {"chapter": "09_bert", "texts": []}
    with Visit(browser, None) as visit:
        pg = visit.page
        record |= _open_timed(visit, site_url + "notebooks/09_bert.html", root)
        record["first_text"] = _bert_shown(pg, root, model, tok, BERT_EXAMPLE)
        box = pg.locator(f"{root} .course-live-text")
        for text in BERT_TEXTS:
            before = _updates(pg, root)
            box.fill(text)
            _wait_update(pg, root, before)
            record["texts"].append(_bert_shown(pg, root, model, tok, text))
        pg.evaluate(f"() => {{ window.courseLive.timings['{root[1:]}'] = []; }}")
        box.fill("The [MASK] ")
        box.press("End")
        typed = "sailed from Nantucket."
        box.press_sequentially(typed, delay=120)
        n = len(fill(model, tok, "The [MASK] " + typed)["ids"])
        pg.wait_for_function(
            f"() => JSON.parse(document.querySelector('{root}').dataset.ids).length === {n}",
            timeout=30_000,
        )
        record["keystroke_ms"] = pg.evaluate(f"() => window.courseLive.timings['{root[1:]}']")
        ARTIFACTS.mkdir(exist_ok=True)
        pg.locator(root).screenshot(path=str(ARTIFACTS / "live-09_bert.png"))
        # bring your own model: a reader's BERT, opened from disk, shows the same views
        own, own_path = own_bert
        pg.locator(f"{root} .course-live-file").set_input_files(str(own_path))
        _wait_model(pg, root, "my_bert")
        _type(pg, root, BERT_TEXTS[1], fill(own, tok, BERT_TEXTS[1])["ids"])
        record["own_model"] = _bert_shown(pg, root, own, tok, BERT_TEXTS[1])
        visit.check("09_bert live view")
    record["keystroke_percentiles_ms"] = _percentiles(record["keystroke_ms"])
    (ARTIFACTS / "live-09_bert.json").write_text(json.dumps(record, indent=1))
    for t in [record["first_text"], *record["texts"], record["own_model"]]:
        assert t["same_ids"] and t["same_masks"] and t["same_top5"], t
        assert t["max_abs_logit_diff"] < 1e-4, t
        assert t["max_abs_attention_diff"] < 1e-4, t
    assert record["keystroke_percentiles_ms"]["p95"] < 5000, record  # a sanity bound only


@pytest.mark.browser
def test_live_pages_from_file_urls(browser, site: Path):
    """Opened from disk (file://): chapter 7's tokeniser works (its table is in the page);
    chapter 8's view says how to serve the site, and nothing fails in the console."""
    pages = site / "notebooks"
    with Visit(browser, (pages / "07_bpe.html").as_uri()) as visit:
        visit.page.wait_for_selector("#course-live-bpe[data-updates]", timeout=30_000)
        visit.check("07_bpe from file://")
    with Visit(browser, (pages / "08_gpt.html").as_uri()) as visit:
        visit.page.wait_for_selector("#course-live-gpt[data-state=unavailable]", timeout=30_000)
        status = visit.page.locator("#course-live-gpt .course-live-status").text_content()
        visit.check("08_gpt from file://")
    assert "python -m http.server" in status, status
