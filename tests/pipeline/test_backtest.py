"""The Spark translation of subscriptions agrees with the router's evaluator.

Every expression below is counted over the generated archive twice: by Spark
(``count_matches``/``backtest``: Column expressions, no Python UDF) and by
``elvin.subscription.compile(expr).matches`` over the same notifications in
Python. The counts must be equal.

Where Spark cannot agree by design (documented in elvin/pipeline/backtest.py)
the case names the inputs it leaves out, and both sides leave them out.
"""

from __future__ import annotations

import unicodedata

import pytest

from elvin.errors import SubscriptionError
from elvin.pipeline.archive import ArchiveError, read_archive
from elvin.pipeline.backtest import (
    _xor,
    backtest,
    count_matches,
    java_glob,
    java_regex,
    load_archive,
)
from elvin.subscription import compile as compile_subscription
from elvin.values import elvin_type

pytestmark = pytest.mark.timeout(900)    # Spark on a shared machine: be patient


def _java_w_differs(text) -> bool:
    """Characters on which Java's (?U) \\w / \\s / \\b and Python's disagree:
    combining marks and connector punctuation (Java \\w only), other numbers
    such as superscripts (Python \\w only), U+001C..U+001F (Python \\s only),
    ZWJ/ZWNJ."""
    if not isinstance(text, str):
        return False
    for ch in text:
        cat = unicodedata.category(ch)
        if cat in ("Mn", "Mc", "Me", "No", "Nl") or (cat == "Pc" and ch != "_"):
            return True
        if "\x1c" <= ch <= "\x1f" or ch in "\u200c\u200d":
            return True
    return False


def _exclude_s_w(attrs) -> bool:
    return _java_w_differs(attrs.get("s"))


