"""Named points where a crash test can have the process kill itself.

``ELVIN_CRASH_AT=NAME[,NAME...]`` in the environment makes the process send
itself SIGKILL when it reaches a point of that name (``crash_point(NAME)``):
a real kill -9 at an exact moment that a test could not hit from outside
(between a disk commit and the reply that follows it, say). Without the
variable a crash point costs one set lookup. Never set it in production.

Points: ``mobility-move-out-received`` (a move-out request is being handled,
nothing written yet), ``mobility-move-out-committed`` (the moved-out client
is on disk, its reply not sent), ``mobility-move-in-handed`` (the first batch
of a move-in reply is sent), ``mobility-download-received`` (another proxy's download of a
buffer arrived, nothing sent), ``mobility-release-received`` (a client's release of its buffer
arrived, nothing written: the client has everything, the proxy still holds
it), ``mobility-released`` (a client's release of
its buffer, or any removal of a client, is committed with the first slice of
its rows deleted; the rest go a slice per turn),
``mobility-take-over`` (a resumed move-out's reply came back: the new buffer,
which holds what the restored one recorded since the restart, is armed; the
restored one's subscriptions still feed it).
"""

from __future__ import annotations

import os
import signal

__all__ = ["crash_point"]

_ARMED = frozenset(filter(None, (n.strip() for n in
                                 os.environ.get("ELVIN_CRASH_AT", "").split(","))))


def crash_point(name: str) -> None:
    if name in _ARMED:
        os.kill(os.getpid(), signal.SIGKILL)
