"""Federation configuration end to end: the ``[federation]`` TOML that
``elvin-domain apply`` writes, elvind's flags, and reloading (SIGHUP)."""

from __future__ import annotations

import argparse
import asyncio
import socket

import pytest

from elvin.federation.topology_file import parse_topology, render_fragment
from elvin.protocol import NotifyDeliver
from elvin.router.cli import build_parser, make_config, reload_router
from elvin.router.config import ConfigError, load_config
from elvin.router.embedded import EmbeddedRouter
from tests.waiting import until, wait_until

from .federation_util import (
    fed_stats,
    federated_routers,
    linked_domains,
    remote_pull,
    stop_all,
)
from .process_util import free_port, stop
from .rawclient import RawClient

TOPOLOGY = """
[domain]
name = "test"

[[routers]]
name = "hub"
url = "ewaf://127.0.0.1:{hub}"

[[routers]]
name = "left"
url = "ewaf://127.0.0.1:{left}"

[[routers]]
name = "right"
url = "ewaf://127.0.0.1:{right}"

[[links]]
from = "hub"
to = "left"

[[links]]
from = "hub"
to = "right"
outgoing = "require(News)"
"""


async def test_routers_configured_by_elvin_domain_apply_fragments(tmp_path):
    ports = {name: free_port() for name in ("hub", "left", "right")}
    topology = parse_topology(TOPOLOGY.format(**ports), tmp_path / "test.toml")
    routers = {}
    try:
        for name in ("hub", "left", "right"):
            path = tmp_path / f"{name}.toml"
            path.write_text('listen = "elvin://127.0.0.1:0"\ndiscovery = false\n\n'
                            + render_fragment(topology, name).replace(
                                "[federation]", "[federation]\ndebounce = 0.01\n"
                                "reconnect_min = 0.05\nreconnect_max = 0.5", 1))
            config = load_config(path)
            assert config.federation.router_domain == name
            routers[name] = EmbeddedRouter(config=config).start()
        wait_until(lambda: linked_domains(routers["hub"]) == {"left", "right"},
                   what="hub linked to left and right")
        left = await RawClient.connected(routers["left"].port)
        await left.subscribe("require(Seq)")
        right = await RawClient.connected(routers["right"].port)
        await right.subscribe("require(Seq)")
        hub = await RawClient.connected(routers["hub"].port)
        await hub.subscribe("require(Seq)")
        await until(lambda: remote_pull(routers["hub"], "left") not in (None, False)
                    and remote_pull(routers["hub"], "right") not in (None, False),
                    what="pull filters at hub")
        producer = await RawClient.connected(routers["hub"].port)
        producer.notify({"Seq": 1})                 # hub -> left only (right wants News)
        producer.notify({"Seq": 2, "News": "x"})    # hub -> left and right
        assert [(await left.expect(NotifyDeliver)).attributes["Seq"] for _ in range(2)] \
            == [1, 2]
        assert (await right.expect(NotifyDeliver)).attributes["Seq"] == 2
        # links carry notifications only from `from` to `to`: left's pull filter
        # at hub is there, but hub's incoming filter from left is false
        assert remote_pull(routers["left"], "hub") is False
        back = await RawClient.connected(routers["left"].port)
        back.notify({"Seq": 3})
        assert (await left.expect(NotifyDeliver)).attributes["Seq"] == 3
        await hub.expect(NotifyDeliver)             # Seq 1
        await hub.expect(NotifyDeliver)             # Seq 2
        await hub.nothing(0.2)
        assert fed_stats(routers["left"])["fed_notify_sent"] == 0
    finally:
        stop_all(routers.values())


