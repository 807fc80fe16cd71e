"""Certificates for TLS tests, made with the ``openssl`` command in a
temporary directory: a private CA and certificates it signs, each valid
for TLS servers and clients (as a federated router's certificate is both:
it serves its listener and is shown when it dials), with the
subjectAltName entries a test needs. The README's "Securing federation"
section gives the same commands.

EC keys (P-256): quick to make, so that each test module can have its own.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["make_ca", "make_certificate"]


def _run(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_ca(directory: Path, name: str) -> tuple[str, str]:
    """A self-signed CA: ``(certificate, key)`` PEM file names."""
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    _run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2",
         "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return str(cert), str(key)


def make_certificate(directory: Path, ca: tuple[str, str], name: str,
                     names: list[str]) -> tuple[str, str]:
    """A certificate signed by ``ca`` naming ``names`` (``DNS:edge.test``,
    ``IP:127.0.0.1``) in its subjectAltName: ``(certificate, key)``."""
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    csr, ext = directory / f"{name}.csr", directory / f"{name}.ext"
    ext.write_text(f"subjectAltName={','.join(names)}\n"
                   "extendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n")
    _run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={name}")
    _run("x509", "-req", "-in", str(csr), "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial",
         "-out", str(cert), "-days", "2", "-extfile", str(ext))
    return str(cert), str(key)
