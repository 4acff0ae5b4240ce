"""The website's explorers (course_lib.static_explorer, tools/explorer_pages.py).

* what a page stores for each setting is what the course's render function returns for it, and
  the value it exposes is the one course_lib computes;
* the first setting is what the notebook's own widget showed (its stored widget state), so the
  explorer renders the notebook's call with the notebook's arguments;
* every chapter's call is found in its notebook, and the post-processing of a built page
  replaces the right cell (and fails, naming the chapter, when it cannot);
* in a browser (``-m browser``): each chapter's explorer, served from 127.0.0.1, shows the
  right output and value after its controls are moved to three settings, with no request off
  the page.
"""

from __future__ import annotations

import functools
import json
import random
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from course_lib.static_explorer import (
    CHAPTERS,
    Control,
    Explorer,
    chapter_explorer,
    decode_payload,
    explorer_html,
    key_of,
    page_html,
    precompute,
    settings,
)
from tools.explorer_pages import ExplorerPageError, cached_precompute, calls_in, place

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


SLOW = {"05_transformer_block", "06_positional_encodings", "08_gpt", "11_long_sequences"}  # 10-40 s
EACH_CHAPTER = [
    pytest.param(c, marks=[pytest.mark.slow] if c in SLOW else [], id=c) for c in CHAPTERS
]


@functools.cache
def built(chapter: str) -> tuple[str, Explorer, dict, str]:
    """(call, explorer, precomputed data, HTML fragment) of a chapter, once per session."""
    call, ex = chapter_explorer(chapter)
    data = cached_precompute(chapter, ex)  # the website build's grid, if it has made it
    return call, ex, data, explorer_html(ex, data)


def as_json(value):
    """A value as the page holds it (JSON round trip: tuples become lists)."""
    return json.loads(json.dumps(value))


def sample_settings(ex: Explorer, n: int, seed: int = 0) -> list[tuple[str, dict]]:
    """The first setting and ``n`` others drawn from the grid (a fixed draw)."""
    grid = list(settings(ex))
    default = key_of(tuple(c.default_index for c in ex.controls))
    first = next(s for s in grid if s[0] == default)
    others = [s for s in grid if s[0] != default]
    return [first, *random.Random(seed).sample(others, min(n, len(others)))]


def test_every_chapter_has_an_explorer():
    chapters = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert list(CHAPTERS) == chapters


@pytest.mark.parametrize("chapter", EACH_CHAPTER)
def test_stored_outputs_are_what_course_lib_renders(chapter):
    _, ex, _, fragment = built(chapter)
    payload = decode_payload(fragment)
    assert set(payload["table"]) == {key for key, _ in settings(ex)}
    assert len(payload["outputs"]) == len(set(payload["outputs"]))
    for key, setting in sample_settings(ex, 3):  # the first and three others: each a render
        assert payload["outputs"][payload["table"][key]] == ex.render(**setting), key
        assert payload["values"][key] == as_json(ex.value(**setting)), key
    assert len(fragment.encode()) < 1.5 * 2**20, "an explorer heavier than 1.5 MiB"


def _notebook_cell(chapter: str, call: str) -> tuple[dict, dict]:
    """(the code cell that makes ``call``, the notebook's widget state)."""
    nb = json.loads((ROOT / "notebooks" / f"{chapter}.ipynb").read_text(encoding="utf-8"))
    found = [
        c for c in nb["cells"] if c["cell_type"] == "code" and calls_in("".join(c["source"]), call)
    ]
    assert len(found) == 1, f"{chapter}: {len(found)} code cells call {call!r}, expected 1"
    return found[0], nb["metadata"].get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})


def _html_values(state: dict, model_id: str) -> list[str]:
    """The values of every HTML widget under ``model_id`` in a stored widget state."""
    model = state[model_id]
    out = [model["state"]["value"]] if model["model_name"] in ("HTMLModel", "HTMLMathModel") else []
    for child in model["state"].get("children", []):
        out += _html_values(state, child.removeprefix("IPY_MODEL_"))
    return out


