"""A real tickertape on two real routers (``elvind`` processes, federated or
not): SIGKILL the one it is on and it carries on at the other (issue 49,
point 1).

What is checked is what the ticker promises (docs/users/tickertape.md,
"Several routers"; docs/admins/mobility.md, "Failover with mobility
proxies"): it shows where it is now; what was typed while it switched waits
in the outbox and is sent once it is connected, once; what is published at
the new router from the moment its subscriptions are back there arrives,
and nothing arrives twice. With mobility proxies: a buffer left at a killed
router (after a move-out, or the standby buffer the ticker keeps while it is
there) comes once that router is back on its state directory, and is said
lost when it is not back within the expiry.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from elvin_apps.tickertape.config import Config
from elvin_apps.tickertape.controller import TickerController, notification_keys
from elvin_apps.tickertape.groups import Group, GroupList
from elvin_apps.tickertape.mobility import TickerMobility
from elvin_apps.tickertape.model import ScrollerModel
from elvin_apps.tickertape.outgoing import Draft
from elvin_apps.tickertape.window import TickerWindow

from elvin.client import connect
from elvin.client.session import client_uri
from elvin.qt import ConnectionManager, StatusWidget
from elvin.qt.status import router_name
from tests.integration.process_util import ELVIND, free_port, stop, wait_listening
from tests.waiting import until

CHAT = 'require(Message) && Group == "Chat"'


class Elvind:
    """One ``elvind`` process, killed with SIGKILL and started again on the
    same port with the same arguments (and state directory) at will."""

    def __init__(self, tmp: Path, name: str, mobility: bool, config: str = "") -> None:
        self.port = free_port()
        self.url = f"elvin://127.0.0.1:{self.port}"
        self.log = tmp / f"elvind-{name}.log"
        self.args = [*ELVIND, "--listen", self.url, "--log-level", "info"]
        if mobility:
            self.args += ["--mobility", "--state-dir", str(tmp / f"state-{name}")]
        if config:
            path = tmp / f"{name}.toml"
            path.write_text(config)
            self.args += ["--config", str(path)]
        self.proc: subprocess.Popen | None = None

    @property
    def canonical(self) -> str:
        """The URL as a connection reports it (``conn.url``)."""
        return str(client_uri(self.url))

    def start(self) -> Elvind:
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=log)
        wait_listening(self.port, self.proc)
        return self

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            stop(self.proc)


@pytest.fixture
def elvinds(tmp_path):
    made: list[Elvind] = []

    def make(name: str, mobility: bool = False, config: str = "") -> Elvind:
        router = Elvind(tmp_path, name, mobility, config).start()
        made.append(router)
        return router

    yield make
    for router in made:
        router.stop()


def chat(text: str) -> dict:
    return {"Group": "Chat", "From": "bob@test", "Message": text,
            "Message-Id": f"id-{text}", "org.tickertape.message": 3001}


def texts(controller: TickerController) -> list[str]:
    return [e.message.text for e in controller.model.entries()]


def run(loop, coro, timeout: float = 60):
    return loop.run_until_complete(asyncio.wait_for(coro, timeout))


def ticker(urls: list[str], tmp_path: Path):
    manager = ConnectionManager(urls, retry_delay=0.05, max_retry_delay=0.2,
                                reconnect_delay=0.05, reconnect_max_delay=0.2)
    controller = TickerController(Config(user="me@test", groups=[Group("Chat")]),
                                  ScrollerModel(), None, manager,
                                  outbox_path=tmp_path / "outbox.ec")
    window = TickerWindow(controller, status=StatusWidget(manager), save_config=False)
    return manager, controller, window


def test_killed_router_the_ticker_carries_on_at_the_other(qtbot, qt_loop, elvinds, tmp_path):
    a, b = elvinds("A"), elvinds("B")
    manager, controller, window = ticker([a.url, b.url], tmp_path)
    qtbot.addWidget(window)
    window.resize(900, 28)
    window.show()
    # typed the moment the ticker knows its router is gone: it is switching
    typed: list[str] = []

    def on_state(state: str) -> None:
        if state == "reconnecting" and not typed:
            typed.append("typed while switching")
            controller.send_soon(Draft("Chat", typed[0]))
    manager.stateChanged.connect(on_state)

    async def scenario():
        manager.start()
        await manager.wait_connected(15)
        await controller.wait_synced(15)
        assert manager.url == a.canonical
        assert window.windowTitle() == f"Tickertape — {router_name(a.canonical)}"
        at_b: list[str] = []
        async with connect(b.url) as listener, connect(b.url) as producer:
            await listener.subscribe(CHAT, listener=lambda n: at_b.append(n["Message"]))
            async with connect(a.url) as producer_a:
                await producer_a.send(chat("before"))
                await until(lambda: "before" in texts(controller), what="a message at A")

            a.kill()
            # published at B all through the switch; those published once the
            # ticker's subscriptions are back at B must all arrive
            must: list[str] = []
            n = 0
            while not must or len(must) < 5:
                back = manager.state == "connected" and manager.url == b.canonical
                text = f"m{n}"
                await producer.send(chat(text))
                await producer.set_keys()            # a round trip: B has read it
                if back:
                    must.append(text)
                n += 1
            await until(lambda: all(t in texts(controller) for t in must),
                        what="every message published at B once the ticker was back")
            await until(lambda: typed and typed[0] in at_b and not controller.outbox,
                        what="the message typed while switching, at B")
            # one more from the ticker: once it is at B, anything sent before
            # it (a second copy of the typed one) would have come first
            controller.send_soon(Draft("Chat", "marker"))
            await until(lambda: "marker" in at_b and "marker" in texts(controller),
                        what="the marker")
        shown = Counter(texts(controller))
        assert max(shown.values()) == 1, [t for t, c in shown.items() if c > 1]
        assert Counter(at_b)[typed[0]] == 1 and shown[typed[0]] == 1

        # it says where it is
        there = router_name(b.canonical)
        assert manager.url == b.canonical and manager.previous_url == a.canonical
        assert window.status.toolTip().startswith(f"Connected to {b.canonical}")
        assert f"Moved here from {a.canonical}" in window.status.toolTip()
        assert there in window.windowTitle()
        # the notice said the move (the outbox notice may follow it)
        assert window.notice.isVisible() or window.notice.text()
        controller.send_soon(Draft("Chat", "one more"))     # nothing waits: no outbox notice
        await until(lambda: "one more" in texts(controller))
        window._router_changed(b.canonical)                 # the notice, for the picture
        assert window.notice.text() == f"Now at {there}"
        assert a.canonical in window.notice.toolTip()
        shot = os.environ.get("ELVIN_FAILOVER_SCREENSHOT")
        if shot:          # once the layout has made room for the notice
            await until(lambda: window.notice.width() >= window.notice.sizeHint().width())
            window.grab().save(shot)
        await controller.close()
        await manager.stop()

    run(qt_loop, scenario())


def federation(name: str, listen: int, *, accept: str = "", connect: tuple[str, int] | None = None
               ) -> str:
    """An elvind config's [federation] section (fast reconnection)."""
    lines = ["[federation]", f'router_domain = "{name}"',
             f'listen = "ewaf://127.0.0.1:{listen}"', "debounce = 0.01",
             "reconnect_min = 0.05", "reconnect_max = 0.2"]
    if accept:
        lines += ["[[federation.accept]]", f'router = "{accept}"']
    if connect:
        lines += ["[[federation.connect]]", f'router = "{connect[0]}"',
                  f'url = "ewaf://127.0.0.1:{connect[1]}"']
    return "\n".join(lines) + "\n"


