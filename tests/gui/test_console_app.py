"""elvin-console against a real router (pytest-qt, qasync, EmbeddedRouter).

Each test builds the console's main window on a qasync loop, as the app
does, with the bundled router in a thread on a free loopback port; other
clients are plain ``elvin.client`` connections or the real ``ep`` tool in a
subprocess. Set CONSOLE_SCREENSHOT_DIR to keep the screenshots the last
test takes.
"""

from __future__ import annotations

import asyncio
import csv
import io
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from elvin_apps.console.consumer import ConsumerPane
from elvin_apps.console.export import read_json_lines
from elvin_apps.console.producer import ProducerPane
from elvin_apps.console.quenchview import QuenchPane
from elvin_apps.console.routers import RouterRegistry
from elvin_apps.console.routerview import RouterViewPane
from elvin_apps.console.tasks import wait_all
from elvin_apps.console.window import MainWindow
from elvin_apps.console.workspace import (
    ConsumerSpec,
    ProducerSpec,
    QuenchSpec,
    RouterSpec,
    RouterViewSpec,
    Workspace,
)
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QToolButton

import elvin.client
from elvin.text import parse_notifications
from elvin.values import Int64
from tests.waiting import until

ROOT = Path(__file__).resolve().parents[2]


# cycles are collected on the main thread only, as run_app does (tests/gui/conftest.py)


@pytest.fixture
def router(make_router):
    """Router statistics every 0.2 s, for the router view panes."""
    return make_router(stats_interval=0.2)


class Console:
    """A main window with routers and panes, shut down at the end."""

    def __init__(self, qtbot) -> None:
        self.qtbot = qtbot
        self.windows: list[MainWindow] = []

    async def open(self, workspace: Workspace) -> MainWindow:
        registry = RouterRegistry()
        window = MainWindow(registry)
        self.qtbot.addWidget(window)
        await window.apply_workspace(workspace)
        window.show()
        self.windows.append(window)
        await until(lambda: all(e.manager.state == "connected" for e in registry.entries()))
        return window

    async def close(self) -> None:
        for window in self.windows:
            await window.shutdown()
            await window.clear()
        await wait_all()


def run(qt_loop, qtbot, scenario, timeout: float = 60):
    console = Console(qtbot)

    async def main():
        try:
            await scenario(console)
        finally:
            await console.close()

    qt_loop.run_until_complete(asyncio.wait_for(main(), timeout))


def basic(url: str, *panes) -> Workspace:
    return Workspace([RouterSpec("local", url)], list(panes) or
                     [ConsumerSpec(title="C", router="local"),
                      ProducerSpec(title="P", router="local")])


async def subscribe(pane: ConsumerPane, expression: str) -> None:
    pane.editor.setExpression(expression)
    assert pane.subscribe_button.isEnabled()
    pane.subscribe_button.click()
    await until(lambda: pane.subscribed, what="subscribed")


async def rows(pane: ConsumerPane, count: int, timeout: float = 10) -> None:
    async def flushed():
        while pane.model.rowCount() < count:
            pane.tick()
            await asyncio.sleep(0.02)
    await asyncio.wait_for(flushed(), timeout)


# -- consumer + producer ---------------------------------------------------------------------

def test_consumer_receives_what_the_producer_sends(qt_loop, qtbot, router):
    async def scenario(console: Console):
        window = await console.open(basic(router.url))
        consumer = window.panes_of("consumer")[0]
        producer = window.panes_of("producer")[0]
        assert isinstance(consumer, ConsumerPane) and isinstance(producer, ProducerPane)
        consumer.editor.edit.setFocus()
        qtbot.keyClicks(consumer.editor.edit, 'require(Price) && Symbol == "ACME"')
        assert consumer.editor.isValid()
        qtbot.keyClick(consumer.editor.edit, Qt.Key.Key_Return,
                       Qt.KeyboardModifier.ControlModifier)
        await until(lambda: consumer.subscribed)
        assert "Subscribed on local" in consumer.status_label.text()

        producer.attributes.set_cell(0, name="Symbol", kind="string", value="ACME")
        producer.attributes.add_row("Price", "real64", "9.5")
        producer.attributes.add_row("Volume", "int64", "1200")
        producer.attributes.add_row("Blob", "opaque", "de ad")
        assert producer.send_button.isEnabled()
        producer.send_button.click()
        await rows(consumer, 1)
        record = consumer.model.record(0)
        assert record.attributes == {"Symbol": "ACME", "Price": 9.5, "Volume": Int64(1200),
                                     "Blob": b"\xde\xad"}
        assert isinstance(record.attributes["Volume"], Int64) and record.secure is False
        assert len(producer.history) == 1 and producer.sent_count == 1

        # one click resends from the history; the detail diffs against the previous row
        producer.attributes.set_cell(1, value="10.25")
        producer.send_button.click()
        await rows(consumer, 2)
        producer.history_list.setCurrentRow(1)           # the first one sent
        button = producer.history_list.itemWidget(producer.history_list.item(1)).findChild(
            QToolButton)
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)     # one click resends
        await rows(consumer, 3)
        assert consumer.model.record(2).attributes["Price"] == 9.5
        consumer.view.selectRow(1)
        assert consumer.detail.record is consumer.model.record(1)
        assert consumer.detail.changes() == {"Symbol": "", "Price": "changed",
                                             "Volume": "", "Blob": ""}
        # columns chosen from what was received; cells show typed values
        consumer.set_columns(["Price", "Symbol"])
        model = consumer.proxy
        assert model.headerData(3, Qt.Orientation.Horizontal) == "Price"
        assert model.index(1, 3).data() == "10.25" and model.index(1, 4).data() == "ACME"
        assert model.index(0, 2).data() == "no"
        # names seen so far feed the completion model
        assert {"Price", "Symbol", "Volume"} <= set(window.names.model.stringList())
        assert "3 received" in consumer.stats_label.text()

    run(qt_loop, qtbot, scenario)


