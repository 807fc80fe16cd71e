"""The ssl protocol stack: elvin:4.0/ssl,none,xdr/host:port."""

from __future__ import annotations

import shutil
import ssl
import subprocess

import pytest

from elvin.client import ConnectError, connect, unotify

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                    "-keyout", str(key), "-out", str(cert), "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return cert, key


@pytest.fixture
async def tls_router(certificate):
    from elvin.router.config import RouterConfig
    from elvin.router.server import Router
    cert, key = certificate
    router = Router(RouterConfig(listen=["elvin:4.0/ssl,none,xdr/127.0.0.1:0"],
                                 tls_cert=str(cert), tls_key=str(key)))
    await router.start()
    try:
        yield router
    finally:
        await router.stop()


async def test_tls_connection(tls_router, certificate):
    url = tls_router.urls[0]
    assert url.startswith("elvin:4.0/ssl,none,xdr/127.0.0.1:")
    context = ssl.create_default_context(cafile=str(certificate[0]))
    async with connect(url, ssl_context=context) as conn:
        assert conn.uri.secure
        sub = await conn.subscribe("require(tls)")
        await conn.send({"tls": "secret"})
        assert (await sub.get(timeout=5))["tls"] == "secret"
        await unotify(url, {"tls": "unotify"}, ssl_context=context)
        assert (await sub.get(timeout=5))["tls"] == "unotify"


async def test_tls_refuses_an_unknown_certificate(tls_router):
    # the default context verifies the router's certificate: self-signed fails
    with pytest.raises(ConnectError, match="certificate verification failed"):
        await connect(tls_router.urls[0], timeout=5)


async def test_ep_over_tls(tls_router, certificate):
    import asyncio
    import sys
    url = tls_router.urls[0]
    context = ssl.create_default_context(cafile=str(certificate[0]))
    async with connect(url, ssl_context=context) as conn:
        sub = await conn.subscribe("require(viaEp)")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "elvin.tools.ep", "-e", url, "--tls-ca", str(certificate[0]),
            stdin=subprocess.PIPE, stderr=subprocess.PIPE)
        _out, err = await asyncio.wait_for(proc.communicate(b"viaEp: 1\n---\n"), 30)
        assert proc.returncode == 0, err
        assert (await sub.get(timeout=5))["viaEp"] == 1
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "elvin.tools.ep", "-e", url,
            stdin=subprocess.PIPE, stderr=subprocess.PIPE)
        _out, err = await asyncio.wait_for(proc.communicate(b"viaEp: 2\n---\n"), 30)
        assert proc.returncode == 2 and b"certificate verification failed" in err


async def test_tls_sockets_count_at_the_door_from_their_accept(certificate):
    """A TLS socket that never finishes its handshake holds a descriptor as
    a plain one does: the door counts it from its accept (per address,
    before a session), a session takes the count over, and a handshake that
    fails or is abandoned gives it back."""
    import asyncio

    from elvin.router.config import RouterConfig
    from elvin.router.server import Router
    from tests.waiting import until

    cert, key = certificate
    router = Router(RouterConfig(listen=["elvin:4.0/ssl,none,xdr/127.0.0.1:0"],
                                 tls_cert=str(cert), tls_key=str(key),
                                 max_pre_session_per_address=2, connect_timeout=60))
    await router.start()
    try:
        port = router.ports[0]
        idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
        await until(lambda: router.door.pre_session == 2)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await asyncio.wait_for(reader.read(), 10) == b""     # refused at its accept
        assert router.stats.refused == {"pre-session-per-address": 1}
        for _, w in idle:                                           # abandoned handshakes
            w.close()
        await until(lambda: router.door.pre_session == 0)
        context = ssl.create_default_context(cafile=str(cert))
        async with connect(router.urls[0], ssl_context=context) as conn:
            await conn.subscribe("require(tls)")
            assert router.door.pre_session == 0 and len(router.door._address_of) == 1
        await until(lambda: not router.door._address_of)
        writer.close()
    finally:
        await router.stop()
