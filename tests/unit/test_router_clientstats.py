"""The publish limit's parts, sans-IO (elvin.router.clientstats), and its
settings: a token bucket driven by the clock it is given, the buckets
shared per address, DropWarn at most once per interval, and clear errors
for garbage values."""

from __future__ import annotations

import gc

import pytest

from elvin.router.clientstats import (
    DROP_WARN_INTERVAL,
    ClientCounters,
    PublishLimit,
    TokenBucket,
    client_name,
    top_clients_text,
)
from elvin.router.config import ConfigError, load_config


def test_the_bucket_gives_its_burst_then_its_rate():
    bucket = TokenBucket(rate=2.0, burst=3.0, now=100.0)
    assert [bucket.take(100.0) for _ in range(4)] == [True, True, True, False]
    assert bucket.take(100.25) is False          # half a token
    assert bucket.take(100.5) is True            # one token at 2/s
    assert bucket.take(100.5) is False
    # idle for long: never more than the burst
    assert [bucket.take(1000.0) for _ in range(4)] == [True, True, True, False]


def test_a_slow_rate_accumulates_between_takes():
    bucket = TokenBucket(rate=0.5, burst=1.0, now=50.0)
    assert bucket.take(50.0)
    assert [bucket.take(50.0 + t) for t in (0.5, 1.0, 1.5)] == [False, False, False]
    assert bucket.take(52.0) and not bucket.take(52.0)


def test_an_address_has_one_bucket_shared_by_its_channels_and_gone_with_them():
    limit = PublishLimit()
    a = limit.bucket("10.0.0.1", 1.0, 2.0, now=0.0)
    assert limit.bucket("10.0.0.1", 1.0, 2.0, now=0.0) is a
    assert limit.bucket("10.0.0.2", 1.0, 2.0, now=0.0) is not a
    assert a.take(0.0) and a.take(0.0) and not a.take(0.0)
    # new figures (a reload): a new bucket, keeping what the old one held
    b = limit.bucket("10.0.0.1", 10.0, 5.0, now=0.0)
    assert b is not a and b.rate == 10.0 and not b.take(0.0) and b.take(0.1)
    del a, b
    gc.collect()
    assert len(limit) == 0                      # the channels holding them are gone


def test_dropwarn_at_most_once_per_interval():
    counters = ClientCounters()
    assert counters.drop_warn_due(10.0)
    assert not counters.drop_warn_due(10.0 + DROP_WARN_INTERVAL / 2)
    assert counters.drop_warn_due(10.0 + DROP_WARN_INTERVAL)


def test_client_names_and_the_one_line_summary():
    assert client_name(("127.0.0.1", 4000)) == "127.0.0.1:4000"
    assert client_name(("::1", 4000, 0, 0)) == "[::1]:4000"
    row = {"client": "h:1", "notifications_in": 3, "notifications_out": 4, "drops": 0,
           "throttled": 1, "subscriptions": 2}
    assert top_clients_text([row, row]) == ("h:1 in 3 out 4 drops 0 throttled 1 subs 2; "
                                            "h:1 in 3 out 4 drops 0 throttled 1 subs 2")


def test_the_settings_read_and_reload_cheaply(tmp_path):
    path = tmp_path / "elvind.toml"
    path.write_text("publish-rate = 50\npublish-burst = 200\n")
    config = load_config(path)
    assert (config.publish_rate, config.publish_burst) == (50, 200)
    from elvin.router.config import RELOADABLE
    assert {"publish_rate", "publish_burst"} <= RELOADABLE


