"""The client's internal contract (``elvin/client/core.py``), without a router or a socket.

The reconnector and the tables of subscriptions and quenches see a connection
only as a ``ReconnectingCore``. Here ``MemoryCore`` plays the connection and a
few sets play the routers it can reach, so that each test shows one rule of
what follows a lost session, and that the contract is all the reconnector
needs. (The same rules against a real router: tests/integration/test_client_*.py
and test_redirect.py.)
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any, Protocol

import pytest

from elvin.client.connection import Connection, ConnectionCore
from elvin.client.core import ClientCore, ReconnectingCore, ReconnectPolicy
from elvin.client.errors import ConnectError, ConnectionClosedError, nack_exception
from elvin.client.events import CloseReason
from elvin.client.quench import Quench, QuenchTable
from elvin.client.restore import Reconnector
from elvin.client.session import SessionOwner
from elvin.client.subscription import Subscription, SubscriptionTable
from elvin.errors import NackCode
from elvin.keys import EMPTY_KEYS
from elvin.protocol import ElvinURI, parse_uri
from elvin.protocol import packets as pk
from elvin.protocol.states import IllegalEvent
from elvin.subscription import parse
from tests.waiting import until

HOME = parse_uri("elvin://home.example:2917")
MOVED = parse_uri("elvin://moved.example:2917")
ELSEWHERE = parse_uri("elvin://elsewhere.example:2917")


class MemorySession:
    """What the tables are handed as a session: here only a name."""

    def __init__(self, uri: ElvinURI, number: int) -> None:
        self.name = f"{uri.host}#{number}"

    def __repr__(self) -> str:
        return self.name


class MemoryCore:
    """A ``ReconnectingCore`` in memory, with routers that answer at once.

    ``reachable``: the hosts where ``establish`` succeeds; ``refused``:
    subscription expressions every router refuses (a parse Nack);
    ``no_quench``: hosts without quench (Nack NOT_IMPL, as Avis);
    ``drops``: hosts that drop the channel while requests are made in it.
    ``log`` records what the reconnector asked for, in order."""

    def __init__(self, policy: ReconnectPolicy, *, uri: ElvinURI = HOME) -> None:
        self.url = str(uri)
        self.uri = uri
        self.home_uri = HOME
        self.uris: tuple[ElvinURI, ...] = (HOME,)
        self.reconnect_policy = policy
        self.state = "open"
        self.notification_keys = EMPTY_KEYS
        self.supports_quench: bool | None = None
        self.reachable: set[str] = set()
        self.refused: set[str] = set()
        self.no_quench: set[str] = set()
        self.drops: set[str] = set()
        self.log: list[str] = []
        self.final: CloseReason | None = None
        self._numbers = itertools.count(1)
        self._ids = itertools.count(100)
        self._xids = itertools.count(1)
        self.session: Any = self._new_session(uri)

    def _new_session(self, uri: ElvinURI) -> MemorySession:
        return MemorySession(uri, next(self._numbers))

    # -- ClientCore ---------------------------------------------------------------------
    async def live_session(self) -> Any:
        if self.state != "open":
            raise ConnectionClosedError(f"connection is {self.state}")
        return self.session

    async def request(self, session, make, expect, on_reply=None, on_late=None, *,
                      expression=None):
        packet = make(next(self._xids))
        host = session.name.split("#")[0]
        self.log.append(f"{type(packet).__name__} in {session}")
        if host in self.drops:
            raise ConnectionClosedError("connection lost (lost)")
        if isinstance(packet, pk.SubAddRqst):
            if packet.expression in self.refused:
                raise nack_exception(NackCode.PARSE_ERROR, "parse error", (0,),
                                     "SubAddRqst", packet.expression)
            reply = pk.SubRply(packet.xid, next(self._ids))
        elif isinstance(packet, pk.QnchAddRqst):
            if host in self.no_quench:
                raise nack_exception(NackCode.NOT_IMPL, "Quench not supported", (),
                                     "QnchAddRqst")
            reply = pk.QnchRply(packet.xid, next(self._ids))
        else:
            raise AssertionError(f"unexpected {packet}")
        assert isinstance(reply, expect)
        if on_reply is not None:
            on_reply(reply)   # as RequestTable does: while the reply is dispatched
        return reply

    # -- ReconnectingCore ---------------------------------------------------------------
    async def establish(self, uri: ElvinURI) -> Any:
        self.log.append(f"establish {uri.host}")
        if uri.host not in self.reachable:
            raise ConnectError(f"cannot connect to {uri}: refused")
        self.uri = uri
        self.session = self._new_session(uri)
        return self.session

    def abandon(self, session, reason: CloseReason) -> None:
        self.log.append(f"abandon {session}: {reason}")
        if self.session is session:
            self.session = None

    def reconnecting(self) -> None:
        self.log.append("reconnecting")
        self.state = "reconnecting"
        self.session = None

    def reconnected(self) -> None:
        self.log.append("reconnected")
        self.state = "open"

    def finalize(self, reason: CloseReason) -> None:
        self.log.append(f"finalize {reason.kind}")
        self.state = "closed"
        self.final = reason


def protocol_members(protocol: type) -> set[str]:
    """The names a class must have to satisfy ``protocol`` (and its bases)."""
    names: set[str] = set()
    for cls in protocol.__mro__:
        if cls in (Protocol, object) or not getattr(cls, "_is_protocol", False):
            continue
        names |= {n for n in vars(cls) if not n.startswith("_")}
        names |= set(getattr(cls, "__annotations__", {}))
    return names


@pytest.mark.parametrize("implementation, protocols", [
    (ConnectionCore, (ReconnectingCore, SessionOwner)),
    (MemoryCore, (ReconnectingCore,)),
])
def test_the_cores_implement_the_whole_contract(implementation, protocols):
    """A member added to a protocol must be added to the connection's core
    (and to this file's stand-in, so these tests keep meaning something)."""
    members = set().union(*(protocol_members(p) for p in protocols))
    assert protocol_members(ClientCore) < protocol_members(ReconnectingCore)
    instance_names = set(dir(implementation))
    if implementation is MemoryCore:
        instance_names |= set(vars(MemoryCore(ReconnectPolicy(True, 0, 0, None))))
    assert members - instance_names == set()


def test_the_connection_s_core_owns_its_state_and_parts_may_write_only_supports_quench():
    """``ConnectionCore`` holds the connection's state, which the
    ``Connection`` shows: a part can learn ``supports_quench`` but not move
    the lifecycle or swap the session by assignment; the lifecycle moves
    only as the ``CLIENT_LIFECYCLE`` table allows."""
    conn = Connection("elvin://home.example:2917", notification_keys=None)
    core = conn._core
    assert isinstance(core, ConnectionCore)
    assert (core.url, core.state, core.session) == (conn.url, "connecting", None)
    assert core.uri == core.home_uri == parse_uri("elvin://home.example:2917")
    core.move("opened")
    assert conn.state == core.state == "open"
    core.supports_quench = False
    assert conn.supports_quench is False
    for name in ("state", "session", "url", "uri", "home_uri", "uris", "notification_keys"):
        with pytest.raises(AttributeError):
            setattr(core, name, None)
    with pytest.raises(AttributeError):
        conn.state = "closed"  # type: ignore[misc]  # read-only, which is the point
    with pytest.raises(IllegalEvent):
        core.move("reconnected")   # not lost: nothing to reconnect
    assert conn.state == "open"


async def connection_with(core: MemoryCore, *expressions: str, quench: bool = False):
    """Tables registered in the core's session, as a connection would have them."""
    subs = SubscriptionTable(core, "the connection")
    quenches = QuenchTable(core, "the connection")
    for text in expressions:
        await subs.register(core.session, Subscription(subs, text, parse(text), EMPTY_KEYS,
                                                       True))
    if quench:
        await quenches.register(core.session, Quench(quenches, ["Price"], EMPTY_KEYS, True))
    return subs, quenches, Reconnector(core, (subs, quenches))


async def test_a_lost_session_is_replaced_and_everything_registered_again():
    core = MemoryCore(ReconnectPolicy(True, 0.0, 0.0, None))
    core.reachable = {"home.example"}
    subs, quenches, reconnector = await connection_with(core, "a > 1", "b == 2", quench=True)
    old_ids = {obj.id for obj in (*subs.live, *quenches.live)}
    objects = (*subs.live, *quenches.live)
    core.log.clear()

    reconnector.after_loss(CloseReason("lost", "the router closed the connection"))
    assert core.state == "reconnecting"
    await reconnector.task

    assert core.log == ["reconnecting", "establish home.example",
                        "SubAddRqst in home.example#2", "SubAddRqst in home.example#2",
                        "QnchAddRqst in home.example#2", "reconnected"]
    assert core.state == "open"
    assert (*subs.live, *quenches.live) == objects            # the application's objects
    assert not any(obj.closed for obj in objects)
    new_ids = {obj.id for obj in objects}
    assert not new_ids & old_ids                              # the router's new ids...
    assert set(subs.by_id) | set(quenches.by_id) == new_ids   # ...find them
    assert core.supports_quench is True
    assert subs.live[0].connection == "the connection"


async def test_the_current_router_is_tried_then_the_first_one():
    core = MemoryCore(ReconnectPolicy(True, 0.0, 0.0, None), uri=MOVED)
    core.reachable = {"home.example"}
    _subs, _quenches, reconnector = await connection_with(core, "a > 1")
    core.log.clear()
    reconnector.after_loss(CloseReason("lost"))
    await reconnector.task
    assert core.log == ["reconnecting", "establish moved.example", "establish home.example",
                        "SubAddRqst in home.example#2", "reconnected"]
    assert core.uri == HOME


async def test_with_several_routers_the_others_are_tried_first_the_lost_one_last():
    core = MemoryCore(ReconnectPolicy(True, 0.0, 0.0, None), uri=MOVED)
    core.uris = (HOME, MOVED, ELSEWHERE)
    core.reachable = {"home.example"}
    _subs, _quenches, reconnector = await connection_with(core, "a > 1")
    core.log.clear()
    reconnector.after_loss(CloseReason("lost"))
    await reconnector.task
    assert core.log == ["reconnecting", "establish elsewhere.example", "establish home.example",
                        "SubAddRqst in home.example#2", "reconnected"]
    assert core.uri == HOME
    # the next loss, at home: moved first, then elsewhere, home itself last
    core.reachable = {"home.example"}
    core.log.clear()
    reconnector.after_loss(CloseReason("lost"))
    await reconnector.task
    assert core.log[:4] == ["reconnecting", "establish moved.example",
                            "establish elsewhere.example", "establish home.example"]


def test_the_pause_between_rounds_is_jittered():
    import random

    from elvin.client.restore import jittered
    rng = random.Random(49)
    pauses = [jittered(1.0, 10.0, rng) for _ in range(200)]
    assert all(0.5 <= p <= 1.5 for p in pauses)
    assert max(pauses) - min(pauses) > 0.5            # spread, not one value
    assert all(jittered(8.0, 5.0, rng) <= 5.0 for _ in range(50))


async def test_without_reconnect_a_lost_session_closes_the_connection():
    core = MemoryCore(ReconnectPolicy(False, 0.0, 0.0, None))
    _subs, _quenches, reconnector = await connection_with(core, "a > 1")
    reason = CloseReason("shutdown", "the router is shutting down")
    reconnector.after_loss(reason)
    assert reconnector.task is None
    assert core.final is reason and core.state == "closed"


async def test_reconnecting_gives_up_after_the_rounds_allowed():
    core = MemoryCore(ReconnectPolicy(True, 0.0, 0.0, 3))
    _subs, _quenches, reconnector = await connection_with(core, "a > 1")
    core.log.clear()
    reconnector.after_loss(CloseReason("lost"))
    await reconnector.task
    assert core.log == ["reconnecting", *["establish home.example"] * 3,
                        "finalize reconnect-failed"]
    assert "gave up after 3 attempts" in core.final.message
    assert isinstance(core.final.error, ConnectError)


async def test_a_redirect_is_followed_even_without_reconnect():
    core = MemoryCore(ReconnectPolicy(False, 0.0, 0.0, None))
    core.reachable = {"elsewhere.example"}
    subs, _quenches, reconnector = await connection_with(core, "a > 1")
    core.log.clear()
    reconnector.after_loss(CloseReason("redirect", redirect=str(ELSEWHERE)))
    await reconnector.task
    assert core.log == ["reconnecting", "establish elsewhere.example",
                        "SubAddRqst in elsewhere.example#2", "reconnected"]
    assert core.uri == ELSEWHERE and not subs.live[0].closed


async def test_a_redirect_that_cannot_be_followed_closes_with_why():
    core = MemoryCore(ReconnectPolicy(False, 0.0, 0.0, None))
    _subs, _quenches, reconnector = await connection_with(core, "a > 1")
    reconnector.after_loss(CloseReason("redirect", "redirected", redirect=str(ELSEWHERE)))
    await reconnector.task
    assert core.final.kind == "redirect" and core.final.redirect == str(ELSEWHERE)
    assert "cannot connect there: cannot connect to" in core.final.message


async def test_a_session_lost_while_restoring_is_abandoned_for_the_next_router():
    core = MemoryCore(ReconnectPolicy(True, 0.0, 0.0, None), uri=MOVED)
    core.reachable = {"moved.example", "home.example"}
    core.drops = {"moved.example"}
    subs = SubscriptionTable(core, None)
    sub = Subscription(subs, "a > 1", parse("a > 1"), EMPTY_KEYS, True)
    subs.bind(sub, 7, add=True)
    reconnector = Reconnector(core, (subs,))
    reconnector.after_loss(CloseReason("lost"))
    await reconnector.task
    assert core.log == ["reconnecting", "establish moved.example",
                        "SubAddRqst in moved.example#2",
                        "abandon moved.example#2: lost: restore failed",
                        "establish home.example", "SubAddRqst in home.example#3",
                        "reconnected"]
    assert sub.id != 7 and not sub.closed


async def test_what_the_new_router_refuses_is_ended_and_the_rest_restored(caplog):
    core = MemoryCore(ReconnectPolicy(True, 0.0, 0.0, None))
    core.reachable = {"home.example"}
    subs, quenches, reconnector = await connection_with(core, "a > 1", "b == 2",
                                                        quench=True)
    kept, refused = subs.live
    quench = quenches.live[0]
    core.refused = {"b == 2"}              # the new router speaks another language version
    core.no_quench = {"home.example"}      # and has no quench
    with caplog.at_level(logging.WARNING, "elvin.client"):
        reconnector.after_loss(CloseReason("lost"))
        await reconnector.task
    assert core.state == "open"
    assert subs.live == [kept] and not kept.closed
    assert refused.closed and quench.closed and quenches.live == []
    assert refused not in subs.by_id.values()
    assert "could not restore" in caplog.text and "b == 2" in caplog.text
    assert "does not support quench" in caplog.text and "Price" in caplog.text


async def test_auto_quench_s_own_quench_ends_without_a_warning(caplog):
    core = MemoryCore(ReconnectPolicy(True, 0.0, 0.0, None))
    core.reachable = {"home.example"}
    quenches = QuenchTable(core, None)
    own = Quench(quenches, ["Price"], EMPTY_KEYS, True, buffer_size=0, internal=True)
    await quenches.register(core.session, own)
    assert quenches.public == []
    core.no_quench = {"home.example"}
    with caplog.at_level(logging.WARNING, "elvin.client"):
        reconnector = Reconnector(core, (quenches,))
        reconnector.after_loss(CloseReason("lost"))
        await reconnector.task
    assert own.closed
    assert "does not support quench" not in caplog.text


async def test_closing_the_connection_stops_reconnecting():
    core = MemoryCore(ReconnectPolicy(True, 3600.0, 3600.0, None))   # a long wait
    _subs, _quenches, reconnector = await connection_with(core, "a > 1")
    reconnector.after_loss(CloseReason("lost"))
    await until(lambda: "establish home.example" in core.log, what="a first attempt")
    reconnector.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reconnector.task
    assert core.state == "reconnecting"    # what comes next is close()'s business


def test_no_part_of_the_client_reaches_into_the_connection_s_private_state():
    """``Connection`` keeps the application's settings; the rest is its
    core's. No module of ``elvin.client`` (nor ``elvin.sync``) reads or
    calls a private name of ``Connection`` on anything but ``self``: what a
    part needs is a documented member of ``ConnectionCore`` or a public one
    of ``Connection``."""
    import ast
    import inspect
    from pathlib import Path

    import elvin.client.connection as module

    source = inspect.getsource(module)
    (cls,) = [node for node in ast.parse(source).body
              if isinstance(node, ast.ClassDef) and node.name == "Connection"]
    private = {node.name for node in cls.body
               if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
    private |= {node.attr for node in ast.walk(cls) if isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name) and node.value.id == "self"
                and isinstance(node.ctx, ast.Store)}
    private = {name for name in private if name.startswith("_") and not name.startswith("__")}
    assert "_core" in private                                # the scan sees the class
    root = Path(module.__file__).parent
    reaches = []
    for path in [*sorted(root.glob("*.py")), root.parent / "sync.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr in private
                    and not (isinstance(node.value, ast.Name) and node.value.id == "self")):
                reaches.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    assert reaches == []
