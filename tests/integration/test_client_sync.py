"""elvin.sync: the blocking facade (runs the asyncio client in a thread)."""

from __future__ import annotations

import threading

import pytest

import elvin.sync
from elvin import Keys
from elvin.client import SubscriptionAdded, SubscriptionClosedError
from elvin.errors import SubscriptionError
from elvin.values import Int64


def test_send_subscribe_get_iterate(router_url):
    with elvin.sync.connect(router_url) as conn:
        assert conn.state == "open" and isinstance(conn.options, dict)
        sub = conn.subscribe("require(Sync)")
        for i in range(5):
            assert conn.send({"Sync": i, "Big": Int64(i)}) is True
        n = sub.get(timeout=5)
        assert n["Sync"] == 0 and type(n["Big"]) is Int64
        seen = []
        for n in sub:
            seen.append(n["Sync"])
            if len(seen) == 4:
                break
        assert seen == [1, 2, 3, 4]
        with pytest.raises(TimeoutError):
            sub.get(timeout=0.2)
        sub.modify("Sync == 9")
        conn.send({"Sync": 1})
        conn.send({"Sync": 9})
        assert sub.get(timeout=5)["Sync"] == 9
        sub.close()
        with pytest.raises(SubscriptionClosedError):
            sub.get(timeout=1)
        assert list(sub) == []
    assert conn.state == "closed"


def test_errors_are_raised_in_the_caller(router_url):
    with elvin.sync.connect(router_url) as conn:
        with pytest.raises(SubscriptionError):
            conn.subscribe("a == ")
        with pytest.raises(TypeError, match="'bad'"):
            conn.send({"bad": object()})


def test_iteration_ends_when_connection_closes(router_url):
    conn = elvin.sync.connect(router_url)
    sub = conn.subscribe("require(End)")
    conn.send({"End": 1})
    results = []

    def consume():
        for n in sub:
            results.append(n["End"])

    thread = threading.Thread(target=consume)
    thread.start()
    import time
    deadline = time.monotonic() + 10
    while results != [1] and time.monotonic() < deadline:   # the thread is iterating
        time.sleep(0.01)
    conn.close()
    thread.join(5)
    assert not thread.is_alive() and results == [1]


def test_thread_safety_many_producers(router_url):
    with elvin.sync.connect(router_url) as consumer, elvin.sync.connect(router_url) as producer:
        sub = consumer.subscribe("require(T)", buffer_size=10_000)

        def produce(k):
            for i in range(200):
                producer.send({"T": k, "i": i})

        threads = [threading.Thread(target=produce, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        producer.flush()
        got = [sub.get(timeout=5) for _ in range(800)]
        for k in range(4):    # per producer thread, order is kept
            assert [n["i"] for n in got if n["T"] == k] == list(range(200))


def test_sync_quench_and_keys(router_url):
    secret = b"sync secret"
    with elvin.sync.connect(router_url) as consumer, elvin.sync.connect(router_url) as producer:
        consumer.subscribe('Q == "a"')
        q = producer.quench(["Q"])
        event = q.get(timeout=5)
        assert isinstance(event, SubscriptionAdded)
        assert len(q.subscriptions) == 1
        secure = consumer.subscribe("require(K)", keys=Keys.producer_subscription(secret),
                                    accept_insecure=False)
        producer.send({"K": 1})
        producer.set_keys(add_notification=Keys.producer(secret))
        producer.send({"K": 2}, deliver_insecure=False)
        n = secure.get(timeout=5)
        assert n["K"] == 2 and n.secure
        q.close()


def test_sync_auto_quench(router_url):
    with elvin.sync.connect(router_url) as consumer, \
            elvin.sync.connect(router_url, auto_quench=True) as producer:
        sub = consumer.subscribe("AQ == 1")
        assert producer.send({"AQ": 2}) is False
        assert producer.send({"AQ": 1}) is True
        assert sub.get(timeout=5)["AQ"] == 1
        assert producer.auto_quench_stats["dropped"] == 1


def test_sync_wanted_ranges(router_url):
    with elvin.sync.connect(router_url) as consumer, \
            elvin.sync.connect(router_url, auto_quench=True) as producer:
        consumer.subscribe("Temperature < 80")
        readings = producer.wanted("Temperature")
        assert readings.matches(70) and not readings.matches(85)
        q = producer.quench(["Temperature"])
        assert not q.wanted("Temperature").matches(85)
        q.close()


def test_sync_unotify(router_url):
    with elvin.sync.connect(router_url) as conn:
        sub = conn.subscribe("require(SU)")
        elvin.sync.unotify(router_url, {"SU": "x"})
        assert sub.get(timeout=5)["SU"] == "x"


def test_sync_connect_failure():
    from elvin.client import ConnectError
    with pytest.raises(ConnectError):
        elvin.sync.connect("elvin://127.0.0.1:1", timeout=2)
