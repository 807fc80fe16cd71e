"""``elvind`` as a subprocess: flags, config file, signals, exit codes; TLS."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from elvin.protocol import ConnRply, Disconn, NotifyDeliver
from elvin.router.config import RouterConfig
from elvin.router.server import Router

from .process_util import ELVIND, free_port, wait_listening
from .rawclient import Closed, RawClient


def run(args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(ELVIND + args, capture_output=True, text=True, timeout=30, **kwargs)


@pytest.fixture
def elvind():
    procs = []

    def start(*args: str) -> subprocess.Popen:
        proc = subprocess.Popen(ELVIND + list(args), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


async def test_sigterm_stops_cleanly_with_disconn(elvind):
    port = free_port()
    proc = elvind("--listen", f"elvin://127.0.0.1:{port}", "--log-level", "debug")
    await asyncio.to_thread(wait_listening, port, proc)
    consumer = await RawClient.connected(port)
    await consumer.subscribe("require(X)")
    consumer.notify({"X": 1})
    assert (await consumer.expect(NotifyDeliver)).attributes == {"X": 1}
    proc.send_signal(signal.SIGTERM)
    got = await consumer.closed_by_router()
    assert [p.reason for p in got if isinstance(p, Disconn)] == [1]
    out, err = await asyncio.to_thread(proc.communicate, timeout=15)
    assert proc.returncode == 0, err
    assert f"127.0.0.1:{port}" in err


async def test_config_file(elvind, tmp_path):
    port = free_port()
    config = tmp_path / "elvind.toml"
    log_file = tmp_path / "elvind.log"
    config.write_text(f'listen = ["elvin://127.0.0.1:{port}"]\n'
                      f'log-level = "debug"\nlog_file = "{log_file}"\n'
                      '[options]\n"Subscription.Max-Count" = { min = 16, default = 20, '
                      'max = 30 }\n')
    proc = elvind("--config", str(config))
    await asyncio.to_thread(wait_listening, port, proc)
    client = await RawClient.open(port)
    reply = await client.connect({"Subscription.Max-Count": 1000})
    assert isinstance(reply, ConnRply)
    assert reply.options["Subscription.Max-Count"] == 30
    await client.close()
    proc.send_signal(signal.SIGINT)
    await asyncio.to_thread(proc.communicate, timeout=15)
    assert proc.returncode == 0
    assert "listening on" in log_file.read_text()


def test_bad_toml_exits_1_naming_file_and_line(tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text('listen = ["elvin://127.0.0.1:1"]\nlog-level = \n')
    result = run(["--config", str(config)])
    assert result.returncode == 1
    assert str(config) in result.stderr and "line 2" in result.stderr


def test_unknown_setting_exits_1_naming_line(tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text('# comment\nlisten = "elvin://127.0.0.1:1"\nbogus = 3\n')
    result = run(["--config", str(config)])
    assert result.returncode == 1
    assert "line 3" in result.stderr and "bogus" in result.stderr


def test_bad_uri_exits_1():
    result = run(["--listen", "http://example.com"])
    assert result.returncode == 1 and "listen URI" in result.stderr


def test_bad_flag_exits_1():
    result = run(["--no-such-flag"])
    assert result.returncode == 1 and "usage" in result.stderr.lower()


def test_missing_config_file_exits_1(tmp_path):
    result = run(["--config", str(tmp_path / "none.toml")])
    assert result.returncode == 1 and "none.toml" in result.stderr


def test_version_and_help():
    result = run(["--version"])
    assert result.returncode == 0 and "elvind" in result.stdout
    result = run(["--help"])
    assert result.returncode == 0 and "--listen" in result.stdout


def test_port_in_use_exits_3():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        result = run(["--listen", f"elvin://127.0.0.1:{port}"])
    assert result.returncode == 3
    assert f"127.0.0.1:{port}" in result.stderr


def test_installed_script_if_present():
    script = Path(sys.executable).parent / "elvind"
    if not script.exists():
        pytest.skip("the elvind script is not installed (pip install -e .)")
    result = subprocess.run([str(script), "--version"], capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 0 and "elvind" in result.stdout


# -- TLS --------------------------------------------------------------------------------

def make_certificate(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    try:
        from cryptography import x509  # noqa: F401
    except ImportError:
        pass
    else:  # pragma: no cover - cryptography is not a dependency
        return _certificate_with_cryptography(cert, key)
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("neither the cryptography package nor the openssl command is "
                    "available to make a test certificate")
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1"],
                   check=True, capture_output=True, timeout=60,
                   env={**os.environ, "RANDFILE": str(directory / ".rnd")})
    return cert, key


def _certificate_with_cryptography(cert: Path, key: Path) -> tuple[Path, Path]:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                   .public_key(private.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
                   .sign(private, hashes.SHA256()))
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(private.private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.TraditionalOpenSSL,
                                          serialization.NoEncryption()))
    return cert, key


async def test_tls_listener(tmp_path):
    cert, key = make_certificate(tmp_path)
    port = free_port()
    config = RouterConfig(listen=[f"elvin:4.0/ssl,none,xdr/127.0.0.1:{port}"],
                          tls_cert=str(cert), tls_key=str(key)).validate()
    tls_router = Router(config)
    await tls_router.start()
    try:
        assert tls_router.urls == [f"elvin:4.0/ssl,none,xdr/127.0.0.1:{port}"]
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        client = await RawClient.connected(port, ssl_context=context)
        await client.subscribe("require(Tls)")
        client.notify({"Tls": "yes"})
        assert (await client.expect(NotifyDeliver)).attributes == {"Tls": "yes"}
        # a plain-TCP client cannot talk to the TLS port
        plain = await RawClient.open(port)
        with pytest.raises(Closed):
            await plain.connect()
        await plain.close()
        await client.close()
    finally:
        await tls_router.stop()


async def test_no_quench_flag_emulates_a_router_without_subset_c(elvind):
    from elvin.errors import NackCode
    from elvin.protocol import Nack, QnchAddRqst

    port = free_port()
    proc = elvind("--listen", f"elvin://127.0.0.1:{port}", "--no-quench")
    await asyncio.to_thread(wait_listening, port, proc)
    client = await RawClient.connected(port)
    reply = await client.request(QnchAddRqst(client.xid(), ("Group",), True))
    assert isinstance(reply, Nack)
    assert (reply.error, reply.message) == (NackCode.NOT_IMPL, "Quench not supported")
    await client.close()
    proc.send_signal(signal.SIGTERM)
    _, err = await asyncio.to_thread(proc.communicate, timeout=15)
    assert proc.returncode == 0
    assert "quench (subset C) off" in err
