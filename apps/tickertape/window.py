"""The main window: a slim, always-on-top strip with the scroller.

Left: the connection dot (drag it to move a frameless window; hover for the
router and the last error) and, while not connected, the state in words.
Middle: the scroller. Right: a notice (sent / will send when connected /
not sent; long ones are shortened and open in full when clicked) and the
menu button. Everything else (compose, history,
groups) opens in its own window so the strip stays one line high.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from elvin_apps.tickertape import __version__
from elvin_apps.tickertape.compose import ComposeDialog
from elvin_apps.tickertape.config import Config, ConfigError, save
from elvin_apps.tickertape.controller import TickerController
from elvin_apps.tickertape.groups import GroupError
from elvin_apps.tickertape.groupsdialog import GroupsDialog
from elvin_apps.tickertape.historywindow import HistoryWindow
from elvin_apps.tickertape.message import Message
from elvin_apps.tickertape.notifier import app_icon
from elvin_apps.tickertape.qtcompat import emit
from elvin_apps.tickertape.scroller import BACKGROUND, ScrollerWidget
from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QFontMetrics, QKeySequence, QMouseEvent
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QMenu,
    QMessageBox,
    QToolButton,
    QWidget,
)

log = logging.getLogger("elvin_apps.tickertape")

NOTICE_MS = 6000
#: Errors stay longer: they need reading.
ERROR_NOTICE_MS = 20000
#: Widest share of the strip a notice takes; longer text is shortened and
#: shown in full on click (and in its tooltip).
NOTICE_SHARE = 0.45
#: The connection state in words, shown next to the dot while not connected.
STATE_WORDS = {
    "connecting": "Connecting…",
    "reconnecting": "Reconnecting…",
    "disconnected": "Not connected",
}


class NoticeLabel(QLabel):
    """The strip's notice: one line, and a click shows the whole text."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.full_text = ""
        self.setCursor(Qt.CursorShape.PointingHandCursor)

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        if self.full_text and event.button() == Qt.MouseButton.LeftButton:
            QMessageBox.information(self.window(), "Tickertape", self.full_text)
            return
        super().mousePressEvent(event)


