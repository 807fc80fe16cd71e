"""elvin.quenching: which values of an attribute do subscriptions want?"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elvin.quenching import (
    NOTHING,
    UNBOUNDED,
    Constraint,
    Interval,
    Match,
    could_match,
    could_match_any,
    wanted,
    wanted_by,
)
from elvin.subscription import compile as compile_subscription
from elvin.subscription import parse
from elvin.subscription.ast import names_in
from elvin.subscription.reference import evaluate as reference_evaluate
from elvin.values import Int64
from tests.subscription_strategies import notifications, numbers, predicates

X = "File-Path"


def w(*texts: str, attribute: str = X, **kw):
    return wanted([parse(t) for t in texts], attribute, **kw)


def test_exact_values():
    result = w('File-Path == "/a"', '"/b" == File-Path', 'equals(File-Path, "/c", "/d")')
    assert not result.unbounded
    assert result.exact == {"/a", "/b", "/c", "/d"}
    assert result.only_exact
    assert result.matches("/a") and not result.matches("/e")


def test_require_alone_is_unbounded():
    assert w("require(File-Path)") is UNBOUNDED
    assert w("require(File-Path)").matches("/anything")


def test_or_with_unrelated_branch_is_unbounded():
    assert w('File-Path == "/a" || File-Size > 3').unbounded


def test_and_keeps_the_tighter_side():
    result = w('File-Path == "/a" && File-Size > 3')
    assert result.exact == {"/a"}
    result = w('begins-with(File-Path, "/home") && File-Path == "/home/x"')
    assert result.only_exact and result.exact == {"/home/x"}


def test_string_negations_and_other_predicates_are_unbounded():
    for text in ('File-Path != "/a"', '!(File-Path == "/a")',
                 'size(File-Path) > 3', 'string(File-Path)',
                 'File-Path == "/a" ^^ File-Size == 1', "File-Path == Other"):
        assert w(text).unbounded, text


def test_string_operators():
    result = w('begins-with(File-Path, "/home/", "/tmp/")', 'ends-with(File-Path, ".txt")',
               'contains(File-Path, "log")', 'wildcard(File-Path, "/etc/*.conf")',
               'regex(File-Path, "^/var/.*[0-9]$")')
    assert result.prefixes == {"/home/", "/tmp/"}
    assert result.suffixes == {".txt"}
    assert result.substrings == {"log"}
    assert result.wildcards == {"/etc/*.conf"}
    assert result.regexes == {"^/var/.*[0-9]$"}
    assert not result.only_exact
    for path in ("/home/a", "/tmp/b", "/x/y.txt", "/x/log/y", "/etc/a.conf", "/var/x9"):
        assert result.matches(path), path
    for path in ("/usr/bin", "/etc/a.cfg", "/var/x"):
        assert not result.matches(path), path


def test_fold_case_is_a_transform():
    result = w('fold-case(File-Path) == "/readme"')
    (constraint,) = result.constraints
    assert constraint == Constraint(Match.EQUALS, "/readme", ("fold-case",))
    assert constraint.fold_case
    assert result.exact == frozenset()          # not a plain exact value
    assert result.by(Match.EQUALS, plain=False) == {"/readme"}
    assert result.matches("/README") and result.matches("/ReadMe")
    assert not result.matches("/other")
    result = w('begins-with(fold-case(File-Path), "/home")')
    assert result.matches("/HOME/x") and not result.matches("/usr")


def test_operator_restriction_makes_unknown_operators_unbounded():
    assert w('regex(File-Path, "a")', operators={Match.EQUALS, Match.BEGINS_WITH}).unbounded
    result = w('begins-with(File-Path, "/a")', operators={Match.EQUALS, Match.BEGINS_WITH})
    assert result.prefixes == {"/a"}


def test_nothing_and_union():
    assert wanted([], X) is NOTHING
    assert NOTHING.nothing and not NOTHING
    assert not NOTHING.matches("/a")
    assert (NOTHING | UNBOUNDED).unbounded


def test_mapping_input_and_per_term():
    asts = {7: parse('File-Path == "/a"'), 9: parse("require(File-Path)")}
    assert wanted(asts, X).unbounded
    per = wanted_by(asts, X)
    assert per[7].exact == {"/a"} and per[9].unbounded


def test_numeric_equality_values():
    result = w("Port == 80 || Port == 443", attribute="Port")
    assert result.exact == {80, 443}
    assert result.matches(80) and result.matches(443.0) and not result.matches(22)


def test_could_match_partial_notification():
    ast = parse('File-Path == "/a" && size(Body) > 3')
    assert could_match(ast, {X: "/a"})           # Body unknown: could still match
    assert not could_match(ast, {X: "/b"})       # ruled out by the known value
    assert could_match(ast, {X: "/a", "Body": "long body"})
    assert not could_match(ast, {X: "/a", "Body": "no"})
    # complete=True: absent names are bottom
    assert not could_match(ast, {X: "/a"}, complete=True)
    either = parse('File-Path == "/a" || Other == 1')
    assert could_match(either, {X: "/b"})        # the other branch may be true
    assert not could_match(parse('!require(File-Path)'), {X: "/b"})
    assert could_match_any([ast, either], {X: "/b"})
    assert names_in(either) == {X, "Other"}


notification_values = st.one_of(st.integers(-5, 5), st.sampled_from(["/a", "/b", "/A", "x"]))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([
    'File-Path == "/a"', 'fold-case(File-Path) == "/a"', 'begins-with(File-Path, "/")',
    'File-Path == "/a" || Size > 2', 'File-Path == "/a" && Size > 2', "require(File-Path)",
    '!(File-Path == "/b")', 'ends-with(File-Path, "a") || File-Path == 3',
    'equals(File-Path, "/b", 2) && !(Size < 0)',
]), st.dictionaries(st.sampled_from([X, "Size"]), notification_values, min_size=1))
def test_analysis_never_under_approximates(text, notification):
    """Whatever a subscription matches, wanted() and could_match() allow."""
    ast = parse(text)
    if compile_subscription(ast).matches(notification):
        assert could_match(ast, notification)
        assert could_match(ast, {k: v for k, v in notification.items() if k == X})
        if X in notification:
            assert wanted([ast], X).matches(notification[X])


@pytest.mark.parametrize("value", ["/a", "/b", 3])
def test_constraint_node_round_trips(value):
    constraint = Constraint(Match.EQUALS, value)
    assert constraint.matches(value)
    assert str(constraint)


# -- numeric intervals ---------------------------------------------------------------

def test_comparisons_give_intervals():
    result = w("Temperature < 80", attribute="Temperature")
    (interval,) = result.intervals
    assert interval == Interval(high=80)
    assert result.matches(70) and result.matches(79.5) and result.matches(-math.inf)
    assert not result.matches(80) and not result.matches(85) and not result.matches(80.0)
    assert not result.matches(math.nan)       # NaN orders above +inf
    assert not result.matches("70")           # a string compared with a number is bottom
    assert 70 in interval and 85 not in interval


def test_ends_open_and_closed_and_flipped():
    result = w("T >= 0 && 80.5 >= T", attribute="T")
    assert result.intervals == {Interval(0, True, 80.5, True)}
    assert result.matches(0) and result.matches(80.5) and result.matches(Int64(3))
    assert not result.matches(-0.0)           # -0.0 < 0 as the language orders reals
    assert not result.matches(80.6)


def test_nan_is_above_every_number():
    assert w("T > 80", attribute="T").matches(math.nan)
    assert not w("T <= 80", attribute="T").matches(math.nan)
    only = w("nan(T)", attribute="T")
    assert only.matches(math.nan) and not only.matches(math.inf) and not only.matches(1)


def test_negation_and_not_equals():
    assert w("!(T < 80)", attribute="T").intervals == {Interval(80, True)}
    result = w("T != 3", attribute="T")
    assert result.matches(2) and result.matches(4) and not result.matches(3)
    assert not result.matches(3.0) and not result.matches("x")
    assert w("!(T > 1 || T < -1)", attribute="T").intervals == {Interval(-1, True, 1, True)}
    assert w('!(T == "a")', attribute="T").unbounded


def test_and_meets_or_joins():
    assert w("T > 5 && T < 3", attribute="T").nothing
    assert w("T == 85 && T < 80", attribute="T").nothing
    assert w("T == 70 && T < 80", attribute="T").exact == {70}
    assert w('T > 3 && T == "a"', attribute="T").nothing
    result = w("T < 0 || T > 100", attribute="T")
    assert result.matches(-1) and result.matches(101) and not result.matches(50)
    assert w("T < 80 || U == 1", attribute="T").unbounded


def test_prefixes_meet():
    assert w('begins-with(File-Path, "/a") && begins-with(File-Path, "/a/b")').prefixes \
        == {"/a/b"}
    assert w('begins-with(File-Path, "/a") && begins-with(File-Path, "/b")').nothing
    assert w('begins-with(File-Path, "/a") && File-Path == "/a/x"').exact == {"/a/x"}
    assert w('begins-with(File-Path, "/a") && File-Path == "/b"').nothing


def test_negative_zero_is_its_own_value():
    result = w("T == -0.0 || T == 0.0", attribute="T")
    assert result.matches(-0.0) and result.matches(0.0)


def test_big_ints_against_reals_stay_sound():
    # 2**53 + 1 == 2.0**53 in the language (the int is promoted and rounds)
    result = w(f"T > {2 ** 53}L && T <= {float(2 ** 53)}", attribute="T")
    assert result.matches(2 ** 53 + 1)
    assert w(f"T == {2 ** 53 + 1}L && T <= {2 ** 53}L", attribute="T").matches(float(2 ** 53))


def test_operator_restriction_covers_ranges():
    assert w("T < 3", attribute="T", operators={Match.EQUALS}).unbounded
    assert w("T < 3", attribute="T", operators={Match.RANGE}).intervals


@settings(max_examples=700, deadline=None)
@given(predicates(["T", "U"], ["S"]), notifications(["T", "U"], ["S"]))
def test_wanted_contains_every_value_the_reference_matches(tree, notification):
    """For random subscriptions and notifications: when the reference
    evaluator says a notification matches, wanted() allows its value of
    every attribute it has."""
    if reference_evaluate(tree, notification) is not True:
        return
    for attribute, value in notification.items():
        result = wanted([tree], attribute)
        assert result.matches(value), (attribute, value, result)
        assert wanted([tree, parse("require(Other)")], attribute).matches(value)


@settings(max_examples=600, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]),
                          st.one_of(st.sampled_from([0, 80, -1, 2 ** 53, 2 ** 53 + 1]),
                                    st.sampled_from([0.0, -0.0, 80.0, 2.0 ** 53, 79.5])),
                          st.booleans()),
                min_size=1, max_size=4),
       st.lists(st.sampled_from(["&&", "||"]), min_size=3, max_size=3), numbers())
def test_interval_algebra_against_the_reference(parts, joins, value):
    """Chains of comparisons on one name (where intervals meet and join,
    near the int/real and -0.0/NaN edges): never unwanted when matched."""
    text = ""
    for i, (op, literal, negate) in enumerate(parts):
        written = f"{literal}L" if isinstance(literal, int) and literal > 2 ** 31 else repr(literal)
        atom = f"T {op} {written}"
        atom = f"!({atom})" if negate else atom
        text = atom if i == 0 else f"({text}) {joins[i - 1]} {atom}"
    tree = parse(text)
    if reference_evaluate(tree, {"T": value}) is True:
        assert wanted([tree], "T").matches(value), (text, value)


def test_overlapping_ranges_are_joined():
    result = w("T < 0", "T >= 0 && T < 10", "T > 20", "T == 15", "T == 5", attribute="T")
    assert result.intervals == {Interval(high=10), Interval(low=20)}
    assert result.exact == {15}                   # 5 is inside [-inf, 10)
    assert w("T < 0", "T > 0", attribute="T").intervals == {Interval(high=0), Interval(low=0)}
    assert w("T <= 0", "T > 0", attribute="T").intervals == {Interval()}
    assert w("nan(T)", "T > 3", attribute="T").intervals == {Interval(low=3)}


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]),
                          st.one_of(st.integers(-3, 3), st.sampled_from([-0.0, 0.0, 1.5, -1.5]),
                                    st.sampled_from([2 ** 53, 2 ** 53 + 1, 2.0 ** 53])),
                          st.sampled_from(["<", "<=", ">", ">=", None]),
                          st.integers(-3, 3)),
                min_size=1, max_size=6), numbers())
def test_joined_ranges_of_many_subscriptions_stay_sound(subs, value):
    """Several subscriptions (one or two comparisons each): joining their
    ranges never drops a value one of them matches."""
    texts = []
    for op, literal, op2, literal2 in subs:
        written = f"{literal}L" if isinstance(literal, int) and literal > 2 ** 31 else repr(literal)
        text = f"T {op} {written}"
        texts.append(text if op2 is None else f"{text} && T {op2} {literal2}")
    trees = [parse(t) for t in texts]
    if any(reference_evaluate(tree, {"T": value}) is True for tree in trees):
        assert wanted(trees, "T").matches(value), (texts, value)
