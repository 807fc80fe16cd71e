"""``elvind --check-config`` does everything a start does but bind and
connect (issue 44): it opens the log, status, state and archive locations,
loads the TLS material and checks its dates and that each key is its
certificate's, and says every problem and every warning; a start refuses
what the check refuses, and warns (log and ``elvind status``) about a
certificate that expires within 30 days."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.waiting import wait_until

from .process_util import ELVIND, free_port, stop, wait_listening
from .tls_certs import make_ca, make_certificate, make_dated_certificate


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """A CA and certificates it signed: good for a year, expiring in 5 days,
    expired, and one more good one whose key is "the wrong key" for the
    first; all readable by anyone (the tests run some commands as nobody)."""
    d = tmp_path_factory.mktemp("certs")
    d.chmod(0o755)
    ca = make_ca(d, "ca")
    out = {"ca": ca,
           "good": make_certificate(d, ca, "good", ["IP:127.0.0.1"]),
           "soon": make_certificate(d, ca, "soon", ["IP:127.0.0.1"], days=5),
           "old": make_dated_certificate(d, ca, "old", ["IP:127.0.0.1"],
                                         "20200101000000Z", "20210101000000Z"),
           "other": make_certificate(d, ca, "other", ["IP:127.0.0.1"])}
    for path in d.iterdir():
        path.chmod(0o755 if path.is_dir() else 0o644)
    return out


def check(*args: str, prefix=()) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, *ELVIND, *args, "--check-config"], capture_output=True,
                          text=True, timeout=60, cwd="/")


def start(*args: str, prefix=()) -> subprocess.CompletedProcess:
    """A start that is expected to fail before listening."""
    return subprocess.run([*prefix, *ELVIND, *args], capture_output=True, text=True,
                          timeout=60, cwd="/")


def said(stderr: str) -> list[str]:
    assert "Traceback" not in stderr, stderr
    return [line for line in stderr.splitlines() if line.strip()]


def test_a_log_file_in_a_missing_directory(tmp_path):
    log = tmp_path / "missing" / "elvind.log"
    args = ["--listen", "elvin://127.0.0.1:0", "--log-file", str(log)]
    result = check(*args)
    assert result.returncode == 1
    assert f"cannot write the log file {log}: the directory {log.parent} does not exist" \
        in result.stderr
    assert start(*args).returncode == 1            # and the start agrees
    assert not log.parent.exists()


def test_an_unwritable_state_directory(unprivileged, shared_tmp):
    state = shared_tmp / "state"
    state.mkdir(mode=0o755)                        # root's: nobody may not write in it
    args = ["--listen", "elvin://127.0.0.1:0", "--state-dir", str(state),
            "--status-file", str(shared_tmp / "nobody-may-not-write-here.json")]
    result = check(*args, prefix=unprivileged)
    assert result.returncode == 1
    lines = said(result.stderr)
    assert f"elvind: cannot write the state directory {state}: Permission denied" in lines
    # every problem, not the first: the status file too
    assert any("cannot write the status file" in line for line in lines), lines
    assert start(*args, prefix=unprivileged).returncode == 1


def test_a_missing_state_directory_is_fine_and_left_missing(tmp_path):
    state = tmp_path / "new" / "state"
    result = check("--listen", "elvin://127.0.0.1:0", "--state-dir", str(state))
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "new").exists()         # created to try it, then removed


def test_an_expired_certificate_is_refused_by_check_and_start(certs):
    cert, key = certs["old"]
    args = ["--listen", "elvin:4.0/ssl,none,xdr/127.0.0.1:0", "--tls-cert", cert,
            "--tls-key", key, "--status-file", os.devnull + ".no"]
    result = check(*args)
    assert result.returncode == 1
    assert f"tls-cert {cert!r}: the certificate expired on 2021-01-01 00:00 UTC" \
        in result.stderr
    result = start(*args)
    assert result.returncode == 1
    assert said(result.stderr) == [f"elvind: tls-cert {cert!r}: the certificate expired on "
                                   "2021-01-01 00:00 UTC"]


def test_a_key_of_another_certificate(certs):
    cert, _ = certs["good"]
    _, other_key = certs["other"]
    result = check("--listen", "elvin://127.0.0.1:0", "--tls-cert", cert,
                   "--tls-key", other_key)
    assert result.returncode == 1
    assert (f"tls-cert / tls-key: the key {other_key!r} is not the key of the certificate "
            f"{cert!r}") in result.stderr


def federation_config(path: Path, extra: str = "", connect: str = "") -> Path:
    path.write_text(f'listen = "elvin://127.0.0.1:{free_port()}"\n{extra}'
                    '[federation]\nrouter_domain = "a"\n'
                    f'[[federation.connect]]\nrouter = "b"\n'
                    f'url = "ewaf:1.0/ssl,none,xdr/127.0.0.1:{free_port()}"\n{connect}')
    return path


def test_a_client_certificate_with_the_wrong_key_and_one_expiring(certs, tmp_path):
    cert, _ = certs["good"]
    _, other_key = certs["other"]
    soon, soon_key = certs["soon"]
    path = federation_config(
        tmp_path / "r.toml", f'tls-cert = "{soon}"\ntls-key = "{soon_key}"\n',
        f'client_cert = "{cert}"\nclient_key = "{other_key}"\n')
    result = check("--config", str(path))
    assert result.returncode == 1
    lines = said(result.stderr)
    assert (f"elvind: federation.connect #1, client_cert / client_key: the key "
            f"{other_key!r} is not the key of the certificate {cert!r}") in lines
    # the warning is said beside the error, not hidden by it
    assert any(line.startswith(f"elvind: warning: tls-cert {soon!r}: the certificate "
                               "expires in 5 day(s)") for line in lines), lines


def test_unreadable_tls_files_are_not_called_missing(certs, unprivileged, private_dir,
                                                     shared_tmp):
    ca = private_dir / "ca.pem"
    ca.write_text(Path(certs["ca"][0]).read_text())
    cert = private_dir / "client.pem"
    cert.write_text(Path(certs["good"][0]).read_text())
    key = private_dir / "client.key"
    key.write_text(Path(certs["good"][1]).read_text())
    for extra, connect, where in (
            (f'[federation]\ntls_ca = "{ca}"\n', "", "federation.tls_ca"),
            ("", f'client_cert = "{cert}"\nclient_key = "{key}"\n', "client_cert")):
        path = shared_tmp / "r.toml"
        text = federation_config(path, "", connect).read_text()
        if extra:
            text = text.replace("[federation]\n", extra)
        path.write_text(text)
        path.chmod(0o644)
        result = check("--config", str(path), "--status-file", str(shared_tmp / "s.json"),
                       prefix=unprivileged)
        assert result.returncode == 1
        assert where in result.stderr and "cannot read: Permission denied" in result.stderr
        assert "no such file" not in result.stderr


def test_every_bad_option_and_every_bad_listen_uri(tmp_path, certs):
    path = tmp_path / "r.toml"
    path.write_text('listen = ["elvin://127.0.0.1:0", "nonsense", "elvin:4.0/ssl,none,xdr/'
                    '127.0.0.1:0"]\n[options]\nbogus1 = 1\nbogus2 = 2\n')
    result = check("--config", str(path))
    assert result.returncode == 1
    text = result.stderr
    for wanted in ("unknown connection option 'bogus1'", "unknown connection option 'bogus2'",
                   "listen #2: bad listen URI", "listen #3 'elvin:4.0/ssl,none,xdr/"
                   "127.0.0.1:0' uses TLS"):
        assert wanted in text, (wanted, text)
    assert f"{path}: 4 problem(s)" in text


def test_a_certificate_expiring_soon_is_warned_about_at_start_and_in_status(certs, tmp_path):
    cert, key = certs["soon"]
    port = free_port()
    status = tmp_path / "st.json"
    args = ["--listen", f"elvin:4.0/ssl,none,xdr/127.0.0.1:{port}", "--tls-cert", cert,
            "--tls-key", key, "--status-file", str(status)]
    result = check(*args)
    assert result.returncode == 0, result.stderr
    assert f"warning: tls-cert {cert!r}: the certificate expires in 5 day(s)" in result.stderr
    assert "ok (1 warning(s))" in result.stdout
    proc = subprocess.Popen([*ELVIND, *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_listening(port, proc)
        wait_until(status.exists, what="the status file")
        shown = subprocess.run([*ELVIND[:3], "status", "--status-file", str(status)],
                               capture_output=True, text=True, timeout=60)
        assert shown.returncode == 0, shown.stderr
        assert f"WARNING: tls-cert {cert!r}: the certificate expires in 5 day(s)" \
            in shown.stdout
        certificates = json.loads(status.read_text())["certificates"]
        assert [c["what"] for c in certificates] == ["tls-cert"]
    finally:
        stop(proc)
        _, err = proc.communicate()
    assert f"WARNING elvin.router: tls-cert {cert!r}: the certificate expires in 5 day(s)" \
        in err


def test_a_state_file_it_cannot_open_is_found_by_the_check(unprivileged, shared_tmp):
    state = shared_tmp / "state"
    state.mkdir()
    state.chmod(0o777)
    held = state / "mobility.sqlite3"
    held.write_bytes(b"")
    held.chmod(0o600)                              # root's: nobody may not open it
    result = check("--listen", "elvin://127.0.0.1:0", "--state-dir", str(state),
                   "--status-file", str(state / "s.json"), prefix=unprivileged)
    assert result.returncode == 1
    assert f"elvind: cannot use the state file {held}: Permission denied" \
        in said(result.stderr)


def test_every_problem_of_the_federation_table_numbered_as_in_the_file(tmp_path):
    path = tmp_path / "r.toml"
    path.write_text('[federation]\nrouter_domain = "a"\nreconnect_min = -1\nkeepalive = 0\n'
                    'listen = "bogus"\n'
                    '[[federation.connect]]\nrouter = "b"\nurl = "nonsense"\n'
                    '[[federation.connect]]\nrouter = "c"\nurl = "ewaf://127.0.0.1:0"\n')
    result = check("--config", str(path))
    assert result.returncode == 1
    lines = said(result.stderr)
    for wanted in (f"{path}, line 5: federation.listen", f"{path}, line 8: federation."
                   "connect #1, url: bad federation URL", f"{path}, line 11: federation."
                   "connect #2, url: cannot connect to port 0",
                   f"{path}, line 3: federation.reconnect_min: must be a positive number",
                   f"{path}, line 4: federation.keepalive: must be a positive number"):
        assert any(line.startswith(f"elvind: {wanted}") for line in lines), (wanted, lines)
    assert lines[-1] == f"elvind: {path}: 5 problem(s)"
    # a start says the first, as before
    result = start("--config", str(path))
    assert result.returncode == 1 and len(said(result.stderr)) == 1


def test_every_bad_number(tmp_path):
    path = tmp_path / "r.toml"
    path.write_text('stats-interval = -1\nconnect-timeout = 0\nmax-subscriptions = 0\n')
    result = check("--config", str(path))
    assert result.returncode == 1
    lines = said(result.stderr)
    for wanted in ("line 1: stats-interval must be positive",
                   "line 2: connect-timeout must be positive",
                   "line 3: max-subscriptions must be at least 1"):
        assert any(line.endswith(wanted) for line in lines), (wanted, lines)
    assert lines[-1] == f"elvind: {path}: 3 problem(s)"
