"""Pre-hashed key matching agrees with elvin.keys.keys_match; key checks."""

import itertools

import pytest

from elvin.errors import NackCode
from elvin.keys import EMPTY_KEYS, Keys, keys_match
from elvin.router.security import (
    KeyRefused,
    apply_delta,
    check_keys,
    key_delta_error,
    prepare_notification,
    prepare_subscription,
    prepared_match,
)

NOTIFICATION_KEYS = [
    EMPTY_KEYS,
    Keys.producer_notification("a"),
    Keys.producer_notification("b"),
    Keys.consumer_notification("a"),
    Keys.dual_notification(["a"], ["b"]),
    Keys.dual_notification(["a"], []),
    Keys.for_notification(producer=["a"], consumer=["c"]),
]
SUBSCRIPTION_KEYS = [
    EMPTY_KEYS,
    Keys.producer_subscription("a"),
    Keys.consumer_subscription("a"),
    Keys.consumer_subscription("b"),
    Keys.dual_subscription(["a"], ["b"]),
    Keys.dual_subscription(["a"], ["x"]),
    Keys.for_subscription(producer=["z"], consumer=["c"]),
]


@pytest.mark.parametrize("n, s", list(itertools.product(NOTIFICATION_KEYS, SUBSCRIPTION_KEYS)))
def test_prepared_match_equals_keys_match(n, s):
    assert prepared_match(prepare_notification(n), prepare_subscription(s)) == keys_match(n, s)


def test_some_pairs_do_match():
    assert prepared_match(prepare_notification(Keys.producer("k")),
                          prepare_subscription(Keys.producer_subscription("k")))
    assert prepared_match(prepare_notification(Keys.consumer_notification("k")),
                          prepare_subscription(Keys.consumer("k")))


def test_check_keys_refuses_unknown_scheme_and_extra_sets():
    with pytest.raises(KeyRefused) as info:
        check_keys(Keys({7: (frozenset({b"x"}),)}))
    assert info.value.code == NackCode.BAD_KEY_SCHEME and info.value.args_ == (7,)
    with pytest.raises(KeyRefused) as info:
        check_keys(Keys({2: (frozenset({b"x"}), frozenset({b"y"}))}))
    assert info.value.code == NackCode.BAD_KEY_INDEX
    check_keys(Keys.dual_notification(["a"], ["b"]))


def test_key_delta_rules():
    current = Keys.producer("a")
    assert key_delta_error(current, Keys.producer("a"), EMPTY_KEYS, "x").code == \
        NackCode.KEY_EXISTS
    assert key_delta_error(current, EMPTY_KEYS, Keys.producer("b"), "x").code == \
        NackCode.NO_SUCH_KEY
    # remove then re-add in one request is fine
    assert key_delta_error(current, Keys.producer("a"), Keys.producer("a"), "x") is None
    assert apply_delta(current, Keys.producer("b"), Keys.producer("a")) == Keys.producer("b")
    assert apply_delta(current, EMPTY_KEYS, Keys.producer("a")) == EMPTY_KEYS