def test_completion_offers_names_seen(qt_loop, qtbot, router):
    async def scenario(console: Console):
        window = await console.open(basic(router.url))
        consumer = window.panes_of("consumer")[0]
        await subscribe(consumer, "require(Temperature)")
        async with elvin.client.connect(router.url) as conn:
            await conn.send({"Temperature": 21.5, "Room": "kitchen"})
            await rows(consumer, 1)
        consumer.editor.setExpression("")
        consumer.editor.edit.setFocus()
        qtbot.keyClicks(consumer.editor.edit, "Te")
        completer = consumer.completer.completer
        assert completer.popup().isVisible()
        assert completer.currentCompletion() == "Temperature"
        qtbot.keyClick(consumer.editor.edit, Qt.Key.Key_Tab)
        assert consumer.editor.expression() == "Temperature"
        assert not completer.popup().isVisible()

    run(qt_loop, qtbot, scenario)


def test_ctrl_enter_closes_the_completion_popup(qt_loop, qtbot, router):
    async def scenario(console: Console):
        window = await console.open(basic(router.url))
        consumer = window.panes_of("consumer")[0]
        window.names.add(["Temperature", "Room"])
        consumer.editor.setExpression("require(Room) && Room == \"kitchen\" || ")
        consumer.editor.edit.moveCursor(QTextCursor.MoveOperation.End)
        consumer.editor.edit.setFocus()
        qtbot.keyClicks(consumer.editor.edit, "Te")
        popup = consumer.completer.completer.popup()
        assert popup.isVisible()
        qtbot.keyClick(popup, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
        assert not popup.isVisible()
        assert "Not sent" in consumer.status_label.text()    # "... || Te" is not valid
        consumer.editor.setExpression("require(Room)")
        consumer.editor.edit.moveCursor(QTextCursor.MoveOperation.End)
        qtbot.keyClicks(consumer.editor.edit, " || require(Te")
        assert popup.isVisible()
        qtbot.keyClick(popup, Qt.Key.Key_Enter, Qt.KeyboardModifier.ControlModifier)
        assert not popup.isVisible()

    run(qt_loop, qtbot, scenario)


def test_bad_expression_shows_its_position_and_is_not_sent(qt_loop, qtbot, router):
    async def scenario(console: Console):
        window = await console.open(basic(router.url))
        consumer = window.panes_of("consumer")[0]
        async with elvin.client.connect(router.url) as watcher:
            quench = await watcher.quench(["Price"])
            consumer.editor.edit.setFocus()
            qtbot.keyClicks(consumer.editor.edit, "Price > 10 && ")
            assert not consumer.editor.isValid()
            assert not consumer.subscribe_button.isEnabled()
            error = consumer.editor.error()
            assert error is not None and error.position is not None
            assert "column" in consumer.editor.errorText()
            assert consumer.editor.underlined()
            # the shortcut and a direct call both refuse to send it
            qtbot.keyClick(consumer.editor.edit, Qt.Key.Key_Return,
                           Qt.KeyboardModifier.ControlModifier)
            assert consumer.apply() is False
            assert "Not sent" in consumer.status_label.text()
            # a round trip on the pane's connection and the watcher's: anything
            # sent before would have been handled and its quench event seen
            await window.registry.get("local").connection.set_keys()
            await watcher.set_keys()
            assert consumer.sub is None and window.registry.get("local").connection\
                .subscriptions == []
            assert quench.subscriptions == {}            # nothing reached the router
            # fixed, it goes through, and the router tells the quench about it
            qtbot.keyClicks(consumer.editor.edit, 'Symbol == "X"')
            assert consumer.apply() is True
            await until(lambda: consumer.subscribed)
            await until(lambda: len(quench.subscriptions) == 1)

    run(qt_loop, qtbot, scenario)


def test_router_refusal_is_shown(qt_loop, qtbot, router):
    async def scenario(console: Console):
        window = await console.open(basic(router.url))
        consumer = window.panes_of("consumer")[0]
        consumer.editor.setExpression("require(A)")
        consumer.set_router("nowhere")          # a router that does not exist
        assert consumer.apply() is True
        await until(lambda: "Waiting for router" in consumer.status_label.text())
        consumer.set_router("local")
        await until(lambda: consumer.subscribed)

    run(qt_loop, qtbot, scenario)


def test_pause_buffers_and_resume_shows_them(qt_loop, qtbot, router):
    async def scenario(console: Console):
        window = await console.open(basic(router.url))
        consumer = window.panes_of("consumer")[0]
        await subscribe(consumer, "require(N)")
        async with elvin.client.connect(router.url) as conn:
            await conn.send({"N": 0})
            await rows(consumer, 1)
            consumer.pause_button.click()
            assert consumer.paused
            for n in range(1, 6):
                await conn.send({"N": n})
            await until(lambda: consumer.model.waiting == 5)
            for _ in range(5):
                consumer.tick()
                await asyncio.sleep(0.02)
            assert consumer.model.rowCount() == 1          # nothing shown while paused
            assert "5 buffered" in consumer.stats_label.text()
            assert consumer.pause_button.text() == "Resume (5)"
            consumer.pause_button.click()
            assert not consumer.paused
            assert consumer.model.rowCount() == 6
            assert [consumer.model.record(i).attributes["N"] for i in range(6)] == \
                list(range(6))
            assert consumer.pause_button.text() == "Pause"

    run(qt_loop, qtbot, scenario)


def test_bounded_buffer_caps_rows_and_counts_drops(qt_loop, qtbot, router):
    async def scenario(console: Console):
        spec = ConsumerSpec(title="C", router="local", buffer=10)
        window = await console.open(basic(router.url, spec))
        consumer = window.panes_of("consumer")[0]
        assert consumer.buffer_spin.value() == 10
        await subscribe(consumer, "require(N)")
        async with elvin.client.connect(router.url) as conn:
            for n in range(15):
                await conn.send({"N": n})
            await until(lambda: consumer.model.received == 15)
            consumer.tick()
            for n in range(15, 35):
                await conn.send({"N": n})
            await until(lambda: consumer.model.received == 35)
            consumer.tick()
        assert consumer.model.rowCount() == 10
        assert consumer.model.dropped == 25
        assert [r.attributes["N"] for r in consumer.model.records()] == list(range(25, 35))
        assert "25</b> dropped" in consumer.stats_label.text()
        # paused, the waiting queue is bounded too
        consumer.set_paused(True)
        async with elvin.client.connect(router.url) as conn:
            for n in range(35, 60):
                await conn.send({"N": n})
            await until(lambda: consumer.model.received == 60)
        assert consumer.model.waiting == 10
        consumer.set_paused(False)
        assert [r.attributes["N"] for r in consumer.model.records()] == list(range(50, 60))
        assert consumer.model.dropped == 50
        # a larger buffer from the spin box keeps more from now on
        consumer.set_capacity(100)
        assert consumer.model.capacity == 100 and consumer.model.rowCount() == 10

    run(qt_loop, qtbot, scenario)


def test_filter_text_and_regex(qt_loop, qtbot, router):
    async def scenario(console: Console):
        window = await console.open(basic(router.url))
        consumer = window.panes_of("consumer")[0]
        await subscribe(consumer, "require(Symbol)")
        async with elvin.client.connect(router.url) as conn:
            for symbol in ("ACME", "BETA", "acme2", "GAMMA"):
                await conn.send({"Symbol": symbol, "Price": 1.0})
            await rows(consumer, 4)
        qtbot.keyClicks(consumer.filter_edit, "acme")
        assert consumer.proxy.rowCount() == 2           # case-insensitive text
        assert "2 match the filter" in consumer.stats_label.text()
        consumer.filter_edit.setText("^Symbol: \"(BETA|GAMMA)\"$")
        assert consumer.proxy.rowCount() == 0           # not a regex yet: literal text
        consumer.regex_box.setChecked(True)
        assert consumer.proxy.rowCount() == 0           # ^...$ per whole text
        consumer.filter_edit.setText("Symbol: \"(BETA|GAMMA)\"")
        assert consumer.proxy.rowCount() == 2
        consumer.filter_edit.setText("(unclosed")
        assert "bad regular expression" in consumer.filter_edit.toolTip()
        assert consumer.proxy.rowCount() == 2           # the last good filter stays
        assert [r.attributes["Symbol"] for r in consumer.visible_records()] == \
            ["BETA", "GAMMA"]
        consumer.filter_edit.clear()
        assert consumer.proxy.rowCount() == 4

    run(qt_loop, qtbot, scenario)


def test_plot_follows_the_filter(qt_loop, qtbot, router):
    async def scenario(console: Console):
        window = await console.open(basic(router.url))
        consumer = window.panes_of("consumer")[0]
        await subscribe(consumer, "require(Symbol)")
        consumer.filter_edit.setText("ACME")
        consumer.set_columns(["Price"])
        assert not consumer.plot.isVisible()
        async with elvin.client.connect(router.url) as conn:
            await conn.send({"Symbol": "ACME", "Price": 1.0})
            await rows(consumer, 1)
            consumer._fill_columns_menu()          # Price is offered for plotting
            plot_menu = next(a.menu() for a in consumer.columns_menu.actions() if a.menu())
            next(a for a in plot_menu.actions() if a.text() == "Price").setChecked(True)
            assert consumer.plot.names == ["Price"] and consumer.plot.isVisible()
            for symbol, price in (("ACME", 2.0), ("BETA", 50.0), ("ACME", Int64(3))):
                await conn.send({"Symbol": symbol, "Price": price})
            await until(lambda: consumer.model.received == 4)
            consumer.tick()
        assert [v for _t, v in consumer.plot.points["Price"]] == [2.0, 3.0]
        assert consumer.plot.chart.latest(0) == 3.0
        assert consumer.to_spec().plots == ["Price"]
        consumer.toggle_plot("Price", False)
        assert not consumer.plot.isVisible()

    run(qt_loop, qtbot, scenario)


def test_secure_match_flag_with_keys(qt_loop, qtbot, router):
    async def scenario(console: Console):
        consumer_spec = ConsumerSpec(title="C", router="local", consumer_keys=['"k1"'],
                                     accept_insecure=False)
        producer_spec = ProducerSpec(title="P", router="local", consumer_keys=['"k1"'],
                                     deliver_insecure=False)
        window = await console.open(basic(router.url, consumer_spec, producer_spec))
        consumer = window.panes_of("consumer")[0]
        producer = window.panes_of("producer")[0]
        assert consumer.keys_button.text() == "Keys: 1 consumer…"
        await subscribe(consumer, "require(Message)")
        producer.send_button.click()
        await rows(consumer, 1)
        assert consumer.model.record(0).secure is True
        assert consumer.proxy.index(0, 2).data() == "yes"
        assert "[keys, secure only]" in producer.history_label(0)
        async with elvin.client.connect(router.url) as other:   # no keys: not delivered
            await other.send({"Message": "insecure"})
        await asyncio.sleep(0.3)
        consumer.tick()
        assert consumer.model.rowCount() == 1

    run(qt_loop, qtbot, scenario)


def test_producer_validates_per_type(qt_loop, qtbot, router):
    async def scenario(console: Console):
        window = await console.open(basic(router.url))
        producer = window.panes_of("producer")[0]
        table = producer.attributes
        table.add_row("Count", "int32", "12x")
        assert not table.is_valid() and not producer.send_button.isEnabled()
        assert "row 2, Count: '12x' is not a whole number" in table.error_label.text()
        assert table.table.item(1, 2).toolTip() and producer.send_once() is False
        assert "Not sent" in producer.status_label.text() and producer.sent_count == 0
        table.set_cell(1, value="3000000000")
        assert "choose int64" in table.error_label.text()
        table.set_cell(1, kind="int64")
        assert table.is_valid()
        table.add_row("Count", "string", "dup")
        assert "already used in row 2" in table.error_label.text()
        # only the duplicate is selected (selectRow adds to a selection when a
        # modifier key is down, as Qt may believe after an earlier test's Ctrl+key)
        table.table.clearSelection()
        table.table.selectRow(2)
        table.remove_selected()
        assert table.is_valid() and table.notification() == {"Message": "hello",
                                                              "Count": Int64(3000000000)}
        table.clear()
        assert "cannot be empty" in table.error_label.text()

    run(qt_loop, qtbot, scenario)


def test_producer_repeats_at_a_rate(qt_loop, qtbot, router):
    async def scenario(console: Console):
        window = await console.open(basic(router.url))
        consumer = window.panes_of("consumer")[0]
        producer = window.panes_of("producer")[0]
        await subscribe(consumer, "require(Message)")
        producer.rate_spin.setValue(100)
        producer.repeat_button.click()
        assert producer.repeater is not None and producer.repeat_button.text() == "Stop"
        await until(lambda: producer.sent_count >= 30)      # repeating, not just once
        producer.repeat_button.click()
        await until(lambda: producer.repeater is None)
        sent = producer.sent_count
        assert sent >= 30
        await until(lambda: consumer.model.received == sent)
        assert producer.history[0].count == sent and "at 100/s" in producer.history_label(0)

    run(qt_loop, qtbot, scenario)


def test_ec_files_load_into_the_producer(qt_loop, qtbot, router, tmp_path):
    async def scenario(console: Console):
        window = await console.open(basic(router.url))
        producer = window.panes_of("producer")[0]
        path = tmp_path / "defs.ec"
        path.write_text('A: 1\nB: "x"\n---\nA: 2L\n---\nA: [01]\n---\n')
        assert producer.load_file(str(path)) == 3
        assert producer.attributes.notification() == {"A": 1, "B": "x"}
        assert [h.notification["A"] for h in producer.history] == [Int64(2), b"\x01"]
        out = tmp_path / "saved.ec"
        assert producer.save_file(str(out), [producer.attributes.notification()])
        assert parse_notifications(out.read_text()) == [{"A": 1, "B": "x"}]

    run(qt_loop, qtbot, scenario)


# -- workspace ---------------------------------------------------------------------------

@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_save_then_load_workspace_restores_panes(qt_loop, qtbot, router, tmp_path, suffix):
    async def scenario(console: Console):
        window = await console.open(basic(router.url))
        consumer = window.panes_of("consumer")[0]
        await subscribe(consumer, 'require(Price) && Symbol == "ACME"')
        consumer.set_columns(["Price"])
        consumer.set_capacity(500)
        consumer.filter_edit.setText("AC")
        producer = window.panes_of("producer")[0]
        producer.attributes.set_cell(0, name="Symbol", value="ACME")
        producer.attributes.add_row("Price", "real64", "2.5")
        producer.keys_button.set_spec(producer.keys_button.spec().__class__(['"p1"'], []))
        quench = window.add_pane("quench")
        quench.names_edit.setText("Price, Symbol")
        assert quench.start()
        window.add_pane("router")
        window.panes[0].set_title("Prices")
        path = tmp_path / f"ws{suffix}"
        assert window.save_workspace(path)
        saved = window.workspace()

        other = await console.open(Workspace())
        assert await other.open_workspace(path)
        assert [p.kind for p in other.panes] == ["consumer", "producer", "quench", "router"]
        assert other.workspace() == saved
        assert other.path == path and path.name in other.windowTitle()
        restored = other.panes_of("consumer")[0]
        assert restored.title() == "Prices" and restored.model.capacity == 500
        assert restored.model.columns() == ["Price"] and restored.filter_edit.text() == "AC"
        await until(lambda: restored.subscribed)        # subscribed again on load
        other_producer = other.panes_of("producer")[0]
        assert other_producer.attributes.notification() == {"Symbol": "ACME", "Price": 2.5}
        assert other_producer.keys_button.spec().producer == ['"p1"']
        await until(lambda: other.panes_of("quench")[0].quench is not None)
        other_producer.send_button.click()
        await rows(restored, 1)
        assert restored.model.record(0).attributes["Price"] == 2.5

    run(qt_loop, qtbot, scenario)


def test_bad_workspace_file_is_reported_and_changes_nothing(qt_loop, qtbot, router, tmp_path,
                                                            monkeypatch):
    from PySide6.QtWidgets import QMessageBox
    warnings = []
    monkeypatch.setattr(QMessageBox, "warning",
                        lambda *args: warnings.append(args[2]))

    async def scenario(console: Console):
        window = await console.open(basic(router.url))
        path = tmp_path / "bad.json"
        path.write_text('{"panes": [{"kind": "consumer", "buffer": -1}]}')
        assert await window.open_workspace(path) is False
        assert "panes[0].buffer" in warnings[0]
        assert len(window.panes) == 2 and window.registry.names() == ["local"]

    run(qt_loop, qtbot, scenario)


# -- export ----------------------------------------------------------------------------

def test_export_writes_files_that_ep_accepts(qt_loop, qtbot, router, tmp_path):
    sent = [{"Symbol": "ACME", "Price": 9.5, "Volume": Int64(10), "Note": 'a "q"\nline 2'},
            {"Symbol": "BETA", "Price": float("nan"), "Raw": b"\x00\xff"},
            {"Symbol": "ACME", "Price": -1.0, "Volume": Int64(-3)}]

    async def scenario(console: Console):
        window = await console.open(basic(router.url))
        consumer = window.panes_of("consumer")[0]
        await subscribe(consumer, "require(Symbol)")
        async with elvin.client.connect(router.url) as conn:
            for notification in sent:
                await conn.send(notification)
            await rows(consumer, 3)
        ec_path, jsonl_path, csv_path = (tmp_path / "out.ec", tmp_path / "out.jsonl",
                                         tmp_path / "out.csv")
        assert consumer.export_to(str(ec_path)) == 3
        assert consumer.export_to(str(jsonl_path)) == 3
        consumer.filter_edit.setText("ACME")           # export what is shown
        assert consumer.export_to(str(csv_path)) == 2

        def same(a, b):
            return a.keys() == b.keys() and all(
                a[k] == b[k] or (a[k] != a[k] and b[k] != b[k]) for k in a)
        back = parse_notifications(ec_path.read_text())
        assert all(same(a, b) for a, b in zip(back, sent, strict=True))
        assert isinstance(back[0]["Volume"], Int64)
        assert all(same(a, b) for a, b in zip(read_json_lines(jsonl_path.read_text()), sent,
                                              strict=True))
        table = list(csv.reader(io.StringIO(csv_path.read_text())))
        assert table[0][:4] == ["time", "secure", "Symbol", "Price"] and len(table) == 3
        assert table[1][table[0].index("Volume")] == "10L"

        # the real ep sends the ec export to the router unchanged
        async with elvin.client.connect(router.url) as listener:
            sub = await listener.subscribe("require(Symbol)")
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "elvin.tools.ep", "-e", router.url,
                stdin=open(ec_path, "rb"), stderr=subprocess.PIPE, cwd=ROOT)
            _out, err = await proc.communicate()
            assert proc.returncode == 0, err.decode()
            got = [await sub.get(timeout=10) for _ in sent]
        assert all(same(dict(a), b) for a, b in zip(got, sent, strict=True))

    run(qt_loop, qtbot, scenario, timeout=90)


