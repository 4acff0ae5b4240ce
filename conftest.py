"""Repository-wide pytest configuration: what is collected, and how."""

import importlib.util
import os
from pathlib import Path

import matplotlib
import pytest
from hypothesis import settings

matplotlib.use("Agg")
# checkers run by tests, nbval and the browser tests are nobody's progress (course_lib.progress)
os.environ.setdefault("COURSE_PROGRESS", "off")

# Property tests draw the same examples on every run and machine (a failure is reproducible, and
# CI cannot go red on a draw nobody saw locally), with no per-example deadline (the machine is
# small and shared).
settings.register_profile("course", derandomize=True, deadline=None, print_blob=True)
settings.load_profile("course")

# notebook sources are jupytext files, not modules
collect_ignore_glob = ["notebooks/*.py", "book/*", ".venv/*"]

# Notebooks whose stored outputs depend on the CPU's kernels (training, low-precision rounding):
# their nbval items count as machine-sensitive. nbval checks every notebook on the pinned code
# path its outputs were written under (tools/code_paths.py); tests/test_portability.py runs
# these once more on the alternate path and compares with the stored outputs, so that a printed
# number on a rounding edge fails here, not on a learner's CPU. Value: seconds in nbval on a
# clean clone (the re-run starts the slowest first).
PORTABILITY_NOTEBOOKS = {
    "08_gpt.ipynb": 30,
    "08_gpt_practice.ipynb": 25,
    "10_feedback_distillation.ipynb": 41,
    "09_bert.ipynb": 10,
    "09_bert_training.ipynb": 80,
    "13_peft.ipynb": 36,
    "13_peft_prompts.ipynb": 30,
    "11_long_sequences.ipynb": 22,
    "05_transformer_block.ipynb": 6,
    "05_transformer_block_stacks.ipynb": 15,
    "04_attention.ipynb": 11,
    "06_positional_encodings.ipynb": 14,
    "12_number_formats.ipynb": 10,
    "12_number_formats_quantisation.ipynb": 10,
}


# -- two tiers: `pytest --quick` while working, `pytest` (all of it) before a merge and in CI ----

#: What the quick tier leaves out (the full run keeps all of it): tests with these marks (the
#: website build, the browser, JupyterLab, anything over ~20 s such as the re-run under another
#: CPU's kernels) and the notebooks' stored outputs (nbval; notebooks/*.ipynb is not collected).
QUICK_SKIPS_MARKS = ("book", "browser", "lab", "slow")


def pytest_addoption(parser):
    parser.addoption(
        "--quick",
        action="store_true",
        default=False,
        help="the quick tier: unit tests, doctests, conformance, exercise checkers and bad "
        "input; no notebooks, website, browser or tests marked slow (see conftest.py)",
    )
    parser.addoption(
        "--nbval-kernels",
        choices=("course", "pinned", "alternate", "native"),
        default="course",
        help="the CPU code path of nbval's notebook kernels (tools/code_paths.py): course (the "
        "default), every notebook on the pinned path its stored outputs were written under "
        "(one thread, MKL's COMPATIBLE branch, AVX2 kernels) except the machine-sensitive ones "
        "(PORTABILITY_NOTEBOOKS), which run on the alternate path and must print the same; "
        "pinned or alternate, every notebook on that path; native, whatever this machine and "
        "environment pick",
    )
    parser.addoption(
        "--nbval-colab",
        action="store_true",
        default=False,
        help="start each notebook's nbval kernel in a simulated Google Colab, as ./course test "
        "asks (tools/colab_sim.py): a fresh environment without the course, an empty data "
        "cache and working folder; the notebook's set-up cell installs the package from the "
        "checkout and fetches the chapter's data. Linux and macOS; needs the package registries",
    )


