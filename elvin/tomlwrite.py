"""Writing the few TOML shapes the suite saves: the one TOML writer.

The standard library reads TOML (``tomllib``) but does not write it, and a
dependency for one writer is not worth it: the files the suite writes (the
console's workspaces, the tickertape's settings, ``elvin-domain``'s
federation fragments) hold only strings, numbers, booleans, lists of those,
small inline tables and arrays of tables, which this module writes in a form
``tomllib`` reads back exactly. ``dumps`` writes a whole document;
``toml_string`` and ``toml_value`` serve writers that lay out their own
lines (with comments).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["dumps", "toml_string", "toml_value"]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _key(name: str) -> str:
    return name if _BARE_KEY.fullmatch(name) else toml_string(name)


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string (control characters escaped)."""
    out = ['"']
    for ch in text:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def toml_value(value: object) -> str:
    """A scalar, list or inline table as TOML; ``TypeError`` for anything else."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return repr(value)      # Python spells nan, inf and -inf as TOML does
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, Mapping):
        inner = ", ".join(f"{_key(k)} = {toml_value(v)}" for k, v in value.items())
        return "{" + inner + "}" if inner else "{}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        items = [toml_value(v) for v in value]
        one_line = "[" + ", ".join(items) + "]"
        if len(one_line) <= 80 and not any(isinstance(v, Mapping) for v in value):
            return one_line
        return "[\n" + "".join(f"    {item},\n" for item in items) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def _is_table_array(value: object) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and \
        all(isinstance(v, Mapping) for v in value)


def dumps(document: Mapping[str, object]) -> str:
    """TOML text for ``document``: scalars first, then each list of
    mappings as an array of tables (``[[name]]``) whose own lists of
    mappings become nested arrays (``[[name.sub]]``)."""
    lines: list[str] = []
    _table(document, "", lines)
    return "\n".join(lines).strip() + "\n"


def _table(table: Mapping[str, object], prefix: str, lines: list[str]) -> None:
    deferred = []
    for key, value in table.items():
        if value is None:
            continue
        if _is_table_array(value):
            deferred.append((key, value))
        else:
            lines.append(f"{_key(key)} = {toml_value(value)}")
    for key, items in deferred:
        name = f"{prefix}.{_key(key)}" if prefix else _key(key)
        for item in items:  # type: ignore[union-attr]
            lines.append("")
            lines.append(f"[[{name}]]")
            _table(item, name, lines)