class TickerWindow(QWidget):
    """The app's main window. ``closed()`` is emitted when it is closed."""

    closed = Signal()

    def __init__(self, controller: TickerController, *, status: QWidget | None = None,
                 save_config: bool = True, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.controller = controller
        self.config: Config = controller.config
        self.save_config = save_config
        self.history_window: HistoryWindow | None = None
        self.compose_dialog: ComposeDialog | None = None
        self.setWindowTitle("Tickertape")
        self.setWindowIcon(app_icon())
        flags = Qt.WindowType.Window
        if self.config.always_on_top:
            flags |= Qt.WindowType.WindowStaysOnTopHint
        if self.config.frameless:
            flags |= Qt.WindowType.FramelessWindowHint
        self.setWindowFlags(flags)
        self.setAutoFillBackground(True)
        pal = self.palette()
        pal.setColor(self.backgroundRole(), BACKGROUND)
        self.setPalette(pal)

        self.scroller = ScrollerWidget(controller.model, speed=self.config.speed, parent=self)
        font = self.scroller.font()
        font.setPointSizeF(self.config.font_size)
        self.scroller.setFont(font)
        self.status = status
        self.state_label = QLabel(self)
        self.state_label.setStyleSheet("color: #e0a100; padding: 0 4px")
        self.state_label.hide()
        self.notice = NoticeLabel(self)
        self.notice.setStyleSheet("color: #c0c4c8; padding: 0 6px")
        self.notice.hide()
        self._notice_timer = QTimer(self)
        self._notice_timer.setSingleShot(True)
        self._notice_timer.timeout.connect(self._notice_expired)

        self.menu_button = QToolButton(self)
        self.menu_button.setText("\N{TRIGRAM FOR HEAVEN}")
        self.menu_button.setToolTip("Menu")
        self.menu_button.setAutoRaise(True)
        self.menu_button.setStyleSheet("QToolButton { color: #c0c4c8; font-size: 14px; "
                                       "padding: 0 8px; border: none } "
                                       "QToolButton::menu-indicator { image: none; width: 0 }")
        self.menu_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.menu = self._build_menu()
        self.menu_button.setMenu(self.menu)

        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 0, 0, 0)
        layout.setSpacing(2)
        if status is not None:
            status.setParent(self)
            label = getattr(status, "label", None)
            if label is not None:
                label.hide()  # the dot says it; the tooltip has the words
            status.setCursor(Qt.CursorShape.SizeAllCursor)
            status.installEventFilter(self)
            layout.addWidget(status)
        layout.addWidget(self.state_label)
        layout.addWidget(self.scroller, 1)
        layout.addWidget(self.notice)
        layout.addWidget(self.menu_button)
        self.resize(960, self.scroller.sizeHint().height())

        self.scroller.replyRequested.connect(self.open_compose)
        self.scroller.composeRequested.connect(lambda: self.open_compose(None))
        controller.problem.connect(lambda text: self.show_notice(text, error=True))
        controller.messageSent.connect(
            lambda attrs: self.show_notice(f"Sent to {attrs.get('Group')}"))
        controller.outboxChanged.connect(self._outbox_changed)
        if controller.startup_notice:
            self.show_notice(controller.startup_notice, error=True)
        elif controller.outbox:          # saved when the user last quit
            self._outbox_changed(len(controller.outbox))
        manager = controller.manager
        if manager is not None and hasattr(manager, "stateChanged"):
            manager.stateChanged.connect(self._state_changed)
            self._state_changed(manager.state)

    # -- menu and shortcuts ----------------------------------------------------
    def _action(self, text: str, slot: Callable[[], object], shortcut: str | None = None) -> QAction:
        action = QAction(text, self)
        action.triggered.connect(slot)
        if shortcut:
            action.setShortcut(QKeySequence(shortcut))
            action.setShortcutContext(Qt.ShortcutContext.ApplicationShortcut)
            self.addAction(action)  # shortcuts work without opening the menu
        return action

    def _build_menu(self) -> QMenu:
        menu = QMenu(self)
        self.compose_action = self._action("&New message…", lambda: self.open_compose(None),
                                           "Ctrl+N")
        self.reply_action = self._action("&Reply to latest…", self.reply_latest, "Ctrl+R")
        self.history_action = self._action("&History…", self.open_history, "Ctrl+H")
        self.groups_action = self._action("&Groups…", self.open_groups, "Ctrl+G")
        self.news_action = self._action("&News subscription…", self.open_news_preset)
        self.pause_action = self._action("&Pause scrolling", self._toggle_pause, "Ctrl+P")
        self.pause_action.setCheckable(True)
        faster = self._action("Faster", lambda: self._speed(1.25), "Ctrl+=")
        slower = self._action("Slower", lambda: self._speed(0.8), "Ctrl+-")
        about = self._action("&About", self._about)
        quit_action = self._action("&Quit", self.close, "Ctrl+Q")
        for action in (self.compose_action, self.reply_action, None, self.history_action,
                       self.groups_action, self.news_action, None, self.pause_action, faster, slower, None,
                       about, quit_action):
            if action is None:
                menu.addSeparator()
            else:
                menu.addAction(action)
        return menu

    def _toggle_pause(self) -> None:
        self.scroller.user_paused = self.pause_action.isChecked()

    def _speed(self, factor: float) -> None:
        self.scroller.set_speed(min(2000.0, self.scroller.speed * factor))
        self.config.speed = round(self.scroller.speed, 1)
        self.show_notice(f"Speed {self.config.speed:g} px/s")
        self._save()

    def _about(self) -> None:
        conn = self.controller.connection
        url = getattr(conn, "url", None) or self.config.elvin or "not connected"
        QMessageBox.about(self, "Tickertape",
                          f"<b>Tickertape {__version__}</b><br>Elvin suite chat ticker "
                          f"(Tickertape Chat Protocol 3001).<br>Router: {url}<br>"
                          f"You are: {self.config.user}")

    # -- mobility -----------------------------------------------------------------
    def add_mobility(self, mobility: QObject) -> None:
        """Menu actions "Move out" / "Move in" and the mobility status (e.g.
        "Caught up 3 messages") for an ``elvin_apps.tickertape.mobility``
        ``TickerMobility``."""
        self.mobility = mobility
        self.move_out_action = self._action("Move &out", mobility.request_move_out)
        self.move_in_action = self._action("Move &in", mobility.request_move_in)
        self.move_out_action.setToolTip("Let the router keep your messages while you are away")
        actions = self.menu.actions()
        before = actions[-2] if len(actions) >= 2 else None   # above About, Quit
        self.menu.insertActions(before, [self.move_out_action, self.move_in_action])
        self.menu.insertSeparator(before)
        mobility.statusChanged.connect(self.show_notice)

        def refresh(*_args: object) -> None:
            state = getattr(mobility, "state", "connected")
            self.move_out_action.setEnabled(state == "connected")
            self.move_in_action.setEnabled(state == "moved-out")
        for signal in (mobility.statusChanged, mobility.movedOut, mobility.movedIn):
            signal.connect(refresh)
        refresh()

    # -- notices ----------------------------------------------------------------
    def show_notice(self, text: str, *, error: bool = False, sticky: bool = False) -> None:
        """Show ``text`` on the strip: for a while (longer for errors), or
        until replaced when ``sticky``. Text wider than the notice's share of
        the strip is shortened; the tooltip and a click give all of it."""
        room = max(120, int(self.width() * NOTICE_SHARE))
        metrics = QFontMetrics(self.notice.font())
        shown = metrics.elidedText(text, Qt.TextElideMode.ElideRight, room - 12)
        shortened = shown != text
        self.notice.full_text = text if shortened else ""
        self.notice.setText(shown)
        self.notice.setToolTip(text + ("\n(click to read it all)" if shortened else ""))
        self.notice.setCursor(Qt.CursorShape.PointingHandCursor if shortened
                              else Qt.CursorShape.ArrowCursor)
        self.notice.setStyleSheet(f"color: {'#ff8a80' if error else '#c0c4c8'}; padding: 0 6px")
        self.notice.show()
        if sticky:
            self._notice_timer.stop()
        else:
            self._notice_timer.start(ERROR_NOTICE_MS if error else NOTICE_MS)

    def _notice_expired(self) -> None:
        if self.controller.outbox:   # what waits is always said
            self._outbox_changed(len(self.controller.outbox))
        else:
            self.notice.hide()

    def _outbox_changed(self, waiting: int) -> None:
        if waiting:
            what = "1 message" if waiting == 1 else f"{waiting} messages"
            self.show_notice(f"{what} will send when connected", sticky=True)
        elif not self._notice_timer.isActive():
            self.notice.hide()

    def _state_changed(self, state: str) -> None:
        words = STATE_WORDS.get(state, "")
        self.state_label.setText(words)
        self.state_label.setVisible(bool(words))
        if self.status is not None:
            self.state_label.setToolTip(self.status.toolTip())

    # -- dialogs ----------------------------------------------------------------
    def group_names_for_compose(self) -> list[str]:
        names = [g.name for g in self.controller.groups]
        names += [n for n in self.controller.known.names() if n not in names]
        return names

    def open_compose(self, reply_to: Message | None = None) -> ComposeDialog:
        """Open (or bring back) the compose dialog; non-modal."""
        if self.compose_dialog is not None and self.compose_dialog.isVisible():
            self.compose_dialog.close()
        dialog = ComposeDialog(
            self.group_names_for_compose(), sender=self.config.user, reply_to=reply_to,
            private_groups=[g.name for g in self.controller.groups if g.private],
            legacy=self.config.legacy, parent=self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.accepted.connect(lambda: self.controller.send_soon(dialog.draft()))
        dialog.destroyed.connect(lambda: setattr(self, "compose_dialog", None))
        self.compose_dialog = dialog
        dialog.show()
        dialog.raise_()
        dialog.activateWindow()
        return dialog

    def reply_latest(self) -> None:
        entries = self.controller.model.entries()
        if entries:
            self.open_compose(entries[-1].message)
        else:
            self.open_compose(None)

    def open_history(self) -> HistoryWindow | None:
        if self.controller.history is None:
            self.show_notice("History is off", error=True)
            return None
        if self.history_window is None:
            self.history_window = HistoryWindow(self.controller.history,
                                                self.controller.model.palette,
                                                is_mention=self.controller.mentions)
            self.history_window.replyRequested.connect(self.open_compose)
            self.controller.messageReceived.connect(self.history_window.add_message)
        else:
            self.history_window.reload()
        self.history_window.show()
        self.history_window.raise_()
        return self.history_window

    def open_groups(self) -> GroupsDialog:
        dialog = GroupsDialog(self.controller.groups,
                              extra=self.config.extra_subscription,
                              known=self.controller.known.counts,
                              known_note=lambda: self.controller.known_groups_note,
                              parent=self)
        self.controller.knownGroupsChanged.connect(dialog.refresh_known)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)

        def done() -> None:
            try:
                groups = dialog.result_groups()
            except GroupError as exc:  # accept() already refuses this
                self.show_notice(str(exc), error=True)
                return
            self.controller.set_groups(groups, dialog.extra_subscription())
            self._save()

        dialog.accepted.connect(done)
        dialog.show()
        return dialog

    def open_news_preset(self) -> QDialog:
        """Build a news subscription (feeds, title words, author) without writing
        the expression; it joins the extra subscription with ``||``."""
        from elvin_apps.newswatcher.preset import NewsPresetDialog, known_feeds

        dialog = NewsPresetDialog(known_feeds(), self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)

        def done() -> None:
            expression = dialog.expression().strip()
            if not expression:
                return
            old = self.config.extra_subscription.strip()
            extra = f"({old}) || ({expression})" if old else expression
            self.controller.set_groups(self.controller.groups, extra)
            self._save()
            self.show_notice("News subscription added")

        dialog.accepted.connect(done)
        dialog.show()
        return dialog

    def _save(self) -> None:
        if not self.save_config:
            return
        try:
            save(self.config)
        except (OSError, ConfigError) as exc:
            self.show_notice(f"Settings not saved: {exc}", error=True)

    # -- window ------------------------------------------------------------------
    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802
        if watched is self.status and event.type() == QEvent.Type.MouseButtonPress:
            handle = self.windowHandle()
            if handle is not None and event.button() == Qt.MouseButton.LeftButton:
                handle.startSystemMove()
                return True
        return super().eventFilter(watched, event)

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt override
        self.controller.flush_history()
        if self.history_window is not None:
            self.history_window.close()
        super().closeEvent(event)
        emit(self.closed)
