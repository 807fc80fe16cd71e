"""Elvin URIs (the Elvin URI scheme draft, ``reference/elvin-uri-scheme.m4.txt``).

Syntax: ``elvin:[version]/protocol/endpoint[;name=value]*`` with

* ``version`` = ``major[.minor]``; missing means the default (4.0);
* ``protocol`` = ``transport,security,marshalling``; the empty string is an
  alias for ``tcp,none,xdr`` and ``secure`` for ``ssl,none,xdr``;
* ``endpoint`` = ``host[:port]`` (RFC 2732 hosts, so IPv6 as ``[::1]``);
  the port defaults to 2917;
* options ``;name=value`` (or ``;name``, value ``""``), %-escapes decoded.

So ``elvin://host``, ``elvin://host:2917``, ``elvin:4.0/tcp,none,xdr/host:2917``
``elvin:/secure/host`` and ``elvin:4.0/ssl,none,xdr/[::1]:2917;a=b`` are all
valid. Supported stacks: transport ``tcp`` or ``ssl``, security ``none``,
marshalling ``xdr``. ``str(uri)`` gives the canonical form, with the version
and the full stack spelled out (as routers must advertise them).

``parse_uri(text, default_port=..., scheme=...)`` also parses other schemes
with the same syntax (e.g. ``ewaf`` for federation, default port 2916).
Errors are ``URIError`` (a ``ValueError``) naming the bad part and the URI.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import quote, unquote

__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_PROTOCOL",
    "SECURE_PROTOCOL",
    "ElvinURI",
    "URIError",
    "parse_uri",
]

DEFAULT_PORT = 2917
DEFAULT_VERSION = (4, 0)
DEFAULT_PROTOCOL = ("tcp", "none", "xdr")
SECURE_PROTOCOL = ("ssl", "none", "xdr")
PROTOCOL_ALIASES = {"": DEFAULT_PROTOCOL, "secure": SECURE_PROTOCOL}
TRANSPORTS = ("tcp", "ssl")
SECURITY_MODULES = ("none",)
MARSHALLINGS = ("xdr",)


class URIError(ValueError):
    """A malformed or unsupported Elvin URI. ``uri`` is the text given and
    ``part`` names the component that is wrong."""

    def __init__(self, message: str, uri: str, part: str = "") -> None:
        self.uri = uri
        self.part = part
        self.message = message
        super().__init__(f"{message} in URI {uri!r}")


@dataclass(frozen=True, kw_only=True)
class ElvinURI:
    host: str
    port: int = DEFAULT_PORT
    version: tuple[int, int] = DEFAULT_VERSION
    protocol: tuple[str, ...] = DEFAULT_PROTOCOL
    options: Mapping[str, str] = field(default_factory=dict)
    scheme: str = "elvin"

    def __hash__(self) -> int:
        return hash((self.scheme, self.host, self.port, self.version, self.protocol,
                     tuple(sorted(self.options.items()))))

    @property
    def transport(self) -> str:
        return self.protocol[0]

    @property
    def secure(self) -> bool:
        """True for an SSL/TLS transport."""
        return self.transport == "ssl"

    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)`` for socket calls (IPv6 without brackets)."""
        return self.host, self.port

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        text = (f"{self.scheme}:{self.version[0]}.{self.version[1]}/"
                f"{','.join(self.protocol)}/{host}:{self.port}")
        for name, value in self.options.items():
            text += f";{quote(name, safe='')}={quote(value, safe='')}"
        return text


_VERSION = re.compile(r"(\d+)(?:\.(\d+))?\Z")
_MODULE = re.compile(r"(?:x-)?[A-Za-z][A-Za-z0-9]*\Z")
_HOSTNAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_.])?\Z")
_OPTION_NAME = re.compile(r"[A-Za-z](?:[A-Za-z0-9\-_.!~*'()]|%[0-9A-Fa-f]{2})*\Z")
_OPTION_VALUE = re.compile(r"(?:[A-Za-z0-9\-_.!~*'()]|%[0-9A-Fa-f]{2})*\Z")


def _parse_version(text: str, uri: str, default: tuple[int, int],
                   scheme: str) -> tuple[int, int]:
    if not text:
        return default
    m = _VERSION.match(text)
    if not m:
        raise URIError(f"bad protocol version {text!r} (expected major.minor, e.g. "
                       f"{default[0]}.{default[1]})", uri, "version")
    version = (int(m.group(1)), int(m.group(2) or 0))
    if version[0] != default[0]:
        raise URIError(f"unsupported protocol version {text} (this suite speaks "
                       f"{scheme} {default[0]}.x)", uri, "version")
    return version


