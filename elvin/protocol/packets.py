"""Every packet of the Elvin Client Protocol 4.0 (subsets A, B and C).

One frozen dataclass per packet of section 7.4, with the spec's field names.
``ID`` is the XDR ``pkt_id`` of section 8.2.3.1. The codec (``xdr.py``)
turns these into bytes and back; nothing here knows about the wire.

Field conventions:
* ``attributes`` and ``options`` are ``dict[str, Value]`` (see ``elvin.values``).
* id32/id64 identifiers are plain non-negative ``int``s.
* keys are ``elvin.keys.Keys``; subscription trees are ``elvin.subscription.ast.Node``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import ClassVar

from elvin.keys import EMPTY_KEYS, Keys
from elvin.subscription.ast import Node
from elvin.values import Value

__all__ = [
    "PACKET_CLASSES", "DisconnReason", "Packet", "PacketId",
    "UNotify", "Nack", "ConnRqst", "ConnRply", "DisconnRqst", "DisconnRply", "Disconn",
    "SecRqst", "SecRply", "QosRqst", "QosRply", "DropWarn", "TestConn", "ConfConn",
    "NotifyEmit", "NotifyDeliver", "SubAddRqst", "SubModRqst", "SubDelRqst", "SubRply",
    "QnchAddRqst", "QnchModRqst", "QnchDelRqst", "QnchRply",
    "SubAddNotify", "SubModNotify", "SubDelNotify",
]


class PacketId(IntEnum):
    UNOTIFY = 32
    NACK = 48
    CONN_RQST = 49
    CONN_RPLY = 50
    DISCONN_RQST = 51
    DISCONN_RPLY = 52
    DISCONN = 53
    SEC_RQST = 54
    SEC_RPLY = 55
    NOTIFY_EMIT = 56
    NOTIFY_DELIVER = 57
    SUB_ADD_RQST = 58
    SUB_MOD_RQST = 59
    SUB_DEL_RQST = 60
    SUB_RPLY = 61
    DROP_WARN = 62
    TEST_CONN = 63
    CONF_CONN = 64
    QOS_RQST = 70
    QOS_RPLY = 71
    QNCH_ADD_RQST = 80
    QNCH_MOD_RQST = 81
    QNCH_DEL_RQST = 82
    QNCH_RPLY = 83
    SUB_ADD_NOTIFY = 84
    SUB_MOD_NOTIFY = 85
    SUB_DEL_NOTIFY = 86


class DisconnReason(IntEnum):
    SHUTDOWN = 1
    REDIRECT = 2
    PROTOCOL_ERRORS = 4


class Packet:
    """Base class: every packet has an ``ID``; requests also have an ``xid``."""

    ID: ClassVar[PacketId]
    __slots__ = ()


def _attrs() -> dict[str, Value]:
    return {}


@dataclass(frozen=True, slots=True)
class UNotify(Packet):
    ID: ClassVar[PacketId] = PacketId.UNOTIFY
    client_major_version: int
    client_minor_version: int
    attributes: dict[str, Value]
    deliver_insecure: bool = True
    keys: Keys = EMPTY_KEYS


@dataclass(frozen=True, slots=True)
class Nack(Packet):
    ID: ClassVar[PacketId] = PacketId.NACK
    xid: int
    error: int
    message: str
    args: tuple[Value, ...] = ()


@dataclass(frozen=True, slots=True)
class ConnRqst(Packet):
    ID: ClassVar[PacketId] = PacketId.CONN_RQST
    xid: int
    client_major_version: int = 4
    client_minor_version: int = 0
    options: dict[str, Value] = field(default_factory=_attrs)
    nfn_keys: Keys = EMPTY_KEYS
    sub_keys: Keys = EMPTY_KEYS


@dataclass(frozen=True, slots=True)
class ConnRply(Packet):
    ID: ClassVar[PacketId] = PacketId.CONN_RPLY
    xid: int
    options: dict[str, Value] = field(default_factory=_attrs)


@dataclass(frozen=True, slots=True)
class DisconnRqst(Packet):
    ID: ClassVar[PacketId] = PacketId.DISCONN_RQST
    xid: int


@dataclass(frozen=True, slots=True)
class DisconnRply(Packet):
    ID: ClassVar[PacketId] = PacketId.DISCONN_RPLY
    xid: int


@dataclass(frozen=True, slots=True)
class Disconn(Packet):
    ID: ClassVar[PacketId] = PacketId.DISCONN
    reason: int
    args: str = ""


@dataclass(frozen=True, slots=True)
class SecRqst(Packet):
    ID: ClassVar[PacketId] = PacketId.SEC_RQST
    xid: int
    add_nfn_keys: Keys = EMPTY_KEYS
    del_nfn_keys: Keys = EMPTY_KEYS
    add_sub_keys: Keys = EMPTY_KEYS
    del_sub_keys: Keys = EMPTY_KEYS


@dataclass(frozen=True, slots=True)
class SecRply(Packet):
    ID: ClassVar[PacketId] = PacketId.SEC_RPLY
    xid: int


@dataclass(frozen=True, slots=True)
class QosRqst(Packet):
    ID: ClassVar[PacketId] = PacketId.QOS_RQST
    xid: int
    options: dict[str, Value] = field(default_factory=_attrs)


@dataclass(frozen=True, slots=True)
class QosRply(Packet):
    ID: ClassVar[PacketId] = PacketId.QOS_RPLY
    xid: int
    options: dict[str, Value] = field(default_factory=_attrs)


@dataclass(frozen=True, slots=True)
class DropWarn(Packet):
    ID: ClassVar[PacketId] = PacketId.DROP_WARN


@dataclass(frozen=True, slots=True)
class TestConn(Packet):
    ID: ClassVar[PacketId] = PacketId.TEST_CONN
    __test__: ClassVar[bool] = False  # not a pytest test class


@dataclass(frozen=True, slots=True)
class ConfConn(Packet):
    ID: ClassVar[PacketId] = PacketId.CONF_CONN


@dataclass(frozen=True, slots=True)
class NotifyEmit(Packet):
    ID: ClassVar[PacketId] = PacketId.NOTIFY_EMIT
    attributes: dict[str, Value]
    deliver_insecure: bool = True
    keys: Keys = EMPTY_KEYS


@dataclass(frozen=True, slots=True)
class NotifyDeliver(Packet):
    ID: ClassVar[PacketId] = PacketId.NOTIFY_DELIVER
    attributes: dict[str, Value]
    secure_matches: tuple[int, ...] = ()
    insecure_matches: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class SubAddRqst(Packet):
    ID: ClassVar[PacketId] = PacketId.SUB_ADD_RQST
    xid: int
    expression: str
    accept_insecure: bool = True
    keys: Keys = EMPTY_KEYS


@dataclass(frozen=True, slots=True)
class SubModRqst(Packet):
    ID: ClassVar[PacketId] = PacketId.SUB_MOD_RQST
    xid: int
    subscription_id: int
    expression: str = ""
    accept_insecure: bool = True
    add_keys: Keys = EMPTY_KEYS
    del_keys: Keys = EMPTY_KEYS


@dataclass(frozen=True, slots=True)
class SubDelRqst(Packet):
    ID: ClassVar[PacketId] = PacketId.SUB_DEL_RQST
    xid: int
    subscription_id: int


@dataclass(frozen=True, slots=True)
class SubRply(Packet):
    ID: ClassVar[PacketId] = PacketId.SUB_RPLY
    xid: int
    subscription_id: int


@dataclass(frozen=True, slots=True)
class QnchAddRqst(Packet):
    ID: ClassVar[PacketId] = PacketId.QNCH_ADD_RQST
    xid: int
    names: tuple[str, ...]
    deliver_insecure: bool = True
    keys: Keys = EMPTY_KEYS


@dataclass(frozen=True, slots=True)
class QnchModRqst(Packet):
    ID: ClassVar[PacketId] = PacketId.QNCH_MOD_RQST
    xid: int
    quench_id: int
    names_add: tuple[str, ...] = ()
    names_del: tuple[str, ...] = ()
    deliver_insecure: bool = True
    add_keys: Keys = EMPTY_KEYS
    del_keys: Keys = EMPTY_KEYS


@dataclass(frozen=True, slots=True)
class QnchDelRqst(Packet):
    ID: ClassVar[PacketId] = PacketId.QNCH_DEL_RQST
    xid: int
    quench_id: int


@dataclass(frozen=True, slots=True)
class QnchRply(Packet):
    ID: ClassVar[PacketId] = PacketId.QNCH_RPLY
    xid: int
    quench_id: int


@dataclass(frozen=True, slots=True)
class SubAddNotify(Packet):
    ID: ClassVar[PacketId] = PacketId.SUB_ADD_NOTIFY
    secure_quench_ids: tuple[int, ...]
    insecure_quench_ids: tuple[int, ...]
    term_id: int
    sub_expr: Node


@dataclass(frozen=True, slots=True)
class SubModNotify(Packet):
    ID: ClassVar[PacketId] = PacketId.SUB_MOD_NOTIFY
    secure_quench_ids: tuple[int, ...]
    insecure_quench_ids: tuple[int, ...]
    term_id: int
    sub_expr: Node


@dataclass(frozen=True, slots=True)
class SubDelNotify(Packet):
    ID: ClassVar[PacketId] = PacketId.SUB_DEL_NOTIFY
    quench_ids: tuple[int, ...]
    term_id: int


PACKET_CLASSES: dict[int, type[Packet]] = {
    cls.ID: cls
    for cls in (
        UNotify, Nack, ConnRqst, ConnRply, DisconnRqst, DisconnRply, Disconn,
        SecRqst, SecRply, QosRqst, QosRply, DropWarn, TestConn, ConfConn,
        NotifyEmit, NotifyDeliver, SubAddRqst, SubModRqst, SubDelRqst, SubRply,
        QnchAddRqst, QnchModRqst, QnchDelRqst, QnchRply,
        SubAddNotify, SubModNotify, SubDelNotify,
    )
}
