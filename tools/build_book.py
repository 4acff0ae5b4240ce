"""Build the course website offline into ``book/_build/html``.

    python -m tools.build_book               # strict: warnings are errors (what ./course book runs)
    python -m tools.build_book --no-strict   # report warnings, build anyway
    python -m tools.build_book --clean       # delete book/_build first

By default the pages load MathJax, require.js and the ipywidgets embed script from CDNs. Here
they come from pinned npm packages, downloaded once from the npm registry as tarballs (plain
urllib, no node), checked against pinned sha512 hashes, cached in ``book/_web_assets/`` (never
committed) and unpacked into ``book/_web_assets/site/_vendor/``. ``book/_config.yml`` copies that
folder into the site root (``html_extra_path``) and points ``mathjax_path`` and
``nb_ipywidgets_js`` at it with page-relative paths, so the site works from any web-server
sub-path and from ``file://``, and no page request leaves the host that serves it.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
ASSETS = BOOK / "_web_assets"
TARBALLS = ASSETS / "npm"
VENDOR = ASSETS / "site" / "_vendor"  # copied to book/_build/html/_vendor
HTML = BOOK / "_build" / "html"
REGISTRY = os.environ.get("NPM_REGISTRY", "https://registry.npmjs.org").rstrip("/")


@dataclass(frozen=True)
class Package:
    """One pinned npm package and the part of it the website serves."""

    name: str
    version: str
    integrity: str  # the registry's "dist.integrity" (Subresource Integrity, sha512)
    dest: str  # folder under _vendor/ (or under root)
    keep: tuple[str, ...]  # glob patterns of package files to serve (relative to package/)
    root: Path = VENDOR  # where dest goes; VENDOR is served with the site

    @property
    def tarball_url(self) -> str:
        return f"{REGISTRY}/{self.name}/-/{self.name.split('/')[-1]}-{self.version}.tgz"

    @property
    def tarball(self) -> Path:
        return TARBALLS / f"{self.name.replace('/', '__')}-{self.version}.tgz"


PACKAGES = (
    # MathJax 3: the combined file the pages load (Sphinx's default, tex-mml-chtml) and every
    # component it may load lazily (TeX extensions, the menu, SVG output, the a11y explorer and
    # its speech rules, the CHTML fonts), laid out as in es5/ so that they resolve beside it.
    # The other combined files (tex-svg.js, ...) are alternatives that are never loaded.
    Package(
        "mathjax",
        "3.2.2",
        "sha512-Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw==",
        "mathjax",
        (
            "LICENSE",
            "es5/tex-mml-chtml.js",
            "es5/core.js",
            "es5/loader.js",
            "es5/startup.js",
            *(f"es5/{d}/**/*" for d in ("a11y", "adaptors", "input", "output", "sre", "ui")),
        ),
    ),
    Package(
        "requirejs",
        "2.3.7",
        "sha512-DouTG8T1WanGok6Qjg2SXuCMzszOo0eHeH9hDZ5Y4x8Je+9JB38HdTLT4/VA8OaUhBa0JPVHJ0pyBkM1z+pDsw==",
        "requirejs",
        ("require.js", "package.json"),
    ),
    # The ipywidgets 8 embed manager (ipywidgets 8.1.9 asks for html-manager ^1.0.1). The fonts
    # beside embed-amd.js are Font Awesome, which its CSS loads relative to the script.
    Package(
        "@jupyter-widgets/html-manager",
        "1.0.15",
        "sha512-5thBIV6ymNgmPVOHvzx+gGy8ZSKmSazhtGw4/c4xJDVzRhG9PTeQsRjF3FUTopvFi//SABeNz1yp47bCrJ3CQA==",
        "html-manager",
        (
            "package.json",
            "dist/embed-amd.js",
            "dist/*.woff2",
            "dist/*.woff",
            "dist/*.ttf",
            "dist/*.eot",
            "dist/*.svg",
        ),
    ),
)

# reveal.js 4 for the chapters' slide decks (tools/slides.py; nbconvert's reveal template is
# written for reveal.js 4). The white theme loads its fonts from dist/theme/fonts/.
PACKAGES += (
    Package(
        "reveal.js",
        "4.6.1",
        "sha512-1CW0auaXNPmwmvQ7TwpszwVxMi2Xr5cTS3J3EBC/HHgbPF32Dn7aiu/LKWDOGjMbaDwKQiGmfqcoGQ74HUHCMw==",
        "reveal.js",
        (
            "LICENSE",
            "dist/reveal.js",
            "dist/reveal.css",
            "dist/theme/white.css",
            "dist/theme/fonts/**/*",
            "plugin/notes/notes.js",
        ),
    ),
)

# Fonts for the glyphs the pages use that a system's fonts may lack (the checkers' verdict
# marks, arrows, dingbats): tools/pdf.py adds them last to every element's font list when it
# prints course.pdf. OFL-1.1; only the regular weight's woff2 files and their @font-face CSS.
PACKAGES += tuple(
    Package(
        name,
        version,
        integrity,
        f"fonts/{name.split('/')[1]}",
        ("LICENSE", "400.css", "files/*-400-normal.woff2"),
    )
    for name, version, integrity in (
        (
            "@fontsource/noto-emoji",
            "5.3.2",
            "sha512-N9CSzXJB04AVWYvFbuBgL2Dq964Zo91th/uOu/QLSuWBYuL9FWXGcEo6ZNwc/IJ7vmpm8KHaIKD7jF8pYm4taw==",
        ),
        (
            "@fontsource/noto-sans-symbols-2",
            "5.3.0",
            "sha512-hFnEnIXOIgLLJ61SO9icRXKoS+LSWoq7ZqKJQ/NaQR7ptdC6+7yW4ci6EuXgsS1S9JmWpciX6w0AFZkU1DKn1A==",
        ),
        # chapter 7's tokeniser examples in Chinese and Korean; the browser loads only the
        # subsets (unicode-range) a page uses
        (
            "@fontsource/noto-sans-sc",
            "5.3.0",
            "sha512-HeqIlGm0+ohOKxZLuHj1qW6r6avHH0OWdKERAcSDI0RQ+MXrteuLKA+M+5eOA8rYy0MFvOR5AT0fQo2rUkye0Q==",
        ),
        (
            "@fontsource/noto-sans-kr",
            "5.3.0",
            "sha512-/JnpTjaCOXW7xUoqOyCVYSr05VOkDy5Yla9O+WAEiS7u+yYLsmHoqj6v1W0bf91G8G3XA2+NnRS3CX2Tf/FVZg==",
        ),
    )
)

# onnxruntime-web, which runs the course's exported models in the reader's browser (chapters 8
# and 9's live views, tools/live_pages.py): the WebAssembly build only (its loader, the Emscripten
# module and the .wasm; no WebGL/WebGPU). MIT (package.json; the package ships no LICENSE file).
PACKAGES += (
    Package(
        "onnxruntime-web",
        "1.30.0",
        "sha512-q0y+JrrtukXSzsBWEMccVfqX25LRmosXHF+CaRJmg8pZClzcV7svNc4rKY3jL02Vb7QmRMDs1SigqR4CXAfKYQ==",
        "onnxruntime-web",
        (
            "package.json",
            "dist/ort.wasm.min.js",
            "dist/ort-wasm-simd-threaded.mjs",
            "dist/ort-wasm-simd-threaded.wasm",
        ),
    ),
)

# axe-core, the accessibility rules engine that tests/test_book.py runs on every page. Only the
# tests use it (injected by Playwright), so it is unpacked beside the site, not into it.
AXE = Package(
    "axe-core",
    "4.14.1",
    "sha512-FHfa+lmNjQZfJz1q8wKqIDwC6DExcHt/pkjNQb09a3NPjCKg2rhu5qb2S4r76ASyFNNtuFooJpZe37OgudVGtQ==",
    "axe-core",
    ("LICENSE", "package.json", "axe.min.js"),
    root=ASSETS / "test",
)

# The files the pages reference (book/_config.yml); the build fails if one is missing.
ENTRY_POINTS = (
    "reveal.js/dist/reveal.js",
    "mathjax/es5/tex-mml-chtml.js",
    "requirejs/require.js",
    "widgets-config.js",
    "html-manager/dist/embed-amd.js",
)

# Loaded on pages with widgets between require.js and the embed script (book/_config.yml).
WIDGETS_CONFIG_JS = """\
/* Written by tools/build_book.py: makes the ipywidgets embed script work offline.
   Loaded after require.js and before html-manager/dist/embed-amd.js. */
