"""The attribute census notification's format (``Elvin-Router-Attributes``):
written by the router (``elvin.router.census``, which says when and why),
read by any client that browses a router (the console's Browse pane). The
two sides share this module, so that an application reads the census
without importing the router.

============================  =======  ==============================================
attribute                     type     meaning
============================  =======  ==============================================
Elvin-Router-Attributes       int32    always 1: subscribe with
                                       ``require(Elvin-Router-Attributes)``
Router-Id                     string   the router's id (as in Elvin-Router-Stats)
Attribute-Names               string   the names seen within ``Attribute-Window``
                                       seconds, one per line, the most used first
Attribute-Counts              string   how many notifications had each, one per line,
                                       in the same order
Attribute-Names-Left-Out      int32    names seen but not listed
Attribute-Window              real64   the seconds the list covers
============================  =======  ==============================================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from elvin.values import Int64

__all__ = ["BROWSE_MARKER", "BROWSE_TERM", "CENSUS_ATTRIBUTE", "CENSUS_SUBSCRIPTION",
           "RECENT_NAMES", "RECENT_REQUEST", "census_notification", "read_census",
           "recent_request"]

CENSUS_ATTRIBUTE = "Elvin-Router-Attributes"
#: what a client subscribes to for the census
CENSUS_SUBSCRIPTION = f"require({CENSUS_ATTRIBUTE})"

#: A browser's subscription (``require(A) || require(B) || ...``) says it is
#: one with ``require(Elvin-Browse) || ...`` (no notification carries the
#: name, so the term never matches): a quench-driven producer that sees it
#: knows it is someone looking at everything, not someone who wants
#: everything produced (``elvin.quenching.is_browsing``).
BROWSE_MARKER = "Elvin-Browse"
BROWSE_TERM = f"require({BROWSE_MARKER})"

#: A notification to the router, not delivered to anyone: "replay your
#: recent notifications to my subscription N" (``elvin.router.recent``), the
#: value is the subscription's id; ``RECENT_NAMES`` (names, one per line)
#: limits it to notifications with one of those names.
RECENT_REQUEST = "Elvin-Router-Recent"
RECENT_NAMES = "Elvin-Router-Recent-Names"


def recent_request(subscription_id: int, names: Sequence[str] = ()) -> dict[str, object]:
    """The notification asking the router to replay to ``subscription_id``."""
    request: dict[str, object] = {RECENT_REQUEST: Int64(subscription_id)}
    if names:
        request[RECENT_NAMES] = "\n".join(names)
    return request


def census_notification(router_id: str, listed: Sequence[tuple[str, int]], left_out: int,
                        window: float) -> dict[str, object]:
    """The notification listing ``(name, count)`` pairs, most used first
    (names with a line break cannot be listed: the caller leaves them out)."""
    return {
        CENSUS_ATTRIBUTE: 1,
        "Router-Id": router_id,
        "Attribute-Names": "\n".join(name for name, _count in listed),
        "Attribute-Counts": "\n".join(str(count) for _name, count in listed),
        "Attribute-Names-Left-Out": left_out,
        "Attribute-Window": float(window),
    }


def read_census(attributes: Mapping[str, object]) -> dict[str, int] | None:
    """The names and counts a census notification lists, or None when
    ``attributes`` is not one (or is malformed: wrong types, counts that
    do not line up)."""
    if attributes.get(CENSUS_ATTRIBUTE) != 1:
        return None
    names, counts = attributes.get("Attribute-Names"), attributes.get("Attribute-Counts")
    if not isinstance(names, str) or not isinstance(counts, str):
        return None
    name_list = names.split("\n") if names else []
    count_list = counts.split("\n") if counts else []
    if len(name_list) != len(count_list):
        return None
    found: dict[str, int] = {}
    for name, count in zip(name_list, count_list, strict=True):
        if not name or not count.isdigit():
            return None
        found[name] = int(count)
    return found
