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
