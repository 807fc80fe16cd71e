"""The ``filewatcher`` command as a process: run, status, SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

from elvin_apps.filewatcher.status import StatusError, read_status

from elvin.client import connect
from tests.waiting import until


async def test_daemon_process_status_and_clean_stop(router, tmp_path):
    root = tmp_path / "root"
    (root / "www").mkdir(parents=True)
    status_file = tmp_path / "status.json"
    config = tmp_path / "fw.toml"
    config.write_text(f'roots = ["{root}"]\ndebounce = 0.05\nstatus-file = "{status_file}"\n')
    env = dict(os.environ, ELVIN_URL=router.url)
    proc = subprocess.Popen(
        [sys.executable, "-m", "elvin_apps.filewatcher", "--config", str(config),
         "--foreground", "--log-level", "debug"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        loop = asyncio.get_running_loop()

        def status():
            try:
                return read_status(str(status_file))
            except StatusError:
                return None

        await until(status, what="the status file")
        async with connect(router.url) as consumer:
            sub = await consumer.subscribe(f'begins-with(File-Path, "{root}/www/")')
            await until(lambda: (status() or {}).get("watches"), what="the watches")
            (root / "www" / "page.html").write_text("hi")
            n = await sub.get(timeout=10)
            assert (n["File-Event"], n["File-Path"]) == ("created", f"{root}/www/page.html")

            out = subprocess.run(
                [sys.executable, "-m", "elvin_apps.filewatcher", "status",
                 "--config", str(config)], capture_output=True, text=True, timeout=30)
            assert out.returncode == 0, out.stderr
            assert "running" in out.stdout
            assert f"{root}/www" in out.stdout and "recursive" in out.stdout
            assert "begins-with(File-Path" in out.stdout

        proc.send_signal(signal.SIGTERM)
        code = await loop.run_in_executor(None, proc.wait, 15)
        assert code == 0
        assert not status_file.exists()
        stderr = proc.stderr.read()
        assert "SIGTERM received" in stderr and "watching" in stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_unreachable_router_exit_code(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "elvin_apps.filewatcher", "--root", str(tmp_path),
         "--elvin", "elvin://127.0.0.1:1", "--status-file", str(tmp_path / "s.json")],
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "cannot reach the router" in out.stderr
    out = subprocess.run([sys.executable, "-m", "elvin_apps.filewatcher", "--root",
                          str(tmp_path / "missing")], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 1
    assert out.stderr.strip() == f"filewatcher: command line: roots: " \
        f"'{tmp_path / 'missing'}': No such file or directory"


async def test_daemon_at_a_router_without_quench_runs_and_says_so(tmp_path):
    """The issue's case: ``filewatcher --root DIR`` at ``elvind --no-quench``
    used to exit 3 with a traceback; now it watches the roots and says so."""
    from .process_util import ELVIND, free_port, stop, wait_listening

    port = free_port()
    router = subprocess.Popen([*ELVIND, "--no-quench", "--listen", f"elvin://127.0.0.1:{port}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    status_file = tmp_path / "status.json"
    proc = None
    try:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, wait_listening, port, router)
        proc = subprocess.Popen(
            [sys.executable, "-m", "elvin_apps.filewatcher", "--root", str(tmp_path),
             "--elvin", f"elvin://127.0.0.1:{port}", "--status-file", str(status_file)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def status():
            try:
                return read_status(str(status_file))
            except StatusError:
                return None

        data = await until(status, what="the status file")
        assert data["quench"] == "off"
        out = subprocess.run(
            [sys.executable, "-m", "elvin_apps.filewatcher", "status", "--status-file",
             str(status_file)], capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        assert "router has no quench: announcing everything under the roots" in out.stdout
        proc.send_signal(signal.SIGTERM)
        assert await loop.run_in_executor(None, proc.wait, 15) == 0
        stderr = proc.stderr.read()
        assert "Traceback" not in stderr
        assert stderr.count("router has no quench") == 1, stderr
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        stop(router)