def pytest_ignore_collect(collection_path, config):
    if config.getoption("quick") and collection_path.suffix == ".ipynb":
        return True  # nbval's items: the full run only
    return None


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in PORTABILITY_NOTEBOOKS:
            item.add_marker(pytest.mark.portability)
        if _is_colab_setup_cell(item):
            # what it prints differs by design (nothing here; pip's and set-up's messages in the
            # simulated Colab of --nbval-colab): nbval runs it and compares nothing
            item.options["check"] = False
    if config.getoption("nbval_kernels") in ("course", "alternate"):
        # nbval runs the machine-sensitive notebooks on the alternate path already: no second
        # run of them (tests/test_portability.py's notebook chunks are for --nbval-kernels=pinned)
        again = [i for i in items if _reruns_a_notebook(i)]
        if again:
            config.hook.pytest_deselected(items=again)
            items[:] = [i for i in items if not _reruns_a_notebook(i)]
    if config.getoption("quick"):
        slow = [
            i
            for i in items
            if i.path.suffix == ".ipynb"  # a notebook named on the command line
            or any(i.get_closest_marker(m) for m in QUICK_SKIPS_MARKS)
        ]
        if slow:
            config.hook.pytest_deselected(items=slow)
            drop = set(slow)
            items[:] = [i for i in items if i not in drop]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A machine-sensitive notebook's cell that prints otherwise on the alternate path: say how
    to see which numbers sit near their rounding edge."""
    outcome = yield
    report = outcome.get_result()
    if (
        report.failed
        and item.path.suffix == ".ipynb"
        and kernel_path(item.config.getoption("nbval_kernels"), item.path.name) == "alternate"
    ):
        name = item.path.stem
        report.sections.append(
            (
                "code path",
                f"{item.path.name} ran on the alternate CPU code path (tools/code_paths.py); its "
                f"stored outputs were written on the pinned one. `python -m tools.portability "
                f"{name}` lists each printed number near its rounding edge (README, 'Portable').",
            )
        )


def _is_colab_setup_cell(item) -> bool:
    """nbval's item for a notebook's Colab set-up cell (tools/publish.py, tag ``colab-setup``)."""
    cell = getattr(item, "cell", None)
    return cell is not None and "colab-setup" in cell.get("metadata", {}).get("tags", [])


def _reruns_a_notebook(item) -> bool:
    """A test of tests/test_portability.py that re-runs a notebook under the portable kernels."""
    spec = getattr(item, "callspec", None)
    return (
        item.path.name == "test_portability.py"
        and spec is not None
        and spec.params.get("chunk") not in (None, "tests")
    )


#: The notebook whose nbval kernel starts next (nbval's kernel start is not told which).
_STARTING: dict[str, str | None] = {"notebook": None}


def kernel_path(option: str, notebook: str | None) -> str:
    """The code path of a notebook's nbval kernel under ``--nbval-kernels=option``: "course"
    runs the machine-sensitive notebooks on the alternate path (their stored outputs, written
    on the pinned path, must print the same there: that checks both paths in one run) and the
    others on the pinned one.

    >>> kernel_path("course", "08_gpt.ipynb"), kernel_path("course", "02_softmax.ipynb")
    ('alternate', 'pinned')
    >>> kernel_path("pinned", "08_gpt.ipynb")
    'pinned'
    """
    if option != "course":
        return option
    return "alternate" if notebook in PORTABILITY_NOTEBOOKS else "pinned"


def _remember_each_notebook() -> None:
    """Note which notebook nbval sets up, for :func:`notebook_kernels_on`'s kernel start."""
    import nbval.plugin

    setup = getattr(nbval.plugin.IPyNbFile.setup, "wrapped", nbval.plugin.IPyNbFile.setup)

    def setup_noting(self):
        _STARTING["notebook"] = Path(str(self.fspath)).name
        return setup(self)

    setup_noting.wrapped = setup
    nbval.plugin.IPyNbFile.setup = setup_noting


