"""Logs and status that say what is so, when it is so (issue 44): a
federation link's recovery is said when it comes up, the status file shows
a link's new state at once, a dial that the peer hangs up during the TLS
handshake says so, the connect summary is not lost at stop, and a reload
names what changed inside ``[options]`` and ``[federation]``."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import socket
import threading

import pytest

from elvin.federation.config import ConnectSpec, FederationConfig
from elvin.router.config import RouterConfig
from elvin.router.status import StatusFile
from tests.waiting import until, wait_until

from .process_util import free_port


def messages(caplog, name: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith(name)]


def test_a_link_that_recovers_is_said_when_it_comes_up(make_router, caplog):
    caplog.set_level(logging.INFO, logger="elvin.federation")
    port = free_port()
    dialler = make_router(config=RouterConfig(
        listen=["elvin://127.0.0.1:0"], discovery=False,
        federation=FederationConfig(router_domain="a", reconnect_min=0.05, reconnect_max=0.1,
                                    connect=[ConnectSpec(f"ewaf://127.0.0.1:{port}", "b")])))

    def report() -> dict:
        return dialler.call(lambda: dialler.router.federation.link_report())[0]
    wait_until(lambda: report()["failed_dials"] >= 2, what="failed dials")
    make_router(config=RouterConfig(
        listen=["elvin://127.0.0.1:0"], discovery=False,
        federation=FederationConfig(router_domain="b", listen=[f"ewaf://127.0.0.1:{port}"],
                                    accept_any=True)))
    wait_until(lambda: report()["state"] == "linked", what="the link up")
    # said while the link is up, not when it closes again
    wait_until(lambda: any("succeeded after" in m for m in messages(caplog, "elvin.federation")),
               what="the recovery line")
    assert report()["state"] == "linked" and report()["last_error"] is None


def test_a_tls_dial_the_peer_hangs_up_on_is_said_in_words(make_router, caplog, tmp_path):
    from .tls_certs import make_ca

    caplog.set_level(logging.INFO, logger="elvin.federation")
    ca = make_ca(tmp_path, "ca")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    stop = threading.Event()

    def hang_up() -> None:          # reads the ClientHello, then closes: no TLS here
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            conn.settimeout(5)
            try:
                conn.recv(65536)
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()
    thread = threading.Thread(target=hang_up, daemon=True)
    thread.start()
    try:
        dialler = make_router(config=RouterConfig(
            listen=["elvin://127.0.0.1:0"], discovery=False,
            federation=FederationConfig(
                router_domain="a", reconnect_min=0.05, reconnect_max=0.1, tls_ca=ca[0],
                connect=[ConnectSpec(f"ewaf:1.0/ssl,none,xdr/127.0.0.1:{port}", "b")])))

        def error() -> str | None:
            return dialler.call(lambda: dialler.router.federation.link_report())[0][
                "last_error"]
        wait_until(error, what="a failed dial")
        assert "closed the connection during the TLS handshake" in error()
        said = messages(caplog, "elvin.federation")
        assert not any(m.endswith("failed: str; retrying") for m in said), said
    finally:
        stop.set()
        thread.join(10)
        server.close()


async def test_the_status_file_is_rewritten_when_a_watched_state_changes(tmp_path):
    path = tmp_path / "status.json"
    state = {"link": "down", "counter": 0}
    status = StatusFile(str(path), lambda: dict(state), interval=3600,
                        watch=lambda: state["link"], watch_interval=0.01)
    status.start()
    try:
        state["counter"] = 1                 # not watched: waits for the next rewrite
        state["link"] = "linked"
        await until(lambda: json.loads(path.read_text())["link"] == "linked",
                    what="the new state in the file")
        assert json.loads(path.read_text())["counter"] == 1
    finally:
        await status.close()


def test_the_connect_summary_is_said_when_the_router_stops(caplog):
    from elvin.router.connlog import ConnectionLog

    class Peer:
        listener = "elvin://127.0.0.1:2917"

        def __init__(self, n):
            self.peer = ("10.0.0.1", 1000 + n)

    async def scenario():
        connlog = ConnectionLog(asyncio.get_running_loop(), window=3600, burst=2)
        for n in range(5):
            connlog.connected(Peer(n))
        connlog.close()                      # long before the window ends

    caplog.set_level("INFO", logger="elvin.router.clients")
    asyncio.run(scenario())
    lines = messages(caplog, "elvin.router.clients")
    assert len(lines) == 3, lines
    assert lines[2].startswith("... and 3 more client connects, 0 more disconnects")


def test_a_reload_names_what_changed_in_options_and_federation(make_router, tmp_path):
    from elvin.router.cli import reload_router

    router = make_router()
    path = tmp_path / "r.toml"
    args = argparse.Namespace(config=str(path))
    dead = free_port()

    def reload(text: str) -> tuple[bool, str]:
        path.write_text(f'listen = "{router.url}"\ndiscovery = false\n{text}')
        return asyncio.run_coroutine_threadsafe(
            reload_router(router.router, args, set_logging=lambda *a: None),
            router.loop).result(60)

    fed = ('[federation]\nrouter_domain = "a"\nreconnect_max = {max}\n'
           '[[federation.connect]]\nrouter = "{peer}"\n'
           f'url = "ewaf://127.0.0.1:{dead}"\n')
    ok, message = reload(fed.format(max=30, peer="b"))
    assert ok, message
    ok, message = reload('[options]\n"Packet.Max-Length" = 65536\n'
                         + fed.format(max=10, peer="c"))
    assert ok, message
    assert "[options] Packet.Max-Length (2097152 -> 65536) (for new connections)" in message
    assert "[federation] connect +c -b; reconnect_max (30 -> 10)" in message, message


def test_replacing_a_dialling_connector_never_hangs_the_reload(make_router, tmp_path):
    """A connector stopped while its dial fails: 3.11's wait_for may swallow
    the cancellation, and the reload then waited for ever for the
    connector's task (it did in about half the runs)."""
    from elvin.router.cli import reload_router

    router = make_router()
    path = tmp_path / "r.toml"
    args = argparse.Namespace(config=str(path))
    dead = free_port()
    for n in range(12):
        path.write_text(f'listen = "{router.url}"\ndiscovery = false\n[federation]\n'
                        f'router_domain = "a"\nreconnect_min = 0.01\nreconnect_max = 0.01\n'
                        f'[[federation.connect]]\nrouter = "p{n}"\n'
                        f'url = "ewaf://127.0.0.1:{dead}"\n')
        ok, message = asyncio.run_coroutine_threadsafe(
            reload_router(router.router, args, set_logging=lambda *a: None),
            router.loop).result(30)
        assert ok, message


@pytest.fixture(autouse=True)
def _quiet_federation(caplog):
    caplog.set_level(logging.INFO, logger="elvin.router")
