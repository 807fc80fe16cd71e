"""The router's traffic archive (``elvind --archive DIR``, ``archive = "DIR"``).

A real router on loopback archives what real clients send; the archive is
read back after the router stopped (``Router.stop`` or SIGTERM flushes it),
and must hold every notification with its Elvin types, the subscriptions
and clients it matched, the secure flag, the size and the producer.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess

import pytest

from elvin.client import connect
from elvin.keys import Keys
from elvin.pipeline.archive import encoded_size, read_archive
from elvin.router.config import ConfigError, RouterConfig, config_from_dict
from elvin.router.server import Router, RouterStartError
from elvin.values import Int64
from tests.waiting import until

from .process_util import ELVIND, free_port, wait_listening


def notification(i: int) -> dict:
    """Every Elvin type, with values that a lossy archive would get wrong."""
    n = {"n": i, "big": Int64(i), "wide": 2**40 + i, "x": i / 4, "s": f"msg {i} \u00e9",
         "o": bytes([i % 256, 0, 255])}
    if i % 3 == 0:
        n["kind"] = "third"
    if i == 7:
        n["x"] = math.nan
    return n


async def test_embedded_router_archives_every_notification(make_router, tmp_path):
    archive = tmp_path / "archive"
    router = make_router(archive=str(archive))
    secret = b"archive-secret"
    count = 40
    got_a: list = []
    got_b: list = []
    got_s: list = []
    async with connect(router.url) as a, connect(router.url) as b, \
            connect(router.url) as producer:
        # a: two subscriptions, both match n < 5; b: one, matches every third
        await a.subscribe("require(n)", listener=got_a.append)
        await a.subscribe("n < 5", listener=got_a.append)
        await b.subscribe('kind == "third"', listener=got_b.append)
        # b also has a secure-only subscription for the keyed notification
        await b.subscribe("require(secret)", keys=Keys.producer_subscription(secret),
                          accept_insecure=False, listener=got_s.append)
        for i in range(count):
            await producer.send(notification(i))
        await producer.send({"nobody": "listens"})
        await producer.send({"secret": 1}, keys=Keys.producer_notification(secret))
        # every delivery seen: the router has routed (and archived) everything
        await until(lambda: len(got_a) == count + 5 and len(got_b) == 14
                    and len(got_s) == 1)
    router.stop()

    rows = read_archive(archive)
    assert len(rows) == count + 2
    producers = {row["producer"] for row in rows}
    assert len(producers) == 1 and None not in producers
    assert next(iter(producers)).endswith(tuple(f":{p}" for p in range(1, 65536)))
    by_n = {row["attributes"]["n"]: row for row in rows if "n" in row["attributes"]}
    assert sorted(by_n) == list(range(count))
    for i, row in by_n.items():
        attrs = row["attributes"]
        expected = notification(i)
        assert list(attrs) == list(expected)              # names, in order
        assert type(attrs["n"]) is int and attrs["n"] == i
        assert type(attrs["big"]) is Int64 and attrs["big"] == i   # int64 stays int64
        assert type(attrs["wide"]) is Int64 and attrs["wide"] == 2**40 + i
        assert type(attrs["s"]) is str and attrs["s"] == expected["s"]
        assert type(attrs["o"]) is bytes and attrs["o"] == expected["o"]
        if i == 7:
            assert math.isnan(attrs["x"])
        else:
            assert type(attrs["x"]) is float and attrs["x"] == i / 4
        subs = 1 + (i < 5) + (i % 3 == 0)
        clients = 1 + (i % 3 == 0)
        assert (row["subscriptions"], row["clients"]) == (subs, clients), i
        assert row["secure"] is False
        assert row["size"] == encoded_size(expected)
    nobody = [row for row in rows if "nobody" in row["attributes"]]
    assert len(nobody) == 1
    assert (nobody[0]["subscriptions"], nobody[0]["clients"]) == (0, 0)
    # the keyed notification: "require(n)" of a does not match, b's secure one does
    keyed = [row for row in rows if "secret" in row["attributes"]]
    assert len(keyed) == 1
    assert (keyed[0]["subscriptions"], keyed[0]["clients"], keyed[0]["secure"]) == (1, 1, True)
    # arrival times are in order of sending, and hours match them
    times = [row["time"] for row in rows]
    assert times == sorted(times)
    assert all(row["hour"] == row["time"].strftime("%Y-%m-%dT%H") for row in rows)


async def test_archive_is_off_by_default(make_router, tmp_path):
    router = make_router()
    assert router.router.archive is None
    async with connect(router.url) as producer:
        await producer.send({"n": 1})


def start_elvind(args: list[str], port: int) -> subprocess.Popen:
    proc = subprocess.Popen([*ELVIND, "--listen", f"elvin://127.0.0.1:{port}",
                             "--log-level", "info", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_listening(port, proc, timeout=20)
    return proc


@pytest.mark.parametrize("how", ["flag", "toml"])
async def test_elvind_archive_flushed_on_sigterm(tmp_path, how):
    archive = tmp_path / "archive dir"
    if how == "flag":
        args = ["--archive", str(archive)]
    else:
        config = tmp_path / "elvind.toml"
        config.write_text(f"archive = {str(archive)!r}\n".replace("'", '"'))
        args = ["--config", str(config)]
    port = free_port()
    proc = start_elvind(args, port)
    count = 500
    received: list = []
    try:
        async with connect(f"elvin://127.0.0.1:{port}") as consumer, \
                connect(f"elvin://127.0.0.1:{port}") as producer:
            await consumer.subscribe("require(seq)", listener=received.append)
            for i in range(count):
                await producer.send({"seq": i, "payload": "x" * (i % 50)})
            await until(lambda: len(received) == count)
            # still connected: SIGTERM must flush rows of live sessions too
            proc.send_signal(signal.SIGTERM)
            _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert f"{count} notifications written" in err
    rows = read_archive(archive)
    assert sorted(row["attributes"]["seq"] for row in rows) == list(range(count))
    assert all((row["subscriptions"], row["clients"]) == (1, 1) for row in rows)
    assert len({row["producer"] for row in rows}) == 1
    assert not list(archive.rglob(".*.tmp"))


def test_archive_that_is_a_file_is_a_config_error(tmp_path):
    target = tmp_path / "not-a-dir"
    target.write_text("data")
    with pytest.raises(ConfigError, match="archive .*not-a-dir.* is not a directory"):
        config_from_dict({"archive": str(target)})
    with pytest.raises(ConfigError, match="'archive' must be a string"):
        config_from_dict({"archive": 3})
    proc = subprocess.run([*ELVIND, "--listen", "elvin://127.0.0.1:0", "--archive",
                           str(target)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1
    assert "is not a directory" in proc.stderr and str(target) in proc.stderr


def test_archive_under_a_file_is_a_startup_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("data")
    target = blocker / "archive"
    proc = subprocess.run([*ELVIND, "--listen", "elvin://127.0.0.1:0", "--archive",
                           str(target)], capture_output=True, text=True, timeout=30)
    # a path the admin must fix: 1, which the systemd unit does not restart
    assert proc.returncode == 1
    assert f"cannot create archive directory {target}: Not a directory" in proc.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write in a read-only directory")
async def test_unwritable_archive_is_a_startup_error(tmp_path):
    target = tmp_path / "ro"
    target.mkdir()
    target.chmod(0o500)
    try:
        router = Router(RouterConfig(listen=["elvin://127.0.0.1:0"], archive=str(target)))
        with pytest.raises(RouterStartError, match="cannot write in archive directory"):
            await router.start()
        assert router.ports == []       # refused before listening
    finally:
        target.chmod(0o700)


async def test_unwritable_archive_as_root_is_a_startup_error():
    # /proc refuses new directories even to root: the error names the path
    router = Router(RouterConfig(listen=["elvin://127.0.0.1:0"],
                                 archive="/proc/elvin-archive-test"))
    with pytest.raises(RouterStartError,
                       match="cannot create archive directory /proc/elvin-archive-test"):
        await router.start()
    assert router.ports == []


async def test_archive_child_process_is_complete_after_stop(make_router, tmp_path):
    # the Parquet writing happens in a child process (not sharing the router's
    # GIL); Router.stop sends it the rows still buffered and waits for it
    archive = tmp_path / "archive"
    router = make_router(archive=str(archive))
    pid = router.router.archive.pid
    assert pid is not None and pid != os.getpid()
    count = 3000        # several batches for the pipe, many rows still buffered at stop
    received: list = []
    async with connect(router.url) as consumer, connect(router.url) as producer:
        await consumer.subscribe("require(seq)", listener=received.append)
        for i in range(count):
            await producer.send({"seq": i, "big": Int64(-i), "o": b"\x00" * (i % 7)})
        await until(lambda: len(received) == count)
    router.stop()
    with pytest.raises(ProcessLookupError):     # the child exited and was reaped
        os.kill(pid, 0)
    rows = read_archive(archive)
    assert sorted(row["attributes"]["seq"] for row in rows) == list(range(count))
    for row in rows:
        attrs = row["attributes"]
        assert type(attrs["big"]) is Int64 and attrs["big"] == -attrs["seq"]
        assert attrs["o"] == b"\x00" * (attrs["seq"] % 7)
        assert (row["subscriptions"], row["clients"], row["secure"]) == (1, 1, False)
        assert row["size"] == encoded_size(attrs)


async def test_killed_archive_process_does_not_stop_routing(make_router, tmp_path, caplog):
    archive = tmp_path / "archive"
    router = make_router(archive=str(archive))
    writer = router.router.archive
    received: list = []
    async with connect(router.url) as consumer, connect(router.url) as producer:
        await consumer.subscribe("require(seq)", listener=received.append)
        for i in range(10):
            await producer.send({"seq": i})
        await until(lambda: len(received) == 10)
        os.kill(writer.pid, signal.SIGKILL)
        await until(lambda: writer.dead)
        for i in range(10, 1010):
            await producer.send({"seq": i})
        await until(lambda: len(received) == 1010)
    assert [n["seq"] for n in received] == list(range(1010))
    errors = [r for r in caplog.records if "archive writer process" in r.getMessage()]
    assert len(errors) == 1 and errors[0].levelname == "ERROR"   # said once
    router.stop()       # no exception: the router stops normally
    assert writer.lost_rows >= 1000
