"""What the docs site's configuration does to the API pages (issue 47, point 5:
the pages as a reader sees them): a constant shows its own text, never its
type's docstring, and a plain class no "Bases: object"."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("sphinx")
from sphinx.util.docstrings import prepare_docstring

CONF = Path(__file__).resolve().parents[2] / "docs" / "conf.py"


@pytest.fixture(scope="module")
def conf():
    spec = importlib.util.spec_from_file_location("elvin_docs_conf", CONF)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_constant_loses_its_types_docstring_and_keeps_its_own(conf):
    for value in ("elvin://127.0.0.1:2917", int | str):
        lines = prepare_docstring(type(value).__doc__)
        conf._drop_type_docstring(None, "data", "X", value, {}, lines)
        assert lines == []
    own = ["``elvin://127.0.0.1:2917``: the router used when none is named.", ""]
    lines = list(own)
    conf._drop_type_docstring(None, "data", "DEFAULT_URL", "elvin://127.0.0.1:2917", {}, lines)
    assert lines == own
    # a class's docstring is its own, even where it says what its base says
    lines = prepare_docstring(str.__doc__)
    conf._drop_type_docstring(None, "class", "S", str, {}, lines)
    assert lines


def test_object_is_no_base_worth_naming(conf):
    bases = [object]
    conf._drop_object_base(None, "X", object(), {}, bases)
    assert bases == []
    bases = [ValueError, object]
    conf._drop_object_base(None, "E", object(), {}, bases)
    assert bases == [ValueError]


def test_quoted_output_and_flags_read_as_typed(conf):
    # --discovery-scope in a parser's help stays a flag, not an en dash, and
    # ("... and 994 more ...") keeps its quotes as the log writes them
    assert conf.smartquotes is False
