"""Qt (PySide6) building blocks shared by the desktop apps.

Qt apps run asyncio on the Qt event loop with qasync (``run_app``), so the
asyncio client works unchanged inside them and no thread does networking.

* ``run_app(main)`` creates the QApplication and qasync loop and runs ``main``
  (``run_app_cli`` as the apps' command lines run it; ``save_screenshot`` for
  their ``--screenshot``)
* ``ConnectionManager`` keeps a connection up, with Qt signals
* ``StatusWidget`` shows a ConnectionManager's state (coloured dot + text)
* ``SubscriptionEditor`` edits a subscription with highlighting and live errors
* ``dialog_buttons``, ``flat_table``, ``monospace_font``, ``push_button``,
  ``split``: widgets every app sets up the same way (``elvin.qt.widgets``)
"""

from elvin.qt.app import application, run_app, run_app_cli, save_screenshot
from elvin.qt.editor import SubscriptionEditor, SubscriptionHighlighter
from elvin.qt.maingc import MainThreadGC
from elvin.qt.manager import ConnectionManager
from elvin.qt.status import StatusWidget
from elvin.qt.widgets import dialog_buttons, flat_table, monospace_font, push_button, split

__all__ = [
    "ConnectionManager",
    "MainThreadGC",
    "StatusWidget",
    "SubscriptionEditor",
    "SubscriptionHighlighter",
    "application",
    "dialog_buttons",
    "flat_table",
    "monospace_font",
    "push_button",
    "run_app",
    "run_app_cli",
    "save_screenshot",
    "split",
]