def test_federated_routers_killed_one_each_message_arrives_once(qtbot, qt_loop, elvinds,
                                                               tmp_path):
    """A and B federated; the ticker on A reads a producer at B through the
    federation; A is SIGKILLed: the ticker carries on at B, every message
    published once its subscriptions are back at B arrives, and none twice
    (each was routed either through A, before, or to the ticker at B)."""
    fed_a, fed_b = free_port(), free_port()
    a = elvinds("A", config=federation("A", fed_a, accept="B"))
    b = elvinds("B", config=federation("B", fed_b, connect=("A", fed_a)))
    manager, controller, window = ticker([a.url, b.url], tmp_path)
    qtbot.addWidget(window)

    async def scenario():
        manager.start()
        await manager.wait_connected(15)
        await controller.wait_synced(15)
        async with connect(b.url) as producer:
            n = 0
            # until the link has carried the ticker's subscription to B and a
            # message back through A (a round trip at B after each)
            while not any(t.startswith("m") for t in texts(controller)):
                await producer.send(chat(f"m{n}"))
                await producer.set_keys()
                n += 1
            before = n
            a.kill()
            must: list[str] = []
            while len(must) < 5:
                back = manager.state == "connected" and manager.url == b.canonical
                await producer.send(chat(f"m{n}"))
                await producer.set_keys()
                if back:
                    must.append(f"m{n}")
                n += 1
            await until(lambda: all(t in texts(controller) for t in must),
                        what="every message published at B once the ticker was back")
        shown = Counter(texts(controller))
        assert max(shown.values()) == 1, [t for t, c in shown.items() if c > 1]
        assert before >= 1 and manager.url == b.canonical
        await controller.close()
        await manager.stop()

    run(qt_loop, scenario())


