"""What a start would find wrong with TLS material, found without starting.

``pair_problems`` loads a certificate and its key as a listener or a dialler
does (``ssl``), saying in one line a key that belongs to another certificate
rather than OpenSSL's ``KEY_VALUES_MISMATCH``; ``validity`` reads the dates
of the first certificate of a PEM file, so that an expired or not yet valid
one is an error and one that expires within ``EXPIRY_WARNING_DAYS`` a
warning -- at ``--check-config``, at start and in ``elvind status``.

The dates come from the certificate's DER (``ssl`` loads certificates but
tells their dates only for CA certificates it trusts, and ``cryptography``
is not a dependency): a short walk of the ASN.1 to TBSCertificate.validity.
"""

from __future__ import annotations

import calendar
import ssl
import time
from dataclasses import dataclass

from elvin.config_file import list_item

__all__ = ["EXPIRY_WARNING_DAYS", "Validity", "ca_problems", "certificate_findings",
           "expiry_note", "pair_problems", "validity"]

#: a certificate that expires sooner than this is warned about
EXPIRY_WARNING_DAYS = 30


@dataclass(frozen=True)
class Validity:
    """When a certificate may be used: seconds since the epoch (UTC)."""

    not_before: float
    not_after: float


def _tlv(data: bytes, at: int) -> tuple[int, int, int]:
    """(tag, start of the value, end of the value) of the DER element at ``at``."""
    tag = data[at]
    length = data[at + 1]
    at += 2
    if length & 0x80:
        count = length & 0x7F
        length = int.from_bytes(data[at:at + count], "big")
        at += count
    if at + length > len(data):
        raise ValueError("truncated DER")
    return tag, at, at + length


def _time(tag: int, text: bytes) -> float:
    value = text.decode("ascii")
    if tag == 0x17:              # UTCTime YYMMDDHHMMSSZ: 50-99 are 19xx (RFC 5280)
        year = int(value[:2])
        value = f"{1900 + year if year >= 50 else 2000 + year}{value[2:]}"
    elif tag != 0x18:            # GeneralizedTime YYYYMMDDHHMMSSZ
        raise ValueError("not a time")
    return float(calendar.timegm(time.strptime(value, "%Y%m%d%H%M%SZ")))


def _validity_of_der(der: bytes) -> Validity:
    _, cert, _ = _tlv(der, 0)               # Certificate
    _, at, tbs_end = _tlv(der, cert)        # TBSCertificate
    fields: list[tuple[int, int, int]] = []
    while at < tbs_end and len(fields) < 5:
        tag, start, end = _tlv(der, at)
        fields.append((tag, start, end))
        at = end
    if fields and fields[0][0] == 0xA0:     # [0] version, absent in v1 certificates
        fields = fields[1:]
    # serialNumber, signature, issuer, validity
    tag, start, end = fields[3]
    if tag != 0x30:
        raise ValueError("no validity")
    b_tag, b_start, b_end = _tlv(der, start)
    a_tag, a_start, a_end = _tlv(der, b_end)
    return Validity(_time(b_tag, der[b_start:b_end]), _time(a_tag, der[a_start:a_end]))


def validity(path: str) -> Validity | None:
    """The dates of the first certificate in the PEM file ``path``; None
    when there is none to read (loading it says why)."""
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return None
    begin, end = "-----BEGIN CERTIFICATE-----", "-----END CERTIFICATE-----"
    start = text.find(begin)
    stop = text.find(end, start)
    if start < 0 or stop < 0:
        return None
    try:
        return _validity_of_der(ssl.PEM_cert_to_DER_cert(text[start:stop + len(end)]))
    except (ValueError, IndexError):
        return None


def expiry_note(what: str, path: str, dates: Validity | None,
                now: float | None = None) -> tuple[str | None, str | None]:
    """``(error, warning)`` about the dates of ``path`` (``what`` names the
    setting): expired or not yet valid is an error, expiring within
    ``EXPIRY_WARNING_DAYS`` a warning."""
    if dates is None:
        return None, None
    now = time.time() if now is None else now
    until = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(dates.not_after))
    if dates.not_after <= now:
        return f"{what} {path!r}: the certificate expired on {until}", None
    if dates.not_before > now:
        since = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(dates.not_before))
        return f"{what} {path!r}: the certificate is not valid before {since}", None
    days = (dates.not_after - now) / 86400
    if days < EXPIRY_WARNING_DAYS:
        return None, (f"{what} {path!r}: the certificate expires in {days:.0f} day(s), "
                      f"on {until}")
    return None, None


def pair_problems(what: str, cert: str, key: str) -> list[str]:
    """Why ``cert`` and ``key`` would not load as a TLS identity (``what``
    names the settings): unreadable, not PEM, or a key of another
    certificate."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        if exc.reason in ("KEY_VALUES_MISMATCH", "NO_CERTIFICATE_ASSIGNED"):
            return [f"{what}: the key {key!r} is not the key of the certificate {cert!r}"]
        reason = exc.reason if exc.reason and exc.reason != "PEM lib" else \
            "no PEM certificate or key found (or the key is encrypted)"
        return [f"{what}: cannot load the certificate {cert!r} / key {key!r}: {reason}"]
    except OSError as exc:
        return [f"{what}: cannot load the certificate {cert!r} / key {key!r}: "
                f"{exc.strerror or exc}"]
    return []


def ca_problems(what: str, ca: str) -> list[str]:
    """Why the CA file ``ca`` would not load as trust anchors."""
    try:
        ssl.create_default_context(cafile=ca)
    except ssl.SSLError as exc:
        return [f"{what} {ca!r}: cannot load: {exc.reason or exc}"]
    except OSError as exc:
        return [f"{what} {ca!r}: cannot load: {exc.strerror or exc}"]
    return []


def certificate_findings(config, now: float | None = None
                         ) -> tuple[list[str], list[str], list[dict]]:
    """Every TLS file a router ``config`` (``RouterConfig``) names, checked
    as a start would use it: ``(errors, warnings, certificates)``, the last
    the dates of each certificate (``elvind status`` and the metrics show
    them)."""
    errors: list[str] = []
    warnings: list[str] = []
    certificates: list[dict] = []

    def dates_of(what: str, path: str, fatal: bool = True) -> None:
        dates = validity(path)
        error, warning = expiry_note(what, path, dates, now)
        # a CA file may be a bundle whose first certificate is not the one that
        # matters: its dates are a warning only
        (errors if fatal else warnings).extend([error] if error else [])
        warnings.extend([warning] if warning else [])
        if dates is not None:
            certificates.append({"what": what, "file": path, "not_after": dates.not_after})

    if config.tls_cert and config.tls_key:
        found = pair_problems("tls-cert / tls-key", config.tls_cert, config.tls_key)
        errors.extend(found)
        if not found:
            dates_of("tls-cert", config.tls_cert)
    fed = config.federation
    if fed is not None:
        if fed.tls_ca:
            found = ca_problems("federation.tls_ca", fed.tls_ca)
            errors.extend(found)
            if not found:
                dates_of("federation.tls_ca", fed.tls_ca, fatal=False)
        for i, spec in enumerate(fed.connect):
            if spec.client_cert and spec.client_key:
                what = list_item("federation.connect", i, "client_cert")
                found = pair_problems(f"{what} / client_key", spec.client_cert,
                                      spec.client_key)
                errors.extend(found)
                if not found:
                    dates_of(what, spec.client_cert)
    return errors, warnings, certificates
