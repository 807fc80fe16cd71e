"""The configuration reference is generated from the declarations: what a
dataclass, its key table and the tool's parser say is what the docs list."""

from __future__ import annotations

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


def test_rows_come_from_the_declarations():
    """A dataclass not declared with elvin.settings: its fields, defaults,
    ranges and comments."""
    rows = {r.key: r for r in configref.settings(Demo)}
    assert list(rows) == ["listen", "log_level", "interval", "retries", "path"]
    assert rows["listen"].description == "where the demo listens"
    assert rows["listen"].default == '["elvin://127.0.0.1:2917"]'
    assert rows["log_level"].description == "debug, info, warning"
    assert rows["log_level"].default == '"info"'
    assert rows["interval"].range == "from 0.1 to 60"
    assert rows["path"].default == "none"


def test_a_key_table_restricts():
    rows = configref.settings(Demo, keys={"log_level", "retries"}, extra=frozenset({"path"}))
    assert [r.key for r in rows] == ["log_level", "retries", "path"]


def test_a_declared_table_says_everything_itself():
    from elvin.settings import SettingsTable, setting

    @dataclass
    class Declared:
        interval: float = setting(5.0, low=0.1, high=60, flag="--interval",
                                  help="seconds between polls (default {default})")
        name: str = setting(default_factory=lambda: "x", shown_default="the host's",
                            section="more", help="a name")

    table = SettingsTable(Declared, {"more": "more settings"})
    rows = configref.declared(table)
    assert [(r.key, r.type, r.default, r.range, r.flag, r.section) for r in rows] == [
        ("interval", "number", "5", "from 0.1 to 60", "--interval", ""),
        ("name", "string", "the host's", "", "", "more")]
    assert rows[0].description == "seconds between polls (default 5)"
    assert [r.key for r in configref.declared(table, "more")] == ["name"]


def test_every_router_key_is_in_the_reference():
    """The router's reference is its settings table: every key the file
    accepts, with its flag, bounds and whether SIGHUP applies it."""
    from elvin.router import config
    rows = {r.key: r for r in configref.declared(config.SETTINGS)}
    assert set(rows) == {s.key for s in config.SETTINGS if s.in_file}
    assert {"listen", "options", "federation", "log-level", "max-partial-bytes"} <= set(rows)
    assert "state-reset" not in rows                # a flag only, refused in the file
    assert {k for k, r in rows.items() if r.reloadable} == {
        s.key for s in config.SETTINGS if s.name in config.RELOADABLE}
    assert rows["stats-interval"].flag == "--stats-interval"
    assert rows["stats-interval"].range == "positive"
    assert rows["max-partial-bytes"].range == "0 (no limit) or more"
    assert rows["discovery-port"].range == "from 0 to 65535"
    assert rows["log-level"].range.startswith("one of debug")
    assert "(default 5)" in rows["stats-interval"].description
    assert all(r.description for r in rows.values())


def test_a_tool_without_reload_has_no_reload_column():
    """The desktop apps reload nothing: their rows say neither "applied on
    reload" nor "needs a restart"; the filewatcher's say which."""
    from elvin_apps.biff.config import SETTINGS as BIFF
    from elvin_apps.filewatcher.config import SETTINGS as FILEWATCHER
    assert {r.reloadable for r in configref.declared(BIFF)} == {None}
    rows = {r.key: r for r in configref.declared(FILEWATCHER)}
    assert rows["debounce"].reloadable and rows["elvin"].reloadable is False