@pytest.mark.parametrize("chapter", EACH_CHAPTER)
def test_the_first_setting_is_what_the_notebook_showed(chapter):
    """The explorer renders the notebook's call: its first output is the stored widget's."""
    call, ex, data, _ = built(chapter)
    cell, state = _notebook_cell(chapter, call)
    views = [
        o["data"][WIDGET_VIEW]["model_id"]
        for o in cell["outputs"]
        if WIDGET_VIEW in o.get("data", {})
    ]
    assert views, f"{chapter}: the cell calling {call!r} stored no widget"
    shown = _html_values(state, views[-1])
    first = data["outputs"][data["table"][key_of(tuple(c.default_index for c in ex.controls))]]
    assert any(v and v in first for v in shown), f"{chapter}: the notebook's widget showed {shown}"


# -- placing explorers on built pages ---------------------------------------------------------

CELL = (
    '<div class="cell docutils container">\n<div class="cell_input docutils container">\n'
    '<div class="highlight"><pre><span class="n">{code}</span></pre></div>\n</div>\n'
    '<div class="cell_output docutils container">\n<div class="output stream">printed</div>\n'
    '<script type="application/vnd.jupyter.widget-view+json">{{"model_id": "{mid}"}}</script>'
    "</div>\n</div>\n"
)


def _page(*cells: tuple[str, str]) -> str:
    return "<html><body>" + "".join(CELL.format(code=c, mid=m) for c, m in cells) + "</body></html>"


def test_place_replaces_the_widget_of_the_calling_cell():
    page = _page(("own_explorer()", "a"), ("explorer()", "b"))
    out = place(page, "04_attention", "explorer()", "attention", "<p>EXPLORER</p>")
    assert '"model_id": "a"' in out and '"model_id": "b"' not in out
    assert out.count("<p>EXPLORER</p>") == 1 and out.count("printed") == 2
    assert out.index("own_explorer") < out.index("EXPLORER")
    again = place(out, "04_attention", "explorer()", "attention", "<p>NEW</p>")
    assert "EXPLORER" not in again and again.count("<p>NEW</p>") == 1


def test_place_fails_naming_the_chapter():
    with pytest.raises(ExplorerPageError, match="02_softmax: expected exactly one code cell"):
        place(_page(("renamed_explorer()", "a")), "02_softmax", "temperature_explorer(", "s", "")
    with pytest.raises(ExplorerPageError, match="found 2"):
        place(_page(("f(1)", "a"), ("f(2)", "b")), "01_matmul", "f(", "m", "")
    no_widget = _page(("f(1)", "a")).replace("widget-view", "other")
    with pytest.raises(ExplorerPageError, match="has no widget output"):
        place(no_widget, "01_matmul", "f(", "m", "")


def test_bad_controls_are_named():
    with pytest.raises(ValueError, match="default of 'x'"):
        Control("x", "x", (1, 2), default=3)
    with pytest.raises(ValueError, match="labels of 'x'"):
        Control("x", "x", (1, 2), labels=("one",))
    with pytest.raises(ValueError, match="kind of 'x'"):
        Control("x", "x", (1,), kind="knob")
    with pytest.raises(ValueError, match="distinct names"):
        Explorer("e", "E", (Control("x", "x", (1,)), Control("x", "y", (2,))), render=str)
    with pytest.raises(TypeError, match="render must return HTML text"):
        precompute(Explorer("e", "E", (Control("x", "x", (1,)),), render=lambda x: x))
    with pytest.raises(ValueError, match="no explorer for chapter '99_x'"):
        chapter_explorer("99_x")


def test_the_grid_cache_computes_once_and_never_serves_another_grid(tmp_path, monkeypatch):
    """tools.explorer_pages.cached_precompute: the second call reads what the first wrote; a
    changed control, chapter or input digest is another file; the grid equals precompute's."""
    from tools import explorer_pages

    calls = []

    def render(x):
        calls.append(x)
        return f"<b>{x}</b>"

    ex = Explorer("e", "E", (Control("x", "x", (1, 2, 3)),), render=render, value=lambda x: (x,))
    first = cached_precompute("99_x", ex, tmp_path)
    assert first == as_json(precompute(ex)) and len(calls) == 6  # cached, then direct
    assert cached_precompute("99_x", ex, tmp_path) == first and len(calls) == 6  # read back
    other = Explorer("e", "E", (Control("x", "x", (1, 2)),), render=render)
    assert len(cached_precompute("99_x", other, tmp_path)["table"]) == 2
    cached_precompute("98_y", ex, tmp_path)
    monkeypatch.setattr(explorer_pages, "inputs_digest", lambda: "changed")
    cached_precompute("99_x", ex, tmp_path)
    assert len(list(tmp_path.glob("*.json"))) == 4 and len(calls) == 14
    assert as_json(cached_precompute("99_x", ex, None)) == first and len(calls) == 17  # direct


