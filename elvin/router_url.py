"""Which router a command talks to: one rule for every command of the suite.

``--elvin`` (``-e``), else ``$ELVIN_URL``, else the ``elvin`` key of the
command's config file, else (for the commands that look) the first router
that discovery finds (``elvin.discovery``), else ``elvin://127.0.0.1:2917``
(docs/architecture.md). Each of these may name several routers, for
failover (``elvin.connect`` takes the list): white space between URLs on
the command line and in ``ELVIN_URL`` (an Elvin URL holds commas, never
spaces), a list in the file; and an app's config may name a discovery
``scope``, whose routers (every one found) are the list when nothing else
names one. The URL is checked before anything connects, and a
bad one is reported naming where it came from, so that a stale
``ELVIN_URL`` is not taken for a typo on the command line.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from elvin.cli_common import EXIT_USAGE, ToolError
from elvin.protocol import URIError, parse_uri

__all__ = ["DEFAULT_URL", "ENV_VAR", "RouterChoice", "RouterURLError", "add_router_argument",
           "check_router_url", "choose_router_url", "router_rule",
           "split_router_urls"]

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
    #: every router named, in failover order (``url`` is the first); empty: ``url`` alone
    urls: tuple[str, ...] = ()

    @property
    def routers(self) -> str | list[str]:
        """What ``elvin.connect`` (or ``ConnectionManager``) is given: the
        one URL, or the failover list when several routers were named."""
        return list(self.urls) if len(self.urls) > 1 else self.url

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


def split_router_urls(value: str | Sequence[str] | None) -> list[str]:
    """The router URLs in ``value``: a list (a config file's), or one text
    with URLs apart by white space (a flag's, ``$ELVIN_URL``); ``[]`` for
    none."""
    if not value:
        return []
    if isinstance(value, str):
        return value.split()
    return [url.strip() for url in value if url.strip()]


def choose_router_url(flag: str | None = None, config_url: str | Sequence[str] | None = None, *,
                      config_file: str | os.PathLike | None = None, discover: bool = False,
                      timeout: float | None = None, environ: Mapping[str, str] | None = None,
                      what: str = "Elvin URL", scope: str | None = None,
                      several: bool = False) -> RouterChoice:
    """The router(s) by the suite's rule (this module's docstring), checked.

    ``config_file`` names the file ``config_url`` was read from, for the
    error message; ``discover`` asks router discovery (within ``timeout``,
    default ``elvin.discovery.APP_TIMEOUT``) when nothing else names a router,
    and so does a ``scope`` (an app's config: every router of that scope).
    ``several``: the caller fails over among a list (the apps); otherwise a
    list on the command line is a usage error, and a list from anywhere else
    (``$ELVIN_URL`` set for the apps, discovery) gives its first router.
    """
    env = os.environ if environ is None else environ
    named = [(split_router_urls(flag), FLAG, "from --elvin"),
             (split_router_urls(env.get(ENV_VAR)), ENV, f"from ${ENV_VAR}"),
             (split_router_urls(config_url), CONFIG,
              f"from elvin in {config_file or 'the config file'}")]
    urls, source, where = next((one for one in named if one[0]), ([], DEFAULT, "the default"))
    if not urls:
        found = _discover(timeout, environ, scope) if discover or scope else []
        if found:
            urls, source = found, DISCOVERY
            where = "found by router discovery" + (f" (scope {scope!r})" if scope else "")
        else:
            urls = [DEFAULT_URL]
    if len(urls) > 1 and not several:
        if source == FLAG:
            raise RouterURLError(f"bad {what} {' '.join(urls)!r} ({where}): it names "
                                 f"{len(urls)} routers; this command takes one")
        urls = urls[:1]      # $ELVIN_URL set for the apps' failover: its first router
    for url in urls:
        check_router_url(url, where, what=what)
    return RouterChoice(urls[0], source, where, tuple(urls))


def _discover(timeout: float | None, environ: Mapping[str, str] | None,
              scope: str | None) -> list[str]:
    from elvin.discovery import APP_TIMEOUT, discover_router_urls

    return discover_router_urls(APP_TIMEOUT if timeout is None else timeout, environ,
                                scope=scope)


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
                        discover: bool = False, what: str = "Elvin router URL",
                        several: bool = False) -> None:
    """``-e/--elvin URL``, its help saying the rule it is chosen by (and,
    ``several``, that a failover list is taken)."""
    also = ", or several in one argument apart by spaces (failover)" if several else ""
    parser.add_argument("-e", "--elvin", metavar="URL",
                        help=f"{what}, e.g. elvin://host:port{also} (router: "
                             f"{router_rule(config=config, discover=discover)})")

