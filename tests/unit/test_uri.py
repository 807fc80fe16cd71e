"""Elvin URIs (elvin-uri-scheme draft)."""

from __future__ import annotations

import pytest

from elvin.protocol import DEFAULT_PORT, ElvinURI, URIError, parse_uri

TCP = ("tcp", "none", "xdr")
SSL = ("ssl", "none", "xdr")


@pytest.mark.parametrize(("text", "host", "port", "version", "protocol", "options"), [
    ("elvin://localhost", "localhost", 2917, (4, 0), TCP, {}),
    ("elvin://router.example.com:2918", "router.example.com", 2918, (4, 0), TCP, {}),
    ("elvin:4.0/tcp,none,xdr/host:3000", "host", 3000, (4, 0), TCP, {}),
    ("elvin:/tcp,none,xdr/host", "host", 2917, (4, 0), TCP, {}),
    ("elvin:4.0/ssl,none,xdr/host:443", "host", 443, (4, 0), SSL, {}),
    ("elvin:/secure/host", "host", 2917, (4, 0), SSL, {}),
    ("elvin:4.1//host", "host", 2917, (4, 1), TCP, {}),
    ("elvin:4//host", "host", 2917, (4, 0), TCP, {}),
    ("elvin:4.0//public.elvin.org:2917", "public.elvin.org", 2917, (4, 0), TCP, {}),
    ("elvin://[::1]:2917", "::1", 2917, (4, 0), TCP, {}),
    ("elvin://[::1]", "::1", 2917, (4, 0), TCP, {}),
    ("elvin:/ssl,none,xdr/[fe80::1]:99", "fe80::1", 99, (4, 0), SSL, {}),
    ("elvin://10.0.0.1:1", "10.0.0.1", 1, (4, 0), TCP, {}),
    ("elvin:/tcp,none,xdr/machine.domain.com:12345;property=value;property2",
     "machine.domain.com", 12345, (4, 0), TCP, {"property": "value", "property2": ""}),
    ("elvin://h;a=b;c=d%20e", "h", 2917, (4, 0), TCP, {"a": "b", "c": "d e"}),
    ("ELVIN://Host:65535", "Host", 65535, (4, 0), TCP, {}),
    ("  elvin://h  ", "h", 2917, (4, 0), TCP, {}),
    ("elvin:/TCP,None,XDR/h", "h", 2917, (4, 0), TCP, {}),
    ("elvin://h;", "h", 2917, (4, 0), TCP, {}),
])
def test_valid_uris(text, host, port, version, protocol, options):
    uri = parse_uri(text)
    assert (uri.host, uri.port, uri.version, uri.protocol, dict(uri.options)) == (
        host, port, version, protocol, options)
    assert uri.transport == protocol[0]
    assert uri.secure == (protocol[0] == "ssl")
    assert uri.address == (host, port)


@pytest.mark.parametrize(("text", "canonical"), [
    ("elvin://localhost", "elvin:4.0/tcp,none,xdr/localhost:2917"),
    ("elvin:/secure/h:1", "elvin:4.0/ssl,none,xdr/h:1"),
    ("elvin://[::1]", "elvin:4.0/tcp,none,xdr/[::1]:2917"),
    ("elvin://h;a=x%3By", "elvin:4.0/tcp,none,xdr/h:2917;a=x%3By"),
])
def test_canonical_form_round_trips(text, canonical):
    uri = parse_uri(text)
    assert str(uri) == canonical
    assert parse_uri(str(uri)) == uri


def test_uri_values_are_comparable_and_hashable():
    a, b = parse_uri("elvin://h"), parse_uri("elvin:4.0/tcp,none,xdr/h:2917")
    assert a == b and hash(a) == hash(b)
    assert a != parse_uri("elvin://h:1")
    assert ElvinURI(host="h") == a
    assert DEFAULT_PORT == 2917


