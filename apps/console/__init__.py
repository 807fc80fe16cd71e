"""elvin-console: the developers' GUI of the Elvin suite.

Write and test subscriptions, send typed notifications, watch quench and the
router's live statistics, against several routers at once. Everything talks
to routers through ``elvin.client`` / ``elvin.qt`` (docs/architecture.md: apps never
parse packets) and runs asyncio on the Qt loop with qasync.

Modules, one job each:

===================  =========================================================
typed                typed attribute values as text: parse and check per type
keytext              raw key lines ("string" / [hex], elvin.keytext) -> elvin.Keys
ringbuffer           the bounded row store (drop oldest, O(1) index)
received             one received notification (a table row) and its text
rate                 the rate indicator's sliding-window meter
diff                 what changed between two notifications
export               received notifications as ec text, JSON lines or CSV
workspace            the workspace file (routers and panes; JSON or TOML)
config               the console's own TOML config file
tasks                running coroutines from Qt slots, errors reported
routers              saved routers, each with its own ConnectionManager
keyseditor           the widget and dialog for raw keys
connectiondialog     editing one saved router (name, URL, keys, options)
routerspanel         the list of routers with their status
completion           attribute names seen so far, completed in the editor
notificationmodel    the live table model (batched inserts) and its filter
detailview           all typed values of one notification, diffed
pane                 what every pane shares (title, router choice, spec)
consumer             the consumer pane
attributetable       the typed attribute editor of the producer pane
repeat               sending at a steady rate
producer             the producer pane
quenchview           the quench pane
chart                a small QPainter time-series chart (no QtCharts needed)
routerview           the router statistics pane
window               the main window: docks, menus, workspace, export
cli                  command line, startup, --screenshot
===================  =========================================================
"""

from elvin._version import __version__ as __version__

USER_AGENT = f"elvin-suite elvin-console/{__version__}"
