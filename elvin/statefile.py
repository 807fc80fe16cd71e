"""Reading the small JSON state files the apps keep (window places, people
the biff knew): a file that is unreadable, truncated, of another version or
full of garbage is ignored with a line in the log naming it, never a crash
at start-up, since the state is a nicety the app can rebuild.

JSON numbers are unbounded in Python (``10**400`` parses, and then
``float()`` or ``math.isfinite`` raise ``OverflowError``; ``NaN`` parses
too), so a number is taken only through ``number_in`` / ``int_in``, which
compare before converting.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

__all__ = ["int_in", "number_in", "read_json_state"]


def read_json_state(path: Path, version: int, log: logging.Logger,
                    what: str) -> dict[str, Any] | None:
    """The object in ``path`` if it is a JSON object whose ``version`` is
    ``version``; None (logged, naming ``what`` and the file) otherwise, and
    silently when there is no file yet."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:
        log.info("%s in %s ignored: %s", what, path, exc)
        return None
    if not isinstance(data, dict):
        log.info("%s in %s ignored: not a JSON object", what, path)
        return None
    if data.get("version") != version:
        log.info("%s in %s ignored: version %r, not %d", what, path,
                 data.get("version"), version)
        return None
    return data


def number_in(value: object, low: float, high: float) -> float | None:
    """``value`` as a float if it is a JSON number (not a boolean) from
    ``low`` to ``high``; None for anything else, NaN and huge ints included."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if not low <= value <= high:      # int against float compares exactly, never overflows
        return None
    return float(value)


def int_in(value: object, low: int, high: int) -> int | None:
    """``value`` if it is a JSON integer (not a boolean) from ``low`` to ``high``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return None
    return value