def notebook_kernels_on(path: str) -> None:
    """nbval's kernels start on a CPU code path of tools/code_paths.py (``path``, or "course":
    :func:`kernel_path`), with the environment ``./course notebooks`` executes them in (on the
    CPU, a fixed hash seed): only the notebooks' kernels, not this process or the other
    subprocesses of the tests. The path's variables are read once, as the libraries start,
    hence in the kernel's environment."""
    import nbval.kernel

    from tools import code_paths

    if path == "course":
        _remember_each_notebook()
    start = getattr(nbval.kernel.start_new_kernel, "wrapped", nbval.kernel.start_new_kernel)

    def start_on_path(*args, **kwargs):
        from tools.execute_notebooks import KERNEL_ENV  # jupytext and nbclient: when needed

        env = {**kwargs.get("env", os.environ), **KERNEL_ENV}
        kwargs["env"] = code_paths.apply(env, kernel_path(path, _STARTING["notebook"]))
        return start(*args, **kwargs)

    start_on_path.wrapped = start
    start_on_path.code_path = path
    nbval.kernel.start_new_kernel = start_on_path


def colab_notebook_kernels(config) -> None:
    """nbval's kernels start in fresh simulated-Colab runtimes (tools/colab_sim.py), made under
    a folder of this process (one per xdist worker, removed at the end)."""
    if os.name == "nt":
        raise pytest.UsageError("--nbval-colab: the simulated Colab links with symlinks (POSIX)")
    import shutil
    import tempfile
    from pathlib import Path

    from tools import colab_sim

    work = Path(tempfile.mkdtemp(prefix="colab-sim-"))
    config.add_cleanup(lambda: shutil.rmtree(work, ignore_errors=True))
    colab_sim.nbval_in_colab(work)


# -- the parallel run (pytest-xdist, --dist loadscope) --------------------------------------


def pytest_configure(config):
    """In a parallel run each worker uses its share of the cores, not all of them: n workers
    with n threads each on n cores spend their time waiting on one another (OpenMP threads
    spin). Tests that need more threads set them themselves; OMP_NUM_THREADS, if set, wins.
    The notebooks' kernels start on the code path ``--nbval-kernels`` names ("course" unless
    told otherwise: :func:`kernel_path`) and, with ``--nbval-colab``, in a simulated Colab (as ./course test asks)."""
    if config.getoption("nbval_colab", False):
        colab_notebook_kernels(config)
    path = config.getoption("nbval_kernels", "course")
    if path != "native" and importlib.util.find_spec("nbval") is not None:  # Jupyter may be absent
        notebook_kernels_on(path)
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers and "OMP_NUM_THREADS" not in os.environ:
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(workers)))


#: The browser tests, in two work units so that the two workers share them: "site" (the website
#: build, its pages, the decks it made) and "lab" (one JupyterLab server: the chapters in Lab and
#: RISE). Each unit starts its own Chromium; the website is built once per run (a lock).
SITE_MODULES = ("tests/test_book.py", "tests/test_lab_slides.py")
LAB_MODULES = ("tests/test_lab.py",)
LAB_TESTS = ("tests/test_lab_slides.py::test_rise_slideshow_in_jupyterlab",)
#: Modules whose tests are units of their own: each is minutes of one subprocess.
ONE_UNIT_PER_TEST = ("tests/test_portability.py",)
#: Units that take minutes, started first (longest first): xdist otherwise starts the units
#: with the most tests first, and a unit of several minutes started last keeps one worker busy
#: alone at the end. A prefix names every unit that starts with it.
START_FIRST = ("site", "lab", "tests/test_portability.py::")


def work_unit(nodeid: str) -> str | None:
    """The unit a test belongs to, where it is not its module (loadscope's default)."""
    module = nodeid.split("::")[0]
    if module in LAB_MODULES or nodeid.split("[")[0] in LAB_TESTS:
        return "lab"
    if module in SITE_MODULES:
        return "site"
    if module in ONE_UNIT_PER_TEST:
        return nodeid
    return None


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, absent under -p no:xdist
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class CourseScheduling(LoadScopeScheduling):
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid) or super()._split_scope(nodeid)

        def _assign_work_unit(self, node) -> None:
            if not self.ordered:  # the first assignment: the queue is complete
                self.ordered = True
                for prefix in reversed(START_FIRST):
                    for scope in [s for s in self.workqueue if s.startswith(prefix)][::-1]:
                        self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    return CourseScheduling(config, log)
