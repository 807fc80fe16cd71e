"""Screenshots of the apps for the README and the docs: ``make screenshots``.

Starts a real ``elvind`` on a free loopback port, sends realistic traffic
through it (chat from several people in three groups with a reply, a link
and a mention; people's coffee and presence; share prices), builds each
app's window offscreen as its command line does, lets the traffic show,
and saves ``docs/screenshots/*.png``:

* ``tickertape.png``        the scrolling strip with chat
* ``tickertape-history.png`` the history window with its detail pane
* ``tickertape-settings.png`` the settings dialog (font, speed, colours, dock)
* ``biff.png``              the roster: coffee, around, away with last coffee
* ``console.png``           the console at 1400x900: per-key tree, plot, detail
* ``console-1024.png``      the console as it opens on a 1024x768 screen, with the
                            router statistics and the unfolded producer
* ``console-browse.png``    Browse: everything on the router as a tree
* ``console-explain.png``   "Explain a match" showing the failing clause
* ``desktop-1024.png``      a real X desktop (Xvfb + openbox, 1024x768): the
                            tickertape docked at the top, the console beside it

Run with ``QT_QPA_PLATFORM=offscreen`` (the default here); the desktop picture
needs Xvfb and openbox (``scripts/ensure-system-packages.sh``) and is skipped,
saying so, without them. ``--only NAME`` makes one part's pictures
(tickertape, biff, console, desktop).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("ELVIN_DISCOVERY", "off")

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "screenshots"


# -- the router ------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_router() -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "elvin.router", "--no-discovery",
                             "--listen", f"elvin://127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"screenshots: elvind exited: {proc.stderr.read().decode()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return proc, f"elvin://127.0.0.1:{port}"
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("screenshots: elvind did not start listening within 15 s")


async def until(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def save(widget, name: str) -> None:
    path = OUT / name
    if not widget.grab().save(str(path)):
        raise SystemExit(f"screenshots: cannot write {path}")
    print(f"wrote {path.relative_to(ROOT)}")


# -- console ---------------------------------------------------------------------------
SYMBOLS = ("ACME", "BETA", "GAMMA", "DELTA")


async def price_ticks(conn, count: int, pause: float) -> None:
    from elvin.values import Int64
    price = {s: 100.0 + i * 7 for i, s in enumerate(SYMBOLS)}
    for n in range(count):
        symbol = SYMBOLS[n % len(SYMBOLS)]
        price[symbol] = round(price[symbol] + ((n * 7919) % 11 - 5) / 8, 2)
        notification = {"Symbol": symbol, "Price": price[symbol],
                        "Volume": Int64(1000 + n * 10), "Exchange": "ASX", "Seq": n}
        if symbol == "DELTA" and 40 <= n < 80:
            del notification["Price"]          # a halted symbol: its line breaks
            notification["Halted"] = 1
        await conn.send(notification)
        if n % len(SYMBOLS) == len(SYMBOLS) - 1:
            await asyncio.sleep(pause)


async def console(url: str) -> None:
    from elvin_apps.console.routers import RouterRegistry
    from elvin_apps.console.tasks import wait_all
    from elvin_apps.console.window import MainWindow
    from elvin_apps.console.workspace import (
        ConsumerSpec,
        ProducerSpec,
        RouterSpec,
        RouterViewSpec,
        Workspace,
    )

    import elvin.client
    # a second router, really running: the sidebar shows two connected ones
    # (a router that is not there showed as a red "not connected" row)
    staging_proc, staging_url = start_router()
    workspace = Workspace(
        [RouterSpec("local", url), RouterSpec("staging", staging_url)],
        [ConsumerSpec(title="Prices", router="local", columns=["Symbol", "Price", "Volume"],
                      subscription='require(Price) || require(Halted)', subscribed=True,
                      plots=["Price"], key="Symbol"),
         ProducerSpec(title="Ticker", router="local"),
         RouterViewSpec(title="Router statistics", router="local", window=60)])
    registry = RouterRegistry()
    window = MainWindow(registry)
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
    async with elvin.client.connect(url) as conn:
        await price_ticks(conn, 160, 0.12)
    await until(lambda: (consumer.tick(), consumer.model.rowCount())[1] >= 160)
    consumer.key_tree.setCurrentItem(consumer.key_tree.items["BETA"])
    consumer.key_tree.items["BETA"].setExpanded(True)
    window.arrange()
    await asyncio.sleep(0.3)
    save(window, "console.png")

    from PySide6.QtCore import QRect, QSize

    from elvin.qt.geometry import fit_to_screen
    fit_to_screen(window, QSize(1280, 800), QRect(0, 19, 1024, 749))   # 1024x768, a panel
    window.show_pane(window.panes_of("router")[0])
    producer.set_expanded(True)
    window.arrange()
    await asyncio.sleep(0.6)
    save(window, "console-1024.png")
    producer.set_expanded(False)
    window.show_pane(consumer)
    window.resize(1400, 900)
    window.arrange()

    await browse_picture(url)
    record = consumer.selected_record()
    dialog = window.explain(record.attributes, 'Symbol == "BETA" && Price < 100 && '
                            '(Exchange == "NYSE" || begins-with(Exchange, "AS"))')
    dialog.resize(1080, 520)        # as it opens on a screen wider than the offscreen one
    dialog.update_explanation()
    await asyncio.sleep(0.2)
    save(dialog, "console-explain.png")
    dialog.close()
    await window.shutdown()
    await window.clear()
    await wait_all()
    window.close()
    staging_proc.terminate()
    staging_proc.wait(10)


async def browse_picture(url: str) -> None:
    """Browse, on a router with chat, prices and coffee flowing."""
    from elvin_apps.console.routers import RouterRegistry
    from elvin_apps.console.window import MainWindow
    from elvin_apps.console.workspace import BrowseSpec, ProducerSpec, RouterSpec, Workspace

    import elvin.client
    registry = RouterRegistry()
    window = MainWindow(registry)
    await window.apply_workspace(Workspace(
        [RouterSpec("local", url)],
        [BrowseSpec(title="Browse", router="local"), ProducerSpec(title="Producer 1",
                                                                  router="local")]))
    window.resize(1280, 760)
    window.show()
    browse = window.panes_of("browse")[0]
    await until(lambda: browse.census_seen, 15)
    async with elvin.client.connect(url) as conn:
        for _round in range(12):
            await send_chat(conn)
            await price_ticks(conn, 8, 0.01)
            await conn.send({"Presence-Protocol": 1000, "Groups": "|coffee|",
                             "User": "alice@example.org", "Status": "coffee",
                             "Status-Text": "kitchen"})
            browse.tick()
            if {"Group", "Symbol", "Status"} <= set(browse.rows()):
                break
        for _round in range(3):
            await send_chat(conn)
            await price_ticks(conn, 16, 0.05)
            browse.tick()
    browse.tick()
    group = browse._items.get("Group")
    if group is not None:
        group.setExpanded(True)
        chat = browse._value_items.get(("Group", "Chat"))
        if chat is not None:
            browse.tree.setCurrentItem(chat)
    symbol = browse._items.get("Symbol")
    if symbol is not None:
        symbol.setExpanded(True)
    browse.tick()
    await asyncio.sleep(0.3)
    save(window, "console-browse.png")
    await window.shutdown()
    await window.clear()
    window.close()


# -- tickertape ---------------------------------------------------------------------------
CHAT = [("alice@example.org", "Chat", "morning all — coffee at 10?", {}),
        ("bob@example.org", "dev", "build 4711 is green again", {}),
        ("carol@example.org", "Chat", "sam, can you look at the release notes?", {}),
        ("dave@example.org", "news", "Elvin 4 router release notes",
         {"Attachment": "MIME-Version: 1.0\r\nContent-Type: text/uri-list\r\n\r\n"
                        "https://example.org/elvin/release-notes\r\n"}),
        ("bob@example.org", "Chat", "count me in", {"In-Reply-To": "chat-0"}),
        ("erin@example.org", "dev", "reviewing the federation patch now", {}),
        ("alice@example.org", "Chat", "kitchen in 5", {}),
        ("carol@example.org", "dev", "who broke the nightly?", {})]


async def send_chat(conn) -> None:
    for n, (sender, group, text, extra) in enumerate(CHAT):
        await conn.send({"Group": group, "From": sender, "Message": text,
                         "Message-Id": f"chat-{n}", "org.tickertape.message": 3001,
                         "Timeout": 10, **extra})
        await asyncio.sleep(0.05)


async def tickertape(url: str) -> None:
    from elvin_apps.tickertape.config import Config
    from elvin_apps.tickertape.controller import TickerController
    from elvin_apps.tickertape.groups import Group
    from elvin_apps.tickertape.history import History
    from elvin_apps.tickertape.model import ScrollerModel
    from elvin_apps.tickertape.window import TickerWindow

    import elvin.client
    from elvin.qt import ConnectionManager, StatusWidget
    with tempfile.TemporaryDirectory() as data:
        config = Config(user="sam@example.org",
                        groups=[Group("Chat"), Group("dev", colour="#6a1b9a"),
                                Group("news", colour="#2e7d32")])
        manager = ConnectionManager(url)
        history = History(Path(data) / "history.sqlite3")
        controller = TickerController(config, ScrollerModel(), history, manager)
        window = TickerWindow(controller, status=StatusWidget(manager), save_config=False)
        window.resize(1100, window.height())
        window.show()
        manager.start()
        await manager.wait_connected(10)
        await controller.wait_synced(10)
        async with elvin.client.connect(url) as conn:
            await send_chat(conn)
        await until(lambda: len(controller.model.entries()) >= len(CHAT))
        await asyncio.sleep(4)                    # let the strip scroll a little
        save(window, "tickertape.png")
        history_window = window.open_history()
        if history_window is not None:
            history_window.resize(900, 520)
            await asyncio.sleep(0.3)
            tree = history_window.tree
            if tree.topLevelItemCount() > 3:
                tree.setCurrentItem(tree.topLevelItem(3))     # the one with a link
            await asyncio.sleep(0.2)
            save(history_window, "tickertape-history.png")
            history_window.close()
        settings = window.open_settings()
        await asyncio.sleep(0.2)
        save(settings, "tickertape-settings.png")
        settings.close()
        window.hide()
        await controller.close()
        await manager.stop()
        history.close()


# -- biff ------------------------------------------------------------------------------------
PEOPLE = [("alice@example.org", "in 5 minutes at the kitchen"),
          ("bob@example.org", "long black, anyone?"),
          ("carol@example.org", ""),
          ("dave@example.org", "")]


async def biff(url: str) -> None:
    import json
    import time as clock

    from elvin_apps.biff import CoffeeBiff
    from elvin_apps.biff.acquaintances import PeopleBook
    from elvin_apps.biff.notify import CoffeeNotifier
    from elvin_apps.biff.qtbiff import QtBiff
    from elvin_apps.biff.window import CoffeeWindow

    import elvin.client
    from elvin.qt import ConnectionManager, StatusWidget
    async with contextlib.AsyncExitStack() as stack:
        peers = []
        for user, text in PEOPLE:
            conn = await stack.enter_async_context(elvin.client.connect(url))
            peer = CoffeeBiff(user, heartbeat=5)
            await peer.start(conn)
            if text:
                await peer.activate(text)
            peers.append(peer)
        manager = ConnectionManager(url)
        me = CoffeeBiff("me@example.org", heartbeat=5)
        qbiff = QtBiff(me, manager)
        # the people this biff knew from before: erin left 25 minutes ago after
        # a coffee two hours ago; frank is a colleague it has not seen yet
        now = clock.time()
        known = Path(tempfile.mkdtemp()) / "people.json"
        known.write_text(json.dumps({"version": 1, "people": [
            {"user": "erin@example.org", "seen": now - 25 * 60, "left": now - 25 * 60,
             "coffee": now - 2 * 3600},
            {"user": "dave@example.org", "seen": now - 60, "coffee": now - 3 * 3600}]}))
        book = PeopleBook(["frank@example.org"], path=known)
        window = CoffeeWindow(qbiff, status=StatusWidget(manager, show_url=False),
                              notifier=CoffeeNotifier(enabled=False), book=book)
        manager.start()
        await manager.wait_connected(10)
        await qbiff.attach()
        window.show()
        await until(lambda: len(me.members) >= len(PEOPLE) + 1)
        await until(lambda: window.count() >= 2)
        await asyncio.sleep(0.5)
        save(window, "biff.png")
        window.hide()
        await qbiff.close()
        await manager.stop()
        for peer in peers:
            await peer.stop()


# -- a real desktop --------------------------------------------------------------------------
GRAB = """
import sys
from PySide6.QtGui import QGuiApplication
app = QGuiApplication([sys.argv[0]])
sys.exit(0 if app.primaryScreen().grabWindow(0).save(sys.argv[1], "PNG") else 1)
"""


def desktop(url: str) -> None:
    """Xvfb + openbox at 1024x768: the tickertape docked at the top, the
    console opened beside it (it fits below the bar), chat flowing."""
    import shutil
    missing = [tool for tool in ("Xvfb", "openbox", "xdotool") if shutil.which(tool) is None]
    if missing:
        print(f"skipped desktop-1024.png: {', '.join(missing)} not installed "
              "(scripts/ensure-system-packages.sh installs them)")
        return
    read_end, write_end = os.pipe()
    server = subprocess.Popen(["Xvfb", "-displayfd", str(write_end), "-noreset", "-screen", "0",
                               "1024x768x24", "-nolisten", "tcp"], pass_fds=(write_end,),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write_end)
    with os.fdopen(read_end) as numbers:
        display = ":" + numbers.readline().strip()
    children = [server]
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "DISPLAY": display, "QT_QPA_PLATFORM": "xcb", "HOME": home,
               "XDG_CONFIG_HOME": f"{home}/config", "XDG_DATA_HOME": f"{home}/data",
               "XDG_STATE_HOME": f"{home}/state", "XDG_RUNTIME_DIR": home}
        try:
            children.append(subprocess.Popen(["openbox", "--sm-disable"], env=env,
                                             stdout=subprocess.DEVNULL,
                                             stderr=subprocess.DEVNULL))
            time.sleep(1.0)
            for module in ("elvin_apps.tickertape", "elvin_apps.console"):
                children.append(subprocess.Popen(
                    [sys.executable, "-m", module, "--elvin", url], env=env,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                wanted = "^Tickertape$" if module.endswith("tickertape") else "Elvin console"
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline and not subprocess.run(
                        ["xdotool", "search", "--onlyvisible", "--name", wanted],
                        env=env, capture_output=True, text=True).stdout.strip():
                    time.sleep(0.2)

            async def chat() -> None:
                import elvin.client
                async with elvin.client.connect(url) as conn:
                    await send_chat(conn)
                    await price_ticks(conn, 40, 0.05)
            asyncio.run(chat())
            time.sleep(5)                       # the strip scrolls, Browse fills
            path = OUT / "desktop-1024.png"
            grabbed = subprocess.run([sys.executable, "-c", GRAB, str(path)], env=env,
                                     capture_output=True, text=True, timeout=60)
            if grabbed.returncode != 0:
                raise SystemExit(f"screenshots: cannot grab the desktop: {grabbed.stderr}")
            print(f"wrote {path.relative_to(ROOT)}")
        finally:
            for child in reversed(children):
                child.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(10)


# -- main ---------------------------------------------------------------------------------
APPS = {"tickertape": tickertape, "biff": biff, "console": console}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=sorted([*APPS, "desktop"]), action="append")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    proc, url = start_router()
    try:
        from elvin.qt import run_app

        if "desktop" in (args.only or ["desktop"]):
            desktop(url)

        async def everything() -> int:
            for name in args.only or APPS:
                if name in APPS:
                    await APPS[name](url)
            return 0

        with tempfile.TemporaryDirectory() as home:
            os.environ["XDG_CONFIG_HOME"] = os.path.join(home, "config")
            os.environ["XDG_DATA_HOME"] = os.path.join(home, "data")
            return run_app(everything, [sys.argv[0]])
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)


if __name__ == "__main__":
    sys.exit(main())