# -- quench and router views ---------------------------------------------------------------

def test_quench_view_shows_another_clients_subscriptions(qt_loop, qtbot, router):
    async def scenario(console: Console):
        window = await console.open(basic(router.url, QuenchSpec(title="Q", router="local")))
        quench = window.panes_of("quench")[0]
        assert isinstance(quench, QuenchPane)
        async with elvin.client.connect(router.url) as other:
            early = await other.subscribe('Price > 10 && Symbol == "ACME"')
            qtbot.keyClicks(quench.names_edit, "Price")
            qtbot.keyClick(quench.names_edit, Qt.Key.Key_Return)
            await until(lambda: len(quench.active_expressions()) == 1)
            (term, text), = quench.active_expressions().items()
            assert "Price > 10" in text and "Symbol" in text
            assert quench.state_of(term) == "added"
            late = await other.subscribe("require(Price)")
            await until(lambda: len(quench.active_expressions()) == 2)
            await early.modify("Price < 5")
            await until(lambda: "Price < 5" in quench.active_expressions().values())
            await late.close()
            await until(lambda: len(quench.active_expressions()) == 1)
            assert "removed" in [quench.table.item(r, 1).text()
                                 for r in range(quench.table.rowCount())]
            assert "modified" in quench.log.toPlainText()
            quench.clear_removed()
            assert quench.table.rowCount() == 1
            await other.subscribe("require(Unrelated)")     # not about Price: not shown
            # a round trip on the pane's connection: a quench event the router
            # sent for that subscription would have arrived before its reply
            await window.registry.get("local").connection.set_keys()
            assert len(quench.active_expressions()) == 1

    run(qt_loop, qtbot, scenario)


