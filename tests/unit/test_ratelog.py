"""elvin.ratelog: the first few lines of a kind, then one summary a window."""

from __future__ import annotations

import asyncio
import logging

from elvin.ratelog import RateLimitedLog
from tests.waiting import until

log = logging.getLogger("tests.ratelog")


def _messages(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "tests.ratelog"]


async def test_a_flood_becomes_a_few_lines_and_a_summary(caplog):
    caplog.set_level(logging.INFO, logger="tests.ratelog")
    notes = RateLimitedLog(log, window=0.2, burst=3)
    for i in range(50):
        notes.log("refused things", logging.WARNING, "refused thing %d", i)
    notes.log("other things", logging.INFO, "other thing")      # its own budget
    assert _messages(caplog) == ["refused thing 0", "refused thing 1", "refused thing 2",
                                 "other thing"]
    await until(lambda: len(_messages(caplog)) == 5)
    assert _messages(caplog)[-1] == "... and 47 more refused things in the last 0.2 s"
    assert caplog.records[-1].levelno == logging.WARNING
    # a new window logs again
    notes.log("refused things", logging.WARNING, "refused thing again")
    assert _messages(caplog)[-1] == "refused thing again"
    notes.close()


def test_close_writes_what_is_pending_without_a_loop(caplog):
    caplog.set_level(logging.INFO, logger="tests.ratelog")
    notes = RateLimitedLog(log, burst=1)
    notes.log("timeouts", logging.INFO, "one")
    notes.log("timeouts", logging.INFO, "two")
    assert notes.pending("timeouts") == 1
    notes.close()
    assert _messages(caplog) == ["one", "... and 1 more timeouts in the last minute"]


async def test_nothing_suppressed_means_no_summary(caplog):
    caplog.set_level(logging.INFO, logger="tests.ratelog")
    notes = RateLimitedLog(log, window=0.05, burst=3)
    notes.log("k", logging.INFO, "a")
    await asyncio.sleep(0.1)
    notes.close()
    assert _messages(caplog) == ["a"]
