"""The tickertape's settings: font, speed, colours, where the strip goes.

Everything that was only in the TOML file, in one dialog: the font and its
size, the scrolling speed, the strip's and the text's colours (with a
preview line), and whether the strip is a bar docked at the top or bottom
edge of the screen or an ordinary window (on top of the others or not,
with or without a title bar). The groups have their own editor, one click
away. OK applies and saves; the window writes the file, keeping the user's
comments (``config.save``).
"""

from __future__ import annotations

from elvin_apps.tickertape.config import DOCK_CHOICES, Config
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QColorDialog,
    QDialog,
    QDoubleSpinBox,
    QFontComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)

from elvin.qt import dialog_buttons

__all__ = ["SettingsDialog"]

_DOCK_LABELS = {"top": "A bar at the top of the screen",
                "bottom": "A bar at the bottom of the screen",
                "window": "A window I can move"}


class ColourButton(QPushButton):
    """A button showing a colour; a click opens the colour picker."""

    def __init__(self, colour: str, title: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = title
        self.colour = QColor(colour)
        self.clicked.connect(self._pick)
        self._show()

    def _pick(self) -> None:
        chosen = QColorDialog.getColor(self.colour, self, self.title)
        if chosen.isValid():
            self.set_colour(chosen.name())

    def set_colour(self, colour: str) -> None:
        self.colour = QColor(colour)
        self._show()

    def name(self) -> str:
        return self.colour.name()

    def _show(self) -> None:
        self.setText(self.colour.name())
        ink = "#000000" if self.colour.lightnessF() > 0.5 else "#ffffff"
        self.setStyleSheet(f"QPushButton {{ background: {self.colour.name()}; color: {ink}; "
                           "padding: 3px 10px }")


class SettingsDialog(QDialog):
    """``applied(dict)`` with the settings that changed (Config field ->
    value) when the user presses OK; ``groupsRequested()`` for the groups
    editor."""

    applied = Signal(dict)
    groupsRequested = Signal()

    def __init__(self, config: Config, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.config = config
        self.setWindowTitle("Tickertape settings")

        self.font_combo = QFontComboBox(self)
        if config.font_family:
            self.font_combo.setCurrentFont(QFont(config.font_family))
        else:
            self.font_combo.setCurrentFont(self.font())
        self.size_spin = QDoubleSpinBox(self)
        self.size_spin.setRange(5, 72)
        self.size_spin.setDecimals(1)
        self.size_spin.setSuffix(" pt")
        self.size_spin.setValue(config.font_size)
        self.speed_spin = QDoubleSpinBox(self)
        self.speed_spin.setRange(1, 2000)
        self.speed_spin.setDecimals(0)
        self.speed_spin.setSingleStep(10)
        self.speed_spin.setSuffix(" pixels a second")
        self.speed_spin.setValue(config.speed)
        self.background_button = ColourButton(config.background, "Strip colour", self)
        self.text_button = ColourButton(config.text_colour, "Text colour", self)
        self.preview = QLabel(self)
        self.preview.setMinimumHeight(30)
        self.preview.setContentsMargins(8, 2, 8, 2)

        self.dock_buttons = QButtonGroup(self)
        dock_box = QVBoxLayout()
        for choice in DOCK_CHOICES:
            button = QRadioButton(_DOCK_LABELS[choice], self)
            button.setObjectName(f"dock-{choice}")
            self.dock_buttons.addButton(button)
            button.setChecked(choice == config.dock)
            dock_box.addWidget(button)
        self.on_top_box = QCheckBox("Keep the window above the others", self)
        self.on_top_box.setChecked(config.always_on_top)
        self.frameless_box = QCheckBox("Without a title bar (drag the dot to move it)", self)
        self.frameless_box.setChecked(config.frameless)
        window_options = QVBoxLayout()
        window_options.setContentsMargins(24, 0, 0, 0)
        window_options.addWidget(self.on_top_box)
        window_options.addWidget(self.frameless_box)
        dock_box.addLayout(window_options)
        dock_note = QLabel("A bar keeps its strip of the screen free of other windows "
                           "where the window manager allows it (X11 desktops).", self)
        dock_note.setWordWrap(True)
        dock_note.setStyleSheet("color: #5f6368")
        dock_box.addWidget(dock_note)

        groups_button = QPushButton("Groups…", self)
        groups_button.setToolTip("The groups you read and send to, their colours and keys")
        groups_button.clicked.connect(self.groupsRequested)

        form = QFormLayout()
        form.addRow("Font", self.font_combo)
        form.addRow("Size", self.size_spin)
        form.addRow("Speed", self.speed_spin)
        colours = QHBoxLayout()
        colours.addWidget(QLabel("Strip", self))
        colours.addWidget(self.background_button)
        colours.addSpacing(12)
        colours.addWidget(QLabel("Text", self))
        colours.addWidget(self.text_button)
        colours.addStretch(1)
        form.addRow("Colours", colours)
        form.addRow("", self.preview)
        form.addRow("Place", dock_box)
        form.addRow("Groups", groups_button)

        buttons, self.ok_button = dialog_buttons(self)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(buttons)

        for signal in (self.font_combo.currentFontChanged, self.size_spin.valueChanged,
                       self.background_button.clicked, self.text_button.clicked):
            signal.connect(self._update_preview)
        self.dock_buttons.buttonToggled.connect(self._update_window_options)
        self._update_preview()
        self._update_window_options()

    # -- reading the form -------------------------------------------------------------
    def dock_choice(self) -> str:
        checked = self.dock_buttons.checkedButton()
        return checked.objectName().removeprefix("dock-") if checked else self.config.dock

    def set_dock_choice(self, choice: str) -> None:
        button = self.findChild(QRadioButton, f"dock-{choice}")
        if button is not None:
            button.setChecked(True)

    def values(self) -> dict[str, object]:
        """What the form says, as Config fields."""
        family = self.font_combo.currentFont().family()
        return {
            "font_family": "" if family == self.font().family() and
            not self.config.font_family else family,
            "font_size": round(self.size_spin.value(), 1),
            "speed": float(round(self.speed_spin.value())),
            "background": self.background_button.name(),
            "text_colour": self.text_button.name(),
            "dock": self.dock_choice(),
            "always_on_top": self.on_top_box.isChecked(),
            "frameless": self.frameless_box.isChecked(),
        }

    def changes(self) -> dict[str, object]:
        return {key: value for key, value in self.values().items()
                if getattr(self.config, key) != value}

    def accept(self) -> None:
        changes = self.changes()
        super().accept()
        if changes:
            self.applied.emit(changes)

    # -- feedback -----------------------------------------------------------------------
    def _update_preview(self, *_args: object) -> None:
        font = QFont(self.font_combo.currentFont())
        font.setPointSizeF(self.size_spin.value())
        self.preview.setFont(font)
        self.preview.setText("alice: lunch at noon?")
        self.preview.setStyleSheet(f"background: {self.background_button.name()}; "
                                   f"color: {self.text_button.name()}; border-radius: 3px")

    def _update_window_options(self, *_args: object) -> None:
        window = self.dock_choice() == "window"
        self.on_top_box.setEnabled(window)
        self.frameless_box.setEnabled(window)
        self.preview.setAlignment(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft)
