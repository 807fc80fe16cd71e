"""newswatcher status: the file the daemon keeps and the report read from it."""

from __future__ import annotations

import os

import pytest
from elvin_apps.newswatcher.status import (
    StatusError,
    format_status,
    pid_alive,
    read_status,
    write_status,
)

NOW = 1_700_000_000.0


def document(**changes):
    doc = {
        "pid": os.getpid(), "running": True, "started": NOW - 300, "elvin": "elvin://r:2917",
        "connected": True, "scoop": False, "quench_terms": 5,
        "totals": {"published": 10, "dropped": 4, "requests": 7, "not_modified": 5,
                   "errors": 1},
        "feeds": [
            {"name": "lwn", "url": "https://lwn.net/rss", "groups": ["news"], "from": "LWN",
             "interval": 300, "polled": True, "scoop": False,
             "why": [{"term": i, "expression": f'News-Feed == "lwn" && x == {i}'}
                     for i in range(5)],
             "last_poll": NOW - 10, "last_result": "304 not modified", "errors": 0,
             "next_poll": NOW + 290, "published": 10},
            {"name": "hn", "url": "https://hn/rss", "groups": ["news", "tech"], "from": "hn",
             "interval": 600, "polled": False, "why": [], "last_poll": None, "errors": 2,
             "last_error": "HTTP 503", "published": 0},
        ],
    }
    doc.update(changes)
    return doc


def test_report_says_what_is_polled_and_why():
    text = format_status(document(), NOW)
    lines = text.splitlines()
    assert lines[0].startswith(f"newswatcher pid {os.getpid()}, up 5m, router elvin://r:2917 "
                               "(connected)")
    assert "1 of 2 feed(s) polled; 5 subscription(s) seen by the quench" in text
    assert ("published 10, dropped by auto-quench 4, group copies not needed 0; HTTP requests"
            " 7, 304s 5, errors 1") in text
    assert "POLLED lwn" in text and "why: term 0: News-Feed == \"lwn\" && x == 0" in text
    assert "... and 2 more" in text and "next in 4m" in text
    assert "idle   hn" in text and 'no subscription can match News-Feed="hn"' in text
    assert "2 error(s) in a row, last: HTTP 503" in text
    verbose = format_status(document(), NOW, verbose=True)
    assert "term 4:" in verbose and "more" not in verbose


def test_stale_and_scoop():
    text = format_status(document(pid=2 ** 22 + 12345, updated=NOW - 60), NOW)
    assert text.startswith("newswatcher is NOT running") and "60s ago" in text
    assert "scoop mode" in format_status(document(scoop=True), NOW)
    assert not pid_alive(None) and not pid_alive(-1) and pid_alive(os.getpid())


def test_write_and_read(tmp_path):
    path = tmp_path / "status.json"
    write_status(path, document())
    doc = read_status(path)
    assert doc["version"] == 1 and doc["feeds"][0]["name"] == "lwn" and doc["updated"] > 0
    path.write_text("[]")
    with pytest.raises(StatusError, match="not a newswatcher status"):
        read_status(path)
    with pytest.raises(StatusError, match="no status file"):
        read_status(tmp_path / "absent.json")
