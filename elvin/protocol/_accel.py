"""Which path the hot codec loops take: the optional compiled accelerator or pure Python.

The pure modules (``xdrprim``) are the source of truth and always complete; the
accelerator (``elvin_xdrfast``, built by ``make accel`` from
``elvin/protocol/_xdrfast.c``) only runs their happy path and hands anything
unusual back to them. It is used when it imports; ``ELVIN_PURE=1`` in the
environment forces the pure path (the tests run both ways), and a missing or
broken build simply means pure. ``describe()`` says which path is in use, for
the test run's header and ``elvind``'s logs.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["MODULE", "describe", "xdrfast"]

MODULE = "elvin_xdrfast"


def _load() -> tuple[ModuleType | None, str]:
    if os.environ.get("ELVIN_PURE", "") not in ("", "0"):
        return None, "pure Python (ELVIN_PURE is set)"
    try:
        module = importlib.import_module(MODULE)
    except ImportError as exc:
        missing = isinstance(exc, ModuleNotFoundError) and exc.name == MODULE
        return None, ("pure Python (accelerator not built: make accel)" if missing
                      else f"pure Python (accelerator {MODULE} does not load: {exc})")
    return module, f"compiled accelerator ({module.__file__})"


#: the compiled module, or None when the pure path is in use
xdrfast, _DESCRIPTION = _load()


def describe() -> str:
    """Which path the codec's hot loops take, in words."""
    return _DESCRIPTION
