"""Sphinx configuration of the Elvin suite's documentation (``make docs``).

Sphinx rather than MkDocs: autodoc imports the real modules, so the API
reference is what the code says (signatures, type hints, docstrings) and a
broken reference fails the build (``-W``); MyST lets the guides (which hold
what the README held before it became a front page) stay Markdown; and an
extension (``_ext/configref.py``) renders the configuration reference from
the tools' declarations at build time.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from elvin._version import __version__  # noqa: E402

project = "Elvin suite"
author = "The Elvin suite developers"
copyright = "2026, The Elvin suite developers"
version = release = __version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "myst_parser",
    "configref",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "screenshots/README*"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# No warning is suppressed: a link to a page or heading that does not exist
# (`[text](page.md#heading)`) fails the build. Source files are named in
# backquotes, not linked: they are not pages here.

# -- API reference ------------------------------------------------------------
autodoc_default_options = {
    "members": True,
    # enum members and dataclass fields are public names too, documented or not
    "undoc-members": True,
    "show-inheritance": True,
    "member-order": "bysource",
}
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = True
# The docstrings refer to names in prose with ``double backquotes`` and
# :class: roles; an unresolved one is not an error (nitpicky stays off).
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# -- HTML ---------------------------------------------------------------------
html_theme = "furo"
html_title = f"Elvin suite {release}"
html_static_path: list[str] = []
html_show_sourcelink = False