@pytest.mark.parametrize("text, message", [
    ('publish-rate = "fast"\n', "'publish-rate' must be a number, not 'fast'"),
    ("publish-rate = true\n", "'publish-rate' must be a number, not True"),
    ("publish-rate = -1\n", "publish-rate must be 0 (no limit) or a positive number"),
    ("publish-rate = nan\n", "publish-rate must be 0 (no limit) or a positive number"),
    ("publish-rate = inf\n", "publish-rate must be 0 (no limit) or a positive number"),
    ("publish-rate = 10\npublish-burst = -5\n", "publish-burst must be 0 (no limit)"),
    ("publish-burst = 10\n", "publish-burst needs publish-rate"),
    ("publish-rate = 10\npublish-burst = 0.5\n", "publish-burst must be at least 1"),
    ("publish-rate = [10]\n", "'publish-rate' must be a number"),
])
def test_garbage_values_are_clear_errors(tmp_path, text, message):
    path = tmp_path / "elvind.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(path) in str(info.value) and message in str(info.value)


def test_status_says_the_limit_and_the_busiest_clients():
    import io

    from elvin.router.status import format_status

    row = {"client": "10.0.0.1:4000", "notifications_in": 30, "bytes_in": 3000,
           "notifications_out": 0, "bytes_out": 80, "drops": 0, "throttled": 12,
           "subscriptions": 0, "match_seconds": 0.0042}
    out = io.StringIO()
    format_status({"running": True, "counters": {"throttled": 12}, "clients": [row],
                   "publish_limit": {"rate": 10.0, "burst": 20.0, "per": "address"}}, out)
    text = out.getvalue()
    assert "publish limit: 10/s, burst 20, per address; 12 notification(s) throttled\n" in text
    assert "busiest clients (1):" in text
    line = next(line for line in text.splitlines() if "10.0.0.1:4000" in line)
    assert line.split() == ["10.0.0.1:4000", "30", "3000", "0", "80", "0", "12", "0", "0.004"]
    out = io.StringIO()
    format_status({"running": True, "counters": {}}, out)
    assert "publish limit: off (0 throttled)\n" in out.getvalue()


def test_the_core_drops_counts_and_warns_except_for_in_process_clients():
    """A SessionCore with the router's sans-IO parts (the session core's
    test host): over the burst, no delivery and one DropWarn; the router's
    in-process clients (its mobility proxy) are never limited."""
    from elvin.protocol import ConnRqst, DropWarn, NotifyEmit
    from elvin.router.session_core import INTERNAL_PEER
    from tests.unit.test_router_session_core import Channel, Host

    host = Host()
    host.publish_limit = PublishLimit()
    host.config.publish_rate, host.config.publish_burst = 0.001, 2
    outside, inside = Channel(host), Channel(host)
    inside.core.peer = INTERNAL_PEER
    for channel in (outside, inside):
        channel.feed(ConnRqst(1, 4, 0, {}))
    out = outside.feed(*(NotifyEmit({"N": n}) for n in range(4)))
    assert [d["N"] for d in host.delivered] == [0, 1]
    assert [type(p) for p in out] == [DropWarn]          # one for the run of two
    assert outside.core.counters.throttled == 2 == host.stats.throttled
    assert outside.core.counters.notifications_in == 4
    host.delivered.clear()
    assert inside.feed(*(NotifyEmit({"N": n}) for n in range(4))) == []
    assert [d["N"] for d in host.delivered] == [0, 1, 2, 3]
    assert inside.core.counters.throttled == 0


def test_a_match_in_steps_is_timed_whole_and_keeps_its_result():
    from elvin.router.clientstats import timed_steps
    from elvin.router.steps import drain

    def steps():
        for _ in range(3):
            sum(range(20_000))          # work the clock can see
            yield
        return 7

    counters = ClientCounters()
    assert drain(timed_steps(steps(), counters)) == 7 and counters.match_seconds > 0
    closed = []

    def endless():
        try:
            while True:
                yield
        finally:
            closed.append(True)

    stepped = timed_steps(endless(), counters)
    next(stepped)
    stepped.close()                     # a session released meanwhile: its match goes
    assert closed == [True]


def test_check_config_lists_both_settings_problems():
    from elvin.router.config import RouterConfig

    found = RouterConfig(publish_rate=-3, publish_burst=0.5).problems("r.toml")
    assert any("publish-rate must be 0 (no limit)" in p for p in found)
    assert any("publish-burst must be at least 1" in p for p in found)
