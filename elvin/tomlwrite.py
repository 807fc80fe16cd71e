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
from collections.abc import Mapping, Sequence
from typing import TypeGuard

__all__ = ["dumps", "edit", "toml_string", "toml_value"]

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


def _is_table_array(value: object) -> TypeGuard[Sequence[Mapping[str, object]]]:
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
    deferred: list[tuple[str, Sequence[Mapping[str, object]]]] = []
    for key, value in table.items():
        if value is None:
            continue
        if _is_table_array(value):
            deferred.append((key, value))
        else:
            lines.append(f"{_key(key)} = {toml_value(value)}")
    for key, items in deferred:
        name = f"{prefix}.{_key(key)}" if prefix else _key(key)
        for item in items:
            lines.append("")
            lines.append(f"[[{name}]]")
            _table(item, name, lines)


def edit(text: str, values: Mapping[str, object], *,
         defaults: Mapping[str, object] | None = None,
         tables: Mapping[str, tuple[str, list[Mapping[str, object]]]] | None = None,
         aliases: Mapping[str, str] | None = None) -> str:
    """``text`` (a TOML document a person may have written) with ``values``
    written into it, keeping its comments, order and layout.

    A top-level key the file has is set to its new value (removed when the
    value is None); one it lacks is added only when the value differs from
    ``defaults``, so the file does not fill up with defaults. ``tables``
    maps an array-of-tables key (``groups``) to ``(match, rows)``: each row
    updates the existing table whose ``match`` field is the same (ignoring
    case), so comments inside it stay; keys a row lacks are removed from its
    table, rows without a table get a new one, tables without a row go, and
    the array follows the rows' order. ``aliases`` names another spelling a
    table may use for a key (``colour``: ``color``), which is then kept.
    Needs tomlkit (the ``gui`` extra): ``ValueError`` if ``text`` is not TOML.
    """
    import tomlkit
    from tomlkit.exceptions import ParseError

    try:
        document = tomlkit.parse(text)
    except ParseError as exc:
        raise ValueError(f"not valid TOML: {exc}") from None
    defaults = defaults or {}
    for key, value in values.items():
        if value is None:
            document.pop(key, None)
        elif key in document:
            if document[key] != value:
                document[key] = value
        elif key not in defaults or defaults[key] != value:
            _add_setting(document, key, value)
    for key, (match, rows) in (tables or {}).items():
        _edit_tables(document, key, match, rows, aliases or {})
    return tomlkit.dumps(document)


def _add_setting(document, key: str, value: object) -> None:
    """A new top-level key goes after the last one the file has (not after
    a comment that introduces the first table)."""
    from tomlkit.items import AoT, Table

    last = None
    for name, item in document.body:
        if name is not None and not isinstance(item, (Table, AoT)):
            last = name
    if last is None:
        document[key] = value
        return
    try:
        document._insert_after(last, key, value)   # tomlkit has no public insert
    except Exception:  # noqa: BLE001 - a layout nicety, not worth failing a save
        document[key] = value


def _edit_tables(document, key: str, match: str, rows: list[Mapping[str, object]],
                 aliases: Mapping[str, str]) -> None:
    import tomlkit
    from tomlkit.items import AoT, Array, InlineTable, Whitespace

    old = document.get(key)
    tables = list(old) if isinstance(old, list) else []
    existing: dict[str, object] = {}
    for table in tables:
        name = table.get(match) if isinstance(table, Mapping) else None
        if isinstance(name, str):
            existing.setdefault(name.casefold(), table)
    if not rows:
        document[key] = tomlkit.array()
        return
    # a file that spells the array inline (groups = [{name = "Chat"}]) keeps
    # that spelling: its entries are inline tables, which an array of
    # tables cannot hold
    inline = isinstance(old, Array) and not isinstance(old, AoT) and \
        any(isinstance(t, InlineTable) for t in tables)
    chosen = []
    edited: set[int] = set()
    for row in rows:
        name = row.get(match)
        table = existing.pop(name.casefold(), None) if isinstance(name, str) else None
        if table is None:
            table = tomlkit.inline_table() if inline else tomlkit.table()
        if _edit_table(table, row, aliases):
            edited.add(id(table))
        chosen.append(table)
    same = len(chosen) == len(tables) and \
        all(a is b for a, b in zip(chosen, tables, strict=True))
    if inline:
        if not same:
            _arrange_inline(old, chosen)
        for index, table in enumerate(chosen):
            if id(table) in edited:   # tomlkit spaces edited inline tables oddly
                old[index] = _respaced(table)
        return
    if same:
        return                      # the same tables in the same order: edited in place
    array = tomlkit.aot()
    for table in chosen:
        body = table.value.body
        while body and body[-1][0] is None and isinstance(body[-1][1], Whitespace):
            body.pop()              # the array puts its own blank line between tables
        array.append(table)
    if key in document:
        document[key] = array
    else:
        document.append(key, array)


def _arrange_inline(array, chosen: list) -> None:
    """Make the inline ``array`` hold ``chosen`` in that order, changing it
    in place so the entries that stay where they were keep their comments
    (an entry that moves loses its end-of-line comment: tomlkit offers no
    way to carry it)."""
    wanted = {id(table) for table in chosen}
    for index in reversed(range(len(array))):
        if id(array[index]) not in wanted:
            del array[index]
    for index, table in enumerate(chosen):
        if index < len(array) and array[index] is table:
            continue
        at = next((i for i in range(index + 1, len(array)) if array[i] is table), None)
        if at is not None:
            del array[at]
        array.insert(index, table)


def _respaced(table):
    """An edited inline table written afresh (``{name = "a", key = "k"}``):
    an inline table holds no comments, so nothing of the user's is lost."""
    import tomlkit

    fresh = tomlkit.inline_table()
    for field, value in table.items():
        fresh[field] = value
    return fresh


def _edit_table(table, row: Mapping[str, object], aliases: Mapping[str, str]) -> bool:
    """``table`` made to say what ``row`` says; whether anything changed."""
    changed = False
    spelt = {canonical: alias for canonical, alias in aliases.items() if alias in table}
    for field in list(table):
        canonical = next((c for c, a in spelt.items() if a == field), field)
        if canonical not in row:
            del table[field]
            changed = True
    for field, value in row.items():
        target = spelt.get(field, field)
        if target not in table or table[target] != value:
            table[target] = value
            changed = True
    return changed
