"""The coffee biff window: a cup to click, who is drinking, how many.

Layout, top to bottom: a banner that flashes when someone starts a coffee
and no desktop notification or tray can say so; the cup button beside the
count and an optional "where/when" field; the roster (those having a
coffee, with their note and for how long, then those around, then those
away, with when they last had a coffee); a line that says the list may be
out of date while not connected; the connection status (the router's URL
in its tooltip) and the menu (notifications, the suite's other apps). The
cup is full and steaming while you are having a coffee, so the button
shows your own state at a glance.
"""

from __future__ import annotations

from elvin_apps.biff import protocol
from elvin_apps.biff.acquaintances import PeopleBook
from elvin_apps.biff.cup import cup_icon
from elvin_apps.biff.notify import CoffeeNotifier
from elvin_apps.biff.people import PeopleList
from elvin_apps.biff.qtbiff import QtBiff
from PySide6.QtCore import QEvent, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QFont, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from elvin.qt.status import router_name

__all__ = ["CoffeeWindow"]

IDLE_TEXT = "I'm having a coffee"
ACTIVE_TEXT = "Done with my coffee"
STALE_TEXT = "Not connected: this list may be out of date"
#: how long the banner stays (ms) unless the user looks at the window first
FLASH_MS = 15_000
#: the banner blinks this many times when it appears, every BLINK_MS
BLINKS, BLINK_MS = 3, 350
_BANNER_STYLES = ("QLabel { background: #ffd166; color: #3d2c00; padding: 6px 10px; "
                  "border-radius: 4px; font-weight: bold }",
                  "QLabel { background: #fff3cd; color: #3d2c00; padding: 6px 10px; "
                  "border-radius: 4px; font-weight: bold }")


