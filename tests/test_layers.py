"""course_lib's packages depend on one another one way only: no import runs back up.

A chapter's folder may use the shared modules at the root and the folders of earlier chapters;
``course_lib.models`` re-exports chapter 5's modules for the chapters after it. If two packages
import each other (directly or round a longer loop), one of them holds code that belongs in the
other, as ``course_lib.block`` once imported ``course_lib.models``, which imported it back.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "course_lib"


def package_of(name: str) -> str | None:
    """``course_lib.block.module`` -> ``block``; None outside course_lib or for the root."""
    parts = name.split(".")
    if parts[0] != "course_lib" or len(parts) < 2:
        return None
    top = parts[1]
    return top if (PACKAGE / top).is_dir() or (PACKAGE / f"{top}.py").is_file() else None


def import_graph() -> dict[str, set[str]]:
    """Which top-level package or module of course_lib imports which (function-level imports
    count too: they run all the same)."""
    edges: dict[str, set[str]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        src = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            edges[src] |= {p for p in map(package_of, names) if p and p != src}
    return edges


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_the_packages_import_one_another_without_a_cycle():
    edges = import_graph()
    assert edges["models"] == {"block"}, "course_lib.models re-exports chapter 5's modules only"
    found = cycle(edges)
    assert found is None, f"an import runs back up the layers: {' -> '.join(found)}"


def test_the_cycle_finder_finds_a_cycle():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None