def test_built_pages_hold_every_explorer():
    """After a website build (skipped without one): each chapter page has its explorer and
    no frozen copy of it."""
    html_dir = ROOT / "book" / "_build" / "html" / "notebooks"
    if not html_dir.is_dir():
        pytest.skip("the website is not built (python -m tools.build_book)")
    for chapter in CHAPTERS:
        _, ex = chapter_explorer(chapter)
        page = (html_dir / f"{chapter}.html").read_text(encoding="utf-8")
        assert page.count(f'data-explorer="{ex.key}"') == 1, chapter


# -- in a browser ------------------------------------------------------------------------------


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """A folder of standalone explorer pages (the site's HTML), served from 127.0.0.1."""
    folder = tmp_path_factory.mktemp("explorers")
    handler = functools.partial(_Quiet, directory=str(folder))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield folder, f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


def drive(pg, ex: Explorer, n: int = 3) -> list[dict]:
    """Move the explorer's controls to ``n`` settings other than the first; for each, what the
    page shows and what course_lib computes (its HTML as the browser parses it, and its text).
    The page must already be loaded."""
    root = pg.locator(f"#course-explorer-{ex.key}")
    root.wait_for(state="attached")
    pg.wait_for_selector(f"#course-explorer-{ex.key}[data-ready=yes]", timeout=30_000)
    out = root.locator(".course-explorer-output")
    seen = []
    for key, setting in sample_settings(ex, n, seed=1)[1:]:
        for c, i in zip(ex.controls, key.split("-"), strict=True):
            control = pg.locator(f"#course-explorer-{ex.key}-{c.name}")
            if c.kind == "select":
                control.select_option(value=i)
            else:
                control.fill(i)
        html_and_text = pg.evaluate(
            "(h) => { const d = document.createElement('div'); d.innerHTML = h; "
            "return [d.innerHTML, d.textContent]; }",
            ex.render(**setting),
        )
        seen.append(
            {
                "key": key,
                "shown_key": out.get_attribute("data-key"),
                "shown_value": json.loads(out.get_attribute("data-value")),
                "value": as_json(ex.value(**setting)),
                "same_html": out.inner_html() == html_and_text[0],
                # the site's theme adds attributes (tabindex on <pre>); the text stays the same
                "same_text": out.text_content() == html_and_text[1],
                "text": out.inner_text().strip()[:80],
            }
        )
    return seen


def off_site(urls: list[str]) -> list[str]:
    return [
        u
        for u in urls
        if urlsplit(u).scheme not in {"data", "blob"} and urlsplit(u).hostname != "127.0.0.1"
    ]


@pytest.mark.browser
@pytest.mark.parametrize("chapter", EACH_CHAPTER)
def test_explorer_responds_in_a_browser(browser, pages, chapter):
    folder, base = pages
    _, ex, _, fragment = built(chapter)
    (folder / f"{chapter}.html").write_text(page_html(fragment, chapter), encoding="utf-8")
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    pg = context.new_page()
    requests, errors = [], []
    pg.on("request", lambda r: requests.append(r.url))
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.route(
        "**/*",
        lambda route: route.continue_() if not off_site([route.request.url]) else route.abort(),
    )
    try:
        pg.goto(base + f"{chapter}.html", wait_until="load")
        seen = drive(pg, ex)
        if chapter == "02_softmax":
            ARTIFACTS.mkdir(exist_ok=True)
            pg.locator(f"#course-explorer-{ex.key}").screenshot(
                path=str(ARTIFACTS / "explorer.png")
            )
    finally:
        context.close()
    ARTIFACTS.mkdir(exist_ok=True)
    record = {"chapter": chapter, "settings": seen, "requests": requests}
    (ARTIFACTS / f"explorer-{chapter}.json").write_text(json.dumps(record, indent=1))
    assert len(seen) == 3
    for s in seen:
        assert s["shown_key"] == s["key"], s
        assert s["shown_value"] == s["value"], s
        assert s["same_html"], s
        assert s["text"], s
    assert not errors, errors
    assert requests and not off_site(requests), requests
