"""The console's back-test: from the consumer pane's subscription, a real
``elvin-pipeline backtest`` child (real Spark) over a small archive.

One test runs Spark (it takes seconds to start); the others stop before it:
a bad archive is refused in the dialog, or by the pipeline child before
Spark starts, and the error is shown.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from elvin_apps.console.backtest import BacktestDialog, parse_outcome
from elvin_apps.console.completion import AttributeNames
from elvin_apps.console.consumer import ConsumerPane
from elvin_apps.console.routers import RouterRegistry

from elvin.pipeline.archive import ArchiveRecord, ArchiveWriter
from elvin.values import Int64

pytestmark = pytest.mark.timeout(600)

START = datetime(2024, 5, 1, 13, 40, tzinfo=UTC).timestamp()


@pytest.fixture
def archive(tmp_path):
    """40 notifications over two hours: Group "chat" every other one."""
    directory = tmp_path / "archive"
    with ArchiveWriter(directory) as writer:
        for i in range(40):
            writer.append(ArchiveRecord(
                {"Group": "chat" if i % 2 == 0 else "news", "Message": f"message {i}",
                 "n": i, "Big": Int64(i * 1000), "blob": bytes([i])},
                producer=f"{i % 3 + 1}/127.0.0.1:5000{i % 3}", subscriptions=1, clients=1,
                time=START + i * 60))
    return str(directory)


@pytest.fixture
def pane(qtbot):
    registry = RouterRegistry(autostart=False)
    widget = ConsumerPane(registry, AttributeNames())
    qtbot.addWidget(widget)
    widget.show()
    yield widget
    if widget.backtest is not None:
        widget.backtest.cancel()


def open_dialog(pane: ConsumerPane, expression: str) -> BacktestDialog:
    pane.editor.setExpression(expression)
    assert pane.backtest_button.isEnabled()
    pane.backtest_button.click()
    dialog = pane.backtest
    assert dialog is not None and dialog.isVisible()
    assert dialog.expression == expression
    return dialog


def test_backtest_runs_on_spark_without_blocking(qtbot, pane, archive):
    dialog = open_dialog(pane, 'Group == "chat" && n < 30')
    dialog.archive_edit.setText(archive)
    dialog.master_edit.setText("local[2]")
    assert dialog.run_button.isEnabled()
    dialog.run_button.click()
    # busy, not frozen: the event loop keeps turning while Spark starts
    assert dialog.running and dialog.busy.isVisible()
    assert not dialog.run_button.isEnabled() and dialog.cancel_button.isEnabled()
    ticks = []
    dialog.timer.timeout.connect(lambda: ticks.append(1))
    qtbot.waitUntil(lambda: dialog.outcome is not None, timeout=300_000)
    outcome = dialog.outcome
    assert outcome.error is None, outcome.error
    assert ticks, "the UI did not update while the back-test ran"
    assert (outcome.matches, outcome.total) == (15, 40)
    assert outcome.per_hour == [("2024-05-01T13", 10), ("2024-05-01T14", 5)]
    assert "Matches: 15" in dialog.count_label.text()
    assert "of 40 archived" in dialog.count_label.text()
    assert not dialog.busy.isVisible() and dialog.run_button.isEnabled()
    assert dialog.hours_table.rowCount() == 2
    assert dialog.hours_table.item(1, 1).text() == "5"
    assert dialog.sample_table.rowCount() == 15
    assert dialog.sample_table.item(0, 0).text() == "2024-05-01 13:40:00"
    assert dialog.sample_table.item(0, 1).text() == "1/127.0.0.1:50000"
    assert dialog.sample_table.item(0, 2).text() == (
        'Group: "chat", Message: "message 0", n: 0, Big: 0, blob: [00]')
    dialog.resize(900, 560)
    dialog.grab().save("/tmp/backtest.png")
    # the pane remembers the archive for the next dialog
    assert pane.backtest_archive == archive


def test_missing_archive_is_refused_in_the_dialog(pane, tmp_path):
    dialog = open_dialog(pane, "require(Group)")
    dialog.archive_edit.setText(str(tmp_path / "nowhere"))
    assert dialog.run() is False
    assert not dialog.running
    assert f"archive directory {tmp_path / 'nowhere'} does not exist" in \
        dialog.status_label.text()


def test_pipeline_error_is_shown(qtbot, pane, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    dialog = open_dialog(pane, "require(Group)")
    dialog.archive_edit.setText(str(empty))
    assert dialog.run()
    # the pipeline child checks the archive before starting Spark
    qtbot.waitUntil(lambda: dialog.outcome is not None, timeout=120_000)
    assert dialog.outcome.error is not None
    assert f"archive directory {empty} is empty" in dialog.status_label.text()
    assert "#c62828" in dialog.status_label.styleSheet()
    assert dialog.count_label.text() == "" and dialog.sample_table.rowCount() == 0


def test_invalid_expression_disables_backtest(pane):
    pane.editor.setExpression("Group == ")
    assert not pane.backtest_button.isEnabled()
    assert pane.backtest_dialog() is None


def test_parse_outcome_keeps_the_pipelines_message():
    err = ("WARNING: Using incubator modules\n"
           "elvin-pipeline: bad subscription: PARSE_ERROR at offset 9: oops\n"
           "  Group == \n           ^\n"
           "\tat org.apache.spark.Something\n")
    outcome = parse_outcome(1, "", err)
    assert outcome.error == ("bad subscription: PARSE_ERROR at offset 9: oops\n"
                             "  Group == \n           ^")
    assert parse_outcome(3, "", "").error == "the back-test failed (exit status 3)"
    assert "unreadable result" in parse_outcome(0, "not json", "").error