def test_quench_view_at_a_router_without_quench(qt_loop, qtbot, make_router):
    """The view says the router has no quench instead of staying empty, and
    watches once the console reconnects to a router that has quench."""
    plain = make_router(quench=False)

    async def scenario(console: Console):
        window = await console.open(basic(plain.url, QuenchSpec(title="Q", router="local",
                                                                names=["Price"],
                                                                active=True)))
        quench = window.panes_of("quench")[0]
        await until(lambda: quench.note_text is not None, what="the note")
        assert quench.note_text.startswith("Router local does not support quench")
        assert quench.table.isHidden() and quench.stop_button.isEnabled()
        assert "does not support quench" in quench.status_label.text()
        assert "color: #c62828" not in quench.status_label.styleSheet()   # not an error

        plain.restart(quench=True)   # same port: the console reconnects by itself
        async with elvin.client.connect(plain.url) as other:
            await other.subscribe("require(Price)")
            await until(lambda: len(quench.active_expressions()) == 1, timeout=20,
                        what="the quench after reconnecting")
        assert quench.note_text is None and not quench.table.isHidden()

    run(qt_loop, qtbot, scenario)


def test_router_view_receives_stats(qt_loop, qtbot, router):
    async def scenario(console: Console):
        window = await console.open(basic(router.url, RouterViewSpec(title="R",
                                                                     router="local")))
        view = window.panes_of("router")[0]
        assert isinstance(view, RouterViewPane)
        await until(lambda: len(view.current_samples()) >= 3)
        sample = view.current_samples()[-1]
        assert sample.connections >= 1 and sample.subscriptions >= 1
        assert view.id_combo.count() == 1
        # the id in words (host, start time, process), not host:pid:epoch:sequence
        assert view.id_combo.currentText().startswith(f"{socket.gethostname()}, started ")
        assert "(process " in view.summary.text()
        assert view.rate_chart.data[0] and view.connections_chart.latest(0) >= 1
        assert view.subscriptions_chart.latest(0) >= 1
        assert "connections" in view.summary.text() and "no drops" in view.summary.text()
        async with elvin.client.connect(router.url) as conn:
            for n in range(200):
                await conn.send({"Load": n})
            before = view.received
            await until(lambda: view.received >= before + 3)
        assert max(s.notifications_in for s in view.current_samples()) >= 200
        # the busiest clients, from the statistics' Top-Clients (issue 49)
        await until(lambda: " in 200 out " in view.clients_label.text(),
                    what="the producer among the busiest clients")
        assert view.clients_label.text().startswith("<b>Busiest clients</b>")
        view.window_combo.setCurrentIndex(0)
        assert view.rate_chart.window == 60

    run(qt_loop, qtbot, scenario)


