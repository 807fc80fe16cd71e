"""``elvind`` as an admin runs it (issue 32): errors at start in one line,
``--check-config``, SIGHUP reloads with a verdict, log rotation, ``elvind
status``, the metrics endpoint, systemd notification, ``include``."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from elvin.federation.config import ConnectSpec, FederationConfig
from elvin.protocol import NotifyDeliver
from elvin.router.config import ConfigError, load_config
from tests.waiting import until, wait_until

from .process_util import ELVIND, free_port, stop, wait_listening
from .rawclient import RawClient


def run(args, prefix=(), **kwargs) -> subprocess.CompletedProcess:
    command = ELVIND if args[0] not in ("status", "reload") else ELVIND[:3]
    return subprocess.run([*prefix, *command, *args], capture_output=True, text=True,
                          timeout=60, **kwargs)


def one_clean_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.fixture
def elvind_proc():
    procs = []

    def start(*args: str, env=None) -> subprocess.Popen:
        proc = subprocess.Popen([*ELVIND, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            stop(proc)
        proc.communicate()


# -- errors at start -------------------------------------------------------------------

def test_unreadable_tls_key_is_one_line_exit_1(unprivileged, private_dir):
    key = private_dir / "elvind.key"
    key.write_text("not a key")
    cert = private_dir.parent / "cert.pem"
    cert.write_text("not a cert")
    cert.chmod(0o644)
    result = run(["--listen", "elvin:4.0/ssl,none,xdr/127.0.0.1:0", "--tls-cert", str(cert),
                  "--tls-key", str(key)], prefix=unprivileged)
    line = one_clean_line(result.stderr)
    assert result.returncode == 1
    assert str(key) in line and "Permission denied" in line


def test_archive_inside_a_private_directory_is_one_line(unprivileged, private_dir):
    archive = private_dir / "archive"
    result = run(["--listen", "elvin://127.0.0.1:0", "--archive", str(archive)],
                 prefix=unprivileged)
    line = one_clean_line(result.stderr)
    assert str(archive) in line and "Permission denied" in line
    assert result.returncode == 1        # a path the admin must fix: not restarted


def test_unwritable_log_and_status_files_are_one_line(unprivileged, private_dir):
    for flag in ("--log-file", "--status-file"):
        path = private_dir / "x"
        result = run(["--listen", "elvin://127.0.0.1:0", flag, str(path)],
                     prefix=unprivileged)
        assert result.returncode == 1, result.stderr
        assert "Traceback" not in result.stderr
        assert f"{path}: Permission denied" in result.stderr.splitlines()[-1]


def test_bad_listen_uri_in_a_file_names_its_line(tmp_path):
    path = tmp_path / "r.toml"
    path.write_text('# router\n\nlisten = ["elvin://127.0.0.1:1", "tcp://x"]\n')
    with pytest.raises(ConfigError, match=r"r.toml, line 3: listen #2: bad listen URI"):
        load_config(path)


def test_packet_max_length_below_the_minimum_is_refused(tmp_path):
    path = tmp_path / "r.toml"
    path.write_text('[options]\n"Packet.Max-Length" = 100\n')
    with pytest.raises(ConfigError, match=r"line 2: Packet.Max-Length: 100 is out of range "
                                          r"\(the router allows 1024 to"):
        load_config(path)


# -- --check-config -----------------------------------------------------------------------

def test_check_config_says_ok_without_binding(tmp_path):
    with socket.socket() as taken:         # the port is in use: a start would fail
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        path = tmp_path / "r.toml"
        path.write_text(f'listen = "elvin://127.0.0.1:{port}"\nlog-file = "{tmp_path}/r.log"\n'
                        f'status-file = "{tmp_path}/st.json"\n')
        result = run(["--config", str(path), "--check-config"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"elvind: {path}: ok"
    assert not (tmp_path / "r.log").exists() and not (tmp_path / "st.json").exists()


def test_check_config_lists_every_problem(tmp_path):
    path = tmp_path / "r.toml"
    path.write_text('listen = "tcp://x"\nstats-interval = -1\nbogus = 1\n'
                    '[options]\n"Packet.Max-Length" = 100\n')
    result = run(["--config", str(path), "--check-config"])
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    for expected in ("line 3: unknown setting 'bogus'", "line 5: Packet.Max-Length",
                     "bad listen URI", "stats-interval must be positive", "4 problem(s)"):
        assert expected in result.stderr, result.stderr


def test_check_config_finds_what_only_a_start_would(unprivileged, private_dir):
    result = run(["--listen", "elvin://127.0.0.1:0", "--log-file", str(private_dir / "l"),
                  "--check-config"], prefix=unprivileged)
    assert result.returncode == 1
    assert f"cannot write the log file {private_dir / 'l'}: Permission denied" in result.stderr


def test_include_reads_fragments_in_order(tmp_path):
    conf_d = tmp_path / "conf.d"
    conf_d.mkdir()
    (conf_d / "20-fed.toml").write_text('[federation]\nrouter_domain = "hub"\n'
                                        'listen = "ewaf://127.0.0.1:0"\n')
    (conf_d / "10-level.toml").write_text('log-level = "debug"\n')
    (conf_d / "notes.txt").write_text("not read")
    main = tmp_path / "elvind.toml"
    main.write_text('log-level = "warning"\ninclude = ["conf.d/*.toml"]\n')
    config = load_config(main)
    assert config.log_level == "debug"
    assert config.federation.router_domain == "hub"
    assert config.sources == [str(main), str(conf_d / "10-level.toml"),
                              str(conf_d / "20-fed.toml")]
    (conf_d / "30-bad.toml").write_text('\n\nbogus = 1\n')
    with pytest.raises(ConfigError, match=r"30-bad.toml, line 3: unknown setting 'bogus'"):
        load_config(main)
    main.write_text('include = "missing.toml"\n')
    with pytest.raises(ConfigError, match="missing.toml: no such file"):
        load_config(main)
    main.write_text('include = "elvind.toml"\n')
    with pytest.raises(ConfigError, match="includes itself"):
        load_config(main)


# -- the running router ---------------------------------------------------------------------

def _wait_for_status(path: Path, predicate=lambda data: True) -> dict:
    def ready():
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return data if predicate(data) else None
    return wait_until(ready, timeout=20, what=f"the status in {path}")


def test_reload_applies_what_can_change_and_says_what_needs_a_restart(elvind_proc, tmp_path):
    port = free_port()
    status = tmp_path / "st.json"
    log_file = tmp_path / "r.log"
    path = tmp_path / "r.toml"
    base = (f'listen = "elvin://127.0.0.1:{port}"\nlog-file = "{log_file}"\n'
            f'status-file = "{status}"\ndiscovery = false\n')
    path.write_text(base)
    proc = elvind_proc("--config", str(path))
    wait_listening(port, proc)
    _wait_for_status(status)

    def reload() -> subprocess.CompletedProcess:
        return run(["reload", "--config", str(path)])

    result = reload()
    assert result.returncode == 0, result.stderr
    assert "reloaded: no changes" in result.stdout
    # the log level, the statistics interval and the option limits change live;
    # a new listen URI is named as needing a restart
    path.write_text(base.replace(f"127.0.0.1:{port}", f"127.0.0.1:{port + 1}")
                    + 'log-level = "debug"\nstats-interval = 1\n'
                    '[options]\n"Packet.Max-Length" = 65536\n')
    result = reload()
    assert result.returncode == 0, result.stderr
    assert "log-level (info -> debug)" in result.stdout
    assert "stats-interval (5 -> 1)" in result.stdout
    assert "[options] Packet.Max-Length (2097152 -> 65536) (for new connections)" \
        in result.stdout
    assert "needs a restart: listen" in result.stdout
    # a broken file: refused, exit 1, the router keeps running as it was
    path.write_text(base + "bogus = 1\n")
    result = reload()
    assert result.returncode == 1
    assert "refused the new configuration" in result.stderr
    assert f"{path}, line 5: unknown setting 'bogus'" in result.stderr
    text = log_file.read_text()
    assert "reload refused, keeping the running configuration" in text
    assert "federation" not in text          # no [federation] table: not mentioned
    wait_listening(port, proc)


def test_the_log_file_is_reopened_after_rotation(elvind_proc, tmp_path):
    port = free_port()
    log_file = tmp_path / "r.log"
    proc = elvind_proc("--listen", f"elvin://127.0.0.1:{port}", "--log-file", str(log_file),
                       "--status-file", str(tmp_path / "st.json"))
    wait_listening(port, proc)
    for sig, name in ((signal.SIGUSR1, "SIGUSR1"), (signal.SIGHUP, "SIGHUP")):
        rotated = log_file.with_suffix(f".{name}")
        log_file.rename(rotated)
        proc.send_signal(sig)
        said = f"{name} received"
        wait_until(lambda said=said: log_file.exists() and said in log_file.read_text(),
                   what=f"a new log file after {name}")
        assert f"{name} received" not in rotated.read_text()


def test_status_shows_federation_links_and_their_last_error(elvind_proc, tmp_path):
    port, dead = free_port(), free_port()
    status = tmp_path / "st.json"
    path = tmp_path / "r.toml"
    path.write_text(f'listen = "elvin://127.0.0.1:{port}"\nstatus-file = "{status}"\n'
                    'discovery = false\n[federation]\nrouter_domain = "a"\n'
                    'reconnect_min = 0.05\nreconnect_max = 0.2\n'
                    f'[[federation.connect]]\nrouter = "b"\nurl = "ewaf://127.0.0.1:{dead}"\n')
    proc = elvind_proc("--config", str(path))
    wait_listening(port, proc)
    _wait_for_status(status, lambda d: d["federation"]["links"][0]["failed_dials"] > 0)
    result = run(["status", "--config", str(path)])
    assert result.returncode == 0, result.stderr
    assert f"connect  b  ewaf://127.0.0.1:{dead}  DOWN" in result.stdout
    assert "last error: Connection refused" in result.stdout
    assert "mobility: off" in result.stdout and "archive: off" in result.stdout
    data = json.loads(run(["status", "--status-file", str(status), "--json"]).stdout)
    assert data["running"] and data["listen"] == [f"elvin://127.0.0.1:{port}"]
    stop(proc)
    assert not status.exists()               # removed at a clean stop
    result = run(["status", "--status-file", str(status)])
    assert result.returncode == 3 and "is elvind running?" in result.stderr


def test_metrics_are_scraped_in_the_prometheus_format(elvind_proc, tmp_path):
    from prometheus_client.parser import text_string_to_metric_families

    port, metrics_port = free_port(), free_port()
    proc = elvind_proc("--listen", f"elvin://127.0.0.1:{port}", "--metrics",
                       f"127.0.0.1:{metrics_port}", "--status-file", str(tmp_path / "s.json"))
    wait_listening(port, proc)

    async def one_subscriber():
        client = await RawClient.connected(port)
        await client.subscribe("require(X)")
        return client

    import asyncio
    loop = asyncio.new_event_loop()
    try:
        client = loop.run_until_complete(one_subscriber())
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics",
                                    timeout=10) as reply:
            assert reply.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = reply.read().decode()
        loop.run_until_complete(client.close())
    finally:
        loop.close()
    samples = {s.name: s.value for family in text_string_to_metric_families(text)
               for s in family.samples}
    assert samples["elvind_up"] == 1
    assert samples["elvind_connections"] == 1 and samples["elvind_subscriptions"] == 1
    assert samples["elvind_connections_accepted_total"] == 1
    assert samples["elvind_archive_up"] == 0
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/nothing", timeout=10)
    assert info.value.code == 404
    with socket.create_connection(("127.0.0.1", metrics_port), timeout=10) as garbage:
        garbage.sendall(b"\x00\xff garbage\r\n\r\n")
        assert garbage.recv(100).startswith(b"HTTP/1.0 400")
    wait_listening(port, proc)               # garbage did not hurt the router


def test_a_taken_metrics_port_is_one_line_exit_3():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run(["--listen", "elvin://127.0.0.1:0", "--metrics", f"127.0.0.1:{port}",
                      "--status-file", os.devnull + ".x"])
    assert result.returncode == 3
    assert f"cannot listen for metrics on 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr


def test_systemd_hears_ready_reloading_and_stopping(elvind_proc, tmp_path):
    notify_path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(notify_path))
        sock.settimeout(20)
        port = free_port()
        env = {**os.environ, "NOTIFY_SOCKET": str(notify_path)}
        proc = elvind_proc("--listen", f"elvin://127.0.0.1:{port}", "--status-file",
                           str(tmp_path / "st.json"), env=env)

        def next_message() -> str:
            return sock.recv(4096).decode()
        ready = next_message()
        assert ready.startswith("READY=1\nSTATUS=elvind") and f"127.0.0.1:{port}" in ready
        proc.send_signal(signal.SIGHUP)
        reloading = next_message()
        assert reloading.startswith("RELOADING=1\nMONOTONIC_USEC=")
        assert next_message().startswith("READY=1\nSTATUS=reloaded")
        proc.send_signal(signal.SIGTERM)
        assert next_message().startswith("STOPPING=1")
        assert proc.wait(20) == 0


def test_listening_is_said_once(elvind_proc):
    port = free_port()
    proc = elvind_proc("--listen", f"elvin://127.0.0.1:{port}", "--status-file", os.devnull
                       + ".y", "--log-level", "info")
    wait_listening(port, proc)
    stop(proc)
    _out, err = proc.communicate()
    assert sum("listening on" in line for line in err.splitlines()) == 1, err


# -- statistics -------------------------------------------------------------------------------

async def test_stats_count_clients_not_themselves(make_router):
    router = make_router(stats_interval=0.1)
    client = await RawClient.connected(router.port)
    await client.subscribe("require(Elvin-Router-Stats)")
    for _ in range(3):
        attrs = (await client.expect(NotifyDeliver, timeout=5)).attributes
        assert attrs["Notifications-Out"] == 0 and attrs["Notifications-In"] == 0
    await client.close()


async def test_stats_publish_federation_links_and_failed_redials(make_router):
    dead = free_port()
    fed = FederationConfig(router_domain="a", reconnect_min=0.05, reconnect_max=0.1,
                           connect=[ConnectSpec(f"ewaf://127.0.0.1:{dead}", router="b")])
    router = make_router(stats_interval=0.1, federation=fed)
    client = await RawClient.connected(router.port)
    await client.subscribe("require(Elvin-Router-Stats)")
    while True:
        attrs = (await client.expect(NotifyDeliver, timeout=5)).attributes
        if attrs["Federation-Redials-Failed"] >= 2:
            break
    assert attrs["Federation-Links"] == 1 and attrs["Federation-Links-Up"] == 0
    assert attrs["Federation-Links-Down"] == "b: Connection refused"
    await client.close()


def test_client_connects_are_logged_then_summed_up(caplog):
    import asyncio

    from elvin.router.connlog import ConnectionLog

    class Fake:
        listener = "elvin://127.0.0.1:2917"

        def __init__(self, n):
            self.peer = ("10.0.0.1", 1000 + n)

    def lines() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == "elvin.router.clients"]

    async def scenario():
        # a window of 2 s: a stall of the machine between two of these calls
        # must not end it early (at 0.2 s one did, under load, and a fourth
        # connect was logged in a window of its own)
        connlog = ConnectionLog(asyncio.get_running_loop(), window=2.0, burst=3)
        clients = [Fake(n) for n in range(10)]
        for c in clients:
            connlog.connected(c)
        for c in clients:
            connlog.disconnected(c)
        await until(lambda: len(lines()) == 4, timeout=60,
                    what="the summary when the window ends")
        connlog.close()

    caplog.set_level("INFO", logger="elvin.router.clients")
    asyncio.run(scenario())
    lines = lines()
    assert lines[:3] == [f"client 10.0.0.1:{1000 + n} connected on elvin://127.0.0.1:2917"
                         for n in range(3)]
    assert len(lines) == 4, lines
    assert lines[3].startswith("... and 7 more client connects, 10 more disconnects in the "
                               "last")


if sys.platform != "linux":  # pragma: no cover
    pytestmark = pytest.mark.skip("systemd and /proc are Linux's")


async def test_client_connects_are_logged_at_info(make_router, caplog):
    caplog.set_level("INFO", logger="elvin.router.clients")
    router = make_router()
    client = await RawClient.connected(router.port)
    await client.close()

    def said() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == "elvin.router.clients"]
    await until(lambda: len(said()) == 2, what="the connect and disconnect lines")
    assert said()[0].startswith("client 127.0.0.1:") and " connected on " in said()[0]
    assert " disconnected after " in said()[1]


def test_reload_opens_moves_and_closes_the_archive(make_router, tmp_path):
    import argparse
    import asyncio

    from elvin.router.cli import reload_router

    pytest.importorskip("pyarrow")
    router = make_router()
    path = tmp_path / "r.toml"
    args = argparse.Namespace(config=str(path))

    def reload(text: str) -> tuple[bool, str]:
        path.write_text(f'listen = "{router.url}"\ndiscovery = false\n{text}')
        return asyncio.run_coroutine_threadsafe(
            reload_router(router.router, args, set_logging=lambda *a: None),
            router.loop).result(60)

    ok, message = reload(f'archive = "{tmp_path / "a1"}"\n')
    assert ok and f"archive (off -> {tmp_path / 'a1'})" in message, message
    assert router.call(lambda: str(router.router.archive.directory)) == str(tmp_path / "a1")
    ok, message = reload(f'archive = "{tmp_path / "a2"}"\n')
    assert ok and router.call(lambda: str(router.router.archive.directory)) == \
        str(tmp_path / "a2")
    blocker = tmp_path / "file"
    blocker.write_text("")
    ok, message = reload(f'archive = "{blocker / "a3"}"\n')
    assert not ok and "FAILED archive: cannot create archive directory" in message
    assert router.call(lambda: router.router.archive) is None      # said, and off
    ok, message = reload("")
    assert ok and router.call(lambda: router.router.archive) is None


def test_a_full_disk_under_the_log_is_said_once(elvind_proc, tmp_path):
    """/dev/full answers every write with ENOSPC, as a full disk does."""
    port = free_port()
    proc = elvind_proc("--listen", f"elvin://127.0.0.1:{port}", "--log-file", "/dev/full",
                       "--status-file", str(tmp_path / "st.json"), "--log-level", "debug")
    wait_listening(port, proc)
    for _ in range(3):                        # more records that cannot be written
        socket.create_connection(("127.0.0.1", port), timeout=10).close()
    stop(proc)
    _out, err = proc.communicate()
    assert proc.returncode == 0
    assert "Traceback" not in err and "Logging error" not in err
    assert err.count("elvind: cannot write the log file /dev/full: No space left on device") == 1
