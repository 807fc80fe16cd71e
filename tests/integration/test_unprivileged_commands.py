"""Every command of the suite, run as an unprivileged user against a file or
directory it may not read or write (issue 32): one line on stderr naming
the path and the system's reason, the documented exit status, never a
traceback. The paths sit in a directory only root may enter, as Debian's
/etc/ssl/private does."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PY = [sys.executable, "-m"]
URL = "elvin://127.0.0.1:1"

#: name -> (module and arguments, with {private} for the private directory; the
#: path the message must name; the exit status)
COMMANDS = {
    "elvind": (["elvin.router", "--config", "{private}/elvind.toml"],
               "{private}/elvind.toml", 1),
    "elvind --archive": (["elvin.router", "--listen", "elvin://127.0.0.1:0", "--archive",
                          "{private}/archive/new"], "{private}/archive/new", 1),
    "ec": (["elvin.tools.ec", "-e", URL, "--consumer-key", "{private}/key", "require(x)"],
           "{private}/key", 1),
    "ep": (["elvin.tools.ep", "-e", URL, "--producer-key", "{private}/key"],
           "{private}/key", 1),
    "ec --tls-ca": (["elvin.tools.ec", "-e", URL, "--tls-ca", "{private}/key", "require(x)"],
                    "{private}/key", 1),
    "elvin-archive": (["elvin.tools.archive", "-e", URL, "require(x)", "{private}/archive"],
                      "{private}/archive", 1),
    "elvin-mobility-proxy": (["elvin.mobility.proxy", "-e", URL, "--key-file",
                              "{private}/key"], "{private}/key", 1),
    "elvin-domain check": (["elvin.federation.domain_cli", "check", "{private}/topology.toml"],
                           "{private}/topology.toml", 1),
    "elvin-domain apply": (["elvin.federation.domain_cli", "apply", "{shared}/topology.toml",
                            "--out", "{private}/out"], "{private}/out", 1),
    "elvin-pipeline": (["elvin.pipeline", "backtest", "require(x)", "{private}/archive"],
                       "{private}/archive", 1),
    "filewatcher": (["elvin_apps.filewatcher", "--config", "{private}/elvind.toml"],
                    "{private}/elvind.toml", 1),
    "newswatcher": (["elvin_apps.newswatcher", "--config", "{private}/elvind.toml"],
                    "{private}/elvind.toml", 1),
    "tickertape": (["elvin_apps.tickertape", "--config", "{private}/elvind.toml"],
                   "{private}/elvind.toml", 1),
    "biff": (["elvin_apps.biff", "--config", "{private}/elvind.toml"],
             "{private}/elvind.toml", 1),
    "elvin-console": (["elvin_apps.console", "--config", "{private}/elvind.toml"],
                      "{private}/elvind.toml", 1),
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_path_it_may_not_use_is_one_line(name, unprivileged, shared_tmp, private_dir):
    for file in ("elvind.toml", "key", "topology.toml"):
        (private_dir / file).write_text("x = 1\n")
    (private_dir / "archive").mkdir()
    (shared_tmp / "topology.toml").write_text('[[routers]]\nname = "a"\n'
                                              'url = "ewaf://127.0.0.1:1"\n')
    (shared_tmp / "topology.toml").chmod(0o644)
    args, path, status = COMMANDS[name]
    fill = {"private": str(private_dir), "shared": str(shared_tmp)}
    env = {**os.environ, "HOME": "/nonexistent", "XDG_CONFIG_HOME": "/nonexistent",
           "QT_QPA_PLATFORM": "offscreen", "ELVIN_DISCOVERY": "off"}
    result = subprocess.run([*unprivileged, *PY, *(a.format(**fill) for a in args)],
                            capture_output=True, text=True, timeout=120, env=env,
                            stdin=subprocess.DEVNULL, cwd=shared_tmp)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == status, result.stderr
    assert lines, "no message"
    assert path.format(**fill) in lines[-1] and "Permission denied" in lines[-1], lines