def test_several_routers_each_with_status(qt_loop, qtbot, router):
    from elvin.router.embedded import EmbeddedRouter
    second = EmbeddedRouter()
    second.start()

    async def scenario(console: Console):
        workspace = Workspace([RouterSpec("one", router.url), RouterSpec("two", second.url)],
                              [ConsumerSpec(title="A", router="one"),
                               ConsumerSpec(title="B", router="two")])
        window = await console.open(workspace)
        rows_ = window.routers_panel.rows
        assert set(rows_) == {"one", "two"}
        assert all(row.status.state() == "connected" for row in rows_.values())
        a, b = window.panes_of("consumer")
        await subscribe(a, "require(X)")
        await subscribe(b, "require(X)")
        async with elvin.client.connect(second.url) as conn:
            await conn.send({"X": 2})
            await rows(b, 1)
        a.tick()
        assert a.model.rowCount() == 0                 # sent to router two only
        # renaming a router keeps the panes on it
        await window.registry.update("two", RouterSpec("second", second.url))
        assert b.router_name == "second" and b.router_combo.currentText() == "second"
        await until(lambda: b.subscribed)
        await asyncio.get_running_loop().run_in_executor(None, second.stop)
        await until(lambda: window.registry.get("second").manager.state != "connected")
        assert window.routers_panel.rows["one"].status.state() == "connected"

    try:
        run(qt_loop, qtbot, scenario)
    finally:
        second.stop()


