"""The state-table machinery (elvin.protocol.states): each role's own table
is tested beside its endpoint; here, what every table relies on."""

from enum import Enum

import pytest

from elvin.protocol.states import ANY_PACKET, IllegalEvent, IllegalPacket, Machine, Role


class _S(Enum):
    NEW = 1
    OPEN = 2
    CLOSING = 3


_TOY = Machine(
    role=Role.CLIENT, initial=_S.NEW,
    received={_S.NEW: {50: _S.OPEN}, _S.OPEN: {ANY_PACKET: _S.OPEN, 53: _S.CLOSING}},
    events={_S.OPEN: {"sent disconnect": _S.CLOSING}},
    ignored=frozenset({_S.CLOSING}),
    names={50: "ConnRply", 57: "NotifyDeliver"},
    refusals={_S.NEW: "before ConnRply"})


def test_a_named_packet_leads_where_its_row_says() -> None:
    assert _TOY.receive(_S.NEW, 50) is _S.OPEN
    assert _TOY.receive(_S.OPEN, 53) is _S.CLOSING


def test_any_packet_covers_every_other_id_of_its_row() -> None:
    assert _TOY.receive(_S.OPEN, 57) is _S.OPEN
    assert _TOY.legal(_S.OPEN, 12345)


def test_an_illegal_packet_says_what_and_where() -> None:
    with pytest.raises(IllegalPacket) as caught:
        _TOY.receive(_S.NEW, 57)
    assert str(caught.value) == "NotifyDeliver before ConnRply"
    assert caught.value.packet_id == 57 and caught.value.state is _S.NEW
    assert not _TOY.legal(_S.NEW, 57)


def test_an_unnamed_id_in_a_state_without_a_refusal_is_still_described() -> None:
    bare = Machine(role=Role.CLIENT, initial=_S.NEW, received={}, events={})
    with pytest.raises(IllegalPacket, match="packet type 99 in state NEW"):
        bare.receive(_S.NEW, 99)


def test_ignored_states_take_everything_and_stay() -> None:
    assert _TOY.receive(_S.CLOSING, 57) is _S.CLOSING
    assert _TOY.legal(_S.CLOSING, 1)


def test_an_own_event_outside_the_table_is_the_endpoints_bug() -> None:
    assert _TOY.event(_S.OPEN, "sent disconnect") is _S.CLOSING
    with pytest.raises(IllegalEvent, match="'sent disconnect' in state NEW"):
        _TOY.event(_S.NEW, "sent disconnect")