# (expression, exclude) -- exclude(attrs) -> True drops the notification from
# both counts, for a documented difference of dialect.
CASES: list[tuple[str, object]] = [
    # comparisons and type mixes (a, b, c hold any type)
    ("a == 1", None), ("a != 1", None), ("a < b", None), ("a <= 10L", None),
    ("a > 2.5", None), ("a >= -3", None), ("a == b", None), ("a != b", None),
    ("a == 'abc'", None), ("a != 'abc'", None), ("s == t", None), ("s != t", None),
    ("l == 5", None), ("l > 9007199254740992.0", None), ("l == 9007199254740993L", None),
    ("r == 2", None), ("r > i", None), ("r <= l", None), ("i == 2147483647 && l < 0L", None),
    ("a == c || b == c", None),
    # arithmetic, promotion and 32/64-bit wrap-around
    ("i + j > 0", None), ("i + 1 < i", None), ("i * j == 0", None), ("i - j < 0", None),
    ("i * 65536 * 65536 == 0", None), ("2147483647 + i < 0", None), ("l * 3L > 0", None),
    ("l + i > l", None), ("l - 1L > l", None), ("-i == i", None), ("-l == l", None),
    ("+i > 0", None), ("~i == -1", None), ("~l == -1L", None), ("a + b > c", None),
    ("a * b < 0", None), ("i + l == 6L", None),
    # integer division (toward zero, by zero = bottom) and remainder (Java)
    ("i / j == 0", None), ("i / j < -1", None), ("i % j == 1", None), ("i % j < 0", None),
    ("l / i > 0", None), ("l / -1L < 0", None), ("l % 3L == 0", None), ("i / 0 == 0", None),
    ("!(i / 0 == 0)", None), ("a / b > 1", None), ("a % b == 0", None),
    # shifts (masked counts) and bitwise operators
    ("i << j != 0", None), ("i << 33 == 2", None), ("i >> 3 == -1", None),
    ("i >>> 28 == 15", None), ("i >> j > 0", None), ("l << 60L < 0", None),
    ("l >>> 1 > 0", None), ("l >> 65 == l >> 1", None), ("i << 40L > 0", None),
    ("i & 255 == 7", None), ("i | j == -1", None), ("i ^ j == 0", None),
    ("l & i != 0", None), ("a & b == 0", None), ("a >>> b < 0", None),
    # real64: IEEE division by zero, NaN, infinities, -0.0
    ("r / 0.0 > 0", None), ("r / 0.0 < 0", None), ("r / 0 != r / 0", None),
    ("1 / r == 0.0", None), ("1.0 / r < 0", None), ("nan(r)", None), ("r == r", None),
    ("r != r", None), ("r < 1.0 || r >= 1.0", None), ("r * 2.0 > 1.0e300", None),
    ("r - r == 0.0", None), ("-r < 0", None), ("r + i > 0", None), ("r % 2 == 0", None),
    ("~r == 0", None), ("r > 0 && r < 1.0e308 * 10.0", None), ("i / 2.0 == 2.5", None),
    ("r == -0.0", None), ("l == r", None),
    # real64 equality and order as Java's Double.compareTo (issue 18): NaN == NaN,
    # NaN above +inf, -0.0 < 0.0; % on reals is Java's remainder
    ("r == 0.0", None), ("r < 0.0", None), ("r <= -0.0", None), ("r > -0.0", None),
    ("r >= 0.0", None), ("r > 1.0e308", None), ("r < r", None), ("r == a", None),
    ("r < a", None), ("a >= r", None), ("r == i", None), ("r < i", None), ("i <= r", None),
    ("-r > 0.0", None), ("r * 0.0 == 0.0", None), ("r % 2.5 == 0.5", None),
    ("r % 0.0 == r % 0.0", None), ("a % r < 1.0", None), ("i % 2.5 == 0.0", None),
    ("r % i > 0", None), ("r - r < 0.0", None),
    # precedence: + -, * / %, << >> >>>, |, ^, & (loosest to tightest)
    ("i | 2 + 1 == 3", None), ("i << 2 * 2 == 0", None), ("i - 1 << 2 > 0", None),
    ("i & 3 << 1 == 2", None), ("i ^ j & 1 == 0", None), ("l | i ^ 1 > 0L", None),
    # partially constant expressions are evaluated (only a constant whole is trivial)
    ("a == 1 || 1 == 2", None), ("1 == 1 ^^ a == 1", None), ("1 / 0 == 1 || a == 1", None),
    # string predicates
    ("begins-with(s, 'a', 'Ab')", None), ("ends-with(s, 'z', 'se')", None),
    ("contains(s, 'é', 'b')", None), ("contains(a, '')", None), ("begins-with(s, '')", None),
    ("ends-with(a, 'c')", None),
    ("wildcard(s, 'a*')", None), ("wildcard(s, '?b*', '[a-c]*z')", None),
    ("wildcard(s, '*\\\\**')", None), ("wildcard(s, '[!a-z]*')", None),
    ("wildcard(t, '*.*')", None), ("wildcard(s, '*')", None), ("wildcard(s, '*&*')", None),
    ("regex(s, '^[a-z]+$')", None), ("regex(s, 'b.d')", None), ("regex(s, '(ab|cd){2}')", None),
    ("regex(s, '[[:upper:]]')", None), ("regex(s, '^.{3}$')", None),
    ("regex(s, '[[:digit:]]+')", None), ("regex(s, 'a|^$')", None), ("regex(s, '\\\\.')", None),
    ("regex(s, '^[^a-z]*$')", None), ("regex(s, 'line.break')", None),
    ("regex(s, '[&]')", None), ("regex(t, 'é')", None), ("regex(s, '[[:punct:]]')", None),
    # Java's \w (combining marks...) and \s differ from Python's: see backtest.py
    ("regex(s, '^\\\\w+$')", _exclude_s_w), ("regex(s, '\\\\s')", _exclude_s_w),
    ("regex(s, '\\\\bab')", _exclude_s_w),
    # Unicode functions: full case folding (ICU = str.casefold), NFD, NFKD, UTF-8 sizes
    ("fold-case(s) == 'strasse'", None), ("fold-case(s) == 'οδοσ'", None),
    ("fold-case(s) == fold-case(t)", None), ("begins-with(fold-case(s), 'st')", None),
    ("fold-case(s) == 'k'", None), ("fold-case(s) == 'i\u0307stanbul'", None),
    ("fold-case(Group) == 'chat'", None),
    ("decompose(s) == decompose(t)", None), ("decompose(s) == 'cafe\u0301'", None),
    ("decompose-compat(s) == 'fine'", None), ("contains(decompose(s), '\u0301')", None),
    ("decompose-compat(s) == 'x2'", None), ("fold-case(decompose(s)) == 'cafe\u0301'", None),
    ("size(s) > 3", None), ("size(s) == 4", None), ("size(o) == 0", None),
    ("size(a) > 2", None), ("size(o) + size(s) > 10", None),
    # equals()
    ("equals(a, 1, 'x')", None), ("equals(i, 1, 2L, 3.0)", None),
    ("equals(s, 'abc', 'xyz', 'Chat')", None), ("equals(Group, 'chat', 'news')", None),
    ("equals(a, b, c)", None),
    # type predicates and require
    ("require(a)", None), ("!require(a)", None), ("require(a) && !require(b)", None),
    ("int32(a)", None), ("int64(a)", None), ("real64(a)", None), ("string(a)", None),
    ("opaque(a)", None), ("!int32(a)", None), ("!nan(a)", None), ("nan(a) || int64(a)", None),
    # three-valued logic, XOR chains
    ("require(a) ^^ require(b)", None), ("a > 0 ^^ b > 0", None),
    ("a == 1 ^^ s == 'abc' ^^ nan(r)", None), ("!(a > 0) || b < 0 && c == 'x'", None),
    ("!(a > 0 ^^ b > 0)", None), ("(a > 0 || b > 0) && !(c < 0)", None),
    ("Group == 'chat' && require(s)", None), ("!(a < b) && !(a >= b)", None),
    ("missing == 1 || !(missing == 1)", None),
]


