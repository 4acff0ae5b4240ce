"""Start JupyterLab on 127.0.0.1 and print the address to open: ``./course lab``.

    python -m tools.lab                      # a free port from 8888 up, chapter 1 opened
    python -m tools.lab --port 9000          # that port, or a clear message if it is taken
    python -m tools.lab --no-browser 07_bpe  # open another chapter; print the URL only

The same :class:`LabServer` starts the JupyterLab that ``tests/test_lab.py`` drives in a real
browser (on a random free port, with its own settings and a temporary copy of the notebooks).
Extra arguments after ``--`` go to ``jupyter lab``.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
FIRST_PORT = 8888

#: JupyterLab settings for a reproducible session (the browser test). ``windowingMode: none``
#: keeps every cell in the page (the default draws only the cells on screen), and the news and
#: update checks would fetch from other hosts.
TEST_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/apputils-extension/sessionDialogs": {"skipKernelRestartDialog": True},
    # RISE's default theme ("simple") loads its fonts from fonts.googleapis.com; "white" has
    # its fonts in the package; no transition, so the screenshot shows one whole slide
    "jupyterlab-rise/plugin": {"theme": "white", "transition": "none"},
}


def port_is_free(port: int, host: str = HOST) -> bool:
    """True if nothing listens on ``host:port`` and it can be bound."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(start: int | None = None, host: str = HOST) -> int:
    """``start`` or the next free port after it; a random free port when ``start`` is None."""
    if start is None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            return s.getsockname()[1]
    for port in range(start, start + 100):
        if port_is_free(port, host):
            return port
    raise RuntimeError(f"no free port in {start}..{start + 99} on {host}")


def write_settings(folder: Path, settings: dict[str, dict]) -> Path:
    """Write JupyterLab user settings (``plugin/file: {key: value}``) under ``folder``."""
    for name, values in settings.items():
        path = folder / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    return folder


