"""elvin.qt widgets with pytest-qt: the subscription editor, and the
connection manager with its status widget against a real router."""

from __future__ import annotations

import asyncio

from elvin.qt import ConnectionManager, StatusWidget, SubscriptionEditor
from elvin.qt.editor import tokens
from elvin.qt.status import STATE_COLOURS


def test_editor_reports_errors_live(qtbot):
    editor = SubscriptionEditor()
    qtbot.addWidget(editor)
    editor.show()
    assert not editor.isValid() and editor.errorText() == ""   # empty: no error shown

    changes = []
    editor.validityChanged.connect(changes.append)
    qtbot.keyClicks(editor.edit, 'Price > 10 && Name ==')
    assert not editor.isValid()
    assert changes == [] or changes[-1] is False
    assert editor.error() is not None
    text = editor.errorText()
    assert "column" in text and editor.error().code in text
    spans = editor.underlined()
    assert len(spans) == 1 and spans[0][1] >= 1
    selection = editor.edit.extraSelections()[0]
    fmt = selection.format
    assert fmt.underlineStyle() == fmt.UnderlineStyle.WaveUnderline
    assert fmt.underlineColor().red() > 200

    with qtbot.waitSignal(editor.validityChanged, timeout=2000) as blocker:
        qtbot.keyClicks(editor.edit, ' "x"')
    assert blocker.args == [True]
    assert editor.isValid() and editor.errorText() == "" and editor.underlined() == []
    assert editor.expression() == 'Price > 10 && Name == "x"'
    assert editor.ast() is not None


def test_editor_underlines_the_error_position(qtbot):
    editor = SubscriptionEditor()
    qtbot.addWidget(editor)
    editor.setExpression("a == == 1")
    assert not editor.isValid()
    position = editor.error().position
    (start, length) = editor.underlined()[0]
    assert start == position and length >= 1
    editor.setExpression('regex(Name, "[")')
    assert not editor.isValid() and editor.underlined()
    editor.setExpression('fold-case(Name) == "x"')
    assert editor.isValid()


def test_highlighter_token_classes():
    kinds = {text[s:s + n]: k for text in ['begins-with(File-Path, "/a") && Size > 0x1F || '
                                           'n != 2.5 ^^ x == 10L']
             for k, s, n in tokens(text)}
    assert kinds["begins-with"] == "function"
    assert kinds["File-Path"] == "name" and kinds["Size"] == "name"
    assert kinds['"/a"'] == "string"
    assert kinds["0x1F"] == "number" and kinds["2.5"] == "number" and kinds["10L"] == "number"
    assert kinds["&&"] == "operator" and kinds["^^"] == "operator"
    assert kinds["!="] == "operator"


def test_highlighter_applies_distinct_colours(qtbot):
    editor = SubscriptionEditor(text='size(Name) > 3 && Name == "x"')
    qtbot.addWidget(editor)
    block = editor.edit.document().firstBlock()
    colours = {}
    for fr in block.layout().formats():
        piece = block.text()[fr.start:fr.start + fr.length]
        colours[piece] = fr.format.foreground().color().name()
    assert len({colours["size"], colours["Name"], colours["3"], colours["&&"],
                colours['"x"']}) == 5


# router (tests/conftest.py) and qt_loop (tests/gui/conftest.py) are shared fixtures


def test_connection_manager_and_status_widget(qtbot, qt_loop, router):
    manager = ConnectionManager(router.url, retry_delay=0.05, max_retry_delay=0.2,
                                reconnect_delay=0.05)
    status = StatusWidget(manager)
    qtbot.addWidget(status)
    states = []
    manager.stateChanged.connect(states.append)
    received = []
    manager.notification.connect(received.append)
    assert status.state() == "disconnected"
    assert status.colour() == STATE_COLOURS["disconnected"]

    async def scenario():
        manager.start()
        conn = await manager.wait_connected(10)
        assert status.colour() == STATE_COLOURS["connected"]
        assert status.text().startswith("Connected to elvin:4.0/tcp,none,xdr/127.0.0.1:")
        await manager.subscribe("require(Qt)")
        await conn.send({"Qt": 1})
        for _ in range(100):
            if received:
                break
            await asyncio.sleep(0.05)
        assert received and received[0]["Qt"] == 1

        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, router.restart)
        for _ in range(200):
            if "reconnecting" in states and manager.state == "connected":
                break
            await asyncio.sleep(0.05)
        assert "reconnecting" in states and manager.state == "connected"
        await manager.connection.send({"Qt": 2})
        for _ in range(100):
            if len(received) == 2:
                break
            await asyncio.sleep(0.05)
        assert [n["Qt"] for n in received] == [1, 2]
        await manager.stop()

    qt_loop.run_until_complete(asyncio.wait_for(scenario(), 30))
    assert states[0] == "connecting" and "connected" in states
    assert manager.state == "disconnected"
    assert status.colour() == STATE_COLOURS["disconnected"]


