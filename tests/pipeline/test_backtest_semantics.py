"""Issue 18 in the back-test: random subscriptions through the Spark
translation give, row by row, the reference interpreter's three-valued
answer (true / false / bottom = NULL) over the shared archive, whose values
include -0.0, NaN, the infinities and the int32/int64 edges.

The expressions come from the same strategy as the evaluators' differential
test (tests/subscription_strategies.py): every arithmetic and bitwise
operator at every precedence level, ``%`` on reals, comparisons of every
numeric type and partly constant logic. They leave out the Unicode
functions, whose ICU and Python versions differ (see backtest.py).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from subscription_strategies import predicates

from elvin.pipeline.backtest import load_archive, translate
from elvin.subscription import unparse
from elvin.subscription.reference import evaluate as reference

pytestmark = pytest.mark.timeout(900)    # Spark on a shared machine: be patient

#: archive attributes (tests/pipeline/pipeline_data.py): r real64, l int64,
#: i int32, a any type; s a string
NUMERIC = ["r", "l", "i", "a"]
STRINGS = ["s"]


@pytest.fixture(scope="module")
def archive_frame(spark, archive):
    return load_archive(spark, archive).select("producer", "attributes").cache()


@settings(max_examples=2, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(trees=st.lists(predicates(NUMERIC, STRINGS, string_functions=False, max_leaves=4),
                      min_size=16, max_size=16))
def test_spark_agrees_with_the_reference_row_by_row(trees, spark, archive_frame, notifications):
    spark.conf.set("spark.sql.ansi.enabled", "false")
    entries: dict = {}
    columns = []
    for i, tree in enumerate(trees):
        entries, predicate = translate(tree, entries)
        columns.append(predicate.alias(f"m{i}"))
    frame = archive_frame.select("producer", *[c.alias(n) for n, c in entries.values()])
    rows = frame.select("producer", *columns).collect()
    assert len(rows) == len(notifications)
    for row in rows:
        attrs = notifications[int(row["producer"][1:])]
        for i, tree in enumerate(trees):
            assert row[f"m{i}"] is reference(tree, attrs), (unparse(tree), attrs)
