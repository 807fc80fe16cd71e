"""filewatcher: configuration, attributes, status formatting, command-line errors."""

from __future__ import annotations

import io
import json
import os

import pytest
from elvin_apps.filewatcher import cli
from elvin_apps.filewatcher.attributes import ALL_NAMES, notification
from elvin_apps.filewatcher.config import ConfigError, apply_overrides, load_config
from elvin_apps.filewatcher.status import (
    StatusError,
    format_status,
    read_status,
    write_status,
)

from elvin.values import Int64


def test_config_file_with_dashes_and_underscores(tmp_path):
    www = tmp_path / "www"
    www.mkdir()
    (tmp_path / "link").symlink_to(www)
    path = tmp_path / "fw.toml"
    path.write_text(f'''
elvin = "elvin://example.org:2917"
roots = ["{tmp_path}/link/", "{www}/inner/.."]
unbounded = "roots"
debounce = 0.2
max-delay = 2
poll_interval = 5
max-watches = 10
status-file = "{tmp_path}/st.json"
log-level = "DEBUG"
''')
    config = load_config(path).validate()
    assert config.roots == [str(www)]          # resolved, deduplicated
    assert (config.unbounded, config.debounce, config.max_delay) == ("roots", 0.2, 2)
    assert (config.poll_interval, config.max_watches, config.log_level) == (5, 10, "debug")
    assert config.status_file == f"{tmp_path}/st.json" and config.host


def test_a_root_inside_another_root_is_folded(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    config = apply_overrides(load_config(None),
                             roots=[str(tmp_path / "a" / "b"), str(tmp_path / "a")]).validate()
    assert config.roots == [str(tmp_path / "a")]


@pytest.mark.parametrize("text, message", [
    ('roots = "/tmp"', "line 1: roots must be a list of directory paths, not '/tmp'"),
    ("roots = [1]", "list of directory paths"),
    ('# watched\nroots = ["/no/such/dir"]', "line 2: roots: '/no/such/dir': No such file"),
    ('roots = ["/"]', "whole file system"),
    ("roots = []", "no roots"),
    ('roots = ["/tmp"]\nunbounded = "everything"', "unbounded"),
    ('roots = ["/tmp"]\ndebounce = -1', "debounce"),
    ('roots = ["/tmp"]\nmax-watches = 0', "max-watches"),
    ('roots = ["/tmp"]\nelvin = "http://x"', "bad router URL"),
    ('roots = ["/tmp"]\ncolour = "red"', "unknown setting 'colour'"),
    ('roots = ["/tmp"\n', "not valid TOML"),
])
def test_config_errors_name_the_problem(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path).validate()
    assert message in str(info.value) and str(path) in str(info.value)


def test_cli_usage_and_config_errors_exit_1(tmp_path, capsys):
    assert cli.main([]) == 1
    assert "no roots" in capsys.readouterr().err
    assert cli.main(["--root", str(tmp_path), "--elvin", "nonsense://"]) == 1
    assert "bad router URL" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        cli.main(["--bogus"])
    assert info.value.code == 1
    with pytest.raises(SystemExit) as info:
        cli.main(["--version"])
    assert info.value.code == 0 and "filewatcher" in capsys.readouterr().out


def test_cli_unreachable_router_exits_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "setup_logging", lambda config: None)   # keep pytest's handlers
    code = cli.main(["--root", str(tmp_path), "--elvin", "elvin://127.0.0.1:1",
                     "--status-file", str(tmp_path / "s.json")])
    assert code == 2
    assert "cannot reach the router" in capsys.readouterr().err


def test_notification_attributes():
    st = os.stat(__file__)
    n = notification("modified", "/x/y", host="h", is_dir=False, st=st)
    assert set(n) == set(ALL_NAMES) - {"File-Dest-Path"}
    assert isinstance(n["File-Size"], Int64) and isinstance(n["File-Mtime"], Int64)
    assert n["File-Mtime"] == st.st_mtime_ns // 1_000_000
    assert n["Filewatcher-Version"] == 1 and n["File-Is-Dir"] == 0
    gone = notification("deleted", "/x/y", host="h", is_dir=True)
    assert "File-Size" not in gone and "File-Owner" not in gone and gone["File-Is-Dir"] == 1
    moved = notification("moved", "/a", dest="/b", host="h", is_dir=False, st=st)
    assert moved["File-Dest-Path"] == "/b"
    with pytest.raises(ValueError):
        notification("exploded", "/a", host="h", is_dir=False)


def test_status_file_round_trip_and_table(tmp_path, capsys):
    path = str(tmp_path / "run" / "status.json")
    status = {
        "version": "0.1.0", "pid": os.getpid(), "started": 0, "updated": 100.0,
        "router": "elvin://r", "connection": "connected", "roots": ["/srv"],
        "unbounded": "ignore", "os_watches": 2,
        "watches": [{"path": "/srv/www", "recursive": True, "backend": "inotify",
                     "pending": False, "error": None, "os_watches": 2,
                     "subscriptions": [7], "interests": ["/srv/www/**"]}],
        "subscriptions": [{"id": 7, "expression": 'begins-with(File-Path, "/srv/www/")',
                           "watching": ["/srv/www/**"], "unbounded": False, "notes": []},
                          {"id": 8, "expression": "require(File-Path)", "watching": [],
                           "unbounded": True, "notes": ["unbounded: ignored (policy)"]}],
        "counters": {"sent": 3},
    }
    write_status(path, status)
    data = read_status(path)
    assert data["running"] is True
    out = io.StringIO()
    format_status(data, out, now=105.0)
    text = out.getvalue()
    assert "running" in text and "/srv/www" in text and "#7" in text
    assert "recursive" in text and "inotify" in text and "ignored (policy)" in text
    assert cli.status_main(["--status-file", path]) == 0
    assert "/srv/www" in capsys.readouterr().out
    assert cli.status_main(["--status-file", path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["watches"][0]["path"] == "/srv/www"

    status["pid"] = 2 ** 22 + 12345            # no such process: stale
    write_status(path, status)
    assert read_status(path)["running"] is False
    assert cli.status_main(["--status-file", path]) == 3
    assert "NOT RUNNING" in capsys.readouterr().out

    with pytest.raises(StatusError, match="is the filewatcher running"):
        read_status(str(tmp_path / "none.json"))
    assert cli.status_main(["--status-file", str(tmp_path / "none.json")]) == 3
