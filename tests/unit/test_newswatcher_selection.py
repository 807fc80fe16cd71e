"""newswatcher selection: which feeds the quench's subscriptions keep polled."""

from __future__ import annotations

import pytest
from elvin_apps.newswatcher.config import FeedConfig
from elvin_apps.newswatcher.selection import Selection, feed_could_match, possible
from elvin_apps.tickertape.groups import groups_expression, threads_expression

from elvin.client import SubscriptionAdded, SubscriptionModified, SubscriptionRemoved
from elvin.subscription import compile as compile_subscription
from elvin.subscription import parse

LWN = FeedConfig("lwn", "https://lwn.net/rss", groups=("news", "linux"))
PY = FeedConfig("pyblog", "https://blog.python.org/feed", groups=("python",),
                sender="Python Insider")
HN = FeedConfig("hn", "https://news.ycombinator.com/rss")
FEEDS = [LWN, PY, HN]


def polled_by(expression: str) -> set[str]:
    ast = parse(expression)
    return {f.name for f in FEEDS if feed_could_match(ast, f)}


@pytest.mark.parametrize("expression, feeds", [
    ('News-Feed == "lwn"', {"lwn"}),
    ('equals(News-Feed, "lwn", "hn")', {"lwn", "hn"}),
    ('contains(News-Title, "python")', {"lwn", "pyblog", "hn"}),
    ('News-Feed == "lwn" && contains(News-Title, "python")', {"lwn"}),
    ('Group == "news"', {"lwn", "hn"}),
    ('From == "Python Insider"', {"pyblog"}),
    ('News-Feed != "lwn"', {"pyblog", "hn"}),
    ('begins-with(News-Feed-URL, "https://lwn.net/")', {"lwn"}),
    ('News-Feed == "nope"', set()),
    ('require(Message)', {"lwn", "pyblog", "hn"}),
    # names the newswatcher never produces are absent, not unknown
    ('require(File-Path) || News-Feed == "hn"', {"hn"}),
    ('News-Feed == "lwn" && require(Foo)', set()),
    ('News-Feed == "lwn" || !(Foo == 1)', {"lwn"}),
])
def test_feed_level_decisions(expression, feeds):
    assert polled_by(expression) == feeds


def test_tickertape_group_subscriptions_including_the_legacy_branch():
    # the tickertape's own expression: v3 names || pre-v3 names (TICKERTAPE...)
    assert polled_by(groups_expression(["news"], legacy=True)) == {"lwn", "hn"}
    assert polled_by(groups_expression(["LINUX"], legacy=True)) == {"lwn"}   # fold-case
    assert polled_by(groups_expression(["Chat"], legacy=True)) == set()
    assert polled_by(threads_expression(["t-1"])) == set()


def test_possible_agrees_with_the_evaluator_on_complete_notifications():
    # with every produced name known, possible() is exact
    attrs = {"News-Feed": "lwn", "Group": "news", "News-Title": "Python 3"}
    produced = frozenset(attrs)
    for text in ['News-Feed == "lwn" && contains(News-Title, "Python")',
                 '!(Group == "news") || require(Nope)', 'News-Title == "x" ^^ Group == "news"',
                 'require(Nope)', '!require(Nope)']:
        exact = compile_subscription(text).evaluate(attrs)
        assert possible(parse(text), attrs, produced) == {exact}, text


def test_incremental_updates_and_reasons():
    changes = []
    sel = Selection(FEEDS, on_change=changes.append)
    assert sel.polled_names() == []
    sel.apply(SubscriptionAdded(7, parse('News-Feed == "lwn"'), False))
    assert sel.polled_names() == ["lwn"] and changes == [{"lwn"}]
    assert sel.choice("lwn").terms == (7,)
    assert sel.expression(7) == 'News-Feed == "lwn"'
    sel.apply(SubscriptionAdded(8, parse('Group == "news"'), False))
    assert sel.polled_names() == ["lwn", "hn"] and changes[-1] == {"hn"}
    assert sel.choice("lwn").terms == (7, 8)
    sel.apply(SubscriptionModified(7, parse('News-Feed == "pyblog"'), False))
    assert sel.polled_names() == ["lwn", "pyblog", "hn"] and changes[-1] == {"pyblog"}
    assert sel.choice("lwn").terms == (8,)
    sel.apply(SubscriptionRemoved(8))
    assert sel.polled_names() == ["pyblog"] and changes[-1] == {"lwn", "hn"}
    sel.apply(SubscriptionRemoved(99))         # unknown: harmless
    sel.clear_terms()
    assert sel.polled_names() == [] and changes[-1] == {"pyblog"}


def test_scoop_and_feed_changes():
    sel = Selection(FEEDS)
    sel.set_term(1, parse('News-Feed == "new"'))
    assert sel.polled_names() == []
    sel.set_feeds(FEEDS + [FeedConfig("new", "http://n/")])
    assert sel.polled_names() == ["new"]
    sel.set_scoop(True)
    assert sel.polled_names() == ["lwn", "pyblog", "hn", "new"]
    assert sel.choice("hn").scoop and sel.choice("hn").terms == ()


def test_a_browsers_subscription_polls_nothing():
    """The console's Browse subscribes to every name in use; marked as a
    browser's, it keeps no feed polled (it would otherwise keep them all)."""
    from elvin_apps.console.browse import browse_expression

    browse = browse_expression(["Group", "Message", "News-Title"])
    assert polled_by(browse) == set()
    assert polled_by(browse.removeprefix("require(Elvin-Browse) || ")) == {"lwn", "pyblog", "hn"}
