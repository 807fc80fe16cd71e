"""The tickertape moves out and in against real routers with a mobility
proxy (``mobility = true``): messages sent while away are shown on move-in
with "Caught up N messages"; the menu actions and the sleep detector drive it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from elvin_apps.tickertape.config import Config
from elvin_apps.tickertape.controller import TickerController
from elvin_apps.tickertape.groups import Group
from elvin_apps.tickertape.mobility import TickerMobility
from elvin_apps.tickertape.model import ScrollerModel
from elvin_apps.tickertape.window import TickerWindow

import elvin.client
from elvin.qt import ConnectionManager
from tests.waiting import until

# Qt objects are collected on the main thread only (tests/gui/conftest.py)


@pytest.fixture
def routers(make_router):
    return [make_router(mobility=True), make_router(mobility=True)]


def run(loop, coro, timeout: float = 40):
    return loop.run_until_complete(asyncio.wait_for(coro, timeout))


def chat(text: str) -> dict:
    return {"Group": "Chat", "From": "bob@test", "Message": text,
            "Message-Id": f"id-{text}", "org.tickertape.message": 3001}


def texts(controller: TickerController) -> list[str]:
    return [e.message.text for e in controller.model.entries()]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make(url: str, clock=None):
    manager = ConnectionManager(url, retry_delay=0.05, max_retry_delay=0.2)
    controller = TickerController(Config(user="me@test", groups=[Group("Chat")]),
                                  ScrollerModel(), None, manager)
    mobility = TickerMobility(controller, manager, clock=clock or Clock(),
                              watch_system=False)
    manager.start()
    return controller, manager, mobility


def test_menu_move_out_and_in_catches_up(qtbot, qt_loop, routers, tmp_path: Path):
    router = routers[0]
    controller, manager, mobility = make(router.url)
    window = TickerWindow(controller, save_config=False)
    window.add_mobility(mobility)
    qtbot.addWidget(window)
    window.show()

    async def scenario():
        await manager.wait_connected(10)
        await controller.wait_synced(10)
        async with elvin.client.connect(router.url) as other:
            await other.send(chat("before"))
            await until(lambda: texts(controller) == ["before"])
            assert not window.move_in_action.isEnabled()
            # offered once the router's mobility proxy has answered
            await until(lambda: window.move_out_action.isEnabled())
            window.move_out_action.trigger()
            await until(lambda: mobility.state == "moved-out")
            assert manager.connection is None
            assert window.move_in_action.isEnabled()
            assert not window.move_out_action.isEnabled()
            for n in range(3):
                await other.send(chat(f"while away {n}"))
            await asyncio.sleep(0.2)      # nothing shows while away
            assert texts(controller) == ["before"]
            window.move_in_action.trigger()
            await until(lambda: mobility.state == "connected" and mobility.status)
            await other.send(chat("after"))
            await until(lambda: "after" in texts(controller))
        await asyncio.sleep(0.3)    # a few frames for the screenshot
        window.grab().save("/tmp/tt-mobility.png")
        await controller.close()
        await manager.stop()

    run(qt_loop, scenario())
    assert mobility.status == "Caught up 3 messages"
    assert window.notice.text() == "Caught up 3 messages"
    assert texts(controller) == ["before", "while away 0", "while away 1", "while away 2",
                                 "after"]


def test_move_to_another_router_and_wake_from_sleep(qtbot, qt_loop, routers):
    old, new = routers
    clock = Clock()
    controller, manager, mobility = make(old.url, clock)
    caught: list[int] = []
    mobility.movedIn.connect(caught.append)

    async def scenario():
        await manager.wait_connected(10)
        await controller.wait_synced(10)
        await mobility.move_out()
        async with elvin.client.connect(old.url) as other:
            await other.send(chat("sent during the night"))
            await other.send(chat("and another"))
        # let the proxy get them before the laptop "wakes"
        await until(lambda: sum(h.buffered for h in
                                old.router.mobility.handlers.values()) == 2)
        await manager.set_url(new.url)        # it wakes up in another office...
        clock.now += 3600                     # ... an hour later
        mobility.tick()                       # the sleep detector notices
        await until(lambda: mobility.state == "connected" and caught)
        assert manager.url.endswith(str(new.port))
        await controller.close()
        await manager.stop()

    run(qt_loop, scenario())
    assert caught == [2]
    assert texts(controller) == ["sent during the night", "and another"]
    assert mobility.status == "Caught up 2 messages"


def test_a_short_gap_is_not_sleep_and_waking_unannounced_says_so(qtbot, qt_loop, routers):
    clock = Clock()
    controller, manager, mobility = make(routers[0].url, clock)

    async def scenario():
        await manager.wait_connected(10)
        clock.now += 6          # one tick late by a second: not a sleep
        mobility.tick()
        assert mobility.status == ""
        clock.now += 600        # slept without a move-out
        mobility.tick()
        assert "missed" in mobility.status and mobility.state == "connected"
        await controller.close()
        await manager.stop()

    run(qt_loop, scenario())


def test_move_out_without_a_proxy_reports_it(qtbot, qt_loop):
    from elvin.router.embedded import EmbeddedRouter
    with EmbeddedRouter() as plain:
        controller, manager, mobility = make(plain.url)

        async def scenario():
            await manager.wait_connected(10)
            await controller.wait_synced(10)
            await mobility.request_move_out()
            assert mobility.state == "connected" and manager.connection is not None
            assert "proxy" in mobility.status
            await controller.close()
            await manager.stop()

        run(qt_loop, scenario())


def test_private_groups_are_buffered_with_their_keys(qtbot, qt_loop, routers):
    """A private group's subscription moves out with its key: what its
    members said meanwhile is caught up (and shown as secure); a message that
    only claims the group's name is buffered by nobody."""
    from elvin_apps.tickertape.controller import notification_keys
    old, new = routers
    manager = ConnectionManager(old.url, retry_delay=0.05, max_retry_delay=0.2)
    config = Config(user="me@test", groups=[Group("Chat"), Group("Inner", key="sesame")])
    controller = TickerController(config, ScrollerModel(), None, manager)
    mobility = TickerMobility(controller, manager, clock=Clock(), watch_system=False)
    manager.start()

    def inner(text: str) -> dict:
        return {**chat(text), "Group": "Inner", "Message-Id": f"id-inner-{text}"}

    async def scenario():
        await manager.wait_connected(10)
        await controller.wait_synced(10)
        await mobility.move_out()
        handler = next(iter(old.router.mobility.handlers.values()))
        assert len(handler.subscriptions) == 2      # public and the private group
        async with elvin.client.connect(old.url) as other:
            await other.send(inner("psst"), keys=notification_keys("sesame"),
                             deliver_insecure=False)
            await other.send(inner("forged"))       # no key: not for the group
            await other.send(chat("public"))
            await until(lambda: handler.buffered == 2)
            await other.send(chat("last"))           # the others were judged before it
            await until(lambda: handler.buffered == 3)
        await mobility.move_in(new.url)
        await controller.close()
        await manager.stop()

    run(qt_loop, scenario())
    assert texts(controller) == ["psst", "public", "last"]
    assert [e.message.secure for e in controller.model.entries()] == [True, False, False]
    assert mobility.status == "Caught up 3 messages"
    assert controller.dropped_insecure == 0


def test_away_is_not_offered_without_a_mobility_proxy(qtbot, qt_loop, make_router):
    """A router without a mobility proxy: "Away" is greyed out and says
    why, instead of failing after 5 s with "no complete hello reply"."""
    router = make_router()
    controller, manager, mobility = make(router.url)
    window = TickerWindow(controller, save_config=False)
    window.add_mobility(mobility)
    qtbot.addWidget(window)

    async def scenario():
        await manager.wait_connected(10)
        await until(lambda: mobility.proxy_available is False, 15, "the proxy probe")
        assert not window.move_out_action.isEnabled()
        assert "no mobility proxy" in window.move_out_action.toolTip()
        await controller.close()
        await manager.stop()

    run(qt_loop, scenario())
