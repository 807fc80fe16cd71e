"""The notification attribute set of the filewatcher, in one place.

Subscribers write subscriptions against these names, and the daemon quenches
on exactly these names, so the set is a published interface: changing a name
or a type is an incompatible change and bumps ``ATTRIBUTE_SET_VERSION``
(sent as ``Filewatcher-Version``).

=====================  =======  ==================================================
attribute              type     meaning
=====================  =======  ==================================================
File-Event             string   ``created``, ``modified``, ``deleted``, ``moved``,
                                ``attrib`` (metadata only: mode, owner, times)
File-Path              string   absolute path of the file; for ``moved`` the old
                                path
File-Dest-Path         string   ``moved`` only: the new path
File-Size              int64    bytes (absent for ``deleted``)
File-Mtime             int64    modification time, milliseconds since the Unix
                                epoch (absent for ``deleted``)
File-Owner             string   owner's user name, or the numeric uid as text
                                (absent for ``deleted``)
File-Host              string   host name of the machine the daemon runs on
File-Is-Dir            int32    1 for a directory, 0 otherwise
Filewatcher-Version    int32    version of this attribute set (1)
=====================  =======  ==================================================

Sizes and times are always int64 (``elvin.Int64``) so that subscriptions see
one type whatever the value; comparisons work across int32/int64 anyway.
"""

from __future__ import annotations

import os
import pwd
import stat as stat_module
from collections.abc import Mapping
from functools import lru_cache

from elvin.values import Int64, Value

__all__ = [
    "ALL_NAMES",
    "ATTRIBUTE_SET_VERSION",
    "EVENT_KINDS",
    "PATH_NAMES",
    "notification",
    "owner_name",
]

EVENT = "File-Event"
PATH = "File-Path"
DEST_PATH = "File-Dest-Path"
SIZE = "File-Size"
MTIME = "File-Mtime"
OWNER = "File-Owner"
HOST = "File-Host"
IS_DIR = "File-Is-Dir"
VERSION = "Filewatcher-Version"

ATTRIBUTE_SET_VERSION = 1

CREATED, MODIFIED, DELETED, MOVED, ATTRIB = "created", "modified", "deleted", "moved", "attrib"
EVENT_KINDS = (CREATED, MODIFIED, DELETED, MOVED, ATTRIB)

#: The attributes whose values are paths: a subscription constraining either
#: one tells the daemon where to watch (see ``pathset``).
PATH_NAMES = (PATH, DEST_PATH)

#: Everything the daemon sends; it quenches on all of them, so it hears of
#: every subscription that could match one of its notifications.
ALL_NAMES = (EVENT, PATH, DEST_PATH, SIZE, MTIME, OWNER, HOST, IS_DIR, VERSION)


@lru_cache(maxsize=1024)
def owner_name(uid: int) -> str:
    """The user name for ``uid``, or the uid as text when there is none
    (containers, NFS); cached because every notification asks."""
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        return str(uid)


def notification(kind: str, path: str, *, host: str, is_dir: bool,
                 st: os.stat_result | None = None,
                 dest: str | None = None) -> dict[str, Value]:
    """The attributes for one event.

    ``st`` is the stat of the file as it is now (of ``dest`` for a move);
    None when it is gone, and then size, time and owner are left out rather
    than guessed.
    """
    if kind not in EVENT_KINDS:
        raise ValueError(f"unknown file event kind {kind!r}")
    attrs: dict[str, Value] = {
        EVENT: kind,
        PATH: path,
        HOST: host,
        VERSION: ATTRIBUTE_SET_VERSION,
    }
    if dest is not None:
        attrs[DEST_PATH] = dest
    if st is not None:
        is_dir = stat_module.S_ISDIR(st.st_mode)
        attrs[SIZE] = Int64(st.st_size)
        attrs[MTIME] = Int64(st.st_mtime_ns // 1_000_000)
        attrs[OWNER] = owner_name(st.st_uid)
    attrs[IS_DIR] = 1 if is_dir else 0
    return attrs


def describe(attrs: Mapping[str, Value]) -> str:
    """A short one-line form for logs."""
    text = f"{attrs.get(EVENT)} {attrs.get(PATH)}"
    if DEST_PATH in attrs:
        text += f" -> {attrs[DEST_PATH]}"
    return text
