"""The console's completion popup, as it is typed into: it narrows with
every keystroke (the keys go to the popup once it is open, as they do for a
user), offers the attribute names the router lists, never covers the lines
being written, and a stale "Not sent" goes once the expression is valid."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QTextCursor

from tests.gui.test_console_app import Console, basic, run


def shown(completer) -> list[str]:
    """The completions the popup lists now."""
    model = completer.completionModel()
    return [model.index(row, 0).data() for row in range(model.rowCount())]


def test_the_popup_narrows_with_every_keystroke(qt_loop, qtbot, router):
    async def scenario(console: Console):
        window = await console.open(basic(router.url))
        consumer = window.panes_of("consumer")[0]
        window.names.add(["Reading", "Region", "Room"])
        edit = consumer.editor.edit
        consumer.editor.setExpression("")
        edit.setFocus()
        qtbot.keyClicks(edit, "re")
        completer = consumer.completer.completer
        popup = completer.popup()
        assert popup.isVisible()
        first = shown(completer)
        # attribute names first, then the language's functions
        assert first[:2] == ["Reading", "Region"] and "require" in first and "regex" in first
        narrowed = []
        for key in "qui":                      # the popup has the keyboard now
            qtbot.keyClick(popup, key)
            narrowed.append(shown(completer))
        assert edit.toPlainText() == "requi"
        assert narrowed[0] == ["require"], narrowed      # "req"
        assert popup.isVisible()
        qtbot.keyClick(popup, "r")
        qtbot.keyClick(popup, "e")             # "require": the whole word, nothing to offer
        assert not popup.isVisible()
        assert edit.toPlainText() == "require"

    run(qt_loop, qtbot, scenario)


def test_the_popup_does_not_cover_the_text(qt_loop, qtbot, router):
    async def scenario(console: Console):
        window = await console.open(basic(router.url))
        consumer = window.panes_of("consumer")[0]
        window.names.add(["Symbol", "Size"])
        edit = consumer.editor.edit
        consumer.editor.setExpression(" && require(Price)\n|| require(Volume)\n|| Size > 2")
        edit.setFocus()
        edit.moveCursor(QTextCursor.MoveOperation.Start)
        qtbot.keyClicks(edit, "S")
        qtbot.keyClicks(edit, "y")
        popup = consumer.completer.completer.popup()
        assert popup.isVisible()
        edit_rect = QRect(edit.mapToGlobal(QPoint(0, 0)), edit.size())
        popup_rect = QRect(popup.mapToGlobal(QPoint(0, 0)), popup.size())
        assert not popup_rect.intersects(edit_rect), (popup_rect, edit_rect)
        qtbot.keyClick(popup, Qt.Key.Key_Escape)

    run(qt_loop, qtbot, scenario)


def test_a_stale_not_sent_goes_when_the_expression_is_valid(qt_loop, qtbot, router):
    async def scenario(console: Console):
        window = await console.open(basic(router.url))
        consumer = window.panes_of("consumer")[0]
        consumer.editor.setExpression('Room == "kitch')
        assert not consumer.apply()
        assert "UNTERM_STRING" in consumer.status_label.text()
        consumer.editor.edit.moveCursor(QTextCursor.MoveOperation.End)
        qtbot.keyClicks(consumer.editor.edit, 'en"')
        assert consumer.editor.isValid()
        assert "Not sent" not in consumer.status_label.text()

    run(qt_loop, qtbot, scenario)


def test_browse_names_are_offered(qt_loop, qtbot, make_router):
    """The router's list of names (Browse) feeds completion, before any
    consumer has received one of them."""
    from elvin_apps.console.workspace import BrowseSpec

    import elvin.client
    from tests.waiting import until

    router = make_router(stats_interval=0.3)

    async def scenario(console: Console):
        window = await console.open(basic(router.url, BrowseSpec(title="B", router="local")))
        browse = window.panes_of("browse")[0]
        await until(lambda: browse.census_seen, 10, "the router's list of names")
        async with elvin.client.connect(router.url) as producer:
            await producer.send({"Quarantine": 1, "Quota": 2})
            await until(lambda: {"Quarantine", "Quota"} <= set(window.names.model.stringList()),
                        10, "the router's names in the completion list")

    run(qt_loop, qtbot, scenario)
