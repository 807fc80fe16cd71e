"""Which router a command talks to: one rule for every command of the suite.

``--elvin`` (``-e``), else ``$ELVIN_URL``, else the ``elvin`` key of the
command's config file, else (for the commands that look) the first router
that discovery finds (``elvin.discovery``), else ``elvin://127.0.0.1:2917``
(docs/architecture.md). The URL is checked before anything connects, and a
bad one is reported naming where it came from, so that a stale
``ELVIN_URL`` is not taken for a typo on the command line.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass

from elvin.cli_common import EXIT_USAGE, ToolError
from elvin.protocol import URIError, parse_uri

__all__ = ["DEFAULT_URL", "ENV_VAR", "RouterChoice", "RouterURLError", "add_router_argument",
           "check_router_url", "choose_router_url", "router_rule"]

DEFAULT_URL = "elvin://127.0.0.1:2917"
ENV_VAR = "ELVIN_URL"

#: where a choice came from (``RouterChoice.source``)
FLAG, ENV, CONFIG, DISCOVERY, DEFAULT = "flag", "env", "config", "discovery", "default"


class RouterURLError(ToolError):
    """A router URL that is not an Elvin URI (usage status); the message
    names the URL, where it came from and what is wrong with it."""

    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_USAGE)


@dataclass(frozen=True)
class RouterChoice:
    """A checked router URL and where it came from."""

    url: str
    source: str     # FLAG, ENV, CONFIG, DISCOVERY or DEFAULT
    where: str      # the same, as messages say it

    @property
    def explicit(self) -> bool:
        """Given on this command line or in its environment (not a file's)."""
        return self.source in (FLAG, ENV)

    @property
    def chosen(self) -> bool:
        """Anything but the default: someone (or discovery) picked this router."""
        return self.source != DEFAULT


def check_router_url(url: str, where: str | None = None, *, what: str = "Elvin URL") -> str:
    """``url`` if it is an Elvin URI, else ``RouterURLError``: ``bad Elvin
    URL 'x' (from $ELVIN_URL): why``. ``what`` is the command's own word
    for it (the tools say "Elvin URI")."""
    try:
        parse_uri(url)
    except URIError as exc:
        origin = f" ({where})" if where else ""
        raise RouterURLError(f"bad {what} {url!r}{origin}: {exc.message}") from None
    return url


def choose_router_url(flag: str | None = None, config_url: str | None = None, *,
                      config_file: str | os.PathLike | None = None, discover: bool = False,
                      timeout: float | None = None, environ: Mapping[str, str] | None = None,
                      what: str = "Elvin URL") -> RouterChoice:
    """The router by the suite's rule (this module's docstring), checked.

    ``config_file`` names the file ``config_url`` was read from, for the
    error message; ``discover`` asks router discovery (within ``timeout``,
    default ``elvin.discovery.APP_TIMEOUT``) when nothing else names a router.
    """
    env = os.environ if environ is None else environ
    if flag:
        choice = RouterChoice(flag, FLAG, "from --elvin")
    elif env.get(ENV_VAR):
        choice = RouterChoice(env[ENV_VAR], ENV, f"from ${ENV_VAR}")
    elif config_url:
        choice = RouterChoice(config_url, CONFIG,
                              f"from elvin in {config_file or 'the config file'}")
    else:
        found = _discover(timeout, environ) if discover else None
        choice = RouterChoice(found, DISCOVERY, "found by router discovery") if found \
            else RouterChoice(DEFAULT_URL, DEFAULT, "the default")
    check_router_url(choice.url, choice.where, what=what)
    return choice


def _discover(timeout: float | None, environ: Mapping[str, str] | None) -> str | None:
    from elvin.discovery import APP_TIMEOUT, discover_url

    return discover_url(APP_TIMEOUT if timeout is None else timeout, environ)


def router_rule(*, config: bool = False, discover: bool = False) -> str:
    """The rule as a command's help states it (what ``choose_router_url``
    does with the same ``config``/``discover``)."""
    steps = ["--elvin", f"${ENV_VAR}"]
    if config:
        steps.append("the config file")
    if discover:
        steps.append("a router found by discovery")
    return ", else ".join([*steps, DEFAULT_URL])


def add_router_argument(parser: argparse.ArgumentParser, *, config: bool = False,
                        discover: bool = False, what: str = "Elvin router URL") -> None:
    """``-e/--elvin URL``, its help saying the rule it is chosen by."""
    parser.add_argument("-e", "--elvin", metavar="URL",
                        help=f"{what}, e.g. elvin://host:port (router: "
                             f"{router_rule(config=config, discover=discover)})")

