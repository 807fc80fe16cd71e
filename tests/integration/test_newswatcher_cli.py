"""``newswatcher`` as a process: flags, exit codes, signals, status, reload."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from elvin_apps.newswatcher import __version__

from elvin.client import connect
from tests.feedserver import FeedServer, Item, rss
from tests.waiting import until

from .process_util import free_port

CMD = [sys.executable, "-m", "elvin_apps.newswatcher"]


def run(*args: str, env: dict | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "ELVIN_URL"}
    environ.update(env or {})
    return subprocess.run(CMD + list(args), capture_output=True, text=True, timeout=timeout,
                          env=environ)


def test_version_and_help():
    result = run("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"newswatcher {__version__}"
    result = run("--help")
    assert result.returncode == 0 and "--scoop" in result.stdout and "status" in result.stdout


def test_usage_and_config_errors_exit_1(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[[feeds]]\nname = 'x'\nurl = 'http://e.org/'\ninterval = -5\n")
    result = run("--config", str(bad))
    assert result.returncode == 1 and "feeds #1, interval" in result.stderr
    result = run("--config", str(tmp_path / "absent.toml"))
    assert result.returncode == 1 and "no such file" in result.stderr
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    result = run("--config", str(empty))
    assert result.returncode == 1 and "no feeds" in result.stderr
    result = run("--feed", "gopher://x/", "--data-dir", str(tmp_path))
    assert result.returncode == 1 and "unsupported scheme" in result.stderr
    result = run("--feed", "x.xml", "--elvin", "nonsense:/", "--data-dir", str(tmp_path))
    assert result.returncode == 1 and "bad Elvin URL" in result.stderr
    assert run("--no-such-flag").returncode == 1


def test_unreachable_router_exits_2(tmp_path):
    url = f"elvin://127.0.0.1:{free_port()}"
    result = run("--feed", str(tmp_path / "f.xml"), "--data-dir", str(tmp_path), "--elvin", url)
    assert result.returncode == 2 and "cannot reach" in result.stderr
    # ELVIN_URL is used when --elvin is not given
    result = run("--feed", str(tmp_path / "f.xml"), "--data-dir", str(tmp_path),
                 env={"ELVIN_URL": url})
    assert result.returncode == 2 and str(url.rsplit(":", 1)[1]) in result.stderr


def test_status_without_a_daemon(tmp_path):
    result = run("status", "--data-dir", str(tmp_path))
    assert result.returncode == 3 and "no status file" in result.stderr
    assert run("reload", "--data-dir", str(tmp_path)).returncode == 3


async def test_daemon_lifecycle(router_url, tmp_path):
    local = tmp_path / "local.xml"
    local.write_text(rss("Local", [Item("l1", "Local news")]))
    with FeedServer() as server:
        server.set("/web.rss", rss("Web", [Item("w1", "Web news")]))
        server.set("/extra.rss", rss("Extra", [Item("e1", "Extra news")]))
        cfg = tmp_path / "newswatcher.toml"
        base = ("[http]\nmin_host_interval = 0\n"
                f"[[feeds]]\nname = \"web\"\nurl = \"{server.url('/web.rss')}\"\n"
                "interval = 0.3\n")
        cfg.write_text(base)
        log_file = tmp_path / "nw.log"
        data = tmp_path / "data"
        async with connect(router_url) as consumer:
            sub = await consumer.subscribe('News-Feed == "local" || News-Feed == "web"')
            proc = subprocess.Popen(
                CMD + ["--config", str(cfg), "--feed", str(local), "--elvin", router_url,
                       "--data-dir", str(data), "--log-file", str(log_file)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                notes = [dict(await sub.get(timeout=15)) for _ in range(2)]
                assert {n["News-Title"] for n in notes} == {"Local news", "Web news"}

                status = run("status", "--data-dir", str(data))
                assert status.returncode == 0, status.stderr
                assert "POLLED local" in status.stdout and "POLLED web" in status.stdout
                assert 'News-Feed == "local"' in status.stdout
                # a second daemon on the same data dir is refused
                second = run("--feed", str(local), "--elvin", router_url,
                             "--data-dir", str(data))
                assert second.returncode == 3 and "another newswatcher" in second.stderr

                # reload (SIGHUP) picks up a new feed
                extra = await consumer.subscribe('News-Feed == "extra"')
                cfg.write_text(base + f"[[feeds]]\nname = \"extra\"\nurl = "
                                      f"\"{server.url('/extra.rss')}\"\ninterval = 0.3\n")
                reload = run("reload", "--data-dir", str(data))
                assert reload.returncode == 0, reload.stderr
                note = await extra.get(timeout=10)
                assert note["News-Title"] == "Extra news"
                # a broken config on reload keeps the running one
                cfg.write_text("[[feeds]]\nname = 1\n")
                proc.send_signal(signal.SIGHUP)
                await until(lambda: "reload refused" in log_file.read_text())
                assert proc.poll() is None
            finally:
                proc.send_signal(signal.SIGTERM)
                out, err = await asyncio.to_thread(proc.communicate, timeout=15)
        assert proc.returncode == 0, err
        text = log_file.read_text()
        assert "newswatcher stopped" in text and "feed extra added" in text
        after = run("status", "--data-dir", str(data))
        assert after.returncode == 3 and "NOT running" in after.stdout
        assert (Path(data) / "state.json").exists()


@pytest.mark.parametrize("sig", [signal.SIGINT])
async def test_sigint_stops_cleanly(router_url, tmp_path, sig):
    local = tmp_path / "f.xml"
    local.write_text(rss("F", []))
    proc = subprocess.Popen(CMD + ["--feed", str(local), "--elvin", router_url,
                                   "--data-dir", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        await until(lambda: (tmp_path / "status.json").exists())
    finally:
        proc.send_signal(sig)
        _out, err = await asyncio.to_thread(proc.communicate, timeout=15)
    assert proc.returncode == 0, err


async def test_the_issue_case_a_router_without_quench(tmp_path):
    """``newswatcher --feed URL --elvin <router without quench>`` used to exit
    3 ("startup failed: NOT_IMPL..."); now it polls in scoop mode and says so."""
    from .process_util import ELVIND, stop, wait_listening

    port = free_port()
    url = f"elvin://127.0.0.1:{port}"
    router = subprocess.Popen([*ELVIND, "--no-quench", "--listen", url],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    local = tmp_path / "f.xml"
    local.write_text(rss("F", [Item("f1", "Fallback news")]))
    data = tmp_path / "data"
    try:
        await asyncio.to_thread(wait_listening, port, router)
        async with connect(url) as consumer:
            sub = await consumer.subscribe("require(News-Title)")
            proc = subprocess.Popen(CMD + ["--feed", str(local), "--elvin", url,
                                           "--data-dir", str(data)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                note = await sub.get(timeout=15)
                assert note["News-Title"] == "Fallback news"
                status = run("status", "--data-dir", str(data))
                assert status.returncode == 0, status.stderr
                assert "router has no quench: scoop mode, every feed is polled" in status.stdout
            finally:
                proc.send_signal(signal.SIGTERM)
                _, err = await asyncio.to_thread(proc.communicate, timeout=15)
        assert proc.returncode == 0, err
        assert "Traceback" not in err and err.count("router has no quench") == 1, err
    finally:
        stop(router)
