"""``elvin-archive``: a client-side traffic archive, against a real router."""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import sys
import time

import pytest

from elvin.client import connect
from elvin.pipeline.archive import encoded_size, read_archive
from elvin.values import Int64

from .process_util import free_port

TOOL = [sys.executable, "-m", "elvin.tools.archive"]


def start_tool(*args: str) -> subprocess.Popen:
    """Start elvin-archive and wait for its "archiving" line (subscribed)."""
    proc = subprocess.Popen([*TOOL, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    line = proc.stderr.readline()
    if "archiving notifications" not in line:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"elvin-archive did not start: {line}{err}")
    return proc


def finish(proc: subprocess.Popen, sig: int | None = None) -> tuple[int, str]:
    if sig is not None:
        proc.send_signal(sig)
    try:
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, err


async def send_and_wait(url: str, notifications: list[dict], matching: int) -> None:
    """Send, and make sure the router routed everything: a second subscriber
    with the tool's expression must have received ``matching`` of them."""
    seen: list = []
    async with connect(url) as witness, connect(url) as producer:
        await witness.subscribe("require(Group)", listener=seen.append)
        for n in notifications:
            await producer.send(n)
        deadline = time.monotonic() + 10
        while len(seen) < matching:
            assert time.monotonic() < deadline, "the router did not deliver in time"
            await asyncio.sleep(0.01)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_archives_what_it_receives_and_flushes_on_signal(router, tmp_path, sig):
    archive = tmp_path / "archive"
    proc = start_tool("-e", router.url, "require(Group)", str(archive))
    try:
        notifications = []
        for i in range(120):
            if i % 4 == 3:
                notifications.append({"Other": i})          # not ours
            else:
                notifications.append({"Group": f"g{i % 3}", "n": i, "big": Int64(-i),
                                      "x": i + 0.5, "o": bytes([i])})
        # the witness saw all 90, so the router has sent them to the tool too;
        # the tool's clean disconnect (DisconnRqst/Rply) after the signal comes
        # after them on its channel, so it has handled them before it exits
        await send_and_wait(router.url, notifications, 90)
    except BaseException:
        proc.kill()
        raise
    status, err = finish(proc, sig)
    assert status == 0, err
    rows = read_archive(archive)
    assert "90 notifications written" in err
    assert len(rows) == 90
    expected = {n["n"]: n for n in notifications if "Group" in n}
    assert sorted(row["attributes"]["n"] for row in rows) == sorted(expected)
    for row in rows:
        attrs = row["attributes"]
        assert attrs == expected[attrs["n"]]
        assert type(attrs["big"]) is Int64 and type(attrs["n"]) is int
        assert row["producer"] is None
        assert (row["subscriptions"], row["clients"], row["secure"]) == (1, 1, False)
        assert row["size"] == encoded_size(attrs)


async def test_router_going_away_exits_2_and_keeps_rows(make_router, tmp_path):
    router = make_router()
    archive = tmp_path / "archive"
    proc = start_tool("-e", router.url, "require(Group)", str(archive))
    try:
        await send_and_wait(router.url, [{"Group": "a", "n": i} for i in range(10)], 10)
        router.stop()
    except BaseException:
        proc.kill()
        raise
    status, err = finish(proc)
    assert status == 2, err
    assert "disconnected from" in err
    assert len(read_archive(archive)) == 10


def test_entry_point_installed():
    assert shutil.which("elvin-archive") or (
        __import__("pathlib").Path(sys.executable).with_name("elvin-archive").exists())


@pytest.mark.parametrize(("args", "status", "message"), [
    (["-e", "elvin://no:port:here", "require(a)"], 1, "bad Elvin URI"),
    (["-e", "elvin://127.0.0.1:{port}", "a < "], 1, "bad subscription: PARSE_ERROR at offset"),
    (["-e", "elvin://127.0.0.1:{port}", "require(a)"], 2, "cannot reach the router at"),
    (["-e", "elvin://127.0.0.1:{port}", "require(a)", "--batch-rows", "0"], 1,
     "--batch-rows must be at least 1"),
])
def test_bad_input(tmp_path, args, status, message):
    port = free_port()           # nothing listens there
    argv = [a.format(port=port) for a in args]
    proc = subprocess.run([*TOOL, *argv[:3], str(tmp_path / "a"), *argv[3:]],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == status, proc.stderr
    assert message in proc.stderr
    if status == 1 and "URI" not in message and "rows" not in message:
        assert "a < " in proc.stderr and "^" in proc.stderr    # shows where


def test_archive_dir_that_is_a_file(router, tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    proc = subprocess.run([*TOOL, "-e", router.url, "require(a)", str(target)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert f"cannot create archive directory {target}" in proc.stderr
