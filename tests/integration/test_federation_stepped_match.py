"""Issue 42: a federated notification is matched in steps, in order.

A FedNotify was matched in one go in the link's handler: with thousands of
costly candidates it held the loop as long as that took. Now it is matched
as a client's NotifyEmit is (``Engine.match_steps``), and a link's later
FedNotify wait for it (``elvin.router.ordered``). The match slice is made
nil, so the count of steps does not depend on the machine's speed."""

from __future__ import annotations

from elvin.federation.packets import FedNotify, frame_fed_packet
from elvin.keys import Keys
from elvin.protocol import NotifyDeliver, SubAddRqst, SubRply

from .federation_util import RawFederator, single_router
from .rawclient import RawClient


async def test_fednotifies_with_many_candidates_are_stepped_and_delivered_in_order(
        monkeypatch):
    import elvin.router.engine as engine_module

    monkeypatch.setattr(engine_module, "MATCH_SLICE", 0.0)
    router = single_router(accept=["peer"])
    try:
        sub = await RawClient.connected(router.port, {"Subscription.Max-Count": 1000})
        for i in range(200):
            sub.send(SubAddRqst(sub.xid(), f'regex(x, "^a+b*{i}$")'))
        await sub.drain()
        for _ in range(200):
            assert isinstance(await sub.next(timeout=60), SubRply)
        peer = await RawFederator.linked(router.federation_urls[0], "peer")
        steps = router.call(lambda: router.router.steps.steps)
        peer.send_raw(b"".join(frame_fed_packet(FedNotify({"x": "a" * 20 + str(i)}, True,
                                                          Keys(), ("peer",)))
                               for i in (7, 8, 9)))
        got = [(await sub.expect(NotifyDeliver, timeout=60)).attributes["x"][-1]
               for _ in range(3)]
        assert got == ["7", "8", "9"]
        assert router.call(lambda: router.router.ordered.deferred) >= 1
        assert router.call(lambda: router.router.steps.steps) - steps >= 100
        for each in (sub, peer):
            await each.close()
    finally:
        router.stop()
