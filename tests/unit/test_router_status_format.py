"""``elvind status``'s report of the parts a router may run without."""

from __future__ import annotations

import io

from elvin.router.status import format_status


def report(**parts) -> str:
    out = io.StringIO()
    format_status({"running": True, "started": 100.0, "updated": 160.0, **parts}, out,
                  now=160.0)
    return out.getvalue()


def test_each_optional_part_says_its_figures_or_off():
    text = report(mobility={"id": "proxy-a", "clients_moved_out": 2, "buffered": 7},
                  archive={"directory": "/var/lib/elvin/archive", "state": "writing",
                           "received": 40, "dropped": 1, "lost": 0})
    assert ("mobility: proxy 'proxy-a', 2 client(s) moved out, 7 notification(s) "
            "buffered\n") in text
    assert ("archive: /var/lib/elvin/archive (writing): 40 archived, 1 dropped, "
            "0 lost\n") in text
    off = report(mobility=None, archive={})
    assert "mobility: off\n" in off and "archive: off\n" in off


def test_refusals_and_what_the_door_holds_are_shown():
    text = report(counters={"refused": {"keys": 2, "connections-per-address": 5}},
                  door={"pre_session": 3, "partial_bytes": 4096, "descriptors": 40,
                        "descriptor_limit": 65536})
    assert ("refused: connections-per-address 5, keys 2; 3 socket(s) before ConnRqst, "
            "4096 bytes in partial frames, 40 of 65536 open files\n") in text
