"""The mobility proxy as processes: ``elvind --mobility`` (and ``mobility =
true`` in its TOML) and the standalone ``elvin-mobility-proxy``."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from elvin.client import connect
from elvin.mobility import MobileConnection, MobilityError, hello

from .process_util import ELVIND, free_port, wait_listening

PROXY = [sys.executable, "-m", "elvin.mobility.proxy"]


async def move_out_once_proxy_answers(mc: MobileConnection, within: float = 10.0):
    """A proxy process needs a moment to subscribe to its requests: retry a
    move-out that timed out (only that) until ``within`` seconds have passed."""
    deadline = time.monotonic() + within
    while True:
        try:
            return await mc.move_out()
        except MobilityError as exc:
            if exc.code != "timeout" or time.monotonic() > deadline:
                raise


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
        ticket = await move_out_once_proxy_answers(mc)
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


async def test_elvind_mobility_key_file_can_be_pinned(spawn, tmp_path):
    """``elvind --mobility-key-file`` gives its proxy a fixed key, printed at
    startup like the standalone proxy's, that a client can pin."""
    from elvin.keys import public_key
    raw = bytes(range(40, 80))
    key_file = tmp_path / "mobility.key"
    key_file.write_bytes(raw)
    port = free_port()
    url = f"elvin://127.0.0.1:{port}"
    proc = spawn(ELVIND + ["--listen", url, "--mobility", "--mobility-key-file",
                           str(key_file)])
    wait_listening(port, proc)
    mc = await MobileConnection.open(url, timeout=1.0, proxy_keys={url: public_key(raw)})
    await mc.subscribe("require(Seq)")
    pub = await connect(url)
    observer = await pub.subscribe("require(Seq)")
    try:
        ticket = await move_out_once_proxy_answers(mc)
        assert ticket.proxy_key == public_key(raw)
        await pub.send({"Seq": 1})
        await observer.get(timeout=10)      # so the proxy has it queued too
        report = await mc.move_in(url)
        assert report.abbreviated and report.caught_up == 1
    finally:
        await mc.close()
        await pub.close()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0
    assert public_key(raw).hex() in proc.communicate()[1]


def test_elvind_mobility_key_file_in_toml(tmp_path):
    """The TOML key, checked before listening: a bad file is a usage error
    (exit 1) that names the file and what is wrong."""
    port = free_port()
    config = tmp_path / "elvind.toml"
    missing = tmp_path / "no-such.key"
    config.write_text(f'listen = "elvin://127.0.0.1:{port}"\nmobility = true\n'
                      f'mobility-key-file = "{missing}"\n')
    result = subprocess.run(ELVIND + ["--config", str(config)], capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 1
    assert "mobility-key-file" in result.stderr and str(missing) in result.stderr
    assert "No such file" in result.stderr


def test_elvind_empty_mobility_key_file_exits_1(tmp_path):
    empty = tmp_path / "empty.key"
    empty.write_bytes(b"")
    result = subprocess.run(ELVIND + ["--listen", f"elvin://127.0.0.1:{free_port()}",
                                      "--mobility", "--mobility-key-file", str(empty)],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert str(empty) in result.stderr and "empty" in result.stderr


def test_standalone_proxy_bad_key_file_exit_1(tmp_path):
    missing = tmp_path / "no-such.key"
    result = subprocess.run(PROXY + ["--key-file", str(missing)], capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 1
    assert str(missing) in result.stderr and "No such file" in result.stderr


async def test_standalone_proxy_keeps_its_buffers_across_a_restart(spawn, router, tmp_path):
    state = tmp_path / "state"
    args = PROXY + ["-e", router.url, "--state-dir", str(state)]
    proc = spawn(args)
    mc = await MobileConnection.open(router.url, timeout=1.0)
    await mc.subscribe("require(Seq)")
    pub = await connect(router.url)
    observer = await pub.subscribe("require(Seq)")
    try:
        ticket = await move_out_once_proxy_answers(mc)
        for seq in range(5):
            await pub.send({"Producer": "cli", "Seq": seq})
        for _ in range(5):      # the router has queued them to the proxy too
            await observer.get(timeout=10)
        await pub.set_keys()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        spawn(args)
        deadline = time.monotonic() + 10
        while True:             # until it answers, with the same key (kept in DIR)
            try:
                key = await hello(pub, ticket.proxy, 0.5)
                break
            except MobilityError:
                if time.monotonic() > deadline:
                    raise
        assert key == ticket.proxy_key
        report = await mc.move_in(router.url)
        assert report.caught_up == 5
    finally:
        await mc.close()
        await pub.close()


def test_standalone_proxy_state_reset_needs_a_state_dir():
    result = subprocess.run(PROXY + ["-e", "elvin://127.0.0.1:1", "--state-reset"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 1 and "--state-reset needs --state-dir" in result.stderr
