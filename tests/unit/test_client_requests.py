"""A session's table of requests (``elvin/client/requests.py``) over an in-memory channel.

``RequestTable`` sees its session only as a ``requests.Channel``; here the
channel keeps what is written, decoded with the real codec, and the test
answers as a router would, so the table's rules can be read one by one.
"""

from __future__ import annotations

import asyncio

import pytest

from elvin.client.errors import (
    ConnectionClosedError,
    NackError,
    QuenchNotSupported,
)
from elvin.client.events import CloseReason
from elvin.client.requests import Channel, RequestTable
from elvin.client.session_core import ClientSessionCore
from elvin.errors import NackCode, ProtocolError, SubscriptionError
from elvin.protocol import FrameDecoder
from elvin.protocol import packets as pk
from tests.waiting import until


class MemoryChannel:
    """A ``Channel`` that keeps the packets written to it."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.is_closing = False
        self.close_reason: CloseReason | None = None
        self.paused = False
        self.sent: list[pk.Packet] = []
        self.core = ClientSessionCore()
        self._decoder = FrameDecoder()

    def write(self, data: bytes) -> None:
        self.sent.extend(self._decoder.feed(data))

    async def drain(self) -> None:
        await until(lambda: not self.paused, what="the channel to resume")


def channel_and_table() -> tuple[MemoryChannel, RequestTable]:
    channel = MemoryChannel()
    channel_view: Channel = channel   # the protocol is all the table may use
    return channel, RequestTable(channel_view)


async def started(coro) -> asyncio.Task:
    """``coro`` running until it waits for its reply."""
    task = asyncio.ensure_future(coro)
    await asyncio.sleep(0)
    return task


async def test_a_reply_updates_state_before_anything_after_it_is_looked_at():
    channel, table = channel_and_table()
    seen = []
    task = await started(table.request(lambda xid: pk.SubAddRqst(xid, "a > 1"), (pk.SubRply,),
                                       5.0, on_reply=lambda r: seen.append(r.subscription_id)))
    (request,) = channel.sent
    assert isinstance(request, pk.SubAddRqst) and request.expression == "a > 1"
    assert table.resolve(pk.SubRply(request.xid, 42)) is None
    assert seen == [42]          # while the reply was dispatched, not when the caller runs
    assert not task.done()
    assert (await task).subscription_id == 42
    assert table.pending == {}


async def test_each_request_has_its_own_xid_and_replies_may_come_in_any_order():
    channel, table = channel_and_table()
    first = await started(table.request(lambda xid: pk.QosRqst(xid, {}), (pk.QosRply,), 5.0))
    second = await started(table.request(lambda xid: pk.QosRqst(xid, {}), (pk.QosRply,), 5.0))
    xid1, xid2 = (p.xid for p in channel.sent)
    assert xid1 != xid2
    table.resolve(pk.QosRply(xid2, {"b": 2}))
    table.resolve(pk.QosRply(xid1, {"a": 1}))
    assert (await first).options == {"a": 1} and (await second).options == {"b": 2}


async def test_a_reply_after_the_caller_gave_up_goes_to_on_late():
    channel, table = channel_and_table()
    late = []
    with pytest.raises(TimeoutError, match="no reply from the router to SubAddRqst"):
        await table.request(lambda xid: pk.SubAddRqst(xid, "a > 1"), (pk.SubRply,), 0.0,
                            on_reply=lambda r: pytest.fail("nobody waits"),
                            on_late=late.append)
    reply = pk.SubRply(channel.sent[0].xid, 9)
    table.resolve(reply)
    assert late == [reply]       # the orphan at the router can be removed


async def test_a_nack_raises_what_it_means():
    channel, table = channel_and_table()
    sub = await started(table.request(lambda xid: pk.SubAddRqst(xid, "a >"), (pk.SubRply,),
                                      5.0, expression="a >"))
    quench = await started(table.request(lambda xid: pk.QnchAddRqst(xid, ("a",)),
                                         (pk.QnchRply,), 5.0))
    other = await started(table.request(lambda xid: pk.SubDelRqst(xid, 5), (pk.SubRply,), 5.0))
    xids = [p.xid for p in channel.sent]
    table.resolve(pk.Nack(xids[0], NackCode.PARSE_ERROR, "parse error at %1", (3,)))
    refusal = table.resolve(pk.Nack(xids[1], NackCode.NOT_IMPL, "Quench not supported"))
    table.resolve(pk.Nack(xids[2], NackCode.NO_SUCH_SUB, "no subscription %1", (5,)))
    with pytest.raises(SubscriptionError) as parse_error:
        await sub
    assert parse_error.value.position == 3
    with pytest.raises(QuenchNotSupported):
        await quench
    assert isinstance(refusal, QuenchNotSupported)    # the connection learns from it
    with pytest.raises(NackError, match=r"NO_SUCH_SUB .* \(to SubDelRqst\): no subscription 5"):
        await other


async def test_a_reply_of_the_wrong_kind_is_a_protocol_error():
    channel, table = channel_and_table()
    task = await started(table.request(lambda xid: pk.SubDelRqst(xid, 5), (pk.SubRply,), 5.0))
    table.resolve(pk.QnchRply(channel.sent[0].xid, 5))
    with pytest.raises(ProtocolError, match="answered SubDelRqst with QnchRply"):
        await task


async def test_a_reply_nobody_asked_for_is_ignored(caplog):
    _channel, table = channel_and_table()
    assert table.resolve(pk.SubRply(77, 1)) is None
    assert "unknown xid 77" in caplog.text


async def test_when_the_channel_goes_every_waiting_request_fails_with_why():
    channel, table = channel_and_table()
    tasks = [await started(table.request(lambda xid: pk.QosRqst(xid, {}), (pk.QosRply,), 5.0))
             for _ in range(3)]
    reason = CloseReason("lost", "the router closed the connection")
    table.fail_all(ConnectionClosedError("connection lost", reason))
    for task in tasks:
        with pytest.raises(ConnectionClosedError) as lost:
            await task
        assert lost.value.reason is reason
    channel.is_closing, channel.close_reason = True, reason
    with pytest.raises(ConnectionClosedError) as closed:
        await table.request(lambda xid: pk.QosRqst(xid, {}), (pk.QosRply,), 5.0)
    assert closed.value.reason is reason
    table.fire_and_forget(lambda xid: pk.SubDelRqst(xid, 5), (pk.SubRply,))
    assert len(channel.sent) == 3       # nothing more went out


async def test_a_full_transport_holds_the_caller_until_it_drains():
    channel, table = channel_and_table()
    channel.paused = True
    task = await started(table.request(lambda xid: pk.QosRqst(xid, {}), (pk.QosRply,), 5.0))
    assert len(channel.sent) == 1      # written, then the caller waits for the drain
    channel.paused = False
    table.resolve(pk.QosRply(channel.sent[0].xid, {}))
    assert (await task).options == {}
