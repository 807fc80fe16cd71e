"""Typed attribute values as the user types them, and back.

The producer pane edits each attribute as (name, type, text): the type is
chosen explicitly so that ``42`` can be sent as int32, int64 or real64 and a
string never needs quotes. Parsing is strict and the errors say what is
wrong in words a user can act on ("'4x' is not a whole number"), because the
whole point of the console is to send exactly the notification the developer
means.
"""

from __future__ import annotations

import math

from elvin.text import format_value
from elvin.values import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, ElvinType, Int64, Value

__all__ = ["TYPES", "TypedValueError", "parse_typed", "type_name", "value_text",
           "check_attribute_name"]

#: The type names shown in the editor, in the order of the combo box.
TYPES = ("string", "int32", "int64", "real64", "opaque")

_NAMES = {ElvinType.INT32: "int32", ElvinType.INT64: "int64", ElvinType.REAL64: "real64",
          ElvinType.STRING: "string", ElvinType.OPAQUE: "opaque"}


class TypedValueError(ValueError):
    """A value that does not fit its type; ``str()`` is the user message."""


class TypeValueMissing(TypedValueError):
    """The value field is empty."""

    def __init__(self, kind: str) -> None:
        super().__init__(f"an {kind} needs a value" if kind[0] in "io" else
                         f"a {kind} needs a value")


def type_name(value: Value) -> str:
    """The Elvin type name of a decoded value (``Int64`` is int64 even when small)."""
    if isinstance(value, Int64):
        return "int64"
    if isinstance(value, bool):
        raise TypeError("Elvin has no boolean type")
    if isinstance(value, int):
        return "int32" if INT32_MIN <= value <= INT32_MAX else "int64"
    if isinstance(value, float):
        return "real64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (bytes, bytearray)):
        return "opaque"
    raise TypeError(f"not an Elvin value: {type(value).__name__}")


def _integer(text: str, kind: str, low: int, high: int) -> int:
    raw = text.strip().replace("_", "")
    if kind == "int64" and raw[-1:] in ("l", "L"):
        raw = raw[:-1]
    if not raw:
        raise TypeValueMissing(kind)
    try:
        body = raw.lstrip("+-")
        number = int(raw, 16) if body[:2].lower() == "0x" else int(raw, 10)
    except ValueError:
        raise TypedValueError(f"{text.strip()!r} is not a whole number (write e.g. 42, -7 "
                              f"or 0x2a)") from None
    if not low <= number <= high:
        hint = " (choose int64)" if kind == "int32" and INT64_MIN <= number <= INT64_MAX \
            else ""
        raise TypedValueError(f"{number} is outside the {kind} range {low} .. {high}{hint}")
    return number



def _real(text: str) -> float:
    raw = text.strip().replace("_", "")
    if not raw:
        raise TypeValueMissing("real64")
    lowered = raw.lower().lstrip("+-")
    if lowered in ("nan", "inf", "infinity"):
        value = float(raw.lower().replace("infinity", "inf"))
        return value
    try:
        value = float(raw)
    except ValueError:
        raise TypedValueError(f"{text.strip()!r} is not a number (write e.g. 3.14, -1e-3, "
                              f"NaN or Infinity)") from None
    if math.isinf(value):
        raise TypedValueError(f"{text.strip()!r} is too large for a real64 (write Infinity "
                              f"if you mean it)")
    return value


def _opaque(text: str) -> bytes:
    raw = text.strip()
    if raw.startswith("[") and raw.endswith("]"):
        raw = raw[1:-1]
    digits = "".join(raw.split())
    if digits.lower().startswith("0x"):
        digits = digits[2:]
    if len(digits) % 2:
        raise TypedValueError(f"opaque values are hex bytes: {len(digits)} hex digits is an "
                              f"odd count")
    try:
        return bytes.fromhex(digits)
    except ValueError:
        bad = next((c for c in digits if c not in "0123456789abcdefABCDEF"), "?")
        raise TypedValueError(f"opaque values are hex bytes (e.g. de ad be ef): {bad!r} "
                              f"is not a hex digit") from None


def parse_typed(kind: str, text: str) -> Value:
    """The value of ``text`` read as Elvin type ``kind`` (one of :data:`TYPES`).

    Strings are taken as typed (no quotes, no escapes; NUL refused). Integers
    accept decimal or ``0x`` hex and ``_`` separators; int64 also accepts a
    trailing ``L`` (as ec prints it). Reals accept ``NaN``/``Infinity``.
    Opaque values are hex bytes, spaces and ``[ ]`` optional.
    """
    if kind == "string":
        if "\x00" in text:
            raise TypedValueError("strings may not contain the NUL character")
        return text
    if kind == "int32":
        return _integer(text, kind, INT32_MIN, INT32_MAX)
    if kind == "int64":
        return Int64(_integer(text, kind, INT64_MIN, INT64_MAX))
    if kind == "real64":
        return _real(text)
    if kind == "opaque":
        return _opaque(text)
    raise TypedValueError(f"unknown type {kind!r} (one of {', '.join(TYPES)})")


def value_text(value: Value) -> str:
    """The editor text for a value: the inverse of :func:`parse_typed`."""
    kind = type_name(value)
    if kind == "string":
        return value  # type: ignore[return-value]
    if kind == "opaque":
        return bytes(value).hex(" ")  # type: ignore[arg-type]
    if kind == "real64":
        return format_value(float(value))  # type: ignore[arg-type]
    return str(int(value))  # type: ignore[arg-type]


def check_attribute_name(name: str) -> str:
    """A usable attribute name, or TypedValueError saying why not."""
    if not name.strip():
        raise TypedValueError("the attribute needs a name")
    if "\x00" in name:
        raise TypedValueError("names may not contain the NUL character")
    if name != name.strip():
        raise TypedValueError(f"{name!r} has leading or trailing spaces (probably a typo)")
    return name
