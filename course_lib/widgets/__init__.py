"""Thin ipywidgets front-ends. The computation each widget shows is a pure, tested function."""