def _parse_protocol(text: str, uri: str) -> tuple[str, ...]:
    alias = PROTOCOL_ALIASES.get(text.lower())
    if alias is not None:
        return alias
    modules = tuple(m.strip().lower() for m in text.split(","))
    for module in modules:
        if not _MODULE.match(module):
            raise URIError(f"bad protocol module name {module!r} in stack {text!r}",
                           uri, "protocol")
    if len(modules) != 3:
        raise URIError(f"protocol stack {text!r} must name a transport, a security and a "
                       "marshalling module (e.g. tcp,none,xdr or ssl,none,xdr)", uri,
                       "protocol")
    transport, security, marshalling = modules
    if transport not in TRANSPORTS:
        raise URIError(f"unsupported transport {transport!r} (supported: "
                       f"{', '.join(TRANSPORTS)})", uri, "transport")
    if security not in SECURITY_MODULES:
        raise URIError(f"unsupported security module {security!r} (supported: "
                       f"{', '.join(SECURITY_MODULES)})", uri, "security")
    if marshalling not in MARSHALLINGS:
        raise URIError(f"unsupported marshalling {marshalling!r} (supported: "
                       f"{', '.join(MARSHALLINGS)})", uri, "marshalling")
    return modules


def _parse_port(text: str, uri: str) -> int:
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= 65535:
        raise URIError(f"bad port {text!r} (expected a number from 1 to 65535)", uri,
                       "port")
    return int(text)


def _parse_endpoint(text: str, uri: str, default_port: int) -> tuple[str, int]:
    if not text:
        raise URIError("missing host", uri, "host")
    if text.startswith("["):
        close = text.find("]")
        if close < 0:
            raise URIError(f"unterminated IPv6 address {text!r} (missing ']')", uri, "host")
        host, rest = text[1:close], text[close + 1:]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise URIError(f"bad IPv6 address {host!r}", uri, "host") from None
        if not rest:
            return host, default_port
        if not rest.startswith(":"):
            raise URIError(f"unexpected {rest!r} after the IPv6 address", uri, "host")
        return host, _parse_port(rest[1:], uri)
    host, colon, port = text.partition(":")
    if ":" in port:
        raise URIError(f"bad endpoint {text!r} (put IPv6 addresses in brackets, e.g. "
                       "[::1]:2917)", uri, "host")
    if not host:
        raise URIError("missing host", uri, "host")
    if not _HOSTNAME.match(host):
        raise URIError(f"bad host {host!r}", uri, "host")
    return host, (_parse_port(port, uri) if colon else default_port)


def _parse_options(parts: list[str], uri: str) -> dict[str, str]:
    options: dict[str, str] = {}
    for part in parts:
        if not part:
            continue   # tolerate "host;" and ";;"
        name, _eq, value = part.partition("=")
        if not _OPTION_NAME.match(name):
            raise URIError(f"bad option name {name!r}", uri, "options")
        if not _OPTION_VALUE.match(value):
            raise URIError(f"bad value {value!r} for option {name!r} (escape reserved "
                           "characters as %XX)", uri, "options")
        name = unquote(name, errors="strict")
        if name in options:
            raise URIError(f"option {name!r} given twice", uri, "options")
        try:
            options[name] = unquote(value, errors="strict")
        except UnicodeDecodeError:
            raise URIError(f"value of option {name!r} is not UTF-8 once unescaped", uri,
                           "options") from None
    return options


def parse_uri(text: str, default_port: int = DEFAULT_PORT, scheme: str = "elvin",
              default_version: tuple[int, int] = DEFAULT_VERSION) -> ElvinURI:
    """Parse an Elvin URI; raises ``URIError`` naming what is wrong."""
    if not isinstance(text, str):
        raise TypeError(f"a URI is a str, not {type(text).__name__}")
    uri = text
    text = text.strip()
    given_scheme, colon, rest = text.partition(":")
    if not colon or given_scheme.lower() != scheme:
        shown = given_scheme if colon else text
        raise URIError(f"not an {scheme} URI (expected '{scheme}://host[:port]' or "
                       f"'{scheme}:[version]/protocol/host[:port]', not {shown!r}...)", uri,
                       "scheme")
    version_text, slash, rest = rest.partition("/")
    if not slash:
        raise URIError(f"expected '{scheme}://host[:port]' or "
                       f"'{scheme}:[version]/protocol/host[:port]'", uri, "syntax")
    protocol_text, slash, rest = rest.partition("/")
    if not slash:
        raise URIError(f"missing '/' between the protocol stack {protocol_text!r} and the "
                       "endpoint", uri, "syntax")
    endpoint, *option_parts = rest.split(";")
    version = _parse_version(version_text, uri, default_version, scheme)
    protocol = _parse_protocol(protocol_text, uri)
    host, port = _parse_endpoint(endpoint, uri, default_port)
    options = _parse_options(option_parts, uri)
    return ElvinURI(host=host, port=port, version=version, protocol=protocol,
                    options=options, scheme=scheme)
