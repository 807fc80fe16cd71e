"""The filewatcher and the newswatcher as an admin runs them (issue 32): as an
unprivileged user, with SIGHUP, log rotation, ``check`` and ``reload``."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from elvin_apps.filewatcher.watches import inotify_watch_count

from elvin.client import connect
from tests.feedserver import FeedServer, Item, rss
from tests.waiting import until

FILEWATCHER = [sys.executable, "-m", "elvin_apps.filewatcher"]
NEWSWATCHER = [sys.executable, "-m", "elvin_apps.newswatcher"]


def run(command, *args, prefix=(), env=None) -> subprocess.CompletedProcess:
    if prefix and env is None:
        # nobody has no home of its own: no default config file to find
        env = {**os.environ, "HOME": "/nonexistent", "XDG_CONFIG_HOME": "/nonexistent"}
    return subprocess.run([*prefix, *command, *args], capture_output=True, text=True,
                          timeout=60, env=env)


def status_of(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def writable_by_all(path: Path) -> Path:
    path.mkdir(exist_ok=True)
    path.chmod(0o777)
    return path


# -- the filewatcher ---------------------------------------------------------------------

def start_filewatcher(prefix, root: Path, router, shared_tmp: Path):
    """The filewatcher as ``prefix`` runs it, watching ``root``; (process,
    its state directory, its status file)."""
    state = writable_by_all(shared_tmp / "state")
    status_file = state / "status.json"
    proc = subprocess.Popen(
        [*prefix, *FILEWATCHER, "--root", str(root), "--elvin", router.url,
         "--status-file", str(status_file), "--log-file", str(state / "fw.log")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, state, status_file


async def test_an_unreadable_watch_target_is_a_warning_and_not_watched(
        router, shared_tmp, unprivileged):
    root = shared_tmp / "fw"
    secret = root / "secret"
    secret.mkdir(parents=True)
    secret.chmod(0o700)                     # root's: nobody may not read it
    proc, state, status_file = start_filewatcher(unprivileged, root, router, shared_tmp)
    try:
        await until(lambda: status_of(status_file), what="the status file")
        async with connect(router.url) as consumer:
            await consumer.subscribe(f'begins-with(File-Path, "{secret}/")')
            watch = await until(lambda: (status_of(status_file) or {}).get("watches"),
                                what="the planned watch")
            assert watch[0]["backend"] == "failed"
            assert watch[0]["error"] == "cannot watch: Permission denied"
            assert inotify_watch_count(proc.pid) == 0      # none claimed, none held
            out = run(FILEWATCHER, "status", "--status-file", str(status_file))
            assert "NOT WATCHED [cannot watch: Permission denied]" in out.stdout
            assert "OS watches: 0 in 0 watched directories; 1 NOT WATCHED" in out.stdout
            log_text = (state / "fw.log").read_text()
            assert (f"WARNING elvin_apps.filewatcher.watches: cannot watch {secret} "
                    "(recursive): Permission denied") in log_text
            assert f"watching {secret}" not in log_text
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.to_thread(proc.communicate, timeout=20)
    assert proc.returncode == 0


async def test_an_unreadable_directory_inside_a_watched_tree_is_named(
        router, shared_tmp, unprivileged):
    root = shared_tmp / "fw"
    (root / "www").mkdir(parents=True)
    secret = root / "www" / "secret"
    secret.mkdir()
    secret.chmod(0o700)
    proc, state, status_file = start_filewatcher(unprivileged, root, router, shared_tmp)
    try:
        await until(lambda: status_of(status_file), what="the status file")
        async with connect(router.url) as consumer:
            sub = await consumer.subscribe(f'begins-with(File-Path, "{root}/www/")')
            watch = await until(lambda: (status_of(status_file) or {}).get("watches"),
                                what="the planned watch")
            assert watch[0]["backend"] == "inotify"
            assert watch[0]["unreadable"] == [str(secret)]
            assert inotify_watch_count(proc.pid) == 1        # www itself, not secret
            out = run(FILEWATCHER, "status", "--status-file", str(status_file))
            assert f"[not readable inside: {secret}]" in out.stdout
            assert (f"cannot watch {secret} (inside the watched {root}/www): Permission "
                    "denied; changes there are not seen") in (state / "fw.log").read_text()
            (root / "www" / "page.html").write_text("still announced")
            note = await sub.get(timeout=15)
            assert note["File-Path"] == f"{root}/www/page.html"
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.to_thread(proc.communicate, timeout=20)
    assert proc.returncode == 0


async def test_filewatcher_sighup_reloads_and_reopens_the_log(router, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    status_file = tmp_path / "status.json"
    log_file = tmp_path / "fw.log"
    config = tmp_path / "fw.toml"
    base = f'elvin = "{router.url}"\nstatus-file = "{status_file}"\nlog-file = "{log_file}"\n'
    config.write_text(base + f'roots = ["{a}"]\n')
    proc = subprocess.Popen([*FILEWATCHER, "--config", str(config)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        await until(lambda: status_of(status_file), what="the status file")
        config.write_text(base + f'roots = ["{a}", "{b}"]\ndebounce = 0.2\n')
        log_file.rename(tmp_path / "fw.log.1")      # logrotate, then postrotate's kill -HUP
        out = await asyncio.to_thread(run, FILEWATCHER, "reload", "--config", str(config))
        assert out.returncode == 0, out.stderr
        assert "reloaded: applied" in out.stdout
        assert f"roots ({a} -> {a}, {b})" in out.stdout and "debounce (0.1 -> 0.2)" in out.stdout
        assert status_of(status_file)["roots"] == [str(a), str(b)]
        assert "SIGHUP received" in log_file.read_text()      # a new file, after the move
        # a broken file is refused, and the daemon carries on as it was
        config.write_text(base + 'roots = "/tmp"\n')
        out = await asyncio.to_thread(run, FILEWATCHER, "reload", "--config", str(config))
        assert out.returncode == 1
        assert "refused the new configuration" in out.stderr
        assert "line 4: roots must be a list of directory paths" in out.stderr
        assert proc.poll() is None
        # SIGUSR1 reopens the log only
        log_file.rename(tmp_path / "fw.log.2")
        proc.send_signal(signal.SIGUSR1)
        await until(lambda: log_file.exists() and "SIGUSR1 received" in log_file.read_text(),
                    what="the log reopened after SIGUSR1")
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.to_thread(proc.communicate, timeout=20)
    assert proc.returncode == 0          # SIGHUP did not kill it


def test_filewatcher_check(tmp_path, shared_tmp, private_dir, unprivileged):
    root = tmp_path / "r"
    root.mkdir()
    good = tmp_path / "fw.toml"
    good.write_text(f'roots = ["{root}"]\nstatus-file = "{tmp_path}/s.json"\n')
    out = run(FILEWATCHER, "check", "--config", str(good))
    assert out.returncode == 0 and out.stdout.strip() == f"filewatcher: {good}: ok"
    assert not (tmp_path / "s.json").exists()
    out = run(FILEWATCHER, "check", "--root", str(root), "--debounce", "-1")
    assert out.returncode == 1 and "debounce" in out.stderr
    # as nobody: a root it cannot read is a warning; a status file it cannot write, an error
    open_root = shared_tmp / "open"
    open_root.mkdir()
    out = run(FILEWATCHER, "check", "--root", str(private_dir), "--root", str(open_root),
              "--status-file", str(private_dir / "s.json"), prefix=unprivileged)
    assert out.returncode == 1
    assert f"warning: root {private_dir} is not readable (Permission denied)" in out.stderr
    assert f"cannot write the status file {private_dir / 's.json'}: Permission denied" \
        in out.stderr
    assert "Traceback" not in out.stderr


def test_filewatcher_status_file_it_cannot_write_is_one_line(shared_tmp, private_dir,
                                                            unprivileged):
    root = shared_tmp / "root"
    root.mkdir()
    out = run(FILEWATCHER, "--root", str(root), "--elvin", "elvin://127.0.0.1:1",
              "--status-file", str(private_dir / "status.json"), prefix=unprivileged)
    assert out.returncode == 1
    assert out.stderr.strip() == (f"filewatcher: cannot write the status file "
                                  f"{private_dir / 'status.json'}: Permission denied")


# -- the newswatcher -----------------------------------------------------------------------

def test_newswatcher_data_dir_it_cannot_use_is_not_blamed_on_another(shared_tmp, private_dir,
                                                                     unprivileged):
    feed = shared_tmp / "feed.xml"
    feed.write_text(rss("F", [Item("1", "one")]))
    feed.chmod(0o644)
    out = run(NEWSWATCHER, "--feed", str(feed), "--elvin", "elvin://127.0.0.1:1",
              "--data-dir", str(private_dir / "data"), prefix=unprivileged)
    assert out.returncode == 1          # a directory to fix: systemd does not restart it
    assert out.stderr.strip() == (f"newswatcher: cannot use the data directory "
                                  f"{private_dir / 'data'}: Permission denied")
    check = run(NEWSWATCHER, "check", "--feed", str(feed), "--data-dir",
                str(private_dir / "data"), prefix=unprivileged)
    assert check.returncode == 1 and "Permission denied" in check.stderr
    check = run(NEWSWATCHER, "check", "--feed", str(feed), "--data-dir",
                str(shared_tmp / "data"))
    assert check.returncode == 0 and check.stdout.strip().endswith("ok (1 feed(s))")
    assert not (shared_tmp / "data").exists()


def test_newswatcher_state_file_it_cannot_read_is_kept_and_said(router, shared_tmp,
                                                               unprivileged):
    feed = shared_tmp / "feed.xml"
    feed.write_text(rss("F", [Item("1", "one")]))
    feed.chmod(0o644)
    data = writable_by_all(shared_tmp / "data")
    state = data / "state.json"
    state.write_text('{"version": 1, "feeds": {}}')
    state.chmod(0o600)                       # root's: nobody may not read it
    out = run(NEWSWATCHER, "--feed", str(feed), "--elvin", router.url, "--data-dir",
              str(data), prefix=unprivileged)
    assert out.returncode == 1, out.stderr
    assert out.stderr.strip() == f"newswatcher: cannot use {state}: Permission denied"
    assert state.exists() and not (data / "state.json.corrupt").exists()   # not set aside


async def test_newswatcher_reload_reports_the_verdict(router_url, tmp_path):
    with FeedServer() as server:
        server.set("/a.rss", rss("A", [Item("a1", "A news")]))
        cfg = tmp_path / "nw.toml"
        good = f'[[feeds]]\nname = "a"\nurl = "{server.url("/a.rss")}"\ninterval = 60\n'
        cfg.write_text(good)
        data = tmp_path / "data"
        proc = subprocess.Popen([*NEWSWATCHER, "--config", str(cfg), "--elvin", router_url,
                                 "--data-dir", str(data)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            await until(lambda: status_of(data / "status.json"), what="the status")
            cfg.write_text(good + 'interval = "often"\n')
            out = await asyncio.to_thread(run, NEWSWATCHER, "reload", "--config", str(cfg),
                                          "--data-dir", str(data))
            assert out.returncode == 1, out.stdout
            assert "refused the new configuration" in out.stderr
            assert str(cfg) in out.stderr
            cfg.write_text(good.replace("interval = 60", "interval = 30"))
            out = await asyncio.to_thread(run, NEWSWATCHER, "reload", "--config", str(cfg),
                                          "--data-dir", str(data))
            assert out.returncode == 0, out.stderr
            assert "reloaded: applied feed a changed" in out.stdout
        finally:
            proc.send_signal(signal.SIGTERM)
            await asyncio.to_thread(proc.communicate, timeout=20)
        assert proc.returncode == 0


# -- systemd ------------------------------------------------------------------------------

def test_the_daemons_tell_systemd_they_are_ready(router, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    feed = tmp_path / "feed.xml"
    feed.write_text(rss("F", [Item("1", "one")]))
    notify = tmp_path / "notify"
    commands = {
        "filewatcher": [*FILEWATCHER, "--root", str(root), "--elvin", router.url,
                        "--status-file", str(tmp_path / "fw.json")],
        "newswatcher": [*NEWSWATCHER, "--feed", str(feed), "--elvin", router.url,
                        "--data-dir", str(tmp_path / "nw")],
    }
    for name, command in commands.items():
        path = notify.with_suffix(f".{name}")
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.bind(str(path))
            sock.settimeout(30)
            proc = subprocess.Popen(command, env={**os.environ, "NOTIFY_SOCKET": str(path)},
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                assert sock.recv(4096).decode().startswith(f"READY=1\nSTATUS={name}")
                proc.send_signal(signal.SIGTERM)
                assert sock.recv(4096).decode().startswith("STOPPING=1")
            finally:
                proc.communicate(timeout=20)
        assert proc.returncode == 0, name