class CoffeeWindow(QWidget):
    """The main window. ``closed`` is emitted when the user closes it."""

    closed = Signal()

    def __init__(self, qbiff: QtBiff, status: QWidget | None = None,
                 default_text: str = "", parent: QWidget | None = None, *,
                 notifier: CoffeeNotifier | None = None,
                 book: PeopleBook | None = None) -> None:
        super().__init__(parent)
        self.qbiff = qbiff
        self.notifier = notifier
        self.book = book
        self.launcher = None           # elvin_apps.suite.AppLauncher, made on first use
        biff = qbiff.biff
        self.setWindowTitle(f"Coffee biff — {biff.user}")
        self._icons = {full: cup_icon(full=full, steam=full) for full in (False, True)}

        self.cup = QToolButton(self)
        self.cup.setObjectName("cup")
        self.cup.setCheckable(True)
        self.cup.setIconSize(QSize(96, 96))
        self.cup.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextUnderIcon)
        self.cup.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self.cup.clicked.connect(self._cup_clicked)

        self.count_label = QLabel(self)
        self.count_label.setObjectName("count")
        big = QFont(self.font())
        big.setPointSizeF(big.pointSizeF() * 2.6)
        big.setBold(True)
        self.count_label.setFont(big)
        self.count_caption = QLabel(self)
        self.count_caption.setObjectName("countCaption")

        self.where = QLineEdit(default_text, self)
        self.where.setObjectName("where")
        self.where.setPlaceholderText("Optional: in 5 minutes at the kitchen")
        self.where.setMaxLength(protocol.MAX_TEXT)
        self.where.setClearButtonEnabled(True)
        self.where.setToolTip("Said next to your name while you have your coffee; "
                              "press Enter to start (or to update it)")
        self.where.returnPressed.connect(self._where_entered)

        self.banner = QLabel(self)
        self.banner.setObjectName("banner")
        self.banner.setWordWrap(True)
        self.banner.setCursor(Qt.CursorShape.PointingHandCursor)
        self.banner.setToolTip("Click to dismiss")
        self.banner.installEventFilter(self)
        self.banner.hide()
        self._banner_timer = QTimer(self)
        self._banner_timer.setSingleShot(True)
        self._banner_timer.timeout.connect(self.banner.hide)
        self._blink_timer = QTimer(self)
        self._blink_timer.setInterval(BLINK_MS)
        self._blink_timer.timeout.connect(self._blink)
        self._blinks = 0

        self.people = PeopleList(biff, self, book=book)
        self.people.setObjectName("people")
        self.people.setMinimumHeight(120)
        self.stale_label = QLabel(STALE_TEXT, self)
        self.stale_label.setObjectName("stale")
        self.stale_label.setStyleSheet("color: #9a6700")
        self.stale_label.hide()

        counts = QHBoxLayout()
        counts.setSpacing(8)
        counts.addWidget(self.count_label, 0, Qt.AlignmentFlag.AlignBaseline)
        counts.addWidget(self.count_caption, 1, Qt.AlignmentFlag.AlignBaseline)
        side = QVBoxLayout()
        side.addStretch(1)
        side.addLayout(counts)
        side.addWidget(self.where)
        side.addStretch(1)
        top = QHBoxLayout()
        top.addWidget(self.cup)
        top.addLayout(side, 1)
        layout = QVBoxLayout(self)
        layout.addWidget(self.banner)
        layout.addLayout(top)
        layout.addWidget(self.people, 1)
        layout.addWidget(self.stale_label)
        bottom = QHBoxLayout()
        self.status = status
        if status is not None:
            status.setParent(self)
            bottom.addWidget(status, 1)
        else:
            bottom.addStretch(1)
        self.settings_button = QToolButton(self)
        self.settings_button.setText("Menu")
        self.settings_button.setAutoRaise(True)
        self.settings_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.settings_button)
        self.menu = menu
        self.notify_action = QAction("Tell me when someone starts a coffee", menu,
                                     checkable=True)
        self.sound_action = QAction("With a sound", menu, checkable=True)
        menu.addAction(self.notify_action)
        menu.addAction(self.sound_action)
        menu.addSeparator()
        self.apps_menu = menu.addMenu("Open")
        self._fill_apps_menu()
        menu.addSeparator()
        menu.addAction("Quit", self.close)
        self.settings_button.setMenu(menu)
        if notifier is not None:
            notifier.window = self
            self.notify_action.setChecked(notifier.enabled)
            self.sound_action.setChecked(notifier.sound)
            self.notify_action.toggled.connect(self._notify_toggled)
            self.sound_action.toggled.connect(lambda on: setattr(notifier, "sound", on))
            qbiff.started.connect(notifier.started)
            self.sound_action.setEnabled(notifier.enabled)
        else:
            self.notify_action.setEnabled(False)
            self.sound_action.setEnabled(False)
        bottom.addWidget(self.settings_button)
        layout.addLayout(bottom)

        QShortcut(QKeySequence.StandardKey.Quit, self, self.close)
        qbiff.changed.connect(self.refresh)
        manager = getattr(qbiff, "manager", None)
        if manager is not None:
            manager.stateChanged.connect(self._connection_state)
            self._connection_state(manager.state)
        if manager is not None and hasattr(manager, "routerChanged"):
            # failed over: the title says which router the room is seen from now
            manager.routerChanged.connect(lambda url: self.setWindowTitle(
                f"Coffee biff — {qbiff.biff.user} at {router_name(url)}"))
        self.resize(460, 400)
        self.refresh()

    # -- what is shown ----------------------------------------------------------------
    def refresh(self) -> None:
        """Show the biff's state: own cup, count, list."""
        biff = self.qbiff.biff
        active = biff.is_active
        self.cup.setChecked(active)
        self.cup.setIcon(self._icons[active])
        self.cup.setText(ACTIVE_TEXT if active else IDLE_TEXT)
        self.cup.setToolTip("Click when you have finished" if active else
                            "Click to tell everybody you are having a coffee")
        drinkers = biff.active_members
        count = len(drinkers)
        self.count_label.setText(str(count))
        self.count_label.setEnabled(count > 0)      # a grey 0: nothing to see
        self.count_caption.setText("person having a coffee" if count == 1 else
                                   "people having a coffee")
        self.people.refresh()
        self.setWindowIcon(self._icons[active])

    def flash(self, title: str, body: str = "") -> None:
        """The alert of last resort: a banner that blinks, then stays a while
        (``FLASH_MS``, or until clicked)."""
        self.banner.setText(f"\N{HOT BEVERAGE} {title}" + (f" \N{EM DASH} {body}" if body else ""))
        self.banner.setStyleSheet(_BANNER_STYLES[0])
        self.banner.show()
        self._blinks = 2 * BLINKS
        self._blink_timer.start()
        self._banner_timer.start(FLASH_MS)

    def _blink(self) -> None:
        self._blinks -= 1
        self.banner.setStyleSheet(_BANNER_STYLES[self._blinks % 2])
        if self._blinks <= 0:
            self._blink_timer.stop()
            self.banner.setStyleSheet(_BANNER_STYLES[0])

    def banner_text(self) -> str:
        """What the banner says while shown (tests)."""
        return self.banner.text() if self.banner.isVisibleTo(self) else ""

    def eventFilter(self, watched, event) -> bool:
        if watched is self.banner and event.type() == QEvent.Type.MouseButtonPress:
            self.banner.hide()
            return True
        return super().eventFilter(watched, event)

    def _fill_apps_menu(self) -> None:
        """The suite's other apps, started on this router (``elvin_apps.suite``)."""
        from elvin_apps.suite import AppLauncher, add_app_actions

        self.launcher = AppLauncher(self)
        self.launcher.failed.connect(lambda text: self.flash(text))
        manager = getattr(self.qbiff, "manager", None)
        add_app_actions(self.apps_menu, self.launcher, "biff",
                        lambda: getattr(manager, "url", None))

    def _connection_state(self, state: str) -> None:
        stale = state != "connected"
        self.stale_label.setVisible(stale)
        self.people.set_stale(stale)

    def _notify_toggled(self, on: bool) -> None:
        self.notifier.enabled = on
        self.sound_action.setEnabled(on)

    def drinkers_text(self) -> str:
        """The people having a coffee, as one line (tests, tray tooltip)."""
        biff = self.qbiff.biff
        drinkers = biff.active_members
        if not drinkers:
            return biff.empty_text or ""
        return ", ".join(biff.render(m) + (" (you)" if m.local else "") for m in drinkers)

    def count(self) -> int:
        return int(self.count_label.text())

    # -- actions ----------------------------------------------------------------------
    def _cup_clicked(self, checked: bool) -> None:
        self.qbiff.setActive(checked, self.where.text().strip())

    def _where_entered(self) -> None:
        # Enter starts a coffee, or while drinking updates where/when
        self.qbiff.setActive(True, self.where.text().strip())

    def closeEvent(self, event: QCloseEvent) -> None:
        if self.book is not None:
            self.book.save()
        self.closed.emit()
        super().closeEvent(event)
