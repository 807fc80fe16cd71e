"""UDP sockets and datagrams, shared by the discovery responder and client.

The draft's IPv4 mapping (section 6.1.1) uses the multicast group 224.4.0.1
and UDP port 2917, with the packet's locality as the IP TTL. For hosts or
tests where multicast is unwanted, the same code also works with a *unicast*
address: the responder binds that address and answers the sender directly.
"""

from __future__ import annotations

import ipaddress
import logging
import socket

from elvin.discovery.codec import DiscoveryDecodeError, Packet, decode, is_compatible

log = logging.getLogger("elvin.discovery")

__all__ = [
    "DEFAULT_ADDRESS",
    "DEFAULT_PORT",
    "is_multicast",
    "listening_socket",
    "multicast_socket",
    "read_datagram",
    "set_ttl",
    "unicast_socket",
]

#: The ERDP IPv4 multicast group and port (draft 6.1.1).
DEFAULT_ADDRESS = "224.4.0.1"
DEFAULT_PORT = 2917


def is_multicast(address: str) -> bool:
    """True for an IPv4 multicast group; anything else is used as unicast."""
    try:
        return ipaddress.IPv4Address(address).is_multicast
    except ValueError:
        return False


def _interface(interface: str) -> bytes:
    return socket.inet_aton(interface or "0.0.0.0")


def multicast_socket(group: str, port: int, interface: str = "",
                     bind_port: int | None = None) -> socket.socket:
    """A UDP socket joined to ``group`` (on ``interface``, "" = the kernel's
    choice), sending on that interface with loopback on, so that clients and
    routers on the same host hear each other. ``bind_port`` (default
    ``port``) is shared with other listeners through SO_REUSEADDR/PORT;
    ``bind_port=0`` gives a send-only socket on an ephemeral port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if hasattr(socket, "SO_REUSEPORT"):
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            except OSError:
                pass
        sock.bind(("", port if bind_port is None else bind_port))
        if bind_port is None or bind_port:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                            socket.inet_aton(group) + _interface(interface))
        if interface:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, _interface(interface))
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
        sock.setblocking(False)
    except BaseException:  # no socket leaks; re-raised
        sock.close()
        raise
    return sock


def unicast_socket(host: str = "", port: int = 0) -> socket.socket:
    """A plain UDP socket bound to ``host:port`` (port 0: any free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    try:
        sock.bind((host, port))
        sock.setblocking(False)
    except BaseException:  # no socket leaks; re-raised
        sock.close()
        raise
    return sock


def listening_socket(address: str, port: int, interface: str = "") -> socket.socket:
    """A socket that hears what is sent to ``address:port``: a member of the
    group for a multicast address, else bound to that unicast address."""
    if is_multicast(address):
        return multicast_socket(address, port, interface)
    return unicast_socket(address, port)


def set_ttl(sock: socket.socket, locality: int) -> None:
    """The draft maps locality directly onto the IPv4 multicast TTL (6.1.1)."""
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, max(0, min(locality, 255)))


def read_datagram(data: bytes, sender: object) -> Packet | None:
    """The ERDP packet in a datagram, or None for one both ends must discard
    (draft 5.2.1): garbage, or a version this end does not speak. Either is
    logged at debug level with its sender: a network carries other people's
    datagrams, so neither is worth more."""
    try:
        packet = decode(data)
    except DiscoveryDecodeError as exc:
        log.debug("discovery: ignoring %d-byte datagram from %s: %s", len(data), sender, exc)
        return None
    if not is_compatible(packet):
        log.debug("discovery: ignoring %s of version %d.%d from %s", type(packet).__name__,
                  packet.major_version, packet.minor_version, sender)
        return None
    return packet