# -- screenshots -----------------------------------------------------------------------------

def test_screenshots_with_traffic(qt_loop, qtbot, router, tmp_path):
    out = Path(os.environ.get("CONSOLE_SCREENSHOT_DIR", tmp_path))

    async def scenario(console: Console):
        workspace = Workspace(
            [RouterSpec("local", router.url), RouterSpec("staging", "elvin://127.0.0.1:1")],
            [ConsumerSpec(title="Prices", router="local", columns=["Symbol", "Price", "Volume"],
                          subscription='require(Price) && Symbol != "TEST"', subscribed=True,
                          filter="ACME", plots=["Price"]),
             ProducerSpec(title="Ticker", router="local"),
             RouterViewSpec(title="Router statistics", router="local", window=60)])
        registry = RouterRegistry()
        window = MainWindow(registry)
        qtbot.addWidget(window)
        console.windows.append(window)
        await window.apply_workspace(workspace)
        window.resize(1400, 900)
        window.show()
        consumer = window.panes_of("consumer")[0]
        producer = window.panes_of("producer")[0]
        await until(lambda: consumer.subscribed)
        producer.attributes.set_attributes([])
        producer.attributes.add_row("Symbol", "string", "ACME")
        producer.attributes.add_row("Price", "real64", "101.25")
        producer.attributes.add_row("Volume", "int64", "1500")
        producer.attributes.add_row("Exchange", "string", "ASX")
        long = "CONSOLE_SCREENSHOT_DIR" in os.environ
        async with elvin.client.connect(router.url) as conn:
            symbols = ["ACME", "BETA", "GAMMA", "DELTA"]
            price = {s: 100.0 + i * 7 for i, s in enumerate(symbols)}
            count = 240 if long else 60
            for n in range(count):
                symbol = symbols[n % 4]
                price[symbol] = round(price[symbol] + ((n * 7919) % 11 - 5) / 8, 2)
                await conn.send({"Symbol": symbol, "Price": price[symbol],
                                 "Volume": Int64(1000 + n * 10), "Exchange": "ASX",
                                 "Seq": n})
                if n % 4 == 3:
                    await asyncio.sleep(0.1 if long else 0.005)
            producer.send_button.click()
            await rows(consumer, count + 1)
            visible = consumer.proxy.rowCount()
            assert visible == count // 4 + 1
            consumer.view.selectRow(visible - 3)
            await asyncio.sleep(0.3)
            consumer.tick()
            window.show_pane(consumer)
            await asyncio.sleep(0.2)
            assert window.grab().save(str(out / "console-consumer.png"))
            view = window.panes_of("router")[0]
            window.show_pane(view)
            # steady traffic at changing rates, as a producer pane repeats it
            seconds = 3.0 if "CONSOLE_SCREENSHOT_DIR" in os.environ else 0.6
            for rate in (250, 800, 400):
                assert producer.start_repeat(rate)
                await asyncio.sleep(seconds)
                if rate != 400:
                    await producer.stop_repeat()
            await until(lambda: len(view.current_samples()) >= 8)
            consumer.tick()
            assert window.grab().save(str(out / "console-router.png"))   # while sending
            await producer.stop_repeat()
        assert (out / "console-consumer.png").stat().st_size > 10_000

    run(qt_loop, qtbot, scenario, timeout=90)


