"""Explain a match: each clause's three-valued result and why, from the
reference interpreter; and the elvin-explain command reading ec/ep text."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from elvin.subscription import parse
from elvin.subscription.explain import explain
from elvin.subscription.reference import evaluate
from elvin.text import format_notification

ROOT = Path(__file__).resolve().parents[2]
EXPRESSION = 'Price < 10 && (Symbol == "ACME" || begins-with(Symbol, "AC")) && !require(Halted)'


def results(attrs: dict) -> dict[str, tuple]:
    return {s.text: (s.word, s.reason) for s in explain(EXPRESSION, attrs)}


@pytest.mark.parametrize("attrs", [
    {"Price": 5, "Symbol": "ACME"}, {"Price": 12.5}, {"Price": "cheap", "Symbol": "ACME"},
    {"Price": 5, "Symbol": 3, "Halted": 1}, {"Price": 5, "Symbol": "XYZ"}, {}])
def test_the_whole_agrees_with_the_reference_evaluator(attrs):
    assert explain(EXPRESSION, attrs)[0].result == evaluate(parse(EXPRESSION), attrs)


def test_each_clause_says_why():
    got = results({"Price": 12.5})
    assert got["Price < 10"] == ("false", "Price = 12.5")
    assert got['Symbol == "ACME"'] == ("bottom", "missing attribute Symbol")
    assert got["require(Halted)"] == ("bottom", "missing attribute Halted")
    got = results({"Price": "cheap", "Symbol": 3})
    assert got["Price < 10"] == ("bottom", "wrong type: Price is a string but 10 is an int32")
    assert got['begins-with(Symbol, "AC")'] == (
        "bottom", "wrong type: Symbol is an int32, not a string")
    got = results({"Price": 5, "Symbol": "ACME"})
    assert got["Price < 10"] == ("true", "")
    steps = explain(EXPRESSION, {"Price": 5, "Symbol": "ACME"})
    assert [s.depth for s in steps] == [0, 1, 1, 2, 2, 1, 2]


def test_cli_reads_ec_text_and_marks_the_failing_clause(tmp_path):
    text = (format_notification({"Price": 5, "Symbol": "ACME", "Halted": 1}) + "\n---\n"
            "$time 2024-01-01T00:00:00.000+0000\n"
            + format_notification({"Price": "cheap"}) + "\n---\n")
    run = [sys.executable, "-m", "elvin.tools.explain"]
    result = subprocess.run([*run, 'Price < 10 && !require(Halted)'], input=text,
                            capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert result.returncode == 0, result.stderr
    index, first, second = result.stdout.strip().split("\n\n")
    # (!require(Halted) is never true: nor is the whole, and the router knows it)
    assert index == "router index: not indexed: it can never be true, so it is never evaluated"
    assert first.splitlines()[0] == "notification 1 (line 1): false — does not match"
    assert "✓ true    Price < 10" in first
    assert "✗ false   !require(Halted)" in first
    assert "bottom — does not match" in second.splitlines()[0]
    assert "wrong type: Price is a string" in second
    assert "missing attribute Halted" in second
    bad = subprocess.run([*run, "Price <"], input=text, capture_output=True, text=True,
                         cwd=ROOT, timeout=30)
    assert bad.returncode == 1 and bad.stderr.startswith("elvin-explain: bad subscription")
    garbage = subprocess.run([*run, "require(x)"], input="not an attribute line\n",
                             capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert garbage.returncode == 1 and "line 1" in garbage.stderr
    assert "Traceback" not in bad.stderr + garbage.stderr


def test_failing_names_the_clauses_to_change():
    from elvin.subscription.explain import failing
    steps = explain(EXPRESSION, {"Price": 12.5, "Symbol": "ACME", "Halted": 1})
    assert [steps[i].text for i in failing(steps)] == ["Price < 10", "!require(Halted)"]
    steps = explain(EXPRESSION, {"Price": 5, "Symbol": "XYZ"})
    assert [steps[i].text for i in failing(steps)] == [
        'Symbol == "ACME"', 'begins-with(Symbol, "AC")', "!require(Halted)"]
    assert failing(explain("Price < 10 && Symbol == \"ACME\"", {"Price": 5, "Symbol": "ACME"})) == []


@pytest.mark.parametrize(("expression", "lines"), [
    ('Group == "chat" && require(Message)', ['value index: Group == "chat"']),
    ("Seq >= 10 && Seq < 20", ["range index: Seq from 10 to 20"]),
    ('Symbol == "X" && Price > 101.5',
     ['value index: Symbol == "X"; then checked: Price from 101.5']),
    ('begins-with(Path, "/srv/www/")', ['prefix index: Path begins with "/srv/www/"']),
    ('ends-with(fold-case(File), ".c", ".h")',
     ['suffix index: fold-case(File) ends with ".c" or ".h"']),
    ('regex(Message, "^alert")', ["name index (scanned): Message is present"]),
    ("Price * 2 > Cost", ["name index (scanned): Cost is present"]),
    ("!(Temperature <= 40)", ["range index: Temperature from 40"]),
    ('fold-case(User) == "bob" || Host == "h1"',
     ['value index: fold-case(User) == "bob"', 'value index: Host == "h1"']),
    ("!require(Halted)", ["not indexed: it can never be true, so it is never evaluated"]),
])
def test_index_placement_says_which_index_a_subscription_is_in(expression, lines):
    from elvin.subscription.explain import index_placement
    assert index_placement(expression) == lines


def test_cli_index_only_needs_no_notifications():
    run = [sys.executable, "-m", "elvin.tools.explain", "--index"]
    result = subprocess.run([*run, 'regex(Message, "a") || Temperature > 40'], input="",
                            capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "router index: filed in several places; evaluated for a notification that meets one of",
        "  name index (scanned): Message is present",
        "  range index: Temperature from 40"]
    bad = subprocess.run([*run, "Price <"], capture_output=True, text=True, cwd=ROOT,
                         timeout=30)
    assert bad.returncode == 1 and bad.stderr.startswith("elvin-explain: bad subscription")
    assert "Traceback" not in bad.stderr
