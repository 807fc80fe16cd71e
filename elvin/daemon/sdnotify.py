"""Telling systemd how a daemon is doing (``Type=notify`` units).

systemd passes the path of a datagram socket in ``NOTIFY_SOCKET``; a daemon
sends it lines such as ``READY=1`` (started: systemd starts what comes after
it only now, and ``systemctl start`` waits for it), ``RELOADING=1`` then
``READY=1`` around a reload, ``STOPPING=1``, and ``STATUS=...`` (shown by
``systemctl status``). The protocol is one ``sendto`` of newline-separated
assignments, so it needs no library (``sd_notify(3)``). Without
``NOTIFY_SOCKET`` (not under systemd, or ``Type=simple``) every call does
nothing, so the daemons call it unconditionally.
"""

from __future__ import annotations

import logging
import os
import socket
import time

__all__ = ["notify", "ready", "reloading", "status", "stopping"]

log = logging.getLogger("elvin.daemon.sdnotify")


def _address(value: str) -> str | bytes | None:
    if value.startswith("@"):            # an abstract socket: leading NUL byte
        return b"\0" + value[1:].encode()
    if value.startswith("/"):
        return value
    return None


def notify(*assignments: str) -> bool:
    """Send ``assignments`` (``"READY=1"``...) to systemd; False when not
    under a notifying service manager or when the message cannot be sent
    (logged at debug level: never a reason to stop)."""
    target = os.environ.get("NOTIFY_SOCKET", "")
    address = _address(target) if target else None
    if address is None or not assignments:
        return False
    message = "\n".join(assignments).encode("utf-8", "replace")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.sendto(message, address)
    except OSError as exc:
        log.debug("cannot notify systemd at %s: %s", target, exc)
        return False
    return True


def ready(text: str | None = None) -> bool:
    """Started (or reloaded): ``READY=1``, with a status line."""
    return notify("READY=1", *([f"STATUS={text}"] if text else []))


def reloading(text: str | None = None) -> bool:
    """Reloading the configuration; ``ready()`` says it is done. systemd
    (253+) wants the monotonic clock with it, to match the reload it asked for."""
    usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    return notify("RELOADING=1", f"MONOTONIC_USEC={usec}",
                  *([f"STATUS={text}"] if text else []))


def stopping(text: str | None = None) -> bool:
    return notify("STOPPING=1", *([f"STATUS={text}"] if text else []))


def status(text: str) -> bool:
    return notify(f"STATUS={text}")