def test_router_view_follows_a_restarted_router(qt_loop, qtbot, router):
    """The router restarts on the same port with a new Router-Id: the pane
    selects the new id (it was showing the connected router) and charts it."""
    async def scenario(console: Console):
        window = await console.open(basic(router.url, RouterViewSpec(title="R",
                                                                     router="local")))
        view = window.panes_of("router")[0]
        await until(lambda: len(view.current_samples()) >= 2)
        old = view.current_id()
        assert view.own_id == old
        router.stop()
        # the id is host:pid:start second; in one process the restart must
        # start in a later second to get a new id (a real restart gets a new pid)
        await until(lambda: int(time.time()) > int(old.rsplit(":", 1)[1]), 3)
        router.start()
        await until(lambda: view.current_id() != old, 20, "the pane follows the new router")
        assert view.id_combo.findData(old) >= 0       # the old one can still be looked at
        await until(lambda: len(view.current_samples()) >= 2)
        assert view.current_samples()[-1].uptime < 30
        assert "restarted" in view.status_label.text()

    run(qt_loop, qtbot, scenario)


def test_quench_view_shows_the_values_subscribers_want(qt_loop, qtbot, router):
    """What a producer needs: per watched attribute, the values some
    subscription can match (elvin.quenching.wanted), kept up to date."""
    async def scenario(console: Console):
        window = await console.open(basic(router.url, QuenchSpec(title="Q", router="local")))
        quench = window.panes_of("quench")[0]
        async with elvin.client.connect(router.url) as other:
            await other.subscribe('Symbol == "ACME" && Price > 10')
            await other.subscribe('begins-with(Symbol, "BE")')
            qtbot.keyClicks(quench.names_edit, "Symbol")
            qtbot.keyClick(quench.names_edit, Qt.Key.Key_Return)
            await until(lambda: len(quench.active_expressions()) == 2)
            assert quench.wanted_values() == {
                "Symbol": 'Symbol == "ACME"  or  begins-with(Symbol, "BE")'}
            anything = await other.subscribe("require(Symbol)")
            await until(lambda: quench.wanted_values()["Symbol"].startswith("any value"))
            await anything.close()
            await until(lambda: "or" in quench.wanted_values()["Symbol"])
            quench.wanted_table.parentWidget().parentWidget().resize(900, 520)
            quench.grab().save("/tmp/quench-wanted.png")

    run(qt_loop, qtbot, scenario)


def test_router_view_says_a_failover(qt_loop, qtbot, make_router):
    """A saved router naming two routers (apart by a space): the first
    stops, the connection fails over, and the router pane says so and
    charts the second router; the routers panel's status names it."""
    from elvin.client.session import client_uri

    first, second = make_router(), make_router()

    async def scenario(console: Console):
        window = await console.open(basic(f"{first.url} {second.url}",
                                          RouterViewSpec(title="R", router="local")))
        view = window.panes_of("router")[0]
        await until(lambda: len(view.current_samples()) >= 2)
        old = view.current_id()
        await asyncio.get_running_loop().run_in_executor(None, first.stop)
        await until(lambda: view.current_id() != old, 20, "the pane follows the failover")
        there = str(client_uri(second.url))
        assert f"Failed over from {client_uri(first.url)} to {there}" in \
            view.status_label.text()
        entry = window.registry.get("local")
        assert entry.manager.url == there and entry.manager.urls[-1] == there

    run(qt_loop, qtbot, scenario)