def test_buffer_left_at_a_killed_router_comes_once_it_is_back(qtbot, qt_loop, elvinds,
                                                             tmp_path):
    """Moved out at A (the proxy buffers), A is killed while the ticker is
    away: moving in lands at B, and what A buffered comes once A is started
    again on its state directory; each message once."""
    a, b = elvinds("A", mobility=True), elvinds("B", mobility=True)
    manager, controller, window = ticker([a.url, b.url], tmp_path)
    mobility = TickerMobility(controller, manager, watch_system=False, collect_ms=100)
    qtbot.addWidget(window)

    async def scenario():
        manager.start()
        await manager.wait_connected(15)
        await controller.wait_synced(15)
        await until(lambda: mobility.proxy_available, what="A's proxy")
        await mobility.move_out()
        assert mobility.state == "moved-out"
        async with connect(a.url) as producer_a:
            for i in range(3):
                await producer_a.send(chat(f"away{i}"))
            await producer_a.set_keys()        # a round trip: A's proxy has them on disk
        a.kill()

        assert await mobility.move_in(timeout=20) == 0     # A cannot be reached
        assert manager.url == b.canonical and len(mobility.pending) == 1
        assert "will come when it is back" in mobility.status
        async with connect(b.url) as producer_b:           # live at B meanwhile
            await producer_b.send(chat("live at B"))
            await until(lambda: "live at B" in texts(controller))

        a.start()                                           # same port, same state
        await until(lambda: all(f"away{i}" in texts(controller) for i in range(3)),
                    timeout=40, what="A's buffer, once A is back")
        assert not mobility.pending and mobility.status == "Caught up 3 messages"
        shown = Counter(texts(controller))
        assert max(shown.values()) == 1
        mobility.close()
        await controller.close()
        await manager.stop()

    run(qt_loop, scenario(), 90)


def test_a_router_not_back_before_the_buffer_expires_is_said_lost(qtbot, qt_loop, elvinds,
                                                                tmp_path):
    """The old router stays dead past the expiry the proxy granted: the
    ticker stops asking and says the messages kept there are lost."""
    a, b = elvinds("A", mobility=True), elvinds("B", mobility=True)
    manager, controller, window = ticker([a.url, b.url], tmp_path)
    mobility = TickerMobility(controller, manager, watch_system=False, collect_ms=100)
    qtbot.addWidget(window)

    async def scenario():
        manager.start()
        await manager.wait_connected(15)
        await controller.wait_synced(15)
        await until(lambda: mobility.proxy_available, what="A's proxy")
        ticket = await mobility.move_out()
        a.kill()
        # as if the proxy had granted half a second
        mobility.ticket = dataclasses.replace(ticket, expiry=0.5)
        await mobility.move_in(timeout=20)
        await until(lambda: "are lost" in mobility.status, what="the buffer said lost")
        assert "not back within 0.5 s" in mobility.status
        assert not mobility.pending and not mobility._collect_timer.isActive()
        mobility.close()
        await controller.close()
        await manager.stop()

    run(qt_loop, scenario(), 60)


def test_what_the_old_router_routed_after_the_failover_comes_from_its_proxy(
        qtbot, qt_loop, elvinds, tmp_path):
    """No move-out: the ticker, given two routers, keeps a standby buffer at
    the proxy of the router it is on. A is killed; at B the ticker collects
    that buffer once A is back: what A routed for it meanwhile comes once,
    and what it had shown already is not shown again."""
    a, b = elvinds("A", mobility=True), elvinds("B", mobility=True)
    manager, controller, window = ticker([a.url, b.url], tmp_path)
    mobility = TickerMobility(controller, manager, watch_system=False, collect_ms=60_000)
    qtbot.addWidget(window)

    async def scenario():
        manager.start()
        await manager.wait_connected(15)
        await controller.wait_synced(15)
        await until(lambda: mobility.standby is not None, what="the standby buffer at A")
        assert mobility.standby.router_url == a.canonical
        async with connect(a.url) as producer_a:
            await producer_a.send(chat("live at A"))
            await until(lambda: "live at A" in texts(controller))
        # a private group joined: the standby buffer is made again with it
        first = mobility.standby
        controller.set_groups(GroupList([Group("Chat"), Group("ops", key="s3cret")]))
        await until(lambda: mobility.standby is not first
                    and "ops" in mobility._standby_expressions, what="the standby with ops")
        a.kill()
        await until(lambda: manager.url == b.canonical and mobility.pending
                    and mobility._task is not None and mobility._task.done(),
                    what="at B, A's buffer waiting")
        await until(lambda: mobility.standby is not None
                    and mobility.standby.router_url == b.canonical,
                    what="a standby buffer at B")
        assert "will come when it is back" in mobility.status

        a.start()                      # its proxy is back with the buffer, subscribed
        async with connect(a.url) as producer_a:
            await producer_a.send(chat("routed to A while away"))
            await producer_a.send(dict(chat("private, to ops"), Group="ops"),
                                  keys=notification_keys("s3cret"), deliver_insecure=False)
            await producer_a.set_keys()           # a round trip: A's proxy has them
        mobility.request_collect()
        await until(lambda: "private, to ops" in texts(controller),
                    what="what A routed meanwhile, from its proxy")
        assert "routed to A while away" in texts(controller)
        assert mobility.status == "Caught up 2 messages" and not mobility.pending
        shown = Counter(texts(controller))
        assert shown["live at A"] == 1 and shown["routed to A while away"] == 1
        mobility.close()
        await controller.close()
        await manager.stop()

    run(qt_loop, scenario(), 90)
