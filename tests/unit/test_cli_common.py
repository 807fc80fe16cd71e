"""The command-line pieces every command shares: the router URL rule, config
file reading, the parser's usage status (elvin.router_url, elvin.config_file,
elvin.cli_common, elvin.app_cli)."""

from __future__ import annotations

import pytest

from elvin.app_cli import app_parser, configured_router
from elvin.cli_common import EXIT_USAGE, ToolError
from elvin.config_file import ConfigError, collecting_problems, line_of, load_named, read_toml
from elvin.router_url import DEFAULT_URL, RouterURLError, choose_router_url

NO_DISCOVERY = {"ELVIN_DISCOVERY": "off"}


def test_router_url_precedence_and_source():
    env = {"ELVIN_URL": "elvin://env:1"}
    flag = choose_router_url("elvin://flag:2", "elvin://file:3", environ=env)
    assert (flag.url, flag.source, flag.explicit, flag.chosen) == \
        ("elvin://flag:2", "flag", True, True)
    from_env = choose_router_url(None, "elvin://file:3", environ=env)
    assert (from_env.url, from_env.source, from_env.explicit) == ("elvin://env:1", "env", True)
    from_file = choose_router_url(None, "elvin://file:3", environ={})
    assert (from_file.url, from_file.explicit, from_file.chosen) == ("elvin://file:3", False, True)
    default = choose_router_url(None, None, environ=NO_DISCOVERY, discover=True)
    assert (default.url, default.source, default.chosen) == (DEFAULT_URL, "default", False)


@pytest.mark.parametrize(("kwargs", "where"), [
    ({"flag": "http://a"}, "(from --elvin)"),
    ({"environ": {"ELVIN_URL": "http://a"}}, "(from $ELVIN_URL)"),
    ({"config_url": "http://a", "config_file": "/etc/x.toml"}, "(from elvin in /etc/x.toml)"),
])
def test_a_bad_router_url_names_where_it_came_from(kwargs, where):
    kwargs.setdefault("environ", {})
    with pytest.raises(RouterURLError) as info:
        choose_router_url(**kwargs)
    message = str(info.value)
    assert message.startswith("bad Elvin URL 'http://a' " + where + ": not an elvin URI")
    assert info.value.status == EXIT_USAGE and "in URI 'http" not in message
    with pytest.raises(RouterURLError, match="^bad Elvin URI 'x://'"):
        choose_router_url("x://", environ={}, what="Elvin URI")


def test_config_file_errors_name_the_file_and_line(tmp_path):
    missing = tmp_path / "missing.toml"
    assert read_toml(missing, must_exist=False) is None
    with pytest.raises(ConfigError, match=f"^{missing}: no such file$"):
        read_toml(missing)
    bad = tmp_path / "bad.toml"
    bad.write_text('a = 1\nb = [1,\n')
    with pytest.raises(ConfigError, match=rf"^{bad}, line \d+.*: not valid TOML: "):
        read_toml(bad)
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"a = '\xff'\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        read_toml(binary)
    good = tmp_path / "good.toml"
    good.write_text('# settings\nlog-level = "info"\n  "max_watches" = 3\n')
    toml = read_toml(good)
    assert toml.data == {"log-level": "info", "max_watches": 3}
    assert toml.line_of("log_level") == ", line 2" and toml.line_of("max-watches") == ", line 3"
    assert line_of(toml.text, "absent") == ""


def _load(path, must_exist=False):
    """An app's loader: the file's elvin, and the file."""
    toml = read_toml(path or "/nonexistent/default.toml", must_exist=must_exist)

    class Config:
        elvin = toml.data.get("elvin") if toml else None
        path = toml.path if toml else None
    return Config()


def test_an_app_reads_its_config_then_its_router(tmp_path, monkeypatch):
    monkeypatch.delenv("ELVIN_URL", raising=False)
    monkeypatch.setenv("ELVIN_DISCOVERY", "off")
    parser = app_parser("app", "1.0", "An app.", config_default="~/.config/elvin/app.toml")
    file = tmp_path / "app.toml"
    file.write_text('elvin = "elvin://there:5"\n')
    config, router = configured_router(_load, parser.parse_args(["--config", str(file)]))
    assert (router.url, router.source) == ("elvin://there:5", "config")
    config, router = configured_router(_load, parser.parse_args([]))
    assert (config.path, router.url) == (None, DEFAULT_URL)
    with pytest.raises(ToolError, match="none.toml: no such file"):
        configured_router(_load, parser.parse_args(["--config", str(tmp_path / "none.toml")]))
    file.write_text('elvin = "tcp://there"\n')
    with pytest.raises(ToolError, match=f"from elvin in {file}"):
        configured_router(_load, parser.parse_args(["--config", str(file)]))
    with pytest.raises(ToolError, match="no such file"):
        load_named(_load, str(tmp_path / "none.toml"))


def test_usage_errors_exit_1(capsys):
    parser = app_parser("app", "1.0", "An app.", config_default=None)
    with pytest.raises(SystemExit) as info:
        parser.parse_args(["--log-level", "loud"])
    assert info.value.code == EXIT_USAGE
    assert parser.parse_args(["--log-level", "DEBUG"]).log_level == "debug"
    with pytest.raises(SystemExit) as info:
        parser.parse_args(["--version"])
    assert info.value.code == 0 and "app 1.0" in capsys.readouterr().out


def test_config_problems_stop_a_start_or_are_all_listed():
    def bad(n: int) -> None:
        raise ConfigError(f"elvind.toml: problem {n}")

    with pytest.raises(ConfigError, match="problem 1"):     # a start stops at the first
        with collecting_problems(None):
            bad(1)
    problems: list[str] = []                                  # --check-config goes on
    for n in (1, 2):
        with collecting_problems(problems):
            bad(n)
    with collecting_problems(problems):
        pass
    assert problems == ["elvind.toml: problem 1", "elvind.toml: problem 2"]
    with pytest.raises(ValueError, match="not a config problem"):   # others pass
        with collecting_problems(problems):
            raise ValueError("not a config problem")