def _python_count(expression, notifications, exclude) -> int:
    matches = compile_subscription(expression).matches
    return sum(1 for n in notifications if not (exclude and exclude(n)) and matches(n))


@pytest.fixture(scope="session")
def spark_counts(spark, archive, notifications):
    """expression -> Spark count, all in as few jobs as possible."""
    from pyspark.sql import functions as F

    df = load_archive(spark, archive)
    plain = [e for e, ex in CASES if ex is None]
    result = {}
    for start in range(0, len(plain), 25):     # 25 predicates per job: quicker codegen
        chunk = plain[start:start + 25]
        counts, rows = count_matches(spark, chunk, df)
        assert rows == len(notifications)
        result.update(zip(chunk, counts, strict=True))
    for expression, exclude in CASES:
        if exclude is None:
            continue
        dropped = [f"p{i}" for i, n in enumerate(notifications) if exclude(n)]
        assert dropped, f"the exclusion for {expression!r} excludes nothing"
        kept = df.where(~F.col("producer").isin(dropped))
        (count,), _ = count_matches(spark, [expression], kept)
        result[expression] = count
    return result


def test_enough_cases():
    assert len(CASES) >= 50
    assert len({e for e, _ in CASES}) == len(CASES)


@pytest.mark.parametrize("expression,exclude", CASES, ids=[e for e, _ in CASES])
def test_spark_count_equals_router(expression, exclude, spark_counts, notifications):
    assert spark_counts[expression] == _python_count(expression, notifications, exclude)


def test_cases_are_not_degenerate(spark_counts, notifications):
    """Most expressions match some but not all notifications (the data
    exercises them); a few are bottom everywhere by design."""
    informative = [e for e, c in spark_counts.items() if 0 < c < len(notifications)]
    assert len(informative) >= 0.7 * len(CASES)


def test_archive_round_trip(archive, notifications):
    """Every value comes back with its Elvin type (int64 5 is not int32 5)
    and its value (NaN, infinities, -0.0, empty strings and opaques)."""
    rows = read_archive(archive)
    assert len(rows) == len(notifications)
    for row, original in zip(rows, notifications, strict=True):
        assert list(row["attributes"]) == list(original)
        for name, value in original.items():
            got = row["attributes"][name]
            assert elvin_type(got) == elvin_type(value), (name, value, got)
            if isinstance(value, float):
                assert repr(got) == repr(value)      # NaN, -0.0
            else:
                assert got == value


