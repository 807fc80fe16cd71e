"""Messages typed while no router answers survive quitting: the outbox is
kept on disk and sent, with the same Message-Ids, at the next start. A real
router; the messages are received by a plain client."""

from __future__ import annotations

import asyncio
import socket
import stat

from elvin_apps.tickertape.config import Config
from elvin_apps.tickertape.controller import TickerController, subscription_keys
from elvin_apps.tickertape.groups import Group
from elvin_apps.tickertape.model import ScrollerModel
from elvin_apps.tickertape.outgoing import Draft
from elvin_apps.tickertape.window import TickerWindow

import elvin.client
from elvin.qt import ConnectionManager

GROUPS = [Group("Chat"), Group("ops", key="s3cret")]


def dead_url() -> str:
    with socket.socket() as sock:        # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        return f"elvin://127.0.0.1:{sock.getsockname()[1]}"


def controller(url: str, path) -> TickerController:
    manager = ConnectionManager(url, retry_delay=0.05, max_retry_delay=0.2)
    return TickerController(Config(user="me@test", groups=list(GROUPS)), ScrollerModel(),
                            None, manager, outbox_path=path)


def test_outbox_survives_quitting_and_goes_at_next_start(qtbot, qt_loop, router, tmp_path):
    path = tmp_path / "outbox.ec"

    async def scenario():
        offline = controller(dead_url(), path)
        offline.manager.start()
        offline.send_soon(Draft("Chat", "typed while the router was down"))
        offline.send_soon(Draft("ops", "private, typed offline"))
        assert len(offline.outbox) == 2 and path.exists()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        ids = [attributes["Message-Id"] for attributes, _keys in offline.outbox]
        assert "s3cret" not in path.read_text()          # keys are never written
        await offline.close()                             # the user quits
        await offline.manager.stop()

        got: list[elvin.client.Notification] = []
        async with elvin.client.connect(router.url) as listener:
            await listener.subscribe("require(Message)", keys=subscription_keys("s3cret"),
                                     listener=got.append)
            again = controller(router.url, path)          # the next start
            window = TickerWindow(again, save_config=False)
            qtbot.addWidget(window)
            assert len(again.outbox) == 2
            assert "2 messages will send when connected" in window.notice.text()
            again.manager.start()
            async with asyncio.timeout(10):
                while len(got) < 2 or path.exists():
                    await asyncio.sleep(0.02)
            await again.close()
            await again.manager.stop()
        assert [n.attributes["Message"] for n in got] == [
            "typed while the router was down", "private, typed offline"]
        assert [n.attributes["Message-Id"] for n in got] == ids
        assert [n.secure for n in got] == [False, True]   # ops still goes with its key
        assert not any("X-Tickertape" in name for n in got for name in n.attributes)

    qt_loop.run_until_complete(asyncio.wait_for(scenario(), 30))


def test_unreadable_outbox_is_kept_aside_and_said(qtbot, qt_loop, tmp_path):
    path = tmp_path / "outbox.ec"
    path.write_text('Message: "unterminated\n')
    broken = controller(dead_url(), path)
    window = TickerWindow(broken, save_config=False)
    qtbot.addWidget(window)
    assert not broken.outbox and not path.exists()
    (aside,) = tmp_path.glob("outbox.ec.unreadable-*")      # never over an earlier one
    assert aside.read_text() == 'Message: "unterminated\n'
    assert "not read" in window.notice.toolTip() + window.notice.text()
    qt_loop.run_until_complete(broken.close())


def test_a_message_sent_while_connected_is_not_written_to_disk(qtbot, qt_loop, router, tmp_path):
    """The outbox file holds only what waits for a router: sending while
    connected writes nothing (and shows no 'will send when connected')."""
    path = tmp_path / "outbox.ec"
    online = controller(router.url, path)
    window = TickerWindow(online, save_config=False)
    qtbot.addWidget(window)
    counts: list[int] = []
    online.outboxChanged.connect(counts.append)

    async def scenario():
        online.manager.start()
        async with elvin.client.connect(router.url) as reader:
            sub = await reader.subscribe('Group == "Chat"')
            async with asyncio.timeout(20):
                while not online.online:
                    await asyncio.sleep(0.02)
            await online.send_soon(Draft("Chat", "while connected"))
            assert (await sub.get(timeout=20))["Message"] == "while connected"
        assert not path.exists() and 1 not in counts
        assert "will send" not in window.notice.text()
        await online.close()
        await online.manager.stop()

    qt_loop.run_until_complete(scenario())
