"""SecRqst's cost on the router: what a change of a session's subscription
keys touches (``Router.owner_sub_keys_changed``)."""

from __future__ import annotations

from elvin.keys import Keys
from elvin.router.config import RouterConfig
from elvin.router.server import Router


class Owner:
    """A quencher or subscriber: records the packets it is sent."""

    def __init__(self) -> None:
        self.sent: list = []

    def send(self, packet, droppable: bool = False) -> None:
        self.sent.append(packet)


def _router_with(subscriber: Owner, count: int) -> Router:
    router = Router(RouterConfig())
    for i in range(count):
        c = router.compile(f'Group == "g{i}"' if i else "require(Watched)")
        router.engine.add(subscriber, "", c.ast, c.matches, names=c.names, index=c.index,
                          placement=c.placement)
    return router


def test_only_the_subscriptions_a_quench_can_see_are_compared(monkeypatch):
    subscriber, quencher = Owner(), Owner()
    router = _router_with(subscriber, 500)
    router.quench.add(quencher, ["Watched"], False, Keys(), Keys.producer("k"))
    seen = []
    real = router.quench.view
    monkeypatch.setattr(router.quench, "view", lambda sub: seen.append(sub) or real(sub))
    router.owner_sub_keys_changed(subscriber, Keys.producer_subscription("k"))
    # one subscription refers to the quenched name: its view, before and after
    assert len(seen) == 2 and seen[0] is seen[1]
    # and the quencher learnt that it now sees it securely: at once, or from
    # the fan-out's outbox when the clock passed FANOUT_STEP first (a loaded
    # machine), which the router's loop sends on its next turn
    assert router.quench.flush(float("inf"))
    assert [type(p).__name__ for p in quencher.sent] == ["SubAddNotify"]


def test_without_quenches_no_view_is_compared(monkeypatch):
    subscriber = Owner()
    router = _router_with(subscriber, 500)
    monkeypatch.setattr(router.quench, "view", lambda sub: (_ for _ in ()).throw(
        AssertionError("no view without quenches")))
    router.owner_sub_keys_changed(subscriber, Keys.producer_subscription("k"))
    assert router.engine.owner_keys(subscriber) == Keys.producer_subscription("k")
