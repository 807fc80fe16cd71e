"""elvin.certcheck: the dates read from a certificate's DER are openssl's,
for UTCTime and GeneralizedTime alike; what counts as expired, not yet
valid, expiring soon."""

from __future__ import annotations

import calendar
import subprocess
import time

import pytest

from elvin.certcheck import EXPIRY_WARNING_DAYS, Validity, expiry_note, validity
from tests.integration.tls_certs import make_ca, make_dated_certificate


def openssl_dates(path: str) -> tuple[float, float]:
    out = subprocess.run(["openssl", "x509", "-in", path, "-noout", "-startdate", "-enddate"],
                         capture_output=True, text=True, check=True).stdout
    dates = dict(line.split("=", 1) for line in out.splitlines())
    parse = lambda text: float(calendar.timegm(time.strptime(text, "%b %d %H:%M:%S %Y GMT")))  # noqa: E731
    return parse(dates["notBefore"]), parse(dates["notAfter"])


@pytest.mark.parametrize("start, end", [("20200101000000Z", "20210101000000Z"),
                                        ("20240229120000Z", "20600101000000Z")])  # Generalized
def test_the_dates_are_the_certificates(tmp_path, start, end):
    ca = make_ca(tmp_path, "ca")
    cert, _ = make_dated_certificate(tmp_path, ca, "c", ["DNS:c.test"], start, end)
    dates = validity(cert)
    assert dates is not None
    assert (dates.not_before, dates.not_after) == openssl_dates(cert)
    assert validity(ca[0]) is not None                 # a CA certificate too


def test_no_certificate_no_dates(tmp_path):
    (tmp_path / "x.pem").write_text("not a certificate\n")
    assert validity(str(tmp_path / "x.pem")) is None
    assert validity(str(tmp_path / "missing.pem")) is None


def test_what_counts_as_expired_or_soon():
    now = 1_800_000_000.0
    day = 86400.0
    expired = expiry_note("tls-cert", "c.pem", Validity(now - 9 * day, now - 1), now)
    assert expired[0] and "expired on" in expired[0] and expired[1] is None
    early = expiry_note("tls-cert", "c.pem", Validity(now + day, now + 90 * day), now)
    assert early[0] and "not valid before" in early[0]
    soon = expiry_note("tls-cert", "c.pem",
                       Validity(now - day, now + (EXPIRY_WARNING_DAYS - 1) * day), now)
    assert soon[0] is None and "expires in 29 day(s)" in soon[1]
    fine = expiry_note("tls-cert", "c.pem", Validity(now - day, now + 365 * day), now)
    assert fine == (None, None)
