"""Tickertape: a scrolling chat and news ticker over Elvin.

The app follows the Tickertape Chat Protocol v3 (org.tickertape.message =
3001) and still reads and writes the attribute names of older clients
(TICKERTAPE, USER, TICKERTEXT, TIMEOUT, MIME_ARGS, REPLACEMENT).

Modules, one job each:

=================  ============================================================
message            an incoming notification as a ``Message`` (robust parsing)
outgoing           building the notification a user sends (new, reply)
attachment         MIME attachments: the URLs a message carries
groups             the user's groups and the subscription expressions for them
palette            stable colours per group
model              the live messages: replacement, expiry, hide, kill thread
lane               scroller geometry (positions, wrap-around, hit tests)
scroller           the scrolling widget (painting, mouse, animation)
history            the on-disk message log (sqlite3)
historywindow      the log window (search, thread view)
compose            the compose / reply dialog
groupsdialog       the group editor
discovery          known groups from quench (what others subscribe to)
config             the TOML configuration file
notifier           tray icon and desktop notification for mentions
controller         glue between the Elvin connection and the widgets
window             the main window
cli                command-line entry point
qtcompat           guards against PySide6 6.12.0 refcount bugs and off-thread GC
=================  ============================================================
"""

from elvin._version import __version__ as __version__

USER_AGENT = f"elvin-suite tickertape/{__version__}"
