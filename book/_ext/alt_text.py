"""Sphinx extension: notebook figures keep their alt text, and the site's accessibility CSS.

myst-nb 1.x takes an image's ``alt`` only from cell-level configuration (``mystnb: image:
alt:``) and, from an output's metadata, only ``width`` and ``height``. The course's figures
carry their alt text in the output metadata, ``{"image/png": {"alt": "..."}}`` (written in the
kernel by ``course_lib.plotting``), so this extension wraps myst-nb's image rendering to copy it
onto the image node, which Sphinx writes as the ``<img alt="...">``. A cell's own
``mystnb: image: alt:`` still wins. Images without any alt text get an empty one only if the
output says it is decorative (``"alt": ""``); otherwise they are left for the audit to report.

It also adds ``static/course-a11y.css`` to every page (colours that keep contrast in the light
and the dark theme; a light background behind figures in the dark theme) and
``static/course-a11y.js`` (names for the widgets' slider handles).

Registered in ``book/_config.yml`` under ``sphinx: local_extensions``.
"""

from __future__ import annotations

import functools
from pathlib import Path

from myst_nb.core.render import MimeData, NbElementRenderer

STATIC = Path(__file__).resolve().parent / "static"
CSS = "course-a11y.css"
JS = "course-a11y.js"


def output_alt(data: MimeData) -> str | None:
    """The alt text an output's metadata gives its image, or None."""
    meta = data.output_metadata.get(data.mime_type, {})
    alt = meta.get("alt") if isinstance(meta, dict) else None
    return alt if isinstance(alt, str) else None


def _with_alt(render_image):
    @functools.wraps(render_image)
    def render(self: NbElementRenderer, data: MimeData):
        nodes = render_image(self, data)
        alt = output_alt(data)
        if alt is not None:
            for node in nodes:
                if node.tagname == "image" and not node.get("alt"):
                    node["alt"] = " ".join(alt.split())
        return nodes

    render._course_alt = True
    return render


def patch_renderer() -> None:
    """Wrap ``NbElementRenderer.render_image`` once (the inline variant calls it)."""
    if not getattr(NbElementRenderer.render_image, "_course_alt", False):
        NbElementRenderer.render_image = _with_alt(NbElementRenderer.render_image)


def add_static(app) -> None:
    app.config.html_static_path.append(str(STATIC))


def setup(app):
    patch_renderer()
    app.connect("builder-inited", add_static)
    app.add_css_file(CSS, priority=900)
    app.add_js_file(JS, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
