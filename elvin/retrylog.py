"""Logging a failure that is retried: loud when something changes, quiet
while nothing does.

A client redialling a router that is down, or a federation link redialling
its peer, fails every few seconds for as long as the outage lasts. A line
per attempt buries everything else (720 an hour at one every 5 s); no line
at all hides the outage. ``RetryLog`` says the first failure, then one line
every ``every`` seconds with the count so far (and a new line at once when
the reason changes), and one line when it works again, naming how long it
took and how many attempts failed. The attempts in between go to debug.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from elvin.cli_common import duration

__all__ = ["RetryLog"]

#: seconds between "still failing" lines
DEFAULT_EVERY = 300.0


class RetryLog:
    """The log of one thing that is retried (``what``: "reconnect to X")."""

    def __init__(self, logger: logging.Logger, what: str, *, every: float = DEFAULT_EVERY,
                 level: int = logging.INFO,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.what = what
        self.every = every
        self.level = level
        self.clock = clock
        self.failures = 0            # failed attempts since the last success
        self.first_failure: float | None = None
        self.last_error = ""
        self._last_said = 0.0
        self._said_error = ""

    @property
    def failing(self) -> bool:
        return self.failures > 0

    def failed(self, error: object) -> None:
        """One attempt failed with ``error``."""
        now = self.clock()
        # an exception with no words says its type; an empty string is no reason
        text = str(error) or ("unknown error" if isinstance(error, str)
                              else type(error).__name__)
        self.failures += 1
        self.last_error = text
        if self.failures == 1:
            self.first_failure = now
            self._say(now, text, f"{self.what} failed: {text}; retrying")
        elif text != self._said_error:
            self._say(now, text, f"{self.what} failed again ({self.failures} attempts "
                                 f"so far), now: {text}; retrying")
        elif now - self._last_said >= self.every:
            since = now - (self.first_failure or now)
            self._say(now, text, f"{self.what} still failing: {self.failures} attempts in "
                                 f"{duration(since)}, last error: {text}; retrying")
        else:
            self.logger.debug("%s failed (attempt %d): %s", self.what, self.failures, text)

    def succeeded(self) -> None:
        """An attempt worked: say so if earlier ones had failed."""
        if self.failures:
            since = self.clock() - (self.first_failure or self.clock())
            self.logger.log(self.level, "%s succeeded after %d failed attempt%s in %s",
                            self.what, self.failures, "" if self.failures == 1 else "s",
                            duration(since))
        self.failures = 0
        self.first_failure = None
        self._said_error = ""

    def _say(self, now: float, error: str, message: str) -> None:
        self._last_said = now
        self._said_error = error
        self.logger.log(self.level, "%s", message)
