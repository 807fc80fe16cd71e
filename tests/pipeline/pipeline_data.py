"""Generated notifications for the pipeline tests (shared by conftest and tests)."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime

from elvin.values import Int64

#: 2024-05-01T10:00:00Z
T0 = datetime(2024, 5, 1, 10, tzinfo=UTC).timestamp()
HOURS = 5
ROWS = 500

STRINGS = [
    "", "a", "abc", "ABC", "Abz", "abcabc", "xyz", "hello world", "b.d", "bxd", "a*b", "[x]",
    "100%", "12345", "x&y", "line\nbreak", "tab\there", "ab", "cdcd", "abcd", "zz",
    "Straße", "STRASSE", "strasse", "ß", "ẞ", "ΟΔΟΣ", "οδος", "οδοσ", "café", "cafe\u0301",
    "\ufb01ne", "fine", "Ωmega", "😀 smile", "İstanbul", "ǅ", "日本語", "\u212a", "Kelvin",
    "\u00bd", "x\u00b2", "Group", "chat", "Chat", "CHAT", "e\u0301", "\u00e9",
]
INT32 = [0, 1, -1, 2, 3, 7, 15, 31, 32, 33, 63, 64, 255, 256, 1000, -1000, 65536,
         2147483647, -2147483648, 2147483646, -2147483647, 5, -5, 12345]
INT64 = [Int64(0), Int64(5), Int64(-1), Int64(2 ** 62), Int64(2 ** 63 - 1), Int64(-(2 ** 63)),
         Int64(2 ** 31), 2 ** 53 + 1, -(2 ** 40), Int64(7), 2 ** 40, Int64(-5)]
REAL64 = [0.0, -0.0, 1.5, -2.5, math.nan, math.inf, -math.inf, 1e300, -1e-300, 2.0, 3.0,
          0.1, 5.0, 2.0 ** 53, 2147483648.0, 7.0, -1.0, 1e-310]
OPAQUE = [b"", b"\x00", b"abc", bytes(range(10)), "ü".encode(), b"\xff" * 5]
GROUPS = ["chat", "elvin", "news", "Chat", "elvin-dev"]

_POOLS = {"int32": INT32, "int64": INT64, "real64": REAL64, "string": STRINGS,
          "opaque": OPAQUE}
#: attribute name -> its usual type (None: any type, uniformly)
NAMES = {"a": None, "b": None, "c": None, "i": "int32", "j": "int32", "l": "int64",
         "r": "real64", "s": "string", "t": "string", "o": "opaque"}


def _value(rng: random.Random, usual: str | None):
    if usual is None or rng.random() < 0.15:
        kind = rng.choice(list(_POOLS))
    else:
        kind = usual
    return rng.choice(_POOLS[kind])


def make_notifications(rows: int = ROWS, seed: int = 20240501) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for _ in range(rows):
        n = {}
        for name, usual in NAMES.items():
            if rng.random() < 0.72:
                n[name] = _value(rng, usual)
        if rng.random() < 0.6:
            n["Group"] = rng.choice(GROUPS) if rng.random() < 0.9 else rng.choice(INT32)
        if not n:
            n["a"] = 1
        out.append(n)
    return out


def make_records(notifications: list[dict], seed: int = 7):
    """(ArchiveRecord, ...) with producer = "p<index>", so tests can pick
    rows out by producer."""
    from elvin.pipeline.archive import ArchiveRecord

    rng = random.Random(seed)
    span = HOURS * 3600
    records = []
    for index, attrs in enumerate(notifications):
        clients = rng.choice([0, 0, 1, 1, 2, 3, 5, 10])
        records.append(ArchiveRecord(
            attrs, producer=f"p{index}", subscriptions=clients + rng.choice([0, 1]) * clients,
            clients=clients, secure=rng.random() < 0.1,
            time=T0 + span * index / len(notifications)))
    return records
