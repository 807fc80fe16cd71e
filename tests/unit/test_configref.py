"""The configuration reference is generated from the declarations: what a
dataclass, its key table and the tool's parser say is what the docs list."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytest.importorskip("sphinx")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "docs" / "_ext"))

import configref

from elvin.config_file import number


@dataclass
class Demo:
    #: where the demo listens
    listen: list[str] = field(default_factory=lambda: ["elvin://127.0.0.1:2917"])
    log_level: str = "info"        # debug, info, warning
    interval: float = number(5.0, 0.1, 60.0)
    retries: int = 3
    path: str | None = None


def demo_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="demo")
    parser.add_argument("--interval", type=float, metavar="SECONDS",
                        help="seconds between polls (default %(default)s)", default=5.0)
    parser.add_argument("--retries", type=int, help="how often to try")
    return parser


def test_rows_come_from_the_declarations():
    rows = {r.key: r for r in configref.settings(
        Demo, dashed=True, skip=frozenset({"path"}), parser=demo_parser())}
    assert list(rows) == ["listen", "log-level", "interval", "retries"]
    assert rows["listen"].description == "where the demo listens"
    assert rows["listen"].default == '["elvin://127.0.0.1:2917"]'
    assert rows["log-level"].description == "debug, info, warning"
    assert rows["log-level"].default == '"info"'
    assert rows["interval"].range == "from 0.1 to 60"
    assert rows["interval"].flag == "--interval"
    assert rows["retries"].description == "how often to try"     # the flag's help


def test_a_key_table_restricts_and_maps():
    table = {"log-level": (str, "log_level"), "tries": (int, "retries")}
    rows = configref.settings(Demo, keys=table, dashed=True)
    assert [r.key for r in rows] == ["log-level", "tries"]


def test_every_router_key_is_in_the_reference():
    from elvin.router import config
    from elvin.router.arguments import build_parser
    rows = configref.settings(config.RouterConfig, keys=config._SCALARS, flags=config._FLAGS,
                              extra=frozenset({"listen", "options", "federation"}), dashed=True,
                              reloadable=config.RELOADABLE, parser=build_parser())
    keys = {r.key for r in rows}
    assert set(config._SCALARS) | set(config._FLAGS) | {"listen", "options", "federation"} == keys
    assert {r.key for r in rows if r.reloadable} >= {"log-level", "stats-interval"}
    listen = next(r for r in rows if r.key == "listen")
    assert listen.flag == "--listen" and listen.description     # from the parser's help
