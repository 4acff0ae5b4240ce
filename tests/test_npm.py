"""course_lib.npm: pinned tarballs are fetched once, checked by sha512 and written atomically."""

from __future__ import annotations

import hashlib

import pytest

from course_lib.npm import fetch_tarball, missing, sri, tarball_url


def _registry(tmp_path, monkeypatch, data: bytes) -> dict[str, str]:
    folder = tmp_path / "registry" / "@scope" / "pkg" / "-"
    folder.mkdir(parents=True)
    (folder / "pkg-1.0.0.tgz").write_bytes(data)
    monkeypatch.setenv("NPM_REGISTRY", (tmp_path / "registry").as_uri())
    return {"name": "@scope/pkg", "version": "1.0.0", "integrity": sri(data)}


def test_sri_is_base64_sha512():
    import base64

    data = b"course"
    assert sri(data) == "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
    assert tarball_url({"name": "plain", "version": "2.1"}, "https://r/") == (
        "https://r/plain/-/plain-2.1.tgz"
    )


def test_fetch_writes_once_and_refuses_a_changed_tarball(tmp_path, monkeypatch, capsys):
    package = _registry(tmp_path, monkeypatch, b"tarball bytes")
    dest = tmp_path / "cache" / "pkg.tgz"
    assert fetch_tarball(package, dest, "a test package") == dest
    assert dest.read_bytes() == b"tarball bytes" and "a test package" in capsys.readouterr().out
    assert not list(dest.parent.glob("*.part"))
    dest.write_bytes(b"kept")  # present: not fetched again
    assert fetch_tarball(package, dest, "again").read_bytes() == b"kept"
    bad = {**package, "integrity": sri(b"something else")}
    with pytest.raises(ValueError, match="has integrity sha512-.*expected"):
        fetch_tarball(bad, tmp_path / "other.tgz", "a tampered package")
    assert not (tmp_path / "other.tgz").exists()


def test_fetch_can_keep_only_some_files_of_the_tarball(tmp_path, monkeypatch):
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in {
            "package/a.json": b"{}",
            "package/b.txt": b"b",
            "package/c": b"c",
        }.items():
            info = tarfile.TarInfo(name)
            info.size = len(text)
            tar.addfile(info, io.BytesIO(text))
    package = _registry(tmp_path, monkeypatch, buf.getvalue())
    folder = tmp_path / "cache" / "pkg"
    assert fetch_tarball(package, folder, "two files", members=["a.json", "b.txt"]) == folder
    assert sorted(p.name for p in folder.iterdir()) == ["a.json", "b.txt"]
    assert (folder / "b.txt").read_bytes() == b"b"
    (folder / "b.txt").write_bytes(b"kept")  # present: not fetched again
    assert fetch_tarball(package, folder, "again", members=["a.json", "b.txt"])
    assert (folder / "b.txt").read_bytes() == b"kept"
    with pytest.raises(KeyError):  # a file the tarball does not hold
        fetch_tarball(package, tmp_path / "other", "a missing file", members=["nope"])
    assert not (tmp_path / "other").exists()


def test_missing_data_names_what_where_and_how_to_fetch_it():
    err = missing("/c/x.tgz", "the X data", "course_lib.x.datasets")
    assert isinstance(err, FileNotFoundError)
    assert "the X data is not in /c/x.tgz" in str(err)
    assert "python -m course_lib.x.datasets" in str(err)
