"""Certificates for TLS tests, made with the ``openssl`` command in a
temporary directory: a private CA and certificates it signs, each valid
for TLS servers and clients (as a federated router's certificate is both:
it serves its listener and is shown when it dials), with the
subjectAltName entries a test needs. The admins' guide's "Securing federation"
section gives the same commands.

EC keys (P-256): quick to make, so that each test module can have its own.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["make_ca", "make_certificate", "make_dated_certificate"]


def _run(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_ca(directory: Path, name: str) -> tuple[str, str]:
    """A self-signed CA: ``(certificate, key)`` PEM file names."""
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    _run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "365",
         "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return str(cert), str(key)


def make_certificate(directory: Path, ca: tuple[str, str], name: str,
                     names: list[str], days: int = 365) -> tuple[str, str]:
    """A certificate signed by ``ca`` naming ``names`` (``DNS:edge.test``,
    ``IP:127.0.0.1``) in its subjectAltName: ``(certificate, key)``."""
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    csr, ext = directory / f"{name}.csr", directory / f"{name}.ext"
    ext.write_text(f"subjectAltName={','.join(names)}\n"
                   "extendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n")
    _run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={name}")
    _run("x509", "-req", "-in", str(csr), "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial",
         "-out", str(cert), "-days", str(days), "-extfile", str(ext))
    return str(cert), str(key)


def make_dated_certificate(directory: Path, ca: tuple[str, str], name: str,
                           names: list[str], start: str, end: str) -> tuple[str, str]:
    """A certificate signed by ``ca`` valid from ``start`` to ``end``
    (``YYYYMMDDHHMMSSZ``, UTC), e.g. one that has expired already: ``openssl
    ca`` is the command that takes both dates (``x509 -req`` counts days
    from now). ``(certificate, key)``."""
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    csr, ext = directory / f"{name}.csr", directory / f"{name}.ext"
    work = directory / f"{name}.ca"
    work.mkdir()
    (work / "index.txt").write_text("")
    (work / "serial").write_text("01\n")
    conf = work / "ca.conf"
    conf.write_text(f"[ca]\ndefault_ca = test\n[test]\ndir = {work}\n"
                    f"database = {work}/index.txt\nnew_certs_dir = {work}\n"
                    f"serial = {work}/serial\ndefault_md = sha256\npolicy = anything\n"
                    "unique_subject = no\ncopy_extensions = none\n"
                    "[anything]\ncommonName = supplied\n")
    ext.write_text(f"subjectAltName={','.join(names)}\n"
                   "extendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n")
    _run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={name}")
    _run("ca", "-batch", "-config", str(conf), "-cert", ca[0], "-keyfile", ca[1],
         "-in", str(csr), "-out", str(cert), "-startdate", start, "-enddate", end,
         "-extfile", str(ext), "-notext")
    return str(cert), str(key)
