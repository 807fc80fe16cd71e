"""Newswatcher: RSS and Atom feeds as Elvin notifications, polled only when
someone can receive them.

The Elvin 3 paper's newswatcher filtered Usenet for the tickertape and was
"enabled through the quenching mechanism": without quench, a producer must
fetch everything just in case. This one learns from the router which
subscriptions could match a feed's notifications (``News-Feed``, ``Group``,
``From`` are known before a feed is fetched) and polls only those feeds.
Every article is published with ``News-*`` attributes and the Tickertape Chat
Protocol v3 attributes, so that it scrolls in any tickertape with no extra
work.

Modules, one job each:

=========  ===============================================================
config     the TOML file: feeds, HTTP politeness, defaults (validated)
feeds      fetching: HTTP with conditional GET, timeouts, size cap,
           per-host politeness, backoff; local files
articles   feedparser output -> notification attributes
state      the dedup store (seen ids, validators), written atomically
selection  quench terms -> which feeds are polled, and why
status     the JSON status file the daemon keeps and ``newswatcher status``
           reads
daemon     the asyncio service gluing the above to ``elvin.client``
cli        command line (run, status, reload), exit codes, signals
preset     a Qt dialog that writes a news subscription for the tickertape
=========  ===============================================================
"""

from elvin._version import __version__ as __version__

USER_AGENT = f"elvin-suite newswatcher/{__version__}"
