"""``filewatcher check`` and ``newswatcher check`` say every problem, and
their ``status``/``reload`` act on the daemon their ``--config`` names or
on none (issue 44)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time

from tests.feedserver import FeedServer, Item, rss
from tests.waiting import until

FILEWATCHER = [sys.executable, "-m", "elvin_apps.filewatcher"]
NEWSWATCHER = [sys.executable, "-m", "elvin_apps.newswatcher"]


def run(command, *args) -> subprocess.CompletedProcess:
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=60)


def lines_of(stderr: str) -> list[str]:
    assert "Traceback" not in stderr, stderr
    return [line for line in stderr.splitlines() if line.strip()]


def one_line(stderr: str) -> str:
    lines = lines_of(stderr)
    assert len(lines) == 1, stderr
    return lines[0]


# -- check --------------------------------------------------------------------------------

def test_filewatcher_check_says_every_problem(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    path = tmp_path / "fw.toml"
    log = tmp_path / "missing" / "fw.log"
    path.write_text(f'roots = ["{root}", "{tmp_path}/nowhere"]\nbogus = 1\n'
                    f'debounce = 1000\nmax-watches = 0\nlog-file = "{log}"\n')
    out = run(FILEWATCHER, "check", "--config", str(path))
    assert out.returncode == 1
    lines = lines_of(out.stderr)
    for wanted in ("unknown setting 'bogus'", f"roots: '{tmp_path}/nowhere'", "debounce",
                   "max-watches",
                   f"cannot write the log file {log}: the directory {log.parent} does not "
                   "exist"):
        assert any(wanted in line for line in lines), (wanted, lines)
    assert lines[-1] == f"filewatcher: {path}: 5 problem(s)"


def test_newswatcher_check_says_every_problem(tmp_path):
    path = tmp_path / "nw.toml"
    log = tmp_path / "missing" / "nw.log"
    path.write_text('bogus = 1\n[http]\nbackoff_initial = 100\nbackoff_max = 1\n'
                    '[[feeds]]\nname = "a"\nurl = "http://example.invalid/a"\n'
                    'interval = "often"\n'
                    '[[feeds]]\nname = "b"\n'
                    '[[feeds]]\nname = "c"\nurl = "http://example.invalid/c"\n')
    out = run(NEWSWATCHER, "check", "--config", str(path), "--data-dir",
              str(tmp_path / "data"), "--log-file", str(log))
    assert out.returncode == 1
    lines = lines_of(out.stderr)
    for wanted in ("bogus", "http.backoff_max", "feeds #1, interval", "feeds #2, url",
                   f"cannot write the log file {log}"):
        assert any(wanted in line for line in lines), (wanted, lines)
    assert lines[-1] == f"newswatcher: {path}: 5 problem(s)"
    assert not (tmp_path / "data").exists()            # tried, and left as it was


# -- acting on the daemon named -----------------------------------------------------------

def test_a_config_that_is_not_toml_reaches_no_daemon(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text('data_dir = "/somewhere"\n[broken\n')
    for command, daemon, flag in ((NEWSWATCHER, "newswatcher", "--data-dir"),
                                  (FILEWATCHER, "filewatcher", "--status-file")):
        for sub in ("reload", "status"):
            out = run(command, sub, "--config", str(path))
            assert out.returncode == 1, (daemon, sub, out.stderr)
            line = one_line(out.stderr)
            if daemon == "newswatcher" and sub == "status":
                assert "not valid TOML" in line, line     # status reads the whole file
                continue
            assert f"cannot tell which {daemon} {path} configures" in line, line
            assert "not valid TOML" in line and flag in line, line


def test_filewatcher_status_of_another_config_is_not_shown(tmp_path):
    # a status file as a running filewatcher writes it (the pid: this test's own)
    ran = tmp_path / "running.toml"
    ran.write_text(f'roots = ["{tmp_path}"]\n')
    status = tmp_path / "status.json"
    status.write_text(json.dumps({
        "format": 1, "version": "0", "pid": os.getpid(), "started": time.time(),
        "updated": time.time(), "router": "elvin://127.0.0.1:1", "config": str(ran),
        "connection": "connected", "roots": [str(tmp_path)], "unreadable_roots": {},
        "unbounded": "ignore", "quench": "on", "os_watches": 0, "watches": [],
        "subscriptions": [], "counters": {}, "reload": None}))
    other = tmp_path / "other.toml"
    other.write_text(f'roots = ["{tmp_path}"]\nstatus-file = "{status}"\n')
    for sub in ("status", "reload"):
        out = run(FILEWATCHER, sub, "--config", str(other))
        assert out.returncode == 1, out.stdout
        assert f"which runs with {ran}, not {other}" in one_line(out.stderr)
    out = run(FILEWATCHER, "status", "--status-file", str(status), "--config", str(ran))
    assert out.returncode == 0, out.stderr


async def test_newswatcher_reload_of_another_config_is_refused(router_url, tmp_path):
    with FeedServer() as server:
        server.set("/a.rss", rss("A", [Item("a1", "A news")]))
        feeds = f'[[feeds]]\nname = "a"\nurl = "{server.url("/a.rss")}"\ninterval = 60\n'
        cfg = tmp_path / "nw.toml"
        cfg.write_text(feeds)
        other = tmp_path / "other.toml"
        other.write_text(feeds)
        data = tmp_path / "data"
        proc = subprocess.Popen([*NEWSWATCHER, "--config", str(cfg), "--elvin", router_url,
                                 "--data-dir", str(data)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        status = data / "status.json"

        def serial() -> int | None:
            try:
                return (json.loads(status.read_text()).get("reload") or {}).get("serial")
            except (OSError, ValueError):
                return None
        try:
            await until(lambda: serial() is not None, what="the status")
            out = await asyncio.to_thread(run, NEWSWATCHER, "reload", "--config", str(other),
                                          "--data-dir", str(data))
            assert out.returncode == 1, out.stdout
            assert f"which runs with {cfg}, not {other}" in one_line(out.stderr)
            assert serial() == 0                         # no SIGHUP reached it
            out = await asyncio.to_thread(run, NEWSWATCHER, "reload", "--config", str(cfg),
                                          "--data-dir", str(data))
            assert out.returncode == 0, out.stderr
        finally:
            proc.send_signal(signal.SIGTERM)
            await asyncio.to_thread(proc.communicate, timeout=20)


def test_newswatcher_check_finds_a_state_file_a_start_could_not_read(unprivileged,
                                                                     shared_tmp):
    data = shared_tmp / "data"
    data.mkdir()
    data.chmod(0o777)
    state = data / "state.json"
    state.write_text('{"version": 1, "feeds": {}}')
    state.chmod(0o600)                            # root's: nobody may not read it
    env = {**os.environ, "HOME": "/nonexistent", "XDG_CONFIG_HOME": "/nonexistent"}
    out = subprocess.run([*unprivileged, *NEWSWATCHER, "check", "--feed",
                          "http://example.invalid/feed", "--data-dir", str(data)],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 1, out.stdout
    assert f"newswatcher: cannot use {state}: Permission denied" in lines_of(out.stderr)


def test_a_second_filewatcher_does_not_take_over_a_status_file(tmp_path):
    # the status file of a running filewatcher (the pid: this test's own)
    status = tmp_path / "status.json"
    status.write_text(json.dumps({"format": 1, "pid": os.getpid(), "config": None}))
    out = run(FILEWATCHER, "--root", str(tmp_path), "--status-file", str(status),
              "--elvin", "elvin://127.0.0.1:1")
    assert out.returncode == 1
    assert one_line(out.stderr) == (f"filewatcher: the status file {status} is in use by "
                                    f"filewatcher pid {os.getpid()}: give each its own "
                                    "--status-file")
