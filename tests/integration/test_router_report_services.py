"""The status file and the metrics endpoint are services of the router
(``elvin.router.status_service``, ``metrics_service``; issue 46): a router
given elvind's ``DaemonReport`` registers the metrics first and the status
file last, starts both with the router and stops both once it has stopped
(the status file goes); a router without one has neither, as before."""

from __future__ import annotations

import asyncio
import json
import os
import urllib.request

import pytest

from elvin.errors import RouterStartError
from elvin.router.config import RouterConfig
from elvin.router.server import Router
from elvin.router.services import StartPoint, StopPoint
from elvin.router.status_service import DaemonReport

from .process_util import free_port


def _config(tmp_path, metrics_port: int) -> RouterConfig:
    return RouterConfig(listen=[f"elvin://127.0.0.1:{free_port()}"],
                        status_file=str(tmp_path / "status.json"),
                        metrics=f"127.0.0.1:{metrics_port}")


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return reply.read().decode()


async def test_the_status_file_and_the_metrics_are_the_routers_services(tmp_path):
    reloads = [{"ok": True, "message": "no changes"}]
    router = Router(_config(tmp_path, free_port()),
                    DaemonReport("9.9", "/etc/elvind.toml", lambda: reloads[-1]))
    names = [service.name for service in router.services]
    # the state directory's lock first (one router per directory), then the
    # metrics (an address it cannot have stops the start before the rest)
    assert names[:2] == ["state directory", "metrics"] and names[-1] == "status file"
    assert router.services["metrics"].starts is StartPoint.BEFORE_LISTENING
    assert router.services["status file"].stops is StopPoint.STOPPED
    await router.start()
    try:
        status = json.loads((tmp_path / "status.json").read_text())
        metrics_url = router.metrics_service.url
        assert status["pid"] == os.getpid() and status["version"] == "9.9"
        assert status["metrics"] == metrics_url and status["reload"] == reloads[-1]
        assert status["listen"] == router.urls
        text = await asyncio.to_thread(_get, metrics_url)
        assert "elvind_connections" in text
        reloads.append({"ok": False, "message": "refused"})
        router.status_service.changed()            # a reload's verdict, at once
        status = json.loads((tmp_path / "status.json").read_text())
        assert status["reload"] == {"ok": False, "message": "refused"}
    finally:
        await router.stop()
    assert not (tmp_path / "status.json").exists()          # gone once stopped
    assert router.metrics_service.url is None
    with pytest.raises(OSError):
        await asyncio.to_thread(_get, metrics_url)
    router.status_service.changed()                 # a late reload writes nothing
    assert not (tmp_path / "status.json").exists()


async def test_a_metrics_address_in_use_stops_the_start_before_listening(tmp_path):
    taken = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    try:
        port = taken.sockets[0].getsockname()[1]
        config = _config(tmp_path, port)
        router = Router(config, DaemonReport())
        with pytest.raises(RouterStartError, match=f"cannot listen for metrics on 127.0.0.1:{port}"):
            await router.start()
        assert router.urls == [] and not (tmp_path / "status.json").exists()
    finally:
        taken.close()
        await taken.wait_closed()


async def test_a_router_without_a_daemon_report_has_neither(tmp_path):
    router = Router(_config(tmp_path, free_port()))
    assert router.metrics_service is None and router.status_service is None
    assert {"metrics", "status file"}.isdisjoint(s.name for s in router.services)
    await router.start()
    try:
        assert not (tmp_path / "status.json").exists()
    finally:
        await router.stop()
