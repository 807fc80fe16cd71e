"""A reload goes through the parts of the router: each reloadable setting is
applied by exactly one of them (elvin.router.reload, elvin.router.services)."""

import asyncio

import pytest

from elvin.router.config import RELOADABLE, RouterConfig
from elvin.router.core_settings import LiveSettings
from elvin.router.reload import ORDER, apply_config, reload_parts
from elvin.router.server import Router
from elvin.router.services import ServiceRegistry


def _no_logging(level: str, file: str | None) -> None:
    pass


def test_every_reloadable_setting_has_exactly_one_part() -> None:
    parts = reload_parts(Router(RouterConfig()), _no_logging)
    owners: dict[str, list[str]] = {}
    for part in parts:
        for name in part.reloads:
            owners.setdefault(name, []).append(part.name)
    assert {name: found for name, found in owners.items() if len(found) != 1} == {}
    assert set(owners) == set(RELOADABLE)
    # the parts that reload something are called in the declared order
    named = [part.name for part in parts if part.reloads]
    assert named == [name for name in ORDER if name in named]


def test_a_second_part_cannot_claim_a_setting() -> None:
    services = ServiceRegistry()
    services.register_part(LiveSettings(RouterConfig(), {"connect_timeout"}))
    with pytest.raises(ValueError, match="connect_timeout"):
        services.register_part(_Other())


class _Other(LiveSettings):
    name = "other"

    def __init__(self) -> None:
        super().__init__(RouterConfig(), {"connect_timeout", "close_timeout"})


def test_the_parts_apply_what_changed_and_the_verdict_says_it_in_order() -> None:
    router = Router(RouterConfig())
    new = RouterConfig(log_level="debug", connect_timeout=3.0, quench=False,
                       stats_interval=2.0, listen=["elvin://127.0.0.1:1"])
    switched: list[tuple[str, str | None]] = []
    ok, message = asyncio.run(apply_config(
        router, new, lambda level, file: switched.append((level, file))))
    assert ok
    assert message == ("applied log-level (info -> debug), stats-interval (5 -> 2), "
                       "connect-timeout (10 -> 3), quench (True -> False); "
                       "needs a restart: listen")
    assert switched == [("debug", None)]
    config = router.config
    assert (config.log_level, config.stats_interval, config.connect_timeout, config.quench) == \
        ("debug", 2.0, 3.0, False)
    assert config.listen != new.listen


def test_a_log_file_that_cannot_open_changes_nothing_of_the_log() -> None:
    router = Router(RouterConfig())

    def cannot(level: str, file: str | None) -> None:
        raise PermissionError(13, "Permission denied")

    ok, message = asyncio.run(apply_config(
        router, RouterConfig(log_level="debug", log_file="/x/y.log", max_connections=5), cannot))
    assert not ok
    assert "log-file '/x/y.log': cannot open: Permission denied" in message
    assert "max-connections (0 -> 5)" in message
    assert (router.config.log_level, router.config.log_file) == ("info", None)
    assert router.config.max_connections == 5