def test_other_schemes_and_default_ports():
    uri = parse_uri("ewaf://fed.example.com", default_port=2916, scheme="ewaf",
                    default_version=(1, 0))
    assert (uri.scheme, uri.host, uri.port, uri.version) == ("ewaf", "fed.example.com",
                                                             2916, (1, 0))
    assert str(uri) == "ewaf:1.0/tcp,none,xdr/fed.example.com:2916"
    assert parse_uri("elvin://h", default_port=5000).port == 5000


@pytest.mark.parametrize(("text", "part", "match"), [
    ("elvin://", "host", "missing host"),
    ("elvin://:2917", "host", "missing host"),
    ("elvin:", "syntax", "expected 'elvin://host"),
    ("elvin:4.0", "syntax", "expected"),
    ("elvin:/tcp,none,xdr", "syntax", "missing '/' between the protocol stack"),
    ("http://host", "scheme", "not an elvin URI"),
    ("localhost:2917", "scheme", "not an elvin URI"),
    ("localhost", "scheme", "not an elvin URI"),
    ("", "scheme", "not an elvin URI"),
    ("elvin://host:abc", "port", "bad port 'abc'"),
    ("elvin://host:0", "port", "bad port '0'"),
    ("elvin://host:65536", "port", "bad port '65536'"),
    ("elvin://host:", "port", "bad port ''"),
    ("elvin://host:-1", "port", "bad port '-1'"),
    ("elvin://host:２９１７", "port", "bad port"),
    ("elvin:/udp,none,xdr/host", "transport", "unsupported transport 'udp' "
     r"\(supported: tcp, ssl\)"),
    ("elvin:/x-foo,none,xdr/host", "transport", "unsupported transport 'x-foo'"),
    ("elvin:/tcp,krb5,xdr/host", "security", "unsupported security module 'krb5'"),
    ("elvin:/tcp,none,json/host", "marshalling", "unsupported marshalling 'json'"),
    ("elvin:/tcp/host", "protocol", "must name a transport, a security and a marshalling"),
    ("elvin:/tcp,none,xdr,zip/host", "protocol", "must name"),
    ("elvin:/tcp,,xdr/host", "protocol", "bad protocol module name ''"),
    ("elvin:/1tcp,none,xdr/host", "protocol", "bad protocol module name"),
    ("elvin:x.y//host", "version", "bad protocol version 'x.y'"),
    ("elvin:4.0.1//host", "version", "bad protocol version"),
    ("elvin:3.0//host", "version", "unsupported protocol version 3.0"),
    ("elvin://::1", "host", "put IPv6 addresses in brackets"),
    ("elvin://[::1", "host", "unterminated IPv6 address"),
    ("elvin://[nonsense]:1", "host", "bad IPv6 address 'nonsense'"),
    ("elvin://[::1]x", "host", "unexpected 'x' after the IPv6 address"),
    ("elvin://[::1]:x", "port", "bad port 'x'"),
    ("elvin://ho st", "host", "bad host 'ho st'"),
    ("elvin://host/", "host", "bad host 'host/'"),
    ("elvin://-host", "host", "bad host"),
    ("elvin://h;=v", "options", "bad option name ''"),
    ("elvin://h;1a=v", "options", "bad option name '1a'"),
    ("elvin://h;a=b c", "options", "bad value 'b c' for option 'a'"),
    ("elvin://h;a=%zz", "options", "bad value"),
    ("elvin://h;a=1;a=2", "options", "option 'a' given twice"),
    ("elvin://h;a=%ff", "options", "not UTF-8"),
])
def test_invalid_uris(text, part, match):
    with pytest.raises(URIError, match=match) as info:
        parse_uri(text)
    err = info.value
    assert isinstance(err, ValueError)
    assert err.part == part
    assert err.uri == text
    assert repr(text) in str(err)      # the message names the offending URI


def test_non_string_is_a_type_error():
    with pytest.raises(TypeError):
        parse_uri(b"elvin://h")  # type: ignore[arg-type]
