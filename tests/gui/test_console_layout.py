"""The console's layout at the sizes people use: the routers sidebar folds
(by itself below 1200 px), producers are a one-line publish bar that
unfolds, the detail hides; the Columns menu keeps its order and stays open
while ticking; "Add attribute" starts typing a name with no error shown."""

from __future__ import annotations

from elvin_apps.console.workspace import ConsumerSpec, ProducerSpec, dumps, loads
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QApplication

import elvin.client
from tests.gui.test_console_app import Console, basic, rows, run, subscribe
from tests.waiting import until


def test_window_works_at_1024_with_the_sidebar_folded(qt_loop, qtbot, router):
    async def scenario(console: Console):
        window = await console.open(basic(router.url))
        window.resize(1400, 900)
        assert window.sidebar_shown
        window.resize(1024, 700)
        assert window.width() == 1024 and not window.sidebar_shown
        assert "local connected" in window.routers_summary.text()
        assert window.routers_summary.isVisible()
        window.sidebar_action.trigger()                 # the user's choice sticks
        assert window.sidebar_shown and not window.routers_summary.isVisible()
        window.resize(1000, 700)
        assert window.sidebar_shown
        window.sidebar_button.click()
        assert not window.sidebar_shown

    run(qt_loop, qtbot, scenario)


def test_producer_is_a_publish_bar_that_unfolds(qt_loop, qtbot, router):
    async def scenario(console: Console):
        window = await console.open(basic(router.url))
        window.resize(1400, 900)
        consumer = window.panes_of("consumer")[0]
        producer = window.panes_of("producer")[0]
        assert not producer.expanded and not producer.full.isVisible()
        assert producer.summary_label.text() == 'Message="hello"'
        dock = window.docks[producer]
        assert dock.height() < 120               # the consumer gets the room
        await subscribe(consumer, "require(Message)")
        producer.bar_send.click()
        await rows(consumer, 1)
        producer.expand_button.click()
        assert producer.expanded and producer.full.isVisible()
        await until(lambda: dock.height() > 200)
        assert loads(dumps(window.workspace())).panes[1].expanded is True
        producer.expand_button.click()
        assert not producer.full.isVisible()

        # the detail pane hides; the choice is saved
        assert consumer.below.isVisible()
        consumer.detail_button.click()
        assert not consumer.below.isVisible()
        assert loads(dumps(window.workspace())).panes[0].detail is False

    run(qt_loop, qtbot, scenario)


def test_columns_menu_keeps_order_and_stays_open(qt_loop, qtbot, router):
    async def scenario(console: Console):
        window = await console.open(basic(router.url, ConsumerSpec(title="C", router="local"),
                                          ProducerSpec(title="P", router="local")))
        consumer = window.panes_of("consumer")[0]
        await subscribe(consumer, "require(b)")
        async with elvin.client.connect(router.url) as conn:
            await conn.send({"c": 1, "b": 2, "a": 3, "D": 4})
            await rows(consumer, 1)
        menu = consumer.columns_menu
        menu.popup(
            consumer.columns_button.mapToGlobal(consumer.columns_button.rect().bottomLeft()))
        await until(menu.isVisible)

        def names() -> list[str]:
            return [a.text() for a in menu.actions() if a.isCheckable()]

        assert names() == ["a", "b", "c", "D"]
        for name in ("c", "a"):
            action = next(a for a in menu.actions() if a.text() == name)
            qtbot.mouseClick(menu, Qt.MouseButton.LeftButton,
                             pos=menu.actionGeometry(action).center())
            assert menu.isVisible() and action.isChecked()
        assert consumer.model.columns() == ["c", "a"]
        menu.close()
        consumer._fill_columns_menu()
        assert names() == ["a", "b", "c", "D"]       # ticked ones do not move up

    run(qt_loop, qtbot, scenario)


def test_add_attribute_types_a_name_with_no_error(qt_loop, qtbot, router):
    async def scenario(console: Console):
        window = await console.open(basic(router.url))
        producer = window.panes_of("producer")[0]
        producer.set_expanded(True)
        window.activateWindow()
        table = producer.attributes
        table.add_button.click()
        assert table.table.currentRow() == 1 and table.table.currentColumn() == 0
        assert table.table.state() == QAbstractItemView.State.EditingState
        editor = QApplication.focusWidget()
        assert editor is not None and table.table.isAncestorOf(editor)
        assert table.error_label.text() == "" and table.is_valid()
        assert producer.send_button.isEnabled()
        assert table.notification() == {"Message": "hello"}     # the blank row is left out
        qtbot.keyClicks(editor, "Count")
        qtbot.keyClick(editor, Qt.Key.Key_Tab)
        table.set_cell(1, kind="int32", value="")
        assert "row 2, Count" in table.error_label.text()     # now a real mistake shows

        table.clear()
        table.add_button.click()
        assert "Type the new attribute's name" in table.error_label.text()
        assert "c62828" not in table.error_label.styleSheet()  # a hint, not an error
        assert not producer.send_button.isEnabled()

    run(qt_loop, qtbot, scenario)


def test_the_detail_keeps_previous_in_view(qtbot):
    """A long previous value pushed the Previous column off to the right
    of Browse's detail (a horizontal scroll bar); now the row fits."""
    from elvin_apps.console.detailview import DetailView
    from elvin_apps.console.received import Received

    view = DetailView()
    qtbot.addWidget(view)
    view.resize(460, 300)
    view.show()
    before = Received(1, 0.0, {"Group": "Chat", "Message": "x" * 200}, False)
    now = Received(2, 1.0, {"Group": "Chat", "Message": "short"}, False)
    view.show_record(now, before)
    qtbot.waitUntil(lambda: view.tree.header().length() <= view.tree.viewport().width() + 1)
    assert not view.tree.horizontalScrollBar().isVisible()


def test_the_unfolded_producer_shows_whole_rows(qt_loop, qtbot, router):
    async def scenario(console: Console):
        window = await console.open(basic(router.url))
        producer = window.panes_of("producer")[0]
        table = producer.attributes.table
        rows_needed = 3 * table.verticalHeader().defaultSectionSize() + \
            table.horizontalHeader().sizeHint().height()
        assert table.minimumHeight() >= rows_needed

    run(qt_loop, qtbot, scenario)
