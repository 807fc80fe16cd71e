"""UDP socket set-up shared by the discovery responder and client.

The draft's IPv4 mapping (section 6.1.1) uses the multicast group 224.4.0.1
and UDP port 2917, with the packet's locality as the IP TTL. For hosts or
tests where multicast is unwanted, the same code also works with a *unicast*
address: the responder binds that address and answers the sender directly.
"""

from __future__ import annotations

import ipaddress
import socket

__all__ = [
    "DEFAULT_ADDRESS",
    "DEFAULT_PORT",
    "is_multicast",
    "multicast_socket",
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
    except BaseException:
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
    except BaseException:
        sock.close()
        raise
    return sock


def set_ttl(sock: socket.socket, locality: int) -> None:
    """The draft maps locality directly onto the IPv4 multicast TTL (6.1.1)."""
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, max(0, min(locality, 255)))
