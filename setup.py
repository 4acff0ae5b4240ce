"""Packaging detail that pyproject.toml cannot express: the repository's ``data/`` folder ships
inside the package as ``course_lib._data``, so that ``course_lib.paths`` finds the data both in an
editable install (the folder itself) and in ``pip install`` of the repository (a copy)."""

from pathlib import Path

from setuptools import find_packages, setup

DATA = ["course_lib._data"] + sorted(
    f"course_lib._data.{p.name}"
    for p in Path(__file__).parent.joinpath("data").iterdir()
    if p.is_dir()
)

setup(
    packages=[*find_packages(include=["course_lib*"]), *DATA],
    package_dir={"course_lib._data": "data"},
    package_data={"course_lib._data": ["**/*"]},
)
