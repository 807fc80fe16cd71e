"""The main window: a slim, always-on-top strip with the scroller.

On a desktop it is docked by default: a borderless bar as wide as the
screen at its top or bottom edge, reserving its strip where the window
manager allows (``elvin.qt.dock``); ``dock = "window"`` makes it an ordinary
window whose size and place are remembered per screen arrangement
(``elvin.qt.geometry``). Windows it opens (history, compose, groups,
settings) are placed clear of the strip, never under it.

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
from elvin_apps.tickertape.scroller import ScrollerWidget
from elvin_apps.tickertape.settingsdialog import SettingsDialog
from PySide6.QtCore import QEvent, QObject, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QAction, QCloseEvent, QColor, QFontMetrics, QKeySequence, QMouseEvent
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QMenu,
    QMessageBox,
    QToolButton,
    QWidget,
)

from elvin.qt.dock import EdgeDock
from elvin.qt.geometry import WindowMemory, keep_on_screen, place_clear_of
from elvin.qt.status import router_name
from elvin.router_url import split_router_urls

log = logging.getLogger("elvin_apps.tickertape")

#: the width of the strip as an ordinary window, when no size is remembered
WINDOW_WIDTH = 960

NOTICE_MS = 6000
#: Errors stay longer: they need reading.
ERROR_NOTICE_MS = 20000
#: Widest share of the strip a notice takes; longer text is shortened and
#: shown in full on click (and in its tooltip).
NOTICE_SHARE = 0.45
#: pixels a notice takes at most, however wide the strip: the messages are
#: what the strip is for (a link that failed to open took ~550 px of it)
NOTICE_MAX = 360
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

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if self.full_text and event.button() == Qt.MouseButton.LeftButton:
            QMessageBox.information(self.window(), "Tickertape", self.full_text)
            return
        super().mousePressEvent(event)


def link_failure(url: str, why: str) -> str:
    """The notice for a link no program opened: its host, not all of it
    (the whole link is in the tooltip)."""
    host = QUrl(url).host() or url[:40]
    return f"Cannot open the link to {host}: {why}"


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
        self.settings_dialog: SettingsDialog | None = None
        self.dock: EdgeDock | None = None
        self.memory: WindowMemory | None = None
        self.launcher = None            # elvin_apps.suite.AppLauncher, made on first use
        self.setWindowTitle("Tickertape")
        self.setWindowIcon(app_icon())
        self._set_window_flags()
        self.setAutoFillBackground(True)

        self.scroller = ScrollerWidget(controller.model, speed=self.config.speed, parent=self)
        # Qt shows tooltips only in the active window unless the *window* has
        # this: a docked bar is never made active just to read it (the
        # tooltips came only after the bar had been clicked once)
        self.setAttribute(Qt.WidgetAttribute.WA_AlwaysShowToolTips)
        self.scroller.urlFailed.connect(
            lambda url, why: self.show_notice(link_failure(url, why), error=True, detail=url))
        self.apply_appearance()
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
        self.resize(WINDOW_WIDTH, self.scroller.sizeHint().height())

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
        if manager is not None and hasattr(manager, "routerChanged"):
            manager.routerChanged.connect(self._router_changed)

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
        self.settings_action = self._action("&Settings…", self.open_settings, "Ctrl+,")
        about = self._action("&About", self._about)
        quit_action = self._action("&Quit", self.close, "Ctrl+Q")
        for action in (self.compose_action, self.reply_action, None, self.history_action,
                       self.groups_action, self.news_action, None, self.pause_action, faster,
                       slower, self.settings_action, None):
            if action is None:
                menu.addSeparator()
            else:
                menu.addAction(action)
        self.apps_menu = menu.addMenu("&Open")
        self.apps_menu.aboutToShow.connect(self._fill_apps_menu)
        self._fill_apps_menu()
        menu.addSeparator()
        menu.addAction(about)
        menu.addAction(quit_action)
        return menu

    def _fill_apps_menu(self) -> None:
        """The suite's other apps, started on this router (``elvin_apps.suite``)."""
        from elvin_apps.suite import AppLauncher, add_app_actions

        if self.launcher is None:
            self.launcher = AppLauncher(self)
            self.launcher.failed.connect(lambda text: self.show_notice(text, error=True))
            self.launcher.started.connect(lambda title: self.show_notice(f"Starting {title}…"))
        if not self.apps_menu.actions():
            add_app_actions(self.apps_menu, self.launcher, "tickertape", self.router_url)

    def router_url(self) -> str | None:
        """The router this ticker uses (the others are started on it)."""
        conn = self.controller.connection
        return getattr(conn, "url", None) or getattr(self.controller.manager, "url", None) \
            or (split_router_urls(self.config.elvin) or [None])[0]

    def _toggle_pause(self) -> None:
        self.scroller.user_paused = self.pause_action.isChecked()

    # -- appearance and placement ---------------------------------------------------
    def _set_window_flags(self) -> None:
        """An ordinary window's flags (a docked bar gets its own from EdgeDock)."""
        flags = Qt.WindowType.Window
        if self.config.always_on_top:
            flags |= Qt.WindowType.WindowStaysOnTopHint
        if self.config.frameless:
            flags |= Qt.WindowType.FramelessWindowHint
        self.setWindowFlags(flags)

    def apply_appearance(self) -> None:
        """Font, speed and colours from the settings."""
        config = self.config
        pal = self.palette()
        pal.setColor(self.backgroundRole(), QColor(config.background))
        self.setPalette(pal)
        self.scroller.set_colours(config.background, config.text_colour)
        self.scroller.set_speed(config.speed)
        font = self.scroller.font()
        if config.font_family:
            font.setFamily(config.font_family)
        font.setPointSizeF(config.font_size)
        self.scroller.setFont(font)
        if self.dock is not None and self.dock.docked:
            self.dock.dock()                  # the bar's height follows the font

    def place(self, memory: WindowMemory | None = None) -> None:
        """Put the strip where the settings say, before it is shown: docked
        at the top or bottom edge, or as a window where it last was."""
        self.memory = memory
        if self.config.dock in ("top", "bottom"):
            if self.memory is not None:
                self.memory.screen_only = True   # a bar's place is its edge
            screen = self.memory.remembered_screen() if self.memory is not None else None
            if self.dock is None:
                self.dock = EdgeDock(self, self.config.dock, screen)
            self.dock.edge = self.config.dock  # type: ignore[assignment]
            self.dock.dock()
            return
        if self.dock is not None and self.dock.docked:
            self.dock.undock()
            self._set_window_flags()
        if self.memory is None or not self._restore_place():
            # a bar at the bottom edge becomes a window that is all on the screen
            self.resize(WINDOW_WIDTH, self.height())
            keep_on_screen(self)

    def _restore_place(self) -> bool:
        """Where the window last was (never off its screen), if known."""
        self.memory.screen_only = False
        return self.memory.restore()

    def place_clear(self, window: QWidget) -> None:
        """Put ``window`` beside the strip, not under it."""
        place_clear_of(window, self.frameGeometry())

    def _speed(self, factor: float) -> None:
        self.scroller.set_speed(min(2000.0, self.scroller.speed * factor))
        self.config.speed = round(self.scroller.speed, 1)
        self.show_notice(f"Speed {self.config.speed:g} px/s")
        self._save()

    def _about(self) -> None:
        conn = self.controller.connection
        url = getattr(conn, "url", None) or " ".join(split_router_urls(self.config.elvin)) \
            or "not connected"
        QMessageBox.about(self, "Tickertape",
                          f"<b>Tickertape {__version__}</b><br>Elvin suite chat ticker "
                          f"(Tickertape Chat Protocol 3001).<br>Router: {url}<br>"
                          f"You are: {self.config.user}")

    # -- mobility -----------------------------------------------------------------
    def add_mobility(self, mobility: QObject) -> None:
        """Menu actions "Away: keep my messages" / "Back: catch up" (the
        mobility protocol's move-out and move-in) and the mobility status
        (e.g. "Caught up 3 messages") for an
        ``elvin_apps.tickertape.mobility`` ``TickerMobility``."""
        self.mobility = mobility
        self.move_out_action = self._action("&Away: keep my messages",
                                            mobility.request_move_out)
        self.move_in_action = self._action("&Back: catch up", mobility.request_move_in)
        self.move_out_action.setToolTip("Going away (closing the laptop, changing networks)? "
                                        "The router keeps your messages until you are back")
        self.move_in_action.setToolTip("Get the messages the router kept while you were away")
        actions = self.menu.actions()
        before = actions[-2] if len(actions) >= 2 else None   # above About, Quit
        self.menu.insertActions(before, [self.move_out_action, self.move_in_action])
        self.menu.insertSeparator(before)
        mobility.statusChanged.connect(self.show_notice)

        away_tip = self.move_out_action.toolTip()

        def refresh(*_args: object) -> None:
            state = getattr(mobility, "state", "connected")
            proxy = getattr(mobility, "proxy_available", True)
            self.move_out_action.setEnabled(state == "connected" and proxy is True)
            self.move_out_action.setToolTip(
                away_tip if proxy is not False else
                "This router has no mobility proxy (elvind --mobility): nothing would keep "
                "your messages while you are away")
            self.move_in_action.setEnabled(state == "moved-out")
        for signal in (mobility.statusChanged, mobility.movedOut, mobility.movedIn,
                       *([mobility.proxyChecked] if hasattr(mobility, "proxyChecked") else [])):
            signal.connect(refresh)
        refresh()

    # -- notices ----------------------------------------------------------------
    def show_notice(self, text: str, *, error: bool = False, sticky: bool = False,
                    detail: str = "") -> None:
        """Show ``text`` on the strip: for a while (longer for errors), or
        until replaced when ``sticky``. Text wider than the notice's share of
        the strip is shortened; the tooltip and a click give all of it."""
        room = max(120, min(NOTICE_MAX, int(self.width() * NOTICE_SHARE)))
        metrics = QFontMetrics(self.notice.font())
        shown = metrics.elidedText(text, Qt.TextElideMode.ElideRight, room - 12)
        shortened = shown != text
        self.notice.full_text = text if shortened else ""
        self.notice.setText(shown)
        self.notice.setToolTip(text + (f"\n{detail}" if detail else "") +
                               ("\n(click to read it all)" if shortened else ""))
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

    def _router_changed(self, url: str) -> None:
        """Failed over: say where the ticker is now (and in the title, which
        a window's task bar shows); what was typed meanwhile goes from here."""
        left = getattr(self.controller.manager, "previous_url", "")
        self.show_notice(f"Now at {router_name(url)}",
                         detail=url + (f"\n(failed over: {left} went away)" if left else ""))
        self.setWindowTitle(f"Tickertape — {router_name(url)}")
        if self.status is not None:
            self.state_label.setToolTip(self.status.toolTip())

    def _state_changed(self, state: str) -> None:
        words = STATE_WORDS.get(state, "")
        self.state_label.setText(words)
        self.state_label.setVisible(bool(words))
        if self.status is not None:
            self.state_label.setToolTip(self.status.toolTip())
        manager = self.controller.manager
        if state == "connected" and len(getattr(manager, "urls", ())) > 1:
            # one of several routers: the title says which
            self.setWindowTitle(f"Tickertape — {router_name(manager.url)}")

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
        self.place_clear(dialog)
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
            # a child window: the window manager keeps it above the strip
            self.history_window = HistoryWindow(self.controller.history,
                                                self.controller.model.palette,
                                                parent=self,
                                                is_mention=self.controller.mentions)
            self.history_window.replyRequested.connect(self.open_compose)
            self.controller.messageReceived.connect(self.history_window.add_message)
            self.place_clear(self.history_window)
        else:
            self.history_window.reload()
        self.history_window.show()
        self.history_window.raise_()
        self.history_window.activateWindow()
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
        self.place_clear(dialog)
        dialog.show()
        return dialog

    def open_settings(self) -> SettingsDialog:
        """Font, speed, colours, where the strip goes, and the groups; what
        is applied is saved to the settings file (comments kept)."""
        if self.settings_dialog is not None:
            self.settings_dialog.raise_()
            self.settings_dialog.activateWindow()
            return self.settings_dialog
        dialog = SettingsDialog(self.config, parent=self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.groupsRequested.connect(self.open_groups)
        dialog.applied.connect(self.apply_settings)
        dialog.destroyed.connect(lambda: setattr(self, "settings_dialog", None))
        self.settings_dialog = dialog
        self.place_clear(dialog)
        dialog.show()
        return dialog

    def apply_settings(self, changes: dict) -> None:
        """Take the settings dialog's ``changes`` (Config field -> value)."""
        moved = any(key in changes for key in ("dock", "always_on_top", "frameless"))
        for key, value in changes.items():
            self.config.choose(key, value)
        self.apply_appearance()
        if moved:
            visible = self.isVisible()
            self.hide()
            if self.config.dock == "window":
                if self.dock is not None and self.dock.docked:
                    self.dock.undock()
                self._set_window_flags()
            self.place(self.memory)
            if visible:
                self.show()
        self._save()
        self.show_notice("Settings saved" if self.save_config else "Settings applied")

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
        self.place_clear(dialog)
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
    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.status and event.type() == QEvent.Type.MouseButtonPress:
            handle = self.windowHandle()
            if handle is not None and event.button() == Qt.MouseButton.LeftButton:
                handle.startSystemMove()
                return True
        return super().eventFilter(watched, event)

    def closeEvent(self, event: QCloseEvent) -> None:
        self.controller.flush_history()
        if self.history_window is not None:
            self.history_window.close()
        super().closeEvent(event)
        emit(self.closed)
