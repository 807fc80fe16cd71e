"""The five Elvin value types and the Python values that stand for them.

Notifications are plain ``dict``s mapping attribute names to values. The Elvin
type of a value follows from its Python type, so that users never have to
spell types out for the common cases:

* ``int``  -> int32 when it fits, else int64 (``Int64(n)`` forces int64)
* ``float`` -> real64
* ``str``  -> string (no NUL character)
* ``bytes`` -> opaque

Values decoded from the wire keep their Elvin type: an int64 arrives as an
``Int64`` even when it is small, so that re-sending or printing it gives the
same type back.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
#: integers of at most this magnitude convert to real64 exactly: the
#: subscription compiler, its shape cache, the index and the analyses
#: compare ints with reals by this one bound, and must agree on it
REAL64_EXACT = 2**53


class ElvinType(IntEnum):
    """Value type codes, numbered as the XDR ``value_typecode`` enumeration."""

    INT32 = 1
    INT64 = 2
    REAL64 = 3
    STRING = 4
    OPAQUE = 5

    @property
    def label(self) -> str:
        """The type's name in lower case (``int32``, ``string``), as messages spell it."""
        return self.name.lower()


class Int64(int):
    """An ``int`` that is always an Elvin int64, whatever its magnitude."""

    __slots__ = ()

    def __new__(cls, value: int = 0) -> Int64:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"Int64 takes an int, not {type(value).__name__}")
        if not INT64_MIN <= value <= INT64_MAX:
            raise ValueError(f"{value} is outside the int64 range")
        return super().__new__(cls, value)

    def __repr__(self) -> str:
        return f"Int64({int(self)})"


Value = int | Int64 | float | str | bytes
Notification = Mapping[str, Value]


def elvin_type(value: object) -> ElvinType:
    """The Elvin type of a Python value, or ``TypeError``/``ValueError``.

    ``bool`` is refused on purpose: Elvin has no boolean type and silently
    sending ``True`` as int32 1 would surprise subscribers.
    """
    cls = type(value)
    if cls is str:
        return ElvinType.STRING
    if cls is int:
        if INT32_MIN <= value <= INT32_MAX:  # type: ignore[operator]  # type() is, for speed: an int here
            return ElvinType.INT32
        if INT64_MIN <= value <= INT64_MAX:  # type: ignore[operator]  # as above
            return ElvinType.INT64
        raise ValueError(f"integer {value} does not fit in int64")
    if cls is Int64:
        return ElvinType.INT64
    if cls is float:
        return ElvinType.REAL64
    if cls is bytes:
        return ElvinType.OPAQUE
    if cls is bool:
        raise TypeError("Elvin has no boolean type: send 0/1 or a string")
    if isinstance(value, (bytearray, memoryview)):
        return ElvinType.OPAQUE
    if isinstance(value, Int64):
        return ElvinType.INT64
    if isinstance(value, int) and not isinstance(value, bool):
        return elvin_type(int(value))
    if isinstance(value, float):
        return ElvinType.REAL64
    if isinstance(value, str):
        return ElvinType.STRING
    raise TypeError(f"{cls.__name__} is not an Elvin value type "
                    "(int, Int64, float, str or bytes)")


def check_value(name: str, value: object) -> ElvinType:
    """Validate one attribute; errors name the attribute so users can find it."""
    try:
        kind = elvin_type(value)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"attribute {name!r}: {exc}") from None
    if kind is ElvinType.STRING and "\x00" in value:  # type: ignore[operator]  # check_value: a STRING is a str
        raise ValueError(f"attribute {name!r}: strings may not contain NUL")
    return kind


def check_name(name: object) -> str:
    """``name`` when it is a valid attribute name (a non-empty string without NUL);
    TypeError or ValueError saying why not.
    """
    if not isinstance(name, str):
        raise TypeError(f"attribute names are strings, not {type(name).__name__}")
    if not name:
        raise ValueError("attribute names may not be empty")
    if "\x00" in name:
        raise ValueError(f"attribute name {name!r} contains NUL")
    return name


def check_notification(attributes: Mapping[str, object]) -> dict[str, Value]:
    """Validate a notification and return it as a plain dict.

    Raises ``TypeError``/``ValueError`` naming the first bad attribute. The
    protocol requires at least one attribute in NotifyEmit, so empty is refused.
    """
    if not isinstance(attributes, Mapping):
        raise TypeError(f"a notification is a mapping, not {type(attributes).__name__}")
    if not attributes:
        raise ValueError("a notification needs at least one attribute")
    result: dict[str, Value] = {}
    for name, value in attributes.items():
        check_name(name)
        check_value(name, value)
        if isinstance(value, (bytearray, memoryview)):
            value = bytes(value)
        result[name] = value  # type: ignore[assignment]  # made bytes just above
    return result