def test_connection_manager_retries_until_router_appears(qtbot, qt_loop, router):
    router.stop()
    manager = ConnectionManager(router.url, retry_delay=0.05, max_retry_delay=0.1)
    status = StatusWidget(manager)
    qtbot.addWidget(status)
    errors = []
    manager.error.connect(errors.append)

    async def scenario():
        manager.start()
        for _ in range(100):
            if errors:
                break
            await asyncio.sleep(0.05)
        assert errors and manager.state in ("disconnected", "connecting")
        assert status.colour() in (STATE_COLOURS["disconnected"], STATE_COLOURS["connecting"])
        await asyncio.get_running_loop().run_in_executor(None, router.start)
        await manager.wait_connected(10)
        assert status.colour() == STATE_COLOURS["connected"]
        await manager.stop()

    qt_loop.run_until_complete(asyncio.wait_for(scenario(), 30))


def test_run_app_returns_the_exit_status(qapp):
    from elvin.qt import run_app

    async def main():
        await asyncio.sleep(0.01)
        return 7

    assert run_app(main) == 7


def test_run_app_cancels_what_main_left_running(qapp, router):
    """A connection manager its app did not stop is cancelled before the loop
    closes, not destroyed pending ("Task was destroyed but it is pending")
    when it is collected, and it closes the connection it opened."""
    from elvin.qt import ConnectionManager, run_app

    manager = ConnectionManager(router.url)
    opened = []

    async def main():
        manager.start()
        opened.append(await manager.wait_connected(10))
        return 0

    assert run_app(main) == 0
    assert manager._task.cancelled()
    assert opened[0].state == "closed"


def test_editor_says_how_precedence_groups_bitwise_operators(qtbot):
    """The language's precedence is not C's (issue 18): the editor shows how
    an expression mixing shift/bitwise operators with others reads."""
    editor = SubscriptionEditor()
    qtbot.addWidget(editor)
    editor.show()
    editor.setExpression("A | 2 + 1 > 3")
    assert editor.isValid() and editor.reading() == "Reads as: (A | 2) + 1"
    editor.setExpression('Kind == "x" && A - 1 << 2 == 6 && B & 3 << 1 != 0')
    assert editor.reading() == "Reads as: A - (1 << 2);  (B & 3) << 1"
    for plain in ["(A | 2) + 1 > 3", "A * 2 + 1 > 3", "A | 2 > 3", "A | 2 + "]:
        editor.setExpression(plain)
        assert editor.reading() == "", plain


STUBBORN_APP = """
import asyncio, logging, sys
from elvin.qt import run_app

logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

async def stubborn():
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            continue                   # ignores being cancelled

async def main():
    asyncio.get_running_loop().create_task(stubborn(), name="stubborn-task")
    await asyncio.sleep(0)
    return 5

print("exit", run_app(main), flush=True)
"""


def test_quit_does_not_hang_on_a_task_that_ignores_cancellation(tmp_path):
    """``run_app`` cancels what is left, waits a bounded time, says which
    task would not stop, and returns (a child process: without the deadline
    it would hang for ever)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "stubborn.py"
    script.write_text(STUBBORN_APP)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60, cwd=Path(__file__).resolve().parents[2],
                          env=dict(os.environ, QT_QPA_PLATFORM="offscreen"))
    assert "exit 5" in done.stdout, done.stderr
    assert "stubborn-task" in done.stderr and "stubborn" in done.stderr
    assert "still running" in done.stderr


def test_connection_manager_fails_over_and_says_where(qtbot, qt_loop, make_router):
    """Given two routers, the manager moves to the second when the first
    goes: routerChanged says so, the status shows it, subscriptions work."""
    from elvin.client import connect
    from elvin.client.session import client_uri
    from tests.waiting import until

    first, second = make_router(), make_router()
    there = str(client_uri(second.url))
    manager = ConnectionManager([first.url, second.url], retry_delay=0.05,
                                max_retry_delay=0.2, reconnect_delay=0.05)
    status = StatusWidget(manager)
    qtbot.addWidget(status)
    moves, received = [], []
    manager.routerChanged.connect(moves.append)
    manager.notification.connect(received.append)

    async def scenario():
        manager.start()
        await manager.wait_connected(10)
        assert manager.url == str(client_uri(first.url))
        await manager.subscribe("require(Moved)")
        await asyncio.get_running_loop().run_in_executor(None, first.stop)
        await until(lambda: moves and manager.state == "connected", what="the failover")
        assert moves == [there] and manager.url == there
        assert status.text() == f"Connected to {there}"
        async with connect(second.url) as producer:
            await producer.send({"Moved": 1})
            await until(lambda: received, what="a notification at the second router")
        await manager.stop()

    qt_loop.run_until_complete(asyncio.wait_for(scenario(), 30))
