"""Back-test a subscription over a router's traffic archive, from the console.

The consumer pane's "Back-test…" button opens ``BacktestDialog`` with the
editor's expression. It runs ``elvin-pipeline backtest EXPR ARCHIVE --json``
as a child process (``QProcess``): Spark takes seconds to start and holds a
JVM, so neither belongs in the GUI process or on its event loop; the window
stays responsive, shows that it is busy (with the elapsed time), and the run
can be cancelled (the process is killed). The result is the pipeline's JSON
(matches, total, matches per hour, sample rows); an error is the
pipeline's own one-line message (bad archive, no Java...), shown in red.
The expression is checked before anything starts: a bad one never runs.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PySide6.QtCore import QProcess, QProcessEnvironment, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from elvin.errors import SubscriptionError
from elvin.qt import split

__all__ = ["BacktestDialog", "BacktestOutcome", "parse_outcome", "pipeline_command"]

SAMPLE_ROWS = 20
DEFAULT_MASTER = "local[*]"
_PREFIX = "elvin-pipeline: "


@dataclass
class BacktestOutcome:
    """What a run gave: a result (``error`` is None) or an error message."""

    matches: int = 0
    total: int = 0
    per_hour: list[tuple[str, int]] = field(default_factory=list)
    sample: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None


def pipeline_command(expression: str, archive: str, master: str = DEFAULT_MASTER,
                     sample: int = SAMPLE_ROWS) -> list[str]:
    """argv of the child: this interpreter runs the pipeline module, so the
    console needs no ``elvin-pipeline`` on PATH."""
    return [sys.executable, "-m", "elvin.pipeline", "backtest", expression, archive,
            "--json", "--sample", str(sample), "--master", master or DEFAULT_MASTER]


def parse_outcome(status: int, stdout: str, stderr: str) -> BacktestOutcome:
    """The child's exit status and output as an outcome.

    On failure the message is the pipeline's own lines (``elvin-pipeline:
    ...``, which say what and where); Spark's log noise is left out unless
    there is nothing else to show.
    """
    if status == 0:
        try:
            data = json.loads(stdout)
            return BacktestOutcome(
                matches=int(data["matches"]), total=int(data["total"]),
                per_hour=[(str(h["hour"]), int(h["matches"])) for h in data["per_hour"]],
                sample=list(data["sample"]))
        except (ValueError, KeyError, TypeError) as exc:
            return BacktestOutcome(error=f"unreadable result from the pipeline ({exc}): "
                                         f"{stdout.strip()[:200]!r}")
    lines = [line for line in stderr.splitlines() if line.strip()]
    ours: list[str] = []
    follows = False         # an indented line continues ours (the ^ under an error)
    for line in lines:
        if line.startswith(_PREFIX):
            ours.append(line[len(_PREFIX):])
            follows = True
        elif follows and line.startswith("  "):
            ours.append(line)
        else:
            follows = False
    if not ours:
        ours = lines[-5:] or [f"the back-test failed (exit status {status})"]
    return BacktestOutcome(error="\n".join(ours))


def format_json_value(value: Any) -> str:
    """A sample value as the console shows values (JSON loses int64-ness)."""
    if isinstance(value, dict) and set(value) == {"opaque"}:
        return f"[{value['opaque']}]"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


class BacktestDialog(QDialog):
    """Run a back-test of one expression over an archive directory."""

    finished_run = Signal(object)       # BacktestOutcome

    def __init__(self, expression: str, archive: str = "", master: str = DEFAULT_MASTER,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Back-test subscription")
        self.setModal(False)
        self.resize(820, 560)
        self.expression = expression
        self.outcome: BacktestOutcome | None = None
        self.process: QProcess | None = None
        self._started = 0.0
        self._stdout = b""
        self._stderr = b""

        intro = QLabel("Count the notifications of a router archive (<tt>elvind --archive"
                       "</tt> or <tt>elvin-archive</tt>) that this subscription would have "
                       "matched. Runs on Spark in a separate process.")
        intro.setWordWrap(True)
        self.expression_label = QLabel()
        self.expression_label.setTextFormat(Qt.TextFormat.PlainText)
        self.expression_label.setWordWrap(True)
        self.expression_label.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse)
        self.expression_label.setStyleSheet("font-family: monospace;")
        self.expression_label.setText(expression)
        self.archive_edit = QLineEdit(archive)
        self.archive_edit.setPlaceholderText("archive directory (holds hour=…/*.parquet)")
        self.archive_edit.setClearButtonEnabled(True)
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        archive_row = QHBoxLayout()
        archive_row.addWidget(self.archive_edit, 1)
        archive_row.addWidget(browse)
        self.master_edit = QLineEdit(master)
        self.master_edit.setToolTip("Spark master: local[*] runs here; spark://host:7077 "
                                    "runs on a cluster")
        form = QFormLayout()
        form.addRow("Subscription", self.expression_label)
        form.addRow("Archive", archive_row)
        form.addRow("Spark master", self.master_edit)

        self.run_button = QPushButton("Run back-test")
        self.run_button.setDefault(True)
        self.run_button.clicked.connect(self.run)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel)
        self.busy = QProgressBar()
        self.busy.setRange(0, 0)            # indeterminate: Spark does not say how long
        self.busy.setTextVisible(False)
        self.busy.setMaximumWidth(160)
        self.busy.hide()
        self.status_label = QLabel()
        self.status_label.setWordWrap(True)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        run_row = QHBoxLayout()
        run_row.addWidget(self.run_button)
        run_row.addWidget(self.cancel_button)
        run_row.addWidget(self.busy)
        run_row.addWidget(self.status_label, 1)

        self.count_label = QLabel()
        self.count_label.setTextFormat(Qt.TextFormat.RichText)
        self.hours_table = _table(["Hour (UTC)", "Matches"])
        self.hours_table.horizontalHeader().setSectionResizeMode(
            QHeaderView.ResizeMode.Stretch)
        self.sample_table = _table(["Time (UTC)", "Producer", "Attributes"])
        self.sample_table.horizontalHeader().setSectionResizeMode(
            2, QHeaderView.ResizeMode.Stretch)
        sample_box = _titled("Sample (earliest matches)", self.sample_table)
        self.sample_title: QLabel = sample_box.findChild(QLabel)
        self.results = split(Qt.Orientation.Horizontal,
                             (_titled("Matches per hour", self.hours_table), 1),
                             (sample_box, 3))

        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addLayout(form)
        layout.addLayout(run_row)
        layout.addWidget(self.count_label)
        layout.addWidget(self.results, 1)
        layout.addWidget(buttons)

        self.timer = QTimer(self)
        self.timer.setInterval(250)
        self.timer.timeout.connect(self._tick)
        self.archive_edit.textChanged.connect(self._update_buttons)
        self._update_buttons()
        self._show_idle()

    # -- running ---------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.process is not None

    def run(self) -> bool:
        """Start the child; False (and the reason shown) if there is nothing to run."""
        if self.running:
            return False
        from elvin.subscription import parse

        try:
            parse(self.expression)
        except SubscriptionError as exc:
            self._show_error(f"bad subscription: {exc}")
            return False
        archive = self.archive_edit.text().strip()
        if not archive:
            self._show_error("choose the archive directory first")
            return False
        if not Path(archive).is_dir():
            self._show_error(f"archive directory {archive} does not exist"
                             if not Path(archive).exists()
                             else f"archive {archive} is not a directory")
            return False
        argv = pipeline_command(self.expression, archive, self.master_edit.text().strip())
        process = QProcess(self)
        env = QProcessEnvironment.systemEnvironment()
        env.insert("PYTHONUNBUFFERED", "1")
        process.setProcessEnvironment(env)
        process.readyReadStandardOutput.connect(self._read_stdout)
        process.readyReadStandardError.connect(self._read_stderr)
        process.finished.connect(self._finished)
        process.errorOccurred.connect(self._process_error)
        self._stdout = self._stderr = b""
        self.process = process
        self.outcome = None
        self._started = time.monotonic()
        process.start(argv[0], argv[1:])
        self.count_label.setText("")
        self._clear_tables()
        self.busy.show()
        self.timer.start()
        self._tick()
        self._update_buttons()
        return True

    def cancel(self) -> None:
        process = self.process
        if process is None:
            return
        self.process = None         # _finished ignores the killed one
        process.kill()
        process.waitForFinished(2000)
        process.deleteLater()
        self._stop_busy()
        self.status_label.setStyleSheet("color: #b35900;")
        self.status_label.setText("Cancelled.")
        self._update_buttons()

    def _read_stdout(self) -> None:
        if self.process is not None:
            self._stdout += bytes(self.process.readAllStandardOutput().data())

    def _read_stderr(self) -> None:
        if self.process is not None:
            self._stderr += bytes(self.process.readAllStandardError().data())

    def _process_error(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart and self.process is not None:
            process, self.process = self.process, None
            process.deleteLater()
            self._stop_busy()
            self._done(BacktestOutcome(error=f"cannot start {sys.executable}: "
                                             f"{process.errorString()}"))

    def _finished(self, status: int, _exit_status) -> None:
        process = self.process
        if process is None or process is not self.sender():
            return
        self._read_stdout()
        self._read_stderr()
        self.process = None
        process.deleteLater()
        self._stop_busy()
        self._done(parse_outcome(status, self._stdout.decode("utf-8", "replace"),
                                 self._stderr.decode("utf-8", "replace")))

    def _done(self, outcome: BacktestOutcome) -> None:
        self.outcome = outcome
        if outcome.error is not None:
            self._show_error(outcome.error)
        else:
            self._show_result(outcome)
        self._update_buttons()
        self.finished_run.emit(outcome)

    def _tick(self) -> None:
        seconds = time.monotonic() - self._started
        phase = "starting Spark" if seconds < 5 and not self._stderr else "running on Spark"
        self.status_label.setStyleSheet("")
        self.status_label.setText(f"Back-test {phase}… {seconds:.0f} s")

    def _stop_busy(self) -> None:
        self.timer.stop()
        self.busy.hide()

    # -- showing ---------------------------------------------------------------------------
    def _show_idle(self) -> None:
        self.status_label.setStyleSheet("color: palette(mid);")
        self.status_label.setText("Choose an archive and press Run.")

    def _show_error(self, message: str) -> None:
        self.status_label.setStyleSheet("color: #c62828;")
        self.status_label.setText(message)

    def _show_result(self, outcome: BacktestOutcome) -> None:
        took = time.monotonic() - self._started
        self.status_label.setStyleSheet("")
        self.status_label.setText(f"Done in {took:.1f} s.")
        share = f" ({outcome.matches / outcome.total:.2%})" if outcome.total else ""
        busy_hours = sum(1 for _h, c in outcome.per_hour if c)
        self.count_label.setText(
            f"<b>Matches: {outcome.matches:,}</b> of {outcome.total:,} archived "
            f"notifications{share}, in {busy_hours} of {len(outcome.per_hour)} hours")
        hours = self.hours_table
        hours.setRowCount(len(outcome.per_hour))
        for row, (hour, count) in enumerate(outcome.per_hour):
            hours.setItem(row, 0, QTableWidgetItem(hour))
            item = QTableWidgetItem(f"{count:,}")
            item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            if not count:
                item.setForeground(Qt.GlobalColor.gray)
            hours.setItem(row, 1, item)
        sample = self.sample_table
        shown = len(outcome.sample)
        self.sample_title.setText(
            f"<b>Sample</b> (the first {shown} of {outcome.matches:,} matches)"
            if shown < outcome.matches else f"<b>Sample</b> (all {shown} matches)")
        sample.setRowCount(len(outcome.sample))
        for row, record in enumerate(outcome.sample):
            when = str(record.get("time") or "")
            when = when.replace("T", " ").split("+")[0][:23]
            attrs = record.get("attributes") or {}
            text = ", ".join(f"{name}: {format_json_value(value)}"
                             for name, value in attrs.items())
            sample.setItem(row, 0, QTableWidgetItem(when))
            sample.setItem(row, 1, QTableWidgetItem(record.get("producer") or "–"))
            item = QTableWidgetItem(text)
            item.setToolTip(text)
            sample.setItem(row, 2, item)
        sample.resizeColumnToContents(0)
        sample.resizeColumnToContents(1)

    def _clear_tables(self) -> None:
        self.hours_table.setRowCount(0)
        self.sample_table.setRowCount(0)

    def _update_buttons(self, *_args) -> None:
        running = self.running
        self.run_button.setEnabled(not running and bool(self.archive_edit.text().strip()))
        self.cancel_button.setEnabled(running)
        self.archive_edit.setEnabled(not running)
        self.master_edit.setEnabled(not running)

    def _browse(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Archive directory",
                                                self.archive_edit.text())
        if path:
            self.archive_edit.setText(path)

    def closeEvent(self, event) -> None:
        self.cancel()
        super().closeEvent(event)


def _table(headers: list[str]) -> QTableWidget:
    table = QTableWidget(0, len(headers))
    table.setHorizontalHeaderLabels(headers)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setAlternatingRowColors(True)
    table.setWordWrap(False)
    table.verticalHeader().hide()
    table.verticalHeader().setDefaultSectionSize(table.fontMetrics().height() + 6)
    table.horizontalHeader().setStretchLastSection(True)
    return table


def _titled(title: str, widget: QWidget) -> QWidget:
    box = QWidget()
    layout = QVBoxLayout(box)
    layout.setContentsMargins(0, 0, 0, 0)
    label = QLabel(f"<b>{title}</b>")
    layout.addWidget(label)
    layout.addWidget(widget, 1)
    return box