(function () {
  "use strict";
  // The embed bundle finds its Font Awesome fonts relative to the URL require.js gives its
  // AMD module, by default the page's own folder; point that module name at the bundle.
  var here = document.currentScript.src;
  window.require.config({
    paths: {"@jupyter-widgets/html-manager": new URL("html-manager", here).href}
  });
  // ipywidgets typesets widget text with the MathJax 2 call MathJax.Hub.Queue; the pages load
  // MathJax 3 (deferred, so it has run by DOMContentLoaded). Translate the one call used.
  document.addEventListener("DOMContentLoaded", function () {
    var mj = window.MathJax;
    if (!mj || mj.Hub || !mj.startup) return;
    mj.Hub = {
      Queue: function () {
        Array.prototype.forEach.call(arguments, function (job) {
          if (Array.isArray(job) && job[0] === "Typeset" && job[2]) {
            mj.startup.promise.then(function () { return mj.typesetPromise([job[2]]); });
          }
        });
      }
    };
  });
})();
"""


def sri(data: bytes) -> str:
    """Subresource-Integrity string of ``data``, as npm writes it: ``sha512-<base64>``."""
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def fetch(pkg: Package) -> bytes:
    """The package tarball, from the cache or the registry, verified against ``pkg.integrity``."""
    if pkg.tarball.exists():
        data = pkg.tarball.read_bytes()
        if sri(data) == pkg.integrity:
            return data
        print(f"   cached {pkg.tarball.name} fails its integrity check; downloading again")
    print(f"== downloading {pkg.name}@{pkg.version} from {pkg.tarball_url}")
    request = urllib.request.Request(pkg.tarball_url, headers={"User-Agent": "tools.build_book"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            data = response.read()
    except OSError as exc:  # URLError, timeouts, refused connections
        raise SystemExit(
            f"error: could not download {pkg.tarball_url}: {exc}\n"
            "The first website build needs the npm registry (set NPM_REGISTRY for a mirror); "
            f"later builds use the copy cached in {_rel(TARBALLS)}."
        ) from exc
    if sri(data) != pkg.integrity:
        raise SystemExit(
            f"error: {pkg.tarball_url} has integrity {sri(data)}, expected {pkg.integrity}"
        )
    TARBALLS.mkdir(parents=True, exist_ok=True)
    tmp = pkg.tarball.with_suffix(".part")
    tmp.write_bytes(data)
    tmp.replace(pkg.tarball)
    return data


def unpack(pkg: Package) -> None:
    """Unpack the kept files of ``pkg`` into ``_vendor/<dest>`` unless that version is there."""
    dest = pkg.root / pkg.dest
    stamp = ASSETS / f"{pkg.dest.replace('/', '__')}.unpacked"
    want = "\n".join((pkg.integrity, *pkg.keep))
    if dest.is_dir() and stamp.exists() and stamp.read_text() == want:
        return
    fetch(pkg)
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    patterns = [re.compile(_glob_to_regex(p)) for p in pkg.keep]
    count = 0
    with tarfile.open(pkg.tarball, "r:gz") as tar:
        for member in tar.getmembers():
            name = member.name.removeprefix("package/")
            if not member.isfile() or ".." in Path(name).parts or name.startswith("/"):
                continue
            if any(p.fullmatch(name) for p in patterns):
                target = dest / name
                target.parent.mkdir(parents=True, exist_ok=True)
                with tar.extractfile(member) as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out)
                count += 1
    stamp.write_text(want)
    print(f"   unpacked {count} files of {pkg.name}@{pkg.version} into {_rel(dest)}")


def _glob_to_regex(pattern: str) -> str:
    """``**/`` spans folders, ``*`` stays within one: ``es5/**/*`` is everything under es5/."""
    out = re.escape(pattern).replace(r"\*\*/", "(?:.*/)?").replace(r"\*", "[^/]*")
    return out


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def prepare_assets() -> None:
    """Make sure every pinned package is downloaded, verified and unpacked."""
    for pkg in PACKAGES:
        unpack(pkg)
    config_js = VENDOR / "widgets-config.js"
    if not config_js.exists() or config_js.read_text() != WIDGETS_CONFIG_JS:
        config_js.write_text(WIDGETS_CONFIG_JS)
    missing = [p for p in ENTRY_POINTS if not (VENDOR / p).is_file()]
    if missing:
        raise SystemExit(f"error: web assets missing after unpacking: {missing}")


def chapter_titles() -> dict[str, str]:
    """Every chapter's title, its notebook's first heading (the first markdown cell's, not the
    Colab set-up cell's comment): ``{'02_softmax': '2. Softmax', ...}``."""
    import json as _json

    titles = {}
    for nb in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        cells = _json.loads(nb.read_text(encoding="utf-8"))["cells"]
        first = next(c for c in cells if c["cell_type"] == "markdown")  # not the Colab cell
        heading = "".join(first["source"]).splitlines()[0]
        if not heading.startswith("# "):
            raise SystemExit(f"error: {nb.name} does not open with its title ('# N. Topic')")
        titles[nb.stem] = heading.removeprefix("# ").strip()
    return titles


def write_quiz_pages() -> list[Path]:
    """The website's quiz pages, one per chapter, from ``data/quizzes`` (course_lib.quiz),
    each titled after its chapter ("Quiz: 2. Softmax")."""
    from course_lib import quiz

    return quiz.write_pages(BOOK / "quizzes", chapter_titles())


def write_records_page(path: Path = BOOK / "records.md") -> Path:
    """The website's race records page: the course's recipes on each machine, from data/gpt."""
    from course_lib.gpt.records import records_page

    path.write_text(records_page(), encoding="utf-8")
    return path


def jupyter_book_command(strict: bool, extra: list[str]) -> list[str]:
    exe = Path(sys.executable).parent / "jupyter-book"
    cmd = [str(exe)] if exe.exists() else ["jupyter-book"]
    cmd += ["build", ".", "--config", "book/_config.yml", "--toc", "book/_toc.yml"]
    cmd += ["--path-output", "book", "--all"]
    if strict:
        cmd += ["-W", "--keep-going"]
    return cmd + extra


REMOTE = re.compile(
    r"""<(?:script|link)\b[^>]*?\b(?:src|href)\s*=\s*["']?(?:https?:)?//[^"'\s>]+""",
    re.IGNORECASE,
)


def remote_assets(html_dir: Path = HTML) -> dict[str, list[str]]:
    """``{page: [tags]}`` for every ``<script src>`` or ``<link href>`` that points off-site.

    Anchors (``<a href>``: launch buttons, citations' DOIs) are links, not page resources.
    """
    found = {}
    for page in sorted(html_dir.rglob("*.html")):
        if _rel_to(page, html_dir).startswith("_vendor/"):
            continue
        hits = REMOTE.findall(page.read_text(encoding="utf-8", errors="replace"))
        if hits:
            found[_rel_to(page, html_dir)] = hits
    return found


def _rel_to(path: Path, base: Path) -> str:
    return path.relative_to(base).as_posix()


# -- Sphinx extension (book/_config.yml: sphinx.local_extensions) ---------------------------


def tidy_scripts(app, pagename, templatename, context, doctree) -> None:
    """Fix two things in each page's list of scripts, in place.

    * Sphinx 7.4 lists an inline script twice when an extension adds it after the builder
      started (sphinx-thebe, sphinx-togglebutton); the second ``const THEBE_JS_URL`` is then a
      SyntaxError in the browser. Keep the first of identical scripts.
    * Sphinx files relative script paths under ``_static/``, so ``../_vendor/x.js`` in the
      configuration becomes ``_static/../_vendor/x.js``; write it as ``_vendor/x.js``.
    """
    scripts = context.get("script_files")
    if not isinstance(scripts, list):
        return
    seen, tidy = set(), []
    for js in scripts:
        if not hasattr(js, "attributes"):  # a plain path string
            js_name, priority, attributes = str(js), 500, {}
        else:
            js_name, priority, attributes = str(js.filename or ""), js.priority, js.attributes
        if js_name.startswith("_static/../"):
            js_name = js_name.removeprefix("_static/../")
            js = type(js)(js_name, priority=priority, **attributes)
        key = (js_name, priority, tuple(sorted(attributes.items())))
        if key not in seen:
            seen.add(key)
            tidy.append(js)
    scripts[:] = tidy


def setup(app):
    from tools.publish import configure_sphinx

    # the repository, issue and launch buttons and the footer derive from [tool.course] and the
    # version in pyproject.toml (tools/publish.py), so book/_config.yml names no URL
    app.connect("config-inited", configure_sphinx)
    app.connect("html-page-context", tidy_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--no-strict", dest="strict", action="store_false", help="do not turn warnings into errors"
    )
    parser.add_argument("--clean", action="store_true", help="delete book/_build before building")
    parser.add_argument(
        "--pdf",
        action="store_true",
        default=True,
        help="also print course.pdf, the whole course as one PDF (tools/pdf.py; the default)",
    )
    parser.add_argument(
        "--no-pdf",
        dest="pdf",
        action="store_false",
        help="skip course.pdf, the whole course as one PDF printed from the site (tools/pdf.py)",
    )
    parser.add_argument(
        "--assets-only",
        action="store_true",
        help="only download (once) and unpack the offline web assets; part of ./course's set-up",
    )
    args, extra = parser.parse_known_args(argv)

    prepare_assets()
    if args.assets_only:
        return 0
    if args.clean:
        shutil.rmtree(BOOK / "_build", ignore_errors=True)
    from tools import handouts, lecturers, slides

    began = time.perf_counter()
    slides.main(["--out", str(VENDOR.parent / "slides")])  # served as slides/<chapter>.slides.html
    handouts.main(["--out", str(VENDOR.parent / "worksheets")])  # linked from lecturers' pages
    write_quiz_pages()  # book/quizzes/*.md, from data/quizzes/*.yml
    lecturers.write_pages()  # book/lecturers/*.md and book/status.md, from the notebooks
    write_records_page()  # book/records.md, from data/gpt (course_lib.gpt.records)
    print(f"   decks, worksheets and generated pages in {time.perf_counter() - began:.0f} s")
    cmd = jupyter_book_command(args.strict, extra)
    print("== jupyter-book " + " ".join(cmd[1:]), flush=True)
    start = time.perf_counter()
    rc = subprocess.call(cmd, cwd=ROOT)
    seconds = time.perf_counter() - start
    if rc != 0:
        print(f"error: the website build failed (exit status {rc}) after {seconds:.0f} s")
        return rc or 1
    from tools import explorer_pages

    print("== explorers: each chapter's main widget, precomputed (tools/explorer_pages.py)")
    sys.stdout.flush()
    try:  # replaces each chapter's frozen explorer widget with one that responds, no kernel
        explorer_pages.print_total(explorer_pages.add_explorers(HTML, verbose=True))
    except explorer_pages.ExplorerPageError as err:
        print(f"error: {err}")
        return 1
    print(f"   explorers in {time.perf_counter() - start - seconds:.0f} s", flush=True)
    from tools import chapter_quizzes

    print("== quizzes: each chapter's quiz on its page, no kernel (tools/chapter_quizzes.py)")
    try:  # replaces the frozen quiz widget that ends each chapter with one that responds
        chapter_quizzes.add_quizzes(HTML)
    except chapter_quizzes.QuizPageError as err:
        print(f"error: {err}")
        return 1
    began = time.perf_counter()
    from tools import live_pages

    print("== live views: the course's models run in the page (tools/live_pages.py)", flush=True)
    try:  # "Type your own text": chapters 7 to 9 run the course's models on the reader's text
        live_pages.add_live_views(HTML, verbose=True)
    except live_pages.LivePageError as err:
        print(f"error: {err}")
        return 1
    print(f"   live views in {time.perf_counter() - began:.0f} s", flush=True)
    remote = remote_assets()
    for page, tags in remote.items():
        print(f"error: {page} loads from another host: {tags}")
    if remote and args.strict:
        return 1
    print(f"built {_rel(HTML / 'index.html')} in {seconds:.0f} s (offline, strict={args.strict})")
    if args.pdf:
        print_pdf()
    return 0


def print_pdf(html: Path = HTML) -> Path | None:
    """course.pdf from the built site (tools/pdf.py); where there is no browser to print it
    with, one line saying how to get one (the website stays built), and None."""
    from tools.pdf import PdfUnavailable, build_pdf

    try:
        out, pages, seconds = build_pdf(html)
    except PdfUnavailable as exc:
        print(f"note: the website is built, course.pdf is not: {exc}")
        return None
    print(f"built {_rel(out)}: {pages} pages in {seconds:.0f} s")
    return out


if __name__ == "__main__":
    sys.exit(main())
