"""Alt text of the course's figures: made in the kernel, stored in the notebooks, on the site.

* ``course_lib.plotting`` makes IPython's PNG of every matplotlib figure carry
  ``{"alt": ...}`` in its metadata (its titles, what is drawn, axes and ranges, and the chapter's
  sentence from ``plotting.describe``);
* every figure in every executed notebook carries such alt text, naming its title;
* ``book/_ext/alt_text.py`` puts that alt text on the image node, which becomes the ``<img alt>``.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest

from course_lib import plotting

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
TITLED = re.compile(r"^Figure “([^”]+)”")


# -- the kernel side --------------------------------------------------------------------------


def test_alt_text_of_a_line_plot_names_title_axes_series_and_ranges():
    fig, ax = plotting.new_axes("Loss during training", "step", "loss", logy=True)
    ax.plot([0, 10, 20], [4.0, 2.0, 1.0], label="train")
    ax.plot([0, 10, 20], [4.2, 2.5, 1.9], label="validation")
    ax.legend()
    alt = plotting.alt_text(fig)
    plt.close(fig)
    assert alt.startswith("Figure “Loss during training”.")
    assert "2 lines (“train”, “validation”)" in alt
    assert "x axis “step” from" in alt and "y axis “loss” from" in alt
    assert "(log scale)" in alt


def test_alt_text_of_a_heat_map_gives_its_size_and_value_range_and_skips_the_colour_bar():
    fig, ax = plt.subplots()
    plotting.heatmap(
        ax, np.arange(12.0).reshape(3, 4), title="Weights", xlabel="key", ylabel="query"
    )
    alt = plotting.alt_text(fig)
    plt.close(fig)
    assert alt.startswith("Figure “Weights”.")
    assert "a 3 by 4 heat map with values from 0 to 11" in alt
    assert "panels" not in alt  # the colour bar is not a panel
    assert "x axis “key”, y axis “query”." in alt  # no pixel ranges for a heat map


def test_alt_text_of_several_panels_bars_points_and_the_chapters_sentence():
    fig, (a, b) = plt.subplots(1, 2)
    fig.suptitle("Two views")
    a.bar(["x", "y", "z"], [1, 2, 3], label="counts")
    a.set_title("bars")
    b.scatter([1, 2, 3, 4], [4, 3, 2, 1])
    b.set_title("points")
    plotting.describe(fig, "The counts rise while the points fall.")
    alt = plotting.alt_text(fig)
    plt.close(fig)
    assert alt.startswith("Figure “Two views”. 2 panels.")
    assert "Panel “bars” shows 3 bars in 1 group (“counts”)" in alt
    assert "3 categories: x, y, z" in alt
    assert "Panel “points” shows 4 points" in alt
    assert alt.endswith("The counts rise while the points fall.")


def test_step_histograms_are_described():
    fig, ax = plotting.new_axes("Scores", "score", "count")
    for name in ("a", "b"):
        ax.hist([0.1, 0.2, 0.2, 0.7], bins=5, histtype="step", label=name)
    alt = plotting.alt_text(fig)
    plt.close(fig)
    assert "2 outlined areas (e.g. step histograms) (“a”, “b”)" in alt


def test_untitled_figures_say_so():
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4])
    alt = plotting.alt_text(fig)
    plt.close(fig)
    assert alt.startswith("An untitled figure.") and not TITLED.match(alt)


def test_bad_input_is_named():
    with pytest.raises(TypeError, match="fig"):
        plotting.alt_text("not a figure")
    fig, _ = plt.subplots()
    with pytest.raises(ValueError, match="sentence"):
        plotting.describe(fig, "  ")
    with pytest.raises(TypeError, match="fig"):
        plotting.describe(None, "x")
    plt.close(fig)


def test_ipython_png_output_carries_the_alt_text():
    """The hook on a real IPython shell with the inline backend's PNG printer (also retina's
    width/height metadata survives)."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.core.pylabtools import select_figure_formats

    shell = InteractiveShell.instance()
    try:
        for formats in ({"png"}, {"retina"}):
            select_figure_formats(shell, formats)  # what the inline backend does
            assert plotting.install_alt_text(shell)
            assert plotting.install_alt_text(shell)  # idempotent: not wrapped twice
            fig, ax = plotting.new_axes("Attention entropy", "head", "entropy (nats)")
            ax.plot([1, 2, 3], [0.5, 1.0, 0.7])
            data, md = shell.display_formatter.format(fig)
            plt.close(fig)
            assert data["image/png"]
            assert md["image/png"]["alt"] == plotting.alt_text(fig)
            assert md["image/png"]["alt"].startswith("Figure “Attention entropy”.")
            if formats == {"retina"}:
                assert {"width", "height"} <= set(md["image/png"])
        # a later %matplotlib inline registers a fresh printer; the pre-cell hook wraps it again
        select_figure_formats(shell, {"png"})
        shell.events.trigger("pre_run_cell", None)
        fig, _ = plotting.new_axes("Again", "x", "y")
        _, md = shell.display_formatter.format(fig)
        plt.close(fig)
        assert md["image/png"]["alt"].startswith("Figure “Again”.")
    finally:
        InteractiveShell.clear_instance()


# -- the executed notebooks -------------------------------------------------------------------


def figure_alts(nb_path: Path) -> list[tuple[int, str | None]]:
    """(cell index, alt or None) of every PNG output of a notebook."""
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    out = []
    for i, cell in enumerate(nb["cells"]):
        for output in cell.get("outputs", []):
            if "image/png" in output.get("data", {}):
                meta = output.get("metadata", {}).get("image/png", {})
                out.append((i, meta.get("alt") if isinstance(meta, dict) else None))
    return out


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_figure_in_the_notebook_has_alt_text_naming_its_title(nb_path: Path):
    """Passes once the chapter has been executed with the alt-text hook (tools.execute_notebooks)."""
    alts = figure_alts(nb_path)
    missing = [i for i, alt in alts if not alt]
    untitled = [i for i, alt in alts if alt and not TITLED.match(alt)]
    assert not missing, f"{nb_path.name}: figures without alt text in cells {missing}"
    assert not untitled, f"{nb_path.name}: figures without a title in cells {untitled}"


# -- the website's extension ------------------------------------------------------------------


def load_extension():
    spec = importlib.util.spec_from_file_location("alt_text", ROOT / "book/_ext/alt_text.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_extension_puts_the_output_metadata_alt_on_the_image_node():
    from docutils import nodes
    from myst_nb.core.render import MimeData

    ext = load_extension()

    def render_image(self, data):  # stands in for myst-nb's, which needs a whole build
        return [nodes.image(uri="_images/abc.png", **self.options)]

    class Renderer:
        options: dict = {}

    wrapped = ext._with_alt(render_image)
    meta = {"image/png": {"alt": "Figure “T”.\n  Panel   “T” shows 1 line.", "width": 400}}
    data = MimeData("image/png", "", output_metadata=meta)
    (node,) = wrapped(Renderer(), data)
    assert node["alt"] == "Figure “T”. Panel “T” shows 1 line."
    (node,) = wrapped(Renderer(), MimeData("image/png", ""))
    assert "alt" not in node  # nothing invented
    Renderer.options = {"alt": "from the cell's mystnb options"}
    (node,) = wrapped(Renderer(), data)
    assert node["alt"] == "from the cell's mystnb options"  # the cell's own alt wins