def test_backtest_result(spark, archive, notifications):
    expression = "Group == 'chat' || i > 1000"
    result = backtest(spark, expression, archive, sample=5)
    expected = _python_count(expression, notifications, None)
    assert result.matches == expected
    assert result.total == len(notifications)
    assert sum(c for _, c in result.per_hour) == expected
    assert [h for h, _ in result.per_hour] == sorted(
        {r["hour"] for r in read_archive(archive)})
    assert len(result.sample) == min(5, expected)
    matches = compile_subscription(expression).matches
    times = [row["time"] for row in result.sample]
    assert times == sorted(times)
    for row in result.sample:
        assert matches(row["attributes"])
        assert row["hour"] == row["time"].strftime("%Y-%m-%dT%H")
        index = int(row["producer"][1:])
        assert row["attributes"] == notifications[index]
    as_json = result.to_json()
    assert as_json["matches"] == expected


def test_backtest_sample_zero_and_no_match(spark, archive):
    result = backtest(spark, "require(nobody_has_this)", archive, sample=0)
    assert result.matches == 0 and result.sample == []
    assert all(c == 0 for _, c in result.per_hour)


def test_bad_expression_reports_position(spark, archive):
    with pytest.raises(SubscriptionError) as info:
        backtest(spark, "a == 1 && (b > ", archive)
    assert info.value.position == 15
    with pytest.raises(SubscriptionError) as info:
        backtest(spark, "a == 1 && regex(s, '(x')", archive)
    assert info.value.code == "INVALID_REGEXP"
    assert info.value.position == 19


def test_missing_archive(spark, tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(ArchiveError, match="nope.*does not exist"):
        backtest(spark, "a == 1", missing)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ArchiveError, match=r"empty.*is empty"):
        backtest(spark, "a == 1", empty)


T, F_, B = True, False, None
#: the spec's Lukasiewicz table (section 6.1.1): A, B, !A, A && B, A || B, A ^^ B
SPEC_TABLE = [
    (T, T, F_, T, T, F_), (T, B, F_, B, T, B), (T, F_, F_, F_, T, T),
    (B, T, B, B, T, B), (B, B, B, B, B, B), (B, F_, B, F_, B, B),
    (F_, T, T, F_, T, T), (F_, B, T, F_, B, B), (F_, F_, T, F_, F_, F_),
]


def test_spark_logic_is_the_spec_table(spark):
    from pyspark.sql import functions as F

    df = spark.createDataFrame([(a, b) for a, b, *_ in SPEC_TABLE], "a boolean, b boolean")
    a, b = F.col("a"), F.col("b")
    got = df.select(a, b, ~a, a & b, a | b, _xor(a, b)).collect()
    assert [tuple(r) for r in got] == SPEC_TABLE


def test_java_patterns():
    assert java_regex(["^a.c$"]) == "(?s)(?U)^a.c\\z"
    assert java_glob(["a*"]).startswith("(?s)^(?:a")
    assert "\\&" in java_regex(["[&]"])


def test_translation_has_no_python_udf(spark, archive):
    """Every case compiles to JVM expressions only: no Python evaluation
    node in the physical plan (the UDF path of the benchmark has one)."""
    from elvin.pipeline.backtest import python_udf_predicate, translate

    df = load_archive(spark, archive)
    entries: dict = {}
    predicates = []
    for expression, _ in CASES:
        entries, predicate = translate(expression, entries)
        predicates.append(predicate)
    flags = df.select("*", *[c.alias(n) for n, c in entries.values()]).select(
        *[p.alias(f"m{i}") for i, p in enumerate(predicates)])
    plan = flags._jdf.queryExecution().executedPlan().toString()
    assert "EvalPython" not in plan and "PythonUDF" not in plan
    udf_plan = df.select(python_udf_predicate("a == 1"))._jdf.queryExecution() \
        .executedPlan().toString()
    assert "EvalPython" in udf_plan


def test_the_session_does_not_record_python_call_sites(spark):
    """PySpark's call-site capture walks the stack and asks the JVM for each
    Column function: a subscription is hundreds of them, so the pipeline's
    sessions turn it off (translation is about three times as fast)."""
    from pyspark.errors.utils import is_debugging_enabled

    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    assert not is_debugging_enabled()
