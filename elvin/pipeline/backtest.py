r"""Subscription back-tests: an Elvin subscription as a Spark SQL Column.

``backtest(spark, expression, archive_dir)`` counts the archived
notifications a subscription would have matched. The subscription AST
(``elvin.subscription.parse``, constant-folded as the router's compiler
folds it) is translated into one Spark Column expression over the archive
schema (``elvin.pipeline.archive``); there is no Python UDF, so the whole
back-test runs in the JVM (whole-stage code generation) on the cluster.

How it works
------------
* **Bottom is NULL.** Spark SQL's ``AND``/``OR``/``NOT`` are Kleene's strong
  three-valued logic, which is the spec's Lukasiewicz table for these three
  operators (true AND null = null, false AND null = false, true OR null =
  true, NOT null = null). ``A ^^ B`` is built as ``(A OR B) AND NOT (A AND
  B)``, which is null whenever A or B is null, as the spec's table wants.
  A notification matches when the predicate is TRUE (``count_if``/``where``
  skip NULL and FALSE alike). The test-suite checks the truth tables.
* **Attributes.** A pre-projection finds each referenced name once per row
  (``get(attributes, array_position(attributes.name, 'X') - 1)``, a struct or
  NULL when the attribute is missing); the predicate reads that struct's
  fields. Each value expression is carried as up to five alternative columns,
  one per Elvin type (int32, int64, real64, string, opaque), of which at most
  one is non-null in a row: an attribute's alternatives are its five value
  fields (exactly one set), a literal has one. Operators combine the
  alternatives that make sense (after promotion int32 < int64 < real64) and
  ``coalesce`` them, so a string in ``x + 1`` or a missing ``x`` leaves every
  alternative NULL: bottom. Alternatives that cannot occur (the string
  alternative of ``x + 1``) are pruned when the column is built.

Semantics, operator by operator (R = the router, `elvin.subscription`)
------------------------------------------------------------------------
| Elvin | Spark SQL | agrees with R? |
| --- | --- | --- |
| missing attribute | NULL struct: every field NULL | yes (bottom) |
| `&&` `\|\|` `!` | `AND` `OR` `NOT` | yes (same truth tables) |
| `^^` | `(a OR b) AND NOT (a AND b)` | yes (bottom if either is) |
| `int32(x)` ... `opaque(x)` | `x.type = 1..5`, NULL if missing | yes (false on another type) |
| `require(x)` | TRUE if present, else NULL | yes (never false) |
| `nan(x)` | `x.type = 3 AND isnan(x.real64)` | yes |
| int32 `+ - *` | int arithmetic, non-ANSI | yes: wraps at 32 bits (Java) |
| int64 `+ - *` | bigint arithmetic, non-ANSI | yes: wraps at 64 bits |
| integer `/` | `div` (toward 0); int32: `cast(.. as int)` | yes; by zero: NULL = bottom; MIN / -1 = MIN |
| integer `%` | `%` (Java remainder) | yes; by zero: NULL; sign of the dividend |
| real `+ - * /` | double arithmetic | yes; `x / 0.0` is rewritten to +-inf / NaN as IEEE 754 (Spark gives NULL), the sign of -0.0 included |
| real `%` | double `%` (Java's remainder, as the router) | yes; `x % 0.0` is rewritten to NaN (Spark gives NULL) |
| shifts, bitwise on a real | no alternative: NULL | yes (bottom) |
| `<<` `>>` `>>>` | `shiftleft` `shiftright` `shiftrightunsigned` | yes: count masked to 5 (int32) or 6 (int64) bits, as Java |
| `&` `\|` `^` `~` | bitwise and, or, xor, not | yes |
| promotion int32 < int64 < real64 | explicit casts | yes (int64 -> double as Java does) |
| `==` `!=` `<` `<=` `>` `>=` | per pair of types, then `coalesce` | yes; string vs number: NULL; strings: only `==` `!=` |
| real `==` and order | Spark's own, plus the sign of two zeros | yes: Java's `Double.compareTo`, as the router: Spark already says NaN = NaN and orders NaN above +inf, but calls -0.0 and 0.0 equal, so two zeros compare by their sign (`-0.0 < 0.0`) |
| `equals(a, b, c)` | `a == b OR a == c` | yes |
| `begins-with` `ends-with` `contains` | `startswith` `endswith` `contains`, OR-ed over the patterns | yes (exact code points) |
| `wildcard(x, g)` | `rlike('(?s)^(?:J)\z')`, J the router's own translation of the glob re-spelled for Java | yes |
| `regex(x, r)` | `rlike('(?s)(?U)J')`, J likewise | mostly: see below |
| `fold-case(s)` | `lower(s)` on ASCII, else ICU `UCharacter.foldCase(s, true)` via `reflect` | yes: full Unicode case folding like `str.casefold` (ß -> ss, final sigma -> σ, ﬁ -> fi); Unicode versions may differ, see below |
| `decompose(s)`, `decompose-compat(s)` | `s` on ASCII, else ICU `Normalizer.decompose(s, false / true)` via `reflect` | yes (NFD / NFKD) |
| `size(x)` | `octet_length` of the string or opaque | yes (UTF-8 bytes) |

`reflect` calls a static Java method in the JVM (no Python), but Spark
counts it as non-deterministic: the back-test projects the predicate before
aggregating it.

Known differences from the router
---------------------------------
* **Regular expressions.** The router translates the spec's POSIX ERE into
  Python ``re`` (``elvin.subscription.patterns``); the back-test takes that
  translation and re-spells it for ``java.util.regex`` (``\Z`` -> ``\z``,
  ``\UXXXXXXXX`` -> ``\x{...}``, ``&`` escaped so that ``&&`` is not a class
  intersection) with DOTALL and UNICODE_CHARACTER_CLASS. Literals, ``.``,
  anchors, bracket expressions, ``[:upper:]``-style classes (spelled out as
  explicit code points), intervals and alternation behave the same. The
  shorthand classes differ at the edges of Unicode: Java's ``\w`` includes
  combining marks (Mn/Mc/Me), connector punctuation other than ``_`` and
  ZWJ/ZWNJ, Python's includes other numbers (No, e.g. superscripts) -- so
  ``\w``, ``\W``, ``\b``, ``\<``, ``\>`` and ``[:alpha:]``/``[:alnum:]``
  (built on ``\w``) can disagree on such characters; Python's ``\s`` also
  matches U+001C..U+001F, Java's does not. Java's backtracking matcher can
  also overflow its stack on very long values with a repeated alternation
  such as ``(a|b)*``; Spark then fails the task.
* **fold-case.** ICU's full case folding and Python's ``str.casefold`` follow
  the same Unicode table (so ``ß`` -> ``ss``, final sigma -> ``σ``, ``ﬁ`` ->
  ``fi``), but from different Unicode versions (Spark 4.x ships ICU 7x,
  Unicode 15.1-17; Python 3.11 has Unicode 14): characters new since then
  can fold differently. On a Spark without ICU4J on its classpath (Spark
  3.5), ``fold-case`` falls back to ``lower()`` (Java's ``toLowerCase``),
  which differs for ``ß``, ligatures, final sigma (Java lowers a word-final
  ``Σ`` to ``ς``, casefold to ``σ``), ``İ``, Cherokee..., and ``decompose``
  raises ``BacktestError`` there.
* **decompose.** Same Unicode-version caveat as fold-case.
* **Values the archive cannot hold** (strings with lone surrogates, a
  Python ``int`` beyond int64) are left out when archived, so they cannot
  be back-tested.

The session must run with ``spark.sql.ansi.enabled=false``: ``backtest``
sets it on the session it is given (wrap-around arithmetic and NULL on
integer division by zero depend on it).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from elvin.errors import SubscriptionError
from elvin.pipeline.archive import SPARK_SCHEMA_DDL, ArchiveError, check_archive, decode_attributes
from elvin.subscription import parse, validate
from elvin.subscription.ast import Kind, Node, flatten, names_in_order
from elvin.subscription.checker import fold
from elvin.subscription.patterns import compile_glob, compile_regex, ere_to_python, glob_to_python

__all__ = [
    "ArchiveError",
    "BacktestError",
    "BacktestResult",
    "SubscriptionError",
    "attribute_entries",
    "backtest",
    "count_matches",
    "withheld",
    "icu_available",
    "java_glob",
    "java_regex",
    "load_archive",
    "prepare",
    "python_udf_predicate",
    "translate",
]

_ICU_FOLD = ("com.ibm.icu.lang.UCharacter", "foldCase")
_ICU_DECOMPOSE = ("com.ibm.icu.text.Normalizer", "decompose")


class BacktestError(Exception):
    """The back-test cannot run (other than a bad expression or archive)."""


# ---------------------------------------------------------------------------
# patterns: the router's Python translation, re-spelled for java.util.regex

def _python_to_java(pattern: str) -> str:
    """Re-spell a pattern produced by ``elvin.subscription.patterns`` for Java.

    The vocabulary of those patterns is small: ``re.escape``d literals,
    ``(?:``, ``(?>``, ``(?!``, ``(?=``, ``(?<=``, classes whose special
    characters are backslash-escaped, ``\\UXXXXXXXX`` code points, ``\\Z``,
    ``\\d \\w \\s \\b`` and their negations.
    """
    out = []
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            e = pattern[i + 1]
            if e == "Z":
                out.append("\\z")
                i += 2
            elif e == "U" and i + 10 <= n:
                out.append("\\x{" + format(int(pattern[i + 2:i + 10], 16), "x") + "}")
                i += 10
            elif e == "u" and i + 6 <= n:
                out.append("\\x{" + format(int(pattern[i + 2:i + 6], 16), "x") + "}")
                i += 6
            else:
                out.append(pattern[i:i + 2])
                i += 2
        elif c == "&":
            out.append("\\&")
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def java_regex(patterns: Iterable[str]) -> str:
    """A Java regex for ``find`` (Spark ``rlike``) equivalent to ``regex()``."""
    parts = [_python_to_java(ere_to_python(p)) for p in patterns]
    body = parts[0] if len(parts) == 1 else "|".join(f"(?:{q})" for q in parts)
    return "(?s)(?U)" + body


def java_glob(patterns: Iterable[str]) -> str:
    """A Java regex for ``find`` equivalent to ``wildcard()`` (whole value)."""
    parts = [_python_to_java(glob_to_python(p)) for p in patterns]
    body = parts[0] if len(parts) == 1 else "|".join(f"(?:{q})" for q in parts)
    return "(?s)^(?:" + body + ")\\z"


# ---------------------------------------------------------------------------
# typed values

def _null_bool() -> Column:
    return F.lit(None).cast("boolean")


@dataclass
class _TV:
    """A value expression as per-type alternatives (None: cannot be that type).

    ``const``: the Python value of a literal (for small simplifications),
    else ``None``.
    """

    i32: Column | None = None
    i64: Column | None = None
    r64: Column | None = None
    s: Column | None = None
    o: Column | None = None
    const: Any = None

    def as_long(self) -> Column | None:
        parts = [c for c in (self.i64, None if self.i32 is None else self.i32.cast("bigint"))
                 if c is not None]
        return _coalesce(parts)

    def as_double(self) -> Column | None:
        parts = [c for c in (self.r64,
                             None if self.i64 is None else self.i64.cast("double"),
                             None if self.i32 is None else self.i32.cast("double"))
                 if c is not None]
        return _coalesce(parts)

    @property
    def numeric(self) -> bool:
        return self.i32 is not None or self.i64 is not None or self.r64 is not None


def _coalesce(parts: list[Column]) -> Column | None:
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return F.coalesce(*parts)


def _or_all(parts: list[Column]) -> Column:
    result = parts[0]
    for p in parts[1:]:
        result = result | p
    return result


def _and_all(parts: list[Column]) -> Column:
    result = parts[0]
    for p in parts[1:]:
        result = result & p
    return result


def _xor(a: Column, b: Column) -> Column:
    return (a | b) & ~(a & b)


def _int_lit(value: int, kind: str) -> Column:
    return F.lit(int(value)).cast(kind)


def _is_negative(x: Column) -> Column:
    """Sign bit of a double (true for -0.0, which ``x < 0`` misses)."""
    return F.when(x == 0, x.cast("string").startswith("-")).otherwise(x < 0)


def _real_div(x: Column, y: Column, y_const: Any) -> Column:
    """IEEE 754 division (Spark's ``/`` gives NULL for a zero divisor)."""
    if type(y_const) in (int, float) and y_const != 0:
        return x / y    # a non-zero (or NaN) constant divisor: Spark's / is IEEE
    nan, inf = F.lit(math.nan), F.lit(math.inf)
    by_zero = (F.when((x == 0) | F.isnan(x), nan)
               .when((x < 0) != _is_negative(y), -inf)
               .when(x.isNotNull(), inf))
    return F.when(y == 0, by_zero).otherwise(x / y)


def _real_rem(x: Column, y: Column) -> Column:
    """Java's ``%`` on doubles (Spark's ``%`` is that, but NULL for a zero divisor)."""
    return F.when(x.isNotNull() & (y == 0), F.lit(math.nan)).otherwise(x % y)


def _nonzero(const: Any) -> bool:
    """A numeric literal that is not a zero (NaN counts: it is no zero)."""
    return isinstance(const, (int, float)) and not isinstance(const, bool) and const != 0


def _zero_sign(x: Column) -> Column:
    """0 for -0.0, 1 for 0.0 (asked of zeros only)."""
    return F.when(x.cast("string").startswith("-"), F.lit(0)).otherwise(F.lit(1))


def _real_compare(op: Callable[[Column, Column], Column], x: Column, y: Column,
                  x_const: Any, y_const: Any) -> Column:
    """``op`` in Java's ``Double.compare`` order, the router's. Spark's own
    double comparison already says NaN = NaN and puts NaN above +inf; it
    only calls -0.0 and 0.0 equal, so two zeros compare by their signs."""
    plain = op(x, y)
    if _nonzero(x_const) or _nonzero(y_const):
        return plain
    return F.when((x == 0) & (y == 0), op(_zero_sign(x), _zero_sign(y))).otherwise(plain)


def _div32(a: Column, b: Column) -> Column:
    return F.call_function("div", a, b).cast("int")


def _div64(a: Column, b: Column) -> Column:
    return F.call_function("div", a, b)


def _shift(name: str) -> tuple[Callable, Callable]:
    return (lambda a, b: F.call_function(name, a, b),
            lambda a, b: F.call_function(name, a, b.cast("int")))


# kind -> (int32 op, int64 op, real64 op or None)
_BINARY: dict[Kind, tuple[Callable, Callable, Callable | None]] = {
    Kind.ADD: (lambda a, b: a + b, lambda a, b: a + b, lambda a, b: a + b),
    Kind.SUBTRACT: (lambda a, b: a - b, lambda a, b: a - b, lambda a, b: a - b),
    Kind.MULTIPLY: (lambda a, b: a * b, lambda a, b: a * b, lambda a, b: a * b),
    Kind.DIVIDE: (_div32, _div64, None),          # real division: _real_div
    Kind.MODULO: (lambda a, b: a % b, lambda a, b: a % b, _real_rem),
    Kind.SHIFT_LEFT: (*_shift("shiftleft"), None),
    Kind.SHIFT_RIGHT: (*_shift("shiftright"), None),
    Kind.LOGICAL_SHIFT_RIGHT: (*_shift("shiftrightunsigned"), None),
    Kind.BIT_AND: (lambda a, b: a.bitwiseAND(b), lambda a, b: a.bitwiseAND(b), None),
    Kind.BIT_OR: (lambda a, b: a.bitwiseOR(b), lambda a, b: a.bitwiseOR(b), None),
    Kind.BIT_XOR: (lambda a, b: a.bitwiseXOR(b), lambda a, b: a.bitwiseXOR(b), None),
}

_COMPARE: dict[Kind, Callable[[Column, Column], Column]] = {
    Kind.EQUALS: lambda a, b: a == b,
    Kind.LESS_THAN: lambda a, b: a < b,
    Kind.LESS_THAN_EQUALS: lambda a, b: a <= b,
    Kind.GREATER_THAN: lambda a, b: a > b,
    Kind.GREATER_THAN_EQUALS: lambda a, b: a >= b,
}

_TYPE_CODES = {Kind.FUNC_INT32: 1, Kind.FUNC_INT64: 2, Kind.FUNC_REAL64: 3,
               Kind.FUNC_STRING: 4, Kind.FUNC_OPAQUE: 5}
_STRING_FUNCS = {Kind.FUNC_FOLD_CASE, Kind.FUNC_DECOMPOSE, Kind.FUNC_DECOMPOSE_COMPAT}


def _entry_column(index: int) -> str:
    return f"__elvin_attr_{index}"


class _Translator:
    def __init__(self, entries: dict[str, Column], icu: bool) -> None:
        self.entries = entries
        self.icu = icu

    # -- predicates ------------------------------------------------------------
    def pred(self, node: Node) -> Column:
        k = node.kind
        if k is Kind.AND:
            return _and_all([self.pred(c) for c in flatten(node)])
        if k is Kind.OR:
            return _or_all([self.pred(c) for c in flatten(node)])
        if k is Kind.XOR:
            parts = [self.pred(c) for c in flatten(node)]
            result = parts[0]
            for p in parts[1:]:
                result = _xor(result, p)
            return result
        if k is Kind.NOT:
            return ~self.pred(node.children[0])
        if k is Kind.NOT_EQUALS:
            return ~self.compare(Kind.EQUALS, self.value(node.children[0]),
                                 self.value(node.children[1]))
        if k in _COMPARE:
            return self.compare(k, self.value(node.children[0]), self.value(node.children[1]))
        if k is Kind.FUNC_EQUALS:
            first = self.value(node.children[0])
            return _or_all([self.compare(Kind.EQUALS, first, self.value(c))
                            for c in node.children[1:]])
        if k is Kind.FUNC_REQUIRE:
            e = self.entry(node.children[0])
            return F.when(e.isNotNull(), F.lit(True))
        if k in _TYPE_CODES:
            e = self.entry(node.children[0])
            return F.when(e.isNotNull(), e.getField("type") == _TYPE_CODES[k])
        if k is Kind.FUNC_NAN:
            e = self.entry(node.children[0])
            return F.when(e.isNotNull(),
                          (e.getField("type") == 3) & F.isnan(e.getField("real64")))
        if k in (Kind.FUNC_BEGINS_WITH, Kind.FUNC_ENDS_WITH, Kind.FUNC_CONTAINS,
                 Kind.FUNC_WILDCARD, Kind.FUNC_REGEX):
            return self.string_predicate(node)
        raise BacktestError(f"{k.name} is not a predicate")

    def string_predicate(self, node: Node) -> Column:
        s = self.value(node.children[0]).s
        if s is None:
            return _null_bool()
        patterns = [c.value for c in node.children[1:]]
        k = node.kind
        if k is Kind.FUNC_BEGINS_WITH:
            return _or_all([s.startswith(p) for p in patterns])
        if k is Kind.FUNC_ENDS_WITH:
            return _or_all([s.endswith(p) for p in patterns])
        if k is Kind.FUNC_CONTAINS:
            return _or_all([s.contains(p) for p in patterns])
        if k is Kind.FUNC_WILDCARD:
            compile_glob(patterns)   # the checker did; keeps both dialects in step
            return s.rlike(java_glob(patterns))
        compile_regex(patterns)
        return s.rlike(java_regex(patterns))

    def compare(self, k: Kind, a: _TV, b: _TV) -> Column:
        op = _COMPARE[k]
        terms: list[Column] = []
        if a.i32 is not None and b.i32 is not None:
            terms.append(op(a.i32, b.i32))
        if a.i64 is not None and (bl := b.as_long()) is not None:
            terms.append(op(a.i64, bl))
        if b.i64 is not None and (al := a.as_long()) is not None:
            terms.append(op(al, b.i64))
        if a.r64 is not None and (bd := b.as_double()) is not None:
            terms.append(_real_compare(op, a.r64, bd, a.const, b.const))
        if b.r64 is not None and (ad := a.as_double()) is not None:
            terms.append(_real_compare(op, ad, b.r64, a.const, b.const))
        if k is Kind.EQUALS and a.s is not None and b.s is not None:
            terms.append(a.s == b.s)
        if not terms:
            return _null_bool()
        return terms[0] if len(terms) == 1 else F.coalesce(*terms)

    # -- values ---------------------------------------------------------------
    def entry(self, node: Node) -> Column:
        if node.kind is not Kind.NAME:
            raise BacktestError(f"expected an attribute name, got {node.kind.name}")
        return self.entries[node.value]

    def value(self, node: Node) -> _TV:
        k = node.kind
        if k is Kind.NAME:
            e = self.entry(node)
            return _TV(i32=e.getField("int32"), i64=e.getField("int64"),
                       r64=e.getField("real64"), s=e.getField("string"),
                       o=e.getField("opaque"))
        if k is Kind.INT32:
            return _TV(i32=_int_lit(node.value, "int"), const=node.value)
        if k is Kind.INT64:
            return _TV(i64=_int_lit(node.value, "bigint"), const=node.value)
        if k is Kind.REAL64:
            v = float(node.value)
            return _TV(r64=F.lit(v).cast("double"), const=v)
        if k is Kind.STRING:
            return _TV(s=F.lit(node.value), const=node.value)
        if k in _BINARY or k is Kind.DIVIDE:
            return self.binary(k, self.value(node.children[0]), self.value(node.children[1]))
        if k is Kind.UNARY_MINUS:
            a = self.value(node.children[0])
            return _TV(i32=_neg(a.i32), i64=_neg(a.i64), r64=_neg(a.r64))
        if k is Kind.UNARY_PLUS:
            a = self.value(node.children[0])
            return _TV(i32=a.i32, i64=a.i64, r64=a.r64)
        if k is Kind.BIT_NEGATE:
            a = self.value(node.children[0])
            return _TV(i32=None if a.i32 is None else F.bitwise_not(a.i32),
                       i64=None if a.i64 is None else F.bitwise_not(a.i64))
        if k in _STRING_FUNCS:
            s = self.value(node.children[0]).s
            if s is None:
                return _TV()
            return _TV(s=F.when(s.isNotNull(), self.string_function(k, s)))
        if k is Kind.FUNC_SIZE:
            e = self.entry(node.children[0])
            return _TV(i32=F.coalesce(F.octet_length(e.getField("string")),
                                      F.octet_length(e.getField("opaque"))))
        raise BacktestError(f"{k.name} is not a value")

    def string_function(self, k: Kind, s: Column) -> Column:
        # ASCII fast path: on pure ASCII, case folding is lower() of A-Z and
        # both decompositions change nothing; only other strings pay for the
        # reflective call into ICU (about a microsecond each)
        ascii_only = F.octet_length(s) == F.char_length(s)
        if k is Kind.FUNC_FOLD_CASE:
            if not self.icu:
                return F.lower(s)
            full = F.reflect(F.lit(_ICU_FOLD[0]), F.lit(_ICU_FOLD[1]), s, F.lit(True))
            return F.when(ascii_only, F.lower(s)).otherwise(full)
        if not self.icu:
            raise BacktestError("decompose() and decompose-compat() need ICU4J on the Spark "
                                "classpath (bundled with Spark 4)")
        compat = k is Kind.FUNC_DECOMPOSE_COMPAT
        full = F.reflect(F.lit(_ICU_DECOMPOSE[0]), F.lit(_ICU_DECOMPOSE[1]), s, F.lit(compat))
        return F.when(ascii_only, s).otherwise(full)

    def binary(self, k: Kind, a: _TV, b: _TV) -> _TV:
        op32, op64, opr = _BINARY[k]
        out = _TV()
        if a.i32 is not None and b.i32 is not None:
            out.i32 = op32(a.i32, b.i32)
        terms = []
        if a.i64 is not None and (bl := b.as_long()) is not None:
            terms.append(op64(a.i64, bl))
        if b.i64 is not None and (al := a.as_long()) is not None:
            terms.append(op64(al, b.i64))
        out.i64 = _coalesce(terms)
        if k is Kind.DIVIDE or opr is not None:
            terms = []
            if a.r64 is not None and (bd := b.as_double()) is not None:
                terms.append(self.real_op(k, opr, a.r64, bd, b.const))
            if b.r64 is not None and (ad := a.as_double()) is not None:
                terms.append(self.real_op(k, opr, ad, b.r64, b.const))
            out.r64 = _coalesce(terms)
        return out

    @staticmethod
    def real_op(k: Kind, opr, x: Column, y: Column, y_const: Any) -> Column:
        if k is Kind.DIVIDE:
            return _real_div(x, y, y_const)
        return opr(x, y)


def _neg(c: Column | None) -> Column | None:
    return None if c is None else -c


def _needs_icu(tree: Node) -> bool:
    return any(n.kind in _STRING_FUNCS for n in tree.walk())


_ICU_CACHE: dict[int, bool] = {}


def icu_available(spark: SparkSession) -> bool:
    """Whether ICU4J (full case folding, NFD) can be called through ``reflect``."""
    key = id(spark.sparkContext) if hasattr(spark, "sparkContext") else id(spark)
    if key not in _ICU_CACHE:
        try:
            row = spark.range(1).select(
                F.reflect(F.lit(_ICU_FOLD[0]), F.lit(_ICU_FOLD[1]), F.lit("ẞ"),
                          F.lit(True)).alias("f")).first()
            _ICU_CACHE[key] = row is not None and row["f"] == "ss"
        except Exception:  # noqa: BLE001 -- any failure means "not available"
            _ICU_CACHE[key] = False
    return _ICU_CACHE[key]


# ---------------------------------------------------------------------------
# public API

def _tree(expression: str | Node) -> Node:
    if isinstance(expression, Node):
        return fold(validate(expression))
    return fold(parse(expression))


def attribute_entries(names: Iterable[str], attributes: Column | None = None
                      ) -> dict[str, tuple[str, Column]]:
    """``name -> (column name, expression)``: the attribute's struct, or NULL
    when the notification has no such attribute (one lookup per name)."""
    attrs = F.col("attributes") if attributes is None else attributes
    out: dict[str, tuple[str, Column]] = {}
    for name in names:
        if name in out:
            continue
        position = F.array_position(attrs.getField("name"), F.lit(name))
        out[name] = (_entry_column(len(out)), F.get(attrs, (position - 1).cast("int")))
    return out


def translate(expression: str | Node, entries: dict[str, tuple[str, Column]] | None = None,
              *, icu: bool = True) -> tuple[dict[str, tuple[str, Column]], Column]:
    """Translate a subscription into Spark columns.

    Returns ``(entries, predicate)``: ``entries`` (``attribute_entries``)
    are the columns to add to the archive DataFrame first, one per referenced
    attribute name, and ``predicate`` the boolean Column over them (NULL =
    bottom). Pass ``entries`` to share the lookups between several
    subscriptions (names missing from it are added). ``prepare`` applies
    both. Raises ``SubscriptionError`` for a bad expression.
    """
    return _translate_tree(_tree(expression), entries, icu)


def _translate_tree(tree: Node, entries: dict[str, tuple[str, Column]] | None,
                    icu: bool) -> tuple[dict[str, tuple[str, Column]], Column]:
    """``translate`` for a checked, folded tree."""
    entries = dict(entries or {})
    missing = [n for n in names_in_order(tree) if n not in entries]
    if missing:
        fresh = attribute_entries(list(entries) + missing)
        for name in missing:
            entries[name] = fresh[name]
    refs = {name: F.col(column) for name, (column, _) in entries.items()}
    return entries, _Translator(refs, icu).pred(tree)


def load_archive(spark: SparkSession, archive_dir: str | os.PathLike) -> DataFrame:
    """The archive as a DataFrame (``ArchiveError`` if missing or empty);
    ``private`` is false in the rows of version 1 files, which lack it."""
    check_archive(archive_dir)
    path = os.fspath(archive_dir)
    df = spark.read.schema(SPARK_SCHEMA_DDL).option("basePath", path).parquet(path)
    return df.withColumn("private", F.coalesce(F.col("private"), F.lit(False)))


def withheld() -> Column:
    """True for the rows of private notifications archived without their
    attributes (``elvin.pipeline.archive``): nothing there to match."""
    return F.col("private") & (F.size(F.col("attributes")) == 0)


def _with_entries(df: DataFrame, entries: dict[str, tuple[str, Column]]) -> DataFrame:
    if not entries:
        return df
    return df.select("*", *[col.alias(name) for name, col in entries.values()])


def prepare(spark: SparkSession, expression: str | Node,
            df: DataFrame) -> tuple[DataFrame, Column]:
    """``(df with the attribute entries added, predicate)``."""
    return _prepare_tree(spark, _tree(expression), df)


def _prepare_tree(spark: SparkSession, tree: Node, df: DataFrame) -> tuple[DataFrame, Column]:
    icu = icu_available(spark) if _needs_icu(tree) else True
    entries, predicate = _translate_tree(tree, None, icu)
    return _with_entries(df, entries), predicate


def count_matches(spark: SparkSession, expressions: list[str | Node],
                  df: DataFrame) -> tuple[list[int], int]:
    """``([matches of each expression], rows)`` over ``df`` in one Spark job
    (the attribute lookups are shared). For many subscriptions at once."""
    trees = [_tree(e) for e in expressions]
    icu = icu_available(spark) if any(_needs_icu(t) for t in trees) else True
    entries: dict[str, tuple[str, Column]] = {}
    predicates = []
    for tree in trees:
        entries, predicate = _translate_tree(tree, entries, icu)
        predicates.append(predicate)
    spark.conf.set("spark.sql.ansi.enabled", "false")
    flags = _with_entries(df.where(~withheld()), entries).select(
        *[p.alias(f"__elvin_m{i}") for i, p in enumerate(predicates)])
    # an aggregate over the whole frame: one row, even when the frame is empty
    [row] = flags.agg(F.count(F.lit(1)).alias("rows"),
                      *[F.count_if(F.col(f"__elvin_m{i}")).alias(f"m{i}")
                        for i in range(len(predicates))]).collect()
    return [int(row[f"m{i}"]) for i in range(len(predicates))], int(row["rows"])


@dataclass
class BacktestResult:
    expression: str
    matches: int
    total: int
    per_hour: list[tuple[str, int]] = field(default_factory=list)
    sample: list[dict[str, Any]] = field(default_factory=list)
    #: private notifications archived without attributes: not in ``total``
    withheld: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "expression": self.expression,
            "matches": self.matches,
            "total": self.total,
            "withheld": self.withheld,
            "per_hour": [{"hour": h, "matches": c} for h, c in self.per_hour],
            "sample": [_jsonable(r) for r in self.sample],
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), ensure_ascii=False, indent=2)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (bytes, bytearray)):
        return {"opaque": bytes(value).hex()}
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def _row_dict(row) -> dict[str, Any]:
    d = row.asDict()
    d["attributes"] = decode_attributes(d["attributes"])
    if d.get("time") is not None and d["time"].tzinfo is None:
        # PySpark hands timestamps back as naive local times
        d["time"] = d["time"].astimezone(UTC)
    return d


def backtest(spark: SparkSession, expression: str | Node, archive_dir: str | os.PathLike,
             sample: int = 10) -> BacktestResult:
    """Count the archived notifications ``expression`` matches.

    ``per_hour`` lists every archived hour (oldest first) with its number of
    matches (0 included); ``sample`` holds up to ``sample`` matching rows
    (earliest first) as ``read_archive`` returns them. Private notifications
    archived without their attributes are not tested: ``withheld`` counts
    them, ``total`` does not. Raises
    ``SubscriptionError`` (with ``position``) for a bad expression and
    ``ArchiveError`` (naming the directory) for a missing or empty archive,
    both before any Spark job runs.
    """
    text = expression if isinstance(expression, str) else None
    tree = _tree(expression)
    check_archive(archive_dir)
    spark.conf.set("spark.sql.ansi.enabled", "false")
    df, predicate = _prepare_tree(spark, tree, load_archive(spark, archive_dir))
    # the predicate is projected first: reflect() (fold-case, decompose) is
    # "non-deterministic" for Spark and may not sit inside an aggregate
    counts = (df.select("hour", predicate.alias("__elvin_match"),
                        withheld().alias("__elvin_withheld"))
              .groupBy("hour")
              .agg(F.count_if(~F.col("__elvin_withheld")).alias("total"),
                   F.count_if(F.col("__elvin_withheld")).alias("withheld"),
                   F.count_if(F.col("__elvin_match") & ~F.col("__elvin_withheld"))
                   .alias("matches"))
              .orderBy("hour").collect())
    per_hour = [(r["hour"], int(r["matches"])) for r in counts]
    total = sum(int(r["total"]) for r in counts)
    hidden = sum(int(r["withheld"]) for r in counts)
    matches = sum(c for _, c in per_hour)
    rows: list[dict[str, Any]] = []
    if sample > 0 and matches:
        columns = ["time", "hour", "producer", "attributes", "subscriptions", "clients",
                   "secure", "size", "private"]
        rows = [_row_dict(r) for r in
                df.where(predicate & ~withheld()).select(*columns).orderBy("time")
                .limit(sample).collect()]
    if text is None:
        from elvin.subscription import unparse
        text = unparse(tree)
    return BacktestResult(text, matches, total, per_hour, rows, hidden)


# ---------------------------------------------------------------------------
# the slow way, for comparison (bench/pipeline.py)

def python_udf_predicate(expression: str | Node) -> Column:
    """A boolean Column computing the same predicate with the router's
    compiled evaluator in a pandas UDF (Arrow batches, Python workers).

    For benchmarks and cross-checks only: every row crosses to Python.
    """
    import pandas as pd

    from elvin.subscription import compile as compile_subscription

    text = expression if isinstance(expression, str) else None
    source = text if text is not None else expression

    def _matches(attributes):
        matches = compile_subscription(source).matches
        return pd.Series([matches(decode_attributes(() if entries is None else entries))
                          for entries in attributes], dtype=bool)

    # real annotations (this module uses postponed ones): pandas_udf infers
    # the UDF kind from them
    _matches.__annotations__ = {"attributes": pd.Series, "return": pd.Series}
    # pyspark's stubs type only the older form that names a functionType, not
    # this one (the documented form since Spark 3.0, the kind taken from the hints)
    udf = F.pandas_udf(_matches, "boolean")  # type: ignore[call-overload]
    return udf(F.col("attributes"))

