"""filewatcher.pathset: subscription AST -> interests, within the roots."""

from __future__ import annotations

import os

import pytest
from elvin_apps.filewatcher.pathset import (
    FILE,
    TREE,
    Interest,
    analyse,
    regex_prefix,
    wildcard_prefix,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from elvin.subscription import compile as compile_subscription
from elvin.subscription import parse

ROOT = "/srv"


def fake_resolve(links: dict[str, str] | None = None):
    """normpath plus symlinks given as {link: target} (no file system)."""
    links = links or {}

    def resolve(path: str) -> str:
        path = os.path.normpath(path)
        for link, target in links.items():
            if path == link or path.startswith(link + "/"):
                path = target + path[len(link):]
        return path

    return resolve


def interests(text: str, roots=(ROOT,), **kw) -> set[Interest]:
    kw.setdefault("resolve", fake_resolve())
    result = analyse(parse(text), list(roots), **kw)
    return set(result.interests)


def test_exact_paths_are_files():
    assert interests('File-Path == "/srv/a/b"') == {Interest(FILE, "/srv/a/b", "/srv/a/b")}
    assert interests('equals(File-Path, "/srv/x", "/srv/y/z")') == {
        Interest(FILE, "/srv/x", "/srv/x"), Interest(FILE, "/srv/y/z", "/srv/y/z")}
    i = Interest(FILE, "/srv/a/b", "/srv/a/b")
    assert i.watch_dir == "/srv/a" and not i.recursive


def test_begins_with_is_a_tree():
    assert interests('begins-with(File-Path, "/srv/www/")') == {
        Interest(TREE, "/srv/www", "/srv/www")}
    # without the slash: the parent's tree, narrowed to the prefix
    (i,) = interests('begins-with(File-Path, "/srv/ww")')
    assert (i.kind, i.path, i.prefix) == (TREE, "/srv", "/srv/ww")
    assert i.covers("/srv/www2/x") and i.covers("/srv/ww") and not i.covers("/srv/abc")
    assert i.recursive and i.watch_dir == "/srv"


def test_wildcard_and_regex_watch_the_directory_of_their_literal_prefix():
    (i,) = interests('wildcard(File-Path, "/srv/logs/*.log")')
    assert (i.kind, i.path, i.prefix) == (TREE, "/srv/logs", None)
    (i,) = interests('wildcard(File-Path, "/srv/logs/app-*")')
    assert (i.kind, i.path, i.prefix) == (TREE, "/srv/logs", "/srv/logs/app-")
    assert interests('wildcard(File-Path, "/srv/exact\\\\*name")') == {
        Interest(FILE, "/srv/exact*name", "/srv/exact*name")}
    (i,) = interests('regex(File-Path, "^/srv/logs/.*\\\\.log$")')
    assert (i.kind, i.path) == (TREE, "/srv/logs")
    assert interests('regex(File-Path, "^/srv/a\\\\.txt$")') == {
        Interest(FILE, "/srv/a.txt", "/srv/a.txt")}


def test_regex_prefix():
    assert regex_prefix("^/a/b$") == ("/a/b", True)
    assert regex_prefix("^/a/b") == ("/a/b", False)
    assert regex_prefix("^/a/bc?d") == ("/a/b", False)      # c is optional
    assert regex_prefix("^/a/bc*") == ("/a/b", False)
    assert regex_prefix("^/a/bc+") == ("/a/bc", False)
    assert regex_prefix("^/a/b{2}") == ("/a/", False)
    assert regex_prefix("^/a/(x|y)/z") == ("/a/", False)    # alternation inside a group
    assert regex_prefix("^/a\\.b/\\d+") == ("/a.b/", False)
    assert regex_prefix("^/a|^/b") is None                  # top-level alternation
    assert regex_prefix("/a/b") is None                     # unanchored: anywhere
    assert regex_prefix("^[|]/x") == ("", False)            # | inside brackets is literal
    assert regex_prefix("^") == ("", False)


def test_wildcard_prefix():
    assert wildcard_prefix("/a/*.log") == ("/a/", False)
    assert wildcard_prefix("/a/?x") == ("/a/", False)
    assert wildcard_prefix("/a/[ab]") == ("/a/", False)
    assert wildcard_prefix("/a/b") == ("/a/b", True)
    assert wildcard_prefix("/a/\\*") == ("/a/*", True)
    assert wildcard_prefix("") == ("", True)


def test_and_keeps_the_cheaper_bounded_side():
    assert interests('ends-with(File-Path, ".log") && begins-with(File-Path, "/srv/logs/")') \
        == {Interest(TREE, "/srv/logs", "/srv/logs")}
    assert interests('begins-with(File-Path, "/srv/") && File-Path == "/srv/a"') == {
        Interest(FILE, "/srv/a", "/srv/a")}
    assert interests('File-Size > 10 && File-Path == "/srv/a"') == {
        Interest(FILE, "/srv/a", "/srv/a")}


def test_or_needs_every_side_bounded():
    assert interests('File-Path == "/srv/a" || File-Path == "/srv/b"') == {
        Interest(FILE, "/srv/a", "/srv/a"), Interest(FILE, "/srv/b", "/srv/b")}
    result = analyse(parse('File-Path == "/srv/a" || File-Size > 3'), [ROOT],
                     resolve=fake_resolve())
    assert result.unbounded and not result.interests


def test_dest_path_constraints_count():
    assert interests('File-Path == "/srv/a" || File-Dest-Path == "/srv/b"') == {
        Interest(FILE, "/srv/a", "/srv/a"), Interest(FILE, "/srv/b", "/srv/b")}


@pytest.mark.parametrize("text", [
    "require(File-Path)", 'ends-with(File-Path, ".txt")', 'contains(File-Path, "x")',
    'fold-case(File-Path) == "/srv/a"', 'regex(File-Path, "srv")', '!(File-Path == "/srv/a")',
    'File-Path != "/srv/a"', 'File-Event == "created"', "File-Path == File-Dest-Path",
])
def test_unbounded_subscriptions_follow_the_policy(text):
    ignored = analyse(parse(text), [ROOT], policy="ignore", resolve=fake_resolve())
    assert ignored.unbounded and ignored.interests == frozenset()
    assert "ignored (policy)" in ignored.notes[0]
    roots = analyse(parse(text), [ROOT, "/home"], policy="roots", resolve=fake_resolve())
    assert roots.unbounded
    assert set(roots.interests) == {Interest(TREE, ROOT, ROOT), Interest(TREE, "/home", "/home")}


def test_values_that_cannot_be_paths_watch_nothing():
    for text in ('File-Path == 42', 'File-Path == "relative"', 'begins-with(File-Path, "x")',
                 'wildcard(File-Path, "x*")'):
        result = analyse(parse(text), [ROOT], resolve=fake_resolve())
        assert not result.unbounded and result.interests == frozenset(), text


def test_only_paths_under_the_roots_are_watched():
    assert interests('File-Path == "/etc/passwd"') == set()
    assert interests('File-Path == "/srv/../etc/passwd"') == set()
    assert interests('begins-with(File-Path, "/etc/")') == set()
    assert interests('File-Path == "/srvx/a"') == set()        # a sibling with the same prefix
    result = analyse(parse('equals(File-Path, "/etc/passwd", "/srv/ok")'), [ROOT],
                     resolve=fake_resolve())
    assert set(result.interests) == {Interest(FILE, "/srv/ok", "/srv/ok")}
    assert "outside the roots" in result.notes[0] and "/etc/passwd" in result.notes[0]


def test_symlinks_are_resolved_before_checking():
    resolve = fake_resolve({"/srv/escape": "/etc", "/tmp/www": "/srv/www"})
    assert interests('File-Path == "/srv/escape/passwd"', resolve=resolve) == set()
    assert interests('begins-with(File-Path, "/srv/escape/")', resolve=resolve) == set()
    # a subscription through a link into a root is watched at the real path and
    # reported with the subscriber's spelling
    (i,) = interests('File-Path == "/tmp/www/index.html"', resolve=resolve)
    assert (i.path, i.shown) == ("/srv/www/index.html", "/tmp/www/index.html")
    (t,) = interests('begins-with(File-Path, "/tmp/www/")', resolve=resolve)
    assert (t.path, t.shown) == ("/srv/www", "/tmp/www")
    assert t.show("/srv/www/a/b") == "/tmp/www/a/b"


def test_a_tree_above_the_roots_watches_the_roots():
    assert interests('begins-with(File-Path, "/")', roots=("/srv/www", "/home/u")) == {
        Interest(TREE, "/srv/www", "/srv/www"), Interest(TREE, "/home/u", "/home/u")}
    assert interests('begins-with(File-Path, "/srv/w")', roots=("/srv/www", "/srv/other")) \
        == {Interest(TREE, "/srv/www", "/srv/www")}
    assert interests('wildcard(File-Path, "*")', roots=("/srv/www",)) == {
        Interest(TREE, "/srv/www", "/srv/www")}


def test_too_many_paths_is_unbounded():
    many = ", ".join(f'"/srv/f{i}"' for i in range(50))
    result = analyse(parse(f"equals(File-Path, {many})"), [ROOT], max_paths=20,
                     resolve=fake_resolve())
    assert result.unbounded and "more than 20 paths" in result.notes[0]
    result = analyse(parse(f"equals(File-Path, {many})"), [ROOT], max_paths=50,
                     resolve=fake_resolve())
    assert len(result.interests) == 50


def test_analysis_never_raises():
    def broken(path: str) -> str:
        raise RuntimeError("boom")

    result = analyse(parse('File-Path == "/srv/a"'), [ROOT], resolve=broken)
    assert result.unbounded and "could not be analysed" in result.notes[0]


PATHS = st.lists(st.sampled_from(["a", "b", "ab", "x.log", "d", "."]), min_size=1,
                 max_size=4).map(lambda parts: "/srv/" + "/".join(parts))
PATTERNS = st.sampled_from([
    ('File-Path == "{p}"', None), ('begins-with(File-Path, "{p}")', None),
    ('wildcard(File-Path, "{p}*")', None), ('wildcard(File-Path, "{p}?")', None),
    ('regex(File-Path, "^{p}.*")', None), ('regex(File-Path, "^{p}$")', None),
    ('begins-with(File-Path, "{p}/")', None),
])


@settings(max_examples=200, deadline=None)
@given(pattern=PATTERNS, p=PATHS, candidate=PATHS)
def test_never_misses_a_path_the_subscription_matches(pattern, p, candidate):
    """Soundness: whenever the subscription matches a path under the root,
    some interest covers it."""
    text = pattern[0].format(p=p.replace(".", "\\\\.") if "regex" in pattern[0] else p)
    compiled = compile_subscription(text)
    found = interests(text)
    norm = os.path.normpath(candidate)
    if compiled.matches({"File-Path": norm}):
        assert any(i.covers(norm) for i in found), (text, norm, found)


def test_a_browsers_subscription_watches_nothing():
    """The console's Browse subscribes to every name in use; marked as a
    browser's, it has no root watched even under policy = "roots"."""
    text = "require(Elvin-Browse) || require(File-Path) || require(Group)"
    result = analyse(parse(text), [ROOT], policy="roots", resolve=fake_resolve())
    assert not result.unbounded and result.interests == frozenset()
    unmarked = analyse(parse(text.removeprefix("require(Elvin-Browse) || ")), [ROOT],
                       policy="roots", resolve=fake_resolve())
    assert unmarked.unbounded and unmarked.interests