def test_bad_federation_toml_names_file_line_and_key(tmp_path):
    path = tmp_path / "elvind.toml"
    path.write_text('[federation]\nrouter_domain = "a"\n\n[[federation.connect]]\n'
                    'router = "b"\nurl = "ewaf://b.example.com:2916"\n\n'
                    '[[federation.connect]]\nrouter = "c"\nurl = "http://c"\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert str(path) in message and "line 10" in message
    assert "federation.connect #2, url" in message and "not an ewaf URI" in message
    path.write_text('[federation]\nrouter_domain = "a"\n\n[[federation.accept]]\n'
                    'router = "b"\nincoming = "Group =="\n')
    with pytest.raises(ConfigError, match=r"line 6: federation.accept #1, incoming: bad "
                                          "subscription expression"):
        load_config(path)


def test_elvind_federation_flags():
    args = build_parser().parse_args([
        "--listen", "elvin://127.0.0.1:0", "--no-discovery",
        "--federation-listen", "ewaf://0.0.0.0:2916",
        "--federation-connect", "ewaf://a.example.com", "--federation-connect",
        "ewaf://b.example.com:3000", "--federation-domain", "me"])
    fed = make_config(args).federation
    assert fed.listen == ["ewaf://0.0.0.0:2916"] and fed.router_domain == "me"
    assert [c.url for c in fed.connect] == ["ewaf://a.example.com", "ewaf://b.example.com:3000"]
    bad = build_parser().parse_args(["--federation-connect", "elvin://x"])
    with pytest.raises(ConfigError, match="federation.connect"):
        make_config(bad)


def _reload(router: EmbeddedRouter, path) -> bool:
    args = argparse.Namespace(config=str(path), federation_listen=None,
                              federation_connect=None, federation_domain=None,
                              federation_accept_any=None)
    return asyncio.run_coroutine_threadsafe(
        reload_router(router.router, args), router.loop).result(10)[0]


def test_reload_reconfigures_a_running_router(tmp_path):
    # r0 and r2 accept anyone; r1 starts unlinked and is told by a config
    # reload (what SIGHUP does) to link to r0, then to r2 instead
    routers = federated_routers(3, links=[], accept_any=True)
    r0, r1, r2 = routers
    path = tmp_path / "r1.toml"

    def write(connect_to, extra=""):
        path.write_text(
            '[federation]\nrouter_domain = "r1"\nlisten = "ewaf://127.0.0.1:0"\n'
            f'debounce = 0.01\nreconnect_min = 0.05\n{extra}\n'
            + "".join(f'[[federation.connect]]\nurl = "{r.federation_urls[0]}"\n'
                      f'outgoing = "require(Out)"\n' for r in connect_to))
    try:
        write([r0])
        assert _reload(r1, path)
        wait_until(lambda: linked_domains(r1) == {"r0"}, what="r1 linked to r0")
        write([r2])
        assert _reload(r1, path)
        wait_until(lambda: linked_domains(r1) == {"r2"} and linked_domains(r0) == set(),
                   what="r1 moved to r2")
        # a broken file changes nothing
        path.write_text('[federation]\nlisten = "nonsense"\n')
        assert not _reload(r1, path)
        assert linked_domains(r1) == {"r2"}
        # the filters of a kept link are replaced in place
        write([r2], extra="")
        link_filter = r1.call(lambda: r1.router.federation.link_for("r2").outgoing.text)
        assert link_filter == "require(Out)"
        path.write_text(path.read_text().replace("require(Out)", "require(Other)"))
        assert _reload(r1, path)
        wait_until(lambda: r1.call(
            lambda: r1.router.federation.link_for("r2").outgoing.text) == "require(Other)",
            what="new outgoing filter")
        # removing the section stops federation altogether
        path.write_text('listen = "elvin://127.0.0.1:0"\n')
        assert _reload(r1, path)
        wait_until(lambda: linked_domains(r2) == set(), what="r1 unlinked")
        assert r1.call(lambda: r1.router.federation) is None
    finally:
        stop_all(routers)


def test_sighup_makes_elvind_reload_its_federation_table(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    hub = federated_routers(1, accept_any=True)[0]
    port = free_port()
    path = tmp_path / "elvind.toml"
    head = (f'listen = "elvin://127.0.0.1:{port}"\ndiscovery = false\n\n[federation]\n'
            'router_domain = "edge"\nlisten = "ewaf://127.0.0.1:0"\nreconnect_min = 0.05\n')
    path.write_text(head)
    proc = subprocess.Popen([sys.executable, "-m", "elvin.router", "--config", str(path),
                             "--log-level", "warning"], stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        while not (line.startswith("elvind ") and "listening on" in line):
            assert line, "elvind exited before listening"
            line = proc.stderr.readline()
        assert "ewaf://127.0.0.1:" in line
        assert linked_domains(hub) == set()
        path.write_text(head + f'\n[[federation.connect]]\nurl = "{hub.federation_urls[0]}"\n')
        os.kill(proc.pid, signal.SIGHUP)
        wait_until(lambda: linked_domains(hub) == {"edge"}, what="elvind to link after SIGHUP")
        path.write_text(head)
        os.kill(proc.pid, signal.SIGHUP)
        wait_until(lambda: linked_domains(hub) == set(), what="elvind to unlink after SIGHUP")
    finally:
        stop(proc)
        stop_all([hub])


async def test_testconn_is_answered_with_confconn():
    from elvin.protocol import ConfConn, TestConn

    from .federation_util import RawFederator

    hub = federated_routers(1, accept_any=True)[0]
    try:
        peer = await RawFederator.linked(hub.federation_urls[0], "prober")
        peer.send(TestConn())
        await peer.expect(ConfConn)
        await peer.close()
    finally:
        stop_all([hub])


def test_federation_port_in_use_stops_the_start_with_a_clear_error():
    from elvin.errors import RouterStartError
    from elvin.federation.config import FederationConfig
    from elvin.router.config import RouterConfig

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        config = RouterConfig(discovery=False, federation=FederationConfig(
            router_domain="x", listen=[f"ewaf://127.0.0.1:{port}"]))
        with pytest.raises(RouterStartError, match=f"cannot listen for federation on "
                                                   f"ewaf://127.0.0.1:{port}"):
            EmbeddedRouter(config=config).start()
