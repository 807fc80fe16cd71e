"""One declaration per setting (elvin.settings): the file's keys, their
checks, the flags and the reloadable set all come from the fields."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

import pytest

from elvin.config_file import ConfigError
from elvin.settings import ROUTER_WORDING, SettingsTable, setting


@dataclass
class Demo:
    interval: float = setting(5.0, above=0, reloadable=True, flag="--interval",
                              metavar="SECONDS", help="seconds between polls (default {default})")
    retries: int = setting(3, low=1, flag="--retries", metavar="N", help="tries")
    port: int = setting(2917, low=0, high=65535, section="net", flag="--port", help="port")
    backlog: int = setting(0, low=0, zero="no limit", help="queued at most")
    level: str = setting("info", choices=("debug", "info"), flag="--level", help="level")
    name: str | None = setting(None, flag="--name", metavar="NAME", help="a name")
    quiet: bool = setting(False, flag="--quiet", help="say less")
    colour: bool = setting(True, flag="--no-colour", reloadable=True, help="no colour")
    hosts: list[str] = setting(default_factory=lambda: ["a"], by_hand=True, flag="--host",
                               metavar="HOST", help="hosts")
    once: bool = setting(False, flag="--once", in_file=False, help="once only")
    bookkeeping: list[str] = field(default_factory=list)


TABLE = SettingsTable(Demo, {"net": "the network"})


def test_the_table_reads_the_declarations():
    assert [s.name for s in TABLE] == ["interval", "retries", "port", "backlog", "level",
                                       "name", "quiet", "colour", "hosts", "once"]
    assert TABLE.reloadable == {"interval", "colour"}
    assert TABLE["name"].optional and TABLE["name"].kind is str
    assert TABLE["hosts"].default == ["a"]
    assert TABLE.help(TABLE["interval"]) == "seconds between polls (default 5)"


@pytest.mark.parametrize("key, value, message", [
    ("interval", "5", "interval must be a number, not '5'"),
    ("retries", 1.5, "retries must be an integer, not 1.5"),
    ("retries", True, "retries must be an integer, not True"),
    ("name", 3, "name must be a string, not 3"),
    ("quiet", "yes", "quiet must be true or false, not 'yes'"),
])
def test_apply_checks_the_type(key, value, message):
    with pytest.raises(ConfigError, match=f"^f.toml, line 2: {message}$"):
        TABLE.apply(Demo(), key, value, "f.toml, line 2")


def test_apply_sets_and_leaves_the_rest_to_the_caller():
    config = Demo()
    assert TABLE.apply(config, "interval", 2, "f") and config.interval == 2
    assert TABLE.apply(config, "colour", False, "f")
    assert not config.colour
    assert not TABLE.apply(config, "hosts", ["b"], "f")        # by hand
    assert not TABLE.apply(config, "once", True, "f")          # not in the file
    assert not TABLE.apply(config, "bogus", 1, "f")
    assert not TABLE.apply(config, "bookkeeping", [], "f")     # not a setting


def test_problems_say_each_bound_as_declared():
    config = Demo(interval=0, retries=0, port=70000, backlog=-1, level="LOUD")
    assert TABLE.problems(config, lambda key: f"f, {key}") == [
        "f, interval: interval must be positive",
        "f, retries: retries must be at least 1",
        "f, port: port must be between 0 and 65535, not 70000",
        "f, backlog: backlog must be 0 (no limit) or more",
        "f, level: level must be one of debug, info, not 'LOUD'",
    ]
    assert TABLE.problems(Demo(level="DEBUG"), str) == []      # any case, as the flag
    assert TABLE.problems(Demo(interval=float("nan")), str) == [
        "interval: interval must be a number, not nan"]


def test_each_tool_keeps_its_wording():
    """The router's messages quote the key, call a whole number "a number"
    and say a range is out of range; its keys are dashed, either spelling
    read."""
    router = SettingsTable(Demo, wording=ROUTER_WORDING)
    assert [s.key for s in router][:3] == ["interval", "retries", "port"]
    with pytest.raises(ConfigError, match=r"^f: 'retries' must be a number, not 1.5$"):
        router.apply(Demo(), "retries", 1.5, "f")
    assert router.problems(Demo(port=70000), str) == [
        "port: port 70000 is out of range (from 0 to 65535)"]
    assert router.unknown("bogus", "f") == "f: unknown setting 'bogus'"
    assert TABLE.unknown("bogus", "f", ("groups",)) == (
        "f: unknown setting 'bogus' (known: backlog, colour, groups, hosts, interval, level, name, "
        "port, quiet, retries)")


def test_load_reads_a_table_and_says_every_problem():
    config = TABLE.load(Demo(), {"interval": 1, "level": "DEBUG"}, lambda key: "f")
    assert config.interval == 1.0 and isinstance(config.interval, float)
    assert config.level == "debug"
    with pytest.raises(ConfigError, match="^f: retries must be at least 1$"):
        TABLE.load(Demo(), {"port": -1, "retries": 0}, lambda key: "f")
    problems: list[str] = []
    TABLE.load(Demo(), {"port": -1, "bogus": 1, "name": 2}, lambda key: f"f {key}", problems)
    assert problems[0].startswith("f bogus: unknown setting 'bogus' (known: ")
    assert problems[1:] == ["f name: name must be a string, not 2",
                            "f port: port must be between 0 and 65535, not -1"]


def test_flags_come_from_the_table_and_set_only_what_is_given():
    parser = argparse.ArgumentParser()
    TABLE.add_arguments(parser)
    group = TABLE.add_arguments(parser, "net")
    assert group.title == "net" and group.description == "the network"
    args = parser.parse_args(["--interval", "2.5", "--no-colour", "--host", "x", "--host",
                              "y", "--port", "1", "--level", "DEBUG", "--once"])
    config = TABLE.apply_args(Demo(retries=7), args)
    assert (config.interval, config.colour, config.hosts, config.port, config.level,
            config.once) == (2.5, False, ["x", "y"], 1, "debug", True)
    assert config.retries == 7 and config.quiet is False and config.name is None
    with pytest.raises(SystemExit):
        parser.parse_args(["--level", "loud"])
