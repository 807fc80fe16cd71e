"""The elvin-domain command (elvin.federation.domain_cli)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from elvin.federation.domain_cli import main

GOOD = """\
[domain]
name = "acme"

[[routers]]
name = "hub"
url = "ewaf://hub.example.com:2916"
client_url = "elvin://hub.example.com"

[[routers]]
name = "edge1"
url = "ewaf://edge1.example.com"

[[routers]]
name = "edge2"
url = "ewaf://edge2.example.com"

[[links]]
from = "hub"
to = "edge1"
outgoing = "require(News)"

[[links]]
from = "edge1"
to = "edge2"
"""

CYCLIC = """\
[[routers]]
name = "a"
url = "ewaf://a:2916"

[[routers]]
name = "b"
url = "ewaf://b:2916"

[[routers]]
name = "c"
url = "ewaf://c:2916"

[[links]]
from = "a"
to = "b"

[[links]]
from = "b"
to = "c"

[[links]]
from = "c"
to = "a"
"""


@pytest.fixture
def good(tmp_path: Path) -> Path:
    path = tmp_path / "good.toml"
    path.write_text(GOOD)
    return path


@pytest.fixture
def cyclic(tmp_path: Path) -> Path:
    path = tmp_path / "cyclic.toml"
    path.write_text(CYCLIC)
    return path


def test_check_a_good_file(good, capsys):
    assert main(["check", str(good)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert f"{good}: event domain 'acme' is valid" in out
    assert "QoS: cycles forbid, diamonds forbid" in out
    assert "cycles forbidden: a link that closes a loop is refused" in out
    assert "dead router or link cuts the domain in two" in out
    # numbered as the errors number them (routers #1), the include folder the
    # admins' guide and the unit name
    assert "  #1   hub  ewaf://hub.example.com:2916" in out
    assert "  #3   edge2  " in out
    assert "[default supplier, default consumer]" in out
    assert "hub -> edge1  (outgoing: require(News); incoming: everything)" in out
    assert "  edge1 -> edge2\n" in out
    downstream = out.split("Downstream", 1)[1]
    assert "hub: edge1, edge2" in downstream
    assert "edge1: edge2" in downstream
    assert "edge2: (none)" in downstream


def test_check_refuses_a_cyclic_file(cyclic, capsys):
    assert main(["check", str(cyclic)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"elvin-domain: {cyclic}")
    assert "links #3 (c -> a)" in err
    assert "would create a cycle" in err and "a -> b -> c -> a" in err


def test_check_lists_cycles_when_allowed(cyclic, capsys):
    cyclic.write_text("[qos]\ncycles = 'allow'\n" + CYCLIC)
    assert main(["check", str(cyclic)]) == 0
    out = capsys.readouterr().out
    assert "Cycles (1):\n  a -> b -> c -> a" in out
    assert "a: b, c" in out
    meaning = " ".join(out.split())            # the explanation is wrapped
    assert "cycles allowed: redundant paths. Every notification still reaches every " \
        "subscriber once" in meaning
    assert "routing = \"trees\"" in meaning and "diamonds forbidden" in meaning


def test_apply_writes_one_fragment_per_router(good, tmp_path, capsys):
    out_dir = tmp_path / "out" / "nested"
    assert main(["apply", str(good), "--out", str(out_dir)]) == 0
    out = capsys.readouterr().out
    assert "'elvind reload' (or SIGHUP) applies it" in out
    assert "not implemented" not in out
    files = sorted(p.name for p in out_dir.iterdir())
    assert files == ["edge1.toml", "edge2.toml", "hub.toml"]
    hub = tomllib.loads((out_dir / "hub.toml").read_text())["federation"]
    assert hub["listen"] == "ewaf://hub.example.com:2916"
    assert hub["connect"] == [{"router": "edge1", "url": "ewaf://edge1.example.com",
                               "outgoing": "require(News)", "incoming": False}]
    edge1 = tomllib.loads((out_dir / "edge1.toml").read_text())["federation"]
    assert edge1["accept"] == [{"router": "hub", "outgoing": False, "incoming": True}]
    assert edge1["connect"][0]["router"] == "edge2"
    edge2 = tomllib.loads((out_dir / "edge2.toml").read_text())["federation"]
    assert "connect" not in edge2 and edge2["accept"][0]["router"] == "edge1"


def test_apply_writes_nothing_for_a_refused_file(cyclic, tmp_path, capsys):
    out_dir = tmp_path / "out"
    assert main(["apply", str(cyclic), "--out", str(out_dir)]) == 1
    assert not out_dir.exists()
    assert "a -> b -> c -> a" in capsys.readouterr().err


def test_apply_reports_an_unwritable_directory(good, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    # a path the admin must fix (exit 1), named with the system's reason
    assert main(["apply", str(good), "--out", str(blocker / "sub")]) == 1
    assert f"cannot write to {blocker / 'sub'}: Not a directory" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [[], ["frobnicate"], ["check"], ["apply", "x.toml"]])
def test_usage_errors_exit_1(argv, capsys):
    assert main(argv) == 1
    assert "usage:" in capsys.readouterr().err


def test_missing_file_exits_1(tmp_path, capsys):
    assert main(["check", str(tmp_path / "nope.toml")]) == 1
    assert "nope.toml: cannot read the file" in capsys.readouterr().err


def test_help_and_version_exit_0(capsys):
    assert main(["--help"]) == 0
    assert "check" in capsys.readouterr().out
    assert main(["--version"]) == 0
    assert "elvin-domain" in capsys.readouterr().out


def test_runs_as_a_program(good, cyclic):
    ok = subprocess.run([sys.executable, "-m", "elvin.federation.domain_cli", "check",
                         str(good)], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and "is valid" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "elvin.federation.domain_cli", "check",
                          str(cyclic)], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "a -> b -> c -> a" in bad.stderr
