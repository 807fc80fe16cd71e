"""RetryLog: a retried failure is said once, then every few minutes with a
count, and once when it works again (issue 32: 720 reconnect lines an hour)."""

from __future__ import annotations

import logging

import pytest

from elvin.retrylog import RetryLog


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def said(caplog):
    caplog.set_level(logging.DEBUG, logger="test.retry")

    def lines(level=logging.INFO) -> list[str]:
        return [r.getMessage() for r in caplog.records
                if r.name == "test.retry" and r.levelno >= level]
    return lines


def test_a_long_outage_is_a_few_lines(said):
    clock = Clock()
    retry = RetryLog(logging.getLogger("test.retry"), "reconnect to elvin://r", every=300,
                     clock=clock)
    for _ in range(720):                     # an hour of attempts every 5 s
        retry.failed(ConnectionRefusedError(111, "Connection refused"))
        clock.now += 5
    lines = said()
    assert lines[0] == "reconnect to elvin://r failed: [Errno 111] Connection refused; retrying"
    assert len(lines) == 1 + 11                # the first, then one every 5 minutes
    assert lines[1] == ("reconnect to elvin://r still failing: 61 attempts in 5 min, last "
                        "error: [Errno 111] Connection refused; retrying")
    assert len(said(logging.DEBUG)) == 720      # every attempt at debug level
    retry.succeeded()
    assert said()[-1] == "reconnect to elvin://r succeeded after 720 failed attempts in 60 min"
    assert not retry.failing


def test_a_new_reason_is_said_at_once(said):
    clock = Clock()
    retry = RetryLog(logging.getLogger("test.retry"), "link", clock=clock)
    retry.failed("Connection refused")
    retry.failed("Connection refused")
    retry.failed("TLS handshake failed: certificate verify failed")
    assert said() == ["link failed: Connection refused; retrying",
                      "link failed again (3 attempts so far), now: TLS handshake failed: "
                      "certificate verify failed; retrying"]


def test_success_without_failure_says_nothing(said):
    retry = RetryLog(logging.getLogger("test.retry"), "link")
    retry.succeeded()
    assert said() == []
