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

from sphinx.util.docstrings import prepare_docstring  # noqa: E402

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
# Types in the signature, a parameter a line once it is long: a "Parameters"
# list of names and types alone (what "description" gives for parameters the
# docstring does not describe) said nothing the signature did not.
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
python_maximum_signature_line_length = 88
autodoc_preserve_defaults = True
# The docstrings refer to names in prose with ``double backquotes`` and
# :class: roles; an unresolved one is not an error (nitpicky stays off).
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# -- HTML ---------------------------------------------------------------------
html_theme = "furo"
html_title = f"Elvin suite {release}"
html_static_path = ["_static"]
# tables: a key or a flag in code is not broken at its hyphens
html_css_files = ["elvin.css"]
html_show_sourcelink = False
# No typographic quotes or dashes: the pages quote what the tools print and
# take ("... and 994 more", `only clients asking for --discovery-scope` in a
# parser's help), which must read as typed; docutils turned "--" into an en
# dash and the opening quote of ("... into a closing one.
smartquotes = False


def _drop_object_base(app, name, obj, options, bases: list) -> None:
    """"Bases: object" under every plain class says nothing; the bases that
    matter (an error's ``NackError``, an enum's ``IntEnum``) stay."""
    bases[:] = [base for base in bases if base is not object]


def _drop_type_docstring(app, what, name, obj, options, lines: list) -> None:
    """A constant has no docstring of its own, so autodoc shows its type's:
    ``str``'s "Create a new string object..." under ``DEFAULT_URL``, "Represent
    a PEP 604 union type" under ``QuenchEvent``. Only the text the page (or a
    ``#:`` comment) gives it is kept."""
    if what not in ("data", "attribute"):
        return
    own = type(obj).__doc__
    if own and [ln.rstrip() for ln in lines if ln.strip()] == \
            [ln.rstrip() for ln in prepare_docstring(own) if ln.strip()]:
        lines.clear()


def setup(app):
    app.connect("autodoc-process-bases", _drop_object_base)
    app.connect("autodoc-process-docstring", _drop_type_docstring)
