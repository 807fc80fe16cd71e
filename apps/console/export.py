"""Received notifications as files: ec text, JSON lines or CSV.

* **ec text** is what ``ec`` prints (a ``$time`` line, ``Name: value``
  lines, ``---``), so ``ep`` sends an export back unchanged and the types
  survive exactly (``1L`` stays int64, opaque stays bytes).
* **JSON lines**: one object per notification, ``{"time", "secure",
  "attributes", "types"}``. Attribute values are plain JSON where JSON can
  hold them (numbers, strings); opaque values are hex strings and
  non-finite reals are the strings ``"NaN"``/``"Infinity"``; ``types`` names
  each attribute's Elvin type so :func:`read_json_lines` restores them.
* **CSV** for spreadsheets: ``time``, ``secure``, then one column per
  attribute name (in the order first seen); cells hold the ec form of the
  value (``"text"``, ``42``, ``42L``, ``[de ad]``) so the type is kept, and
  are empty where the notification lacks the attribute.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from elvin_apps.console.received import Received
from elvin_apps.console.typed import type_name

from elvin.text import format_notification, format_value
from elvin.values import Int64, Value

__all__ = ["FORMATS", "ExportError", "export", "format_for_path", "to_ec_text",
           "to_json_lines", "to_csv", "read_json_lines", "iso_time"]

#: format name -> (file filter for dialogs, default suffix)
FORMATS = {
    "ec": ("ec text (*.ec *.txt)", ".ec"),
    "jsonl": ("JSON lines (*.jsonl *.ndjson)", ".jsonl"),
    "csv": ("CSV (*.csv)", ".csv"),
}


class ExportError(ValueError):
    """An export that cannot be written, or JSON lines that do not read back."""


def iso_time(when: float) -> str:
    """``2008-07-10T11:51:08.729+0930``: the ``$time`` form of ``ec``."""
    moment = datetime.fromtimestamp(when).astimezone()
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}" + \
        moment.strftime("%z")


def to_ec_text(rows: Iterable[Received]) -> str:
    out = []
    for row in rows:
        out.append(f"$time {iso_time(row.time)}\n{format_notification(row.attributes)}\n---\n")
    return "".join(out)


def _json_value(value: Value) -> object:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, float) and not math.isfinite(value):
        return format_value(value)      # JSON has no NaN or Infinity: ec's words
    if isinstance(value, int):
        return int(value)
    return value


def to_json_lines(rows: Iterable[Received]) -> str:
    lines = []
    for row in rows:
        record = {
            "time": iso_time(row.time),
            "secure": row.secure,
            "attributes": {name: _json_value(v) for name, v in row.attributes.items()},
            "types": {name: type_name(v) for name, v in row.attributes.items()},
        }
        lines.append(json.dumps(record, ensure_ascii=False, allow_nan=False))
    return "".join(line + "\n" for line in lines)


def to_csv(rows: Iterable[Received]) -> str:
    rows = list(rows)
    names: dict[str, None] = {}
    for row in rows:
        for name in row.attributes:
            names.setdefault(name, None)
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["time", "secure", *names])
    for row in rows:
        attrs = row.attributes
        writer.writerow([iso_time(row.time), "yes" if row.secure else "no",
                         *(format_value(attrs[n]) if n in attrs else "" for n in names)])
    return buffer.getvalue()


def format_for_path(path: str | Path, default: str = "ec") -> str:
    """The format a file name asks for (by suffix), else ``default``."""
    suffix = Path(path).suffix.lower()
    for name, (_filter, ext) in FORMATS.items():
        if suffix == ext or (name == "jsonl" and suffix in (".ndjson", ".json")) or \
                (name == "ec" and suffix in (".txt", ".ep")):
            return name
    return default


def export(rows: Iterable[Received], path: str | Path, fmt: str | None = None) -> int:
    """Write ``rows`` to ``path`` in ``fmt`` (default: by suffix); returns
    the number of notifications written."""
    rows = list(rows)
    fmt = fmt or format_for_path(path)
    writers = {"ec": to_ec_text, "jsonl": to_json_lines, "csv": to_csv}
    if fmt not in writers:
        raise ExportError(f"unknown export format {fmt!r} (ec, jsonl or csv)")
    text = writers[fmt](rows)
    try:
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    except OSError as exc:
        raise ExportError(f"cannot write {path}: {exc.strerror or exc}") from None
    return len(rows)


def _from_json(name: str, kind: str, value: object, line: int) -> Value:
    where = f"line {line}, attribute {name!r}"
    if kind == "opaque" and isinstance(value, str):
        try:
            return bytes.fromhex(value)
        except ValueError:
            raise ExportError(f"{where}: opaque value is not hex") from None
    if kind == "real64":
        if value in ("NaN", "Infinity", "-Infinity"):
            return float(str(value).replace("Infinity", "inf"))
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    if kind in ("int32", "int64") and isinstance(value, int) and not isinstance(value, bool):
        return Int64(value) if kind == "int64" else value
    if kind == "string" and isinstance(value, str):
        return value
    raise ExportError(f"{where}: {value!r} is not a {kind}")


def read_json_lines(text: str) -> list[dict[str, Value]]:
    """The notifications of a JSON lines export, with their Elvin types."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            attributes, types = record["attributes"], record.get("types", {})
        except (ValueError, KeyError, TypeError) as exc:
            raise ExportError(f"line {number}: not an exported notification ({exc})") from None
        out.append({name: _from_json(name, types.get(name, _guess(value)), value, number)
                    for name, value in attributes.items()})
    return out


def _guess(value: object) -> str:
    if isinstance(value, float):
        return "real64"
    if isinstance(value, int):
        return "int32" if -2**31 <= value < 2**31 else "int64"
    return "string"
