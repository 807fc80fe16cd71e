"""The mobility proxy as processes: ``elvind --mobility`` (and ``mobility =
true`` in its TOML) and the standalone ``elvin-mobility-proxy``."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from elvin.client import connect
from elvin.mobility import MobileConnection, MobilityError

from .process_util import ELVIND, free_port, wait_listening

PROXY = [sys.executable, "-m", "elvin.mobility.proxy"]


@pytest.fixture
def spawn():
    procs: list[subprocess.Popen] = []

    def start(args: list[str]) -> subprocess.Popen:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def round_trip(url: str, attempts: float = 10.0) -> int:
    """Move out and in at ``url``; returns how many notifications came back.
    Retries the move-out while the proxy may still be starting."""
    mc = await MobileConnection.open(url, timeout=1.0)
    await mc.subscribe("require(Seq)")
    pub = await connect(url)
    observer = await pub.subscribe("require(Seq)")
    try:
        deadline = time.monotonic() + attempts
        while True:
            try:
                await mc.move_out()
                break
            except MobilityError as exc:
                if exc.code != "timeout" or time.monotonic() > deadline:
                    raise
        for seq in range(7):
            await pub.send({"Producer": "cli", "Seq": seq})
        # once an observer has the last one, the router has also queued it to
        # the proxy, whose connection carries it before the move-in request
        for _ in range(7):
            await observer.get(timeout=10)
        report = await mc.move_in(url)
        return report.caught_up
    finally:
        await mc.close()
        await pub.close()


async def test_elvind_mobility_flag(spawn):
    port = free_port()
    proc = spawn(ELVIND + ["--listen", f"elvin://127.0.0.1:{port}", "--mobility",
                           "--mobility-quota", "100"])
    wait_listening(port, proc)
    assert await round_trip(f"elvin://127.0.0.1:{port}") == 7


async def test_elvind_mobility_in_toml(spawn, tmp_path):
    port = free_port()
    config = tmp_path / "elvind.toml"
    config.write_text(f'listen = "elvin://127.0.0.1:{port}"\nmobility = true\n'
                      "mobility-expiry = 60\n")
    proc = spawn(ELVIND + ["--config", str(config)])
    wait_listening(port, proc)
    assert await round_trip(f"elvin://127.0.0.1:{port}") == 7


async def test_standalone_proxy(spawn, router):
    proc = spawn(PROXY + ["-e", router.url, "--quota", "5"])
    caught_up = await round_trip(router.url)
    assert caught_up == 5                        # its quota
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0


def test_standalone_proxy_without_router_exits_2():
    port = free_port()
    result = subprocess.run(PROXY + ["-e", f"elvin://127.0.0.1:{port}"], capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 2
    assert "cannot reach the router" in result.stderr


def test_standalone_proxy_bad_settings_exit_1():
    result = subprocess.run(PROXY + ["--quota", "0"], capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 1 and "quota" in result.stderr


async def test_standalone_proxy_with_a_key_file_can_be_pinned(spawn, router, tmp_path):
    """With ``--key-file`` the proxy's public key is stable (and printed), so
    a client can pin it and skip the hello that an impostor could answer."""
    from elvin.keys import public_key
    raw = bytes(range(40))
    key_file = tmp_path / "proxy.key"
    key_file.write_bytes(raw)
    proc = spawn(PROXY + ["-e", router.url, "--key-file", str(key_file)])
    pinned = {router.url: public_key(raw)}
    mc = await MobileConnection.open(router.url, timeout=1.0, proxy_keys=pinned)
    await mc.subscribe("require(Seq)")
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                ticket = await mc.move_out()
                break
            except MobilityError as exc:
                if exc.code != "timeout" or time.monotonic() > deadline:
                    raise
        assert ticket.proxy_key == public_key(raw)
        report = await mc.move_in(router.url)
        assert report.caught_up == 0 and report.abbreviated
        # a wrong pinned key reaches nobody: the request times out, unread
        wrong = MobileConnection(mc.connection, timeout=0.5,
                                 proxy_keys={router.url: b"\x00" * 20})
        with pytest.raises(MobilityError) as info:
            await wrong.move_out()
        assert info.value.code == "timeout"
    finally:
        await mc.close()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0
    assert public_key(raw).hex() in proc.communicate()[1]