class LabServer:
    """A ``jupyter lab`` process on ``127.0.0.1:port`` with a token, stopped on exit.

    ``root`` is the folder it serves; ``state`` (optional) a folder for its settings, workspaces
    and runtime files, so that a test neither reads nor changes the user's own.
    """

    def __init__(
        self,
        root: Path,
        port: int | None = None,
        *,
        state: Path | None = None,
        settings: dict[str, dict] | None = None,
        browser: bool = False,
        extra: list[str] | None = None,
        log: Path | None = None,
        code_path: str | None = None,
    ) -> None:
        self.root = Path(root)
        self.port = free_port() if port is None else port
        self.token = secrets.token_hex(24)
        self.state, self.settings, self.browser = state, settings, browser
        self.extra, self.log = list(extra or []), log
        self.code_path = code_path  # the kernels' CPU code path (tools/code_paths.py); None: native
        self.proc: subprocess.Popen | None = None

    @property
    def base(self) -> str:
        return f"http://{HOST}:{self.port}"

    def url(self, path: str = "", *, reset: bool = False) -> str:
        """The address of ``path`` (relative to the root) in JupyterLab, token included.

        ``reset`` starts from an empty workspace instead of reopening the last one's tabs.
        """
        where = f"/lab/tree/{path}" if path else "/lab"
        return f"{self.base}{where}?{'reset&' if reset else ''}token={self.token}"

    def api(self, method: str, path: str) -> object:
        """Call the server's REST API (``/api/...``); the decoded JSON answer, or None."""
        request = urllib.request.Request(
            f"{self.base}/api/{path}",
            method=method,
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            body = response.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> int:
        """Stop every running kernel (their sessions too); return how many there were."""
        sessions = self.api("GET", "sessions") or []
        for session in sessions:
            self.api("DELETE", f"sessions/{session['id']}")
        kernels = self.api("GET", "kernels") or []
        for kernel in kernels:
            self.api("DELETE", f"kernels/{kernel['id']}")
        return len(sessions) + len(kernels)

    def command(self) -> list[str]:
        cmd = [
            sys.executable,
            "-m",
            "jupyterlab",
            f"--ServerApp.ip={HOST}",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",  # the port asked for, or fail
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            "--LabApp.news_url=",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ]
        if not self.browser:
            cmd.append("--no-browser")
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")
        if self.state is not None:
            cmd += [
                f"--LabApp.user_settings_dir={self.state / 'settings'}",
                f"--LabApp.workspaces_dir={self.state / 'workspaces'}",
            ]
        return cmd + self.extra

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.code_path is not None:  # the kernels inherit it
            from tools import code_paths

            env = code_paths.apply(env, self.code_path)
        if self.state is not None:  # the user's Jupyter config, data and runtime stay untouched
            for key, sub in (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_RUNTIME_DIR", "runtime")):
                (self.state / sub).mkdir(parents=True, exist_ok=True)
                env[key] = str(self.state / sub)
            if self.settings:
                write_settings(self.state / "settings", self.settings)
        return env

    def start(self, timeout: float = 120) -> LabServer:
        if not port_is_free(self.port):
            raise PortTaken(self.port)
        out = open(self.log, "w") if self.log else None  # noqa: SIM115 (closed by the process)
        self.proc = subprocess.Popen(
            self.command(), env=self.env(), stdout=out, stderr=subprocess.STDOUT if out else None
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"JupyterLab did not start (jupyter lab exited with status "
                    f"{self.proc.returncode})"
                )
            try:
                with urllib.request.urlopen(
                    f"{self.base}/api/status?token={self.token}", timeout=2
                ):
                    return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"jupyter lab did not answer on {self.base} within {timeout:.0f} s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # a clean shutdown stops its kernels too
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()

    def __enter__(self) -> LabServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class PortTaken(RuntimeError):
    def __init__(self, port: int) -> None:
        super().__init__(
            f"port {port} on {HOST} is already in use (another JupyterLab?). Stop that program, "
            f"or choose another port: ./course lab --port {port + 1}"
        )
        self.port = port


def chapter_path(name: str) -> str:
    """``07_bpe`` (or a path to it, or a chapter number such as ``07`` or ``7``) as the notebook
    path JupyterLab opens; a number opens the chapter's first notebook (part 1 of a split one).

    >>> chapter_path("5")
    'notebooks/05_transformer_block.ipynb'
    """
    stem = Path(name).name.removesuffix(".py").removesuffix(".ipynb")
    if stem.isdigit():
        parts = sorted((ROOT / "notebooks").glob(f"{int(stem):02d}_*.ipynb"))
        stem = parts[0].stem if parts else stem
    path = ROOT / "notebooks" / f"{stem}.ipynb"
    if not path.is_file():
        known = ", ".join(p.stem for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")))
        raise SystemExit(f"error: no chapter {stem!r}; the chapters are: {known}")
    return path.relative_to(ROOT).as_posix()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapter", nargs="?", default="01_matmul", help="chapter to open")
    parser.add_argument(
        "--port", type=int, help=f"port (default: the first free from {FIRST_PORT})"
    )
    parser.add_argument("--no-browser", action="store_true", help="print the URL, open nothing")
    parser.add_argument("extra", nargs=argparse.REMAINDER, help="after --: jupyter lab options")
    args = parser.parse_args(argv)
    extra = [a for a in args.extra if a != "--"]
    path = chapter_path(args.chapter)
    port = args.port if args.port is not None else free_port(FIRST_PORT)
    server = LabServer(ROOT, port, browser=False, extra=extra)
    try:
        server.start()
    except PortTaken as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except RuntimeError as err:  # jupyter lab itself did not start: its messages are above
        print(f"error: {err}; ./course doctor checks the environment", file=sys.stderr)
        return 1
    url = server.url(path)
    print(f"\nJupyterLab is running. Open this address in your browser:\n\n    {url}\n")
    print("Stop it with Ctrl+C.", flush=True)
    if not args.no_browser:
        import webbrowser

        webbrowser.open(url)
    signal.signal(signal.SIGTERM, lambda *_: server.stop())  # stop Lab with this process
    try:
        return server.proc.wait()
    except KeyboardInterrupt:
        server.stop()
        return 0


if __name__ == "__main__":
    sys.exit(main())
