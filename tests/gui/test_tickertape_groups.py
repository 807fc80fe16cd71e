"""Groups, subscriptions, colours, config file and group discovery."""

from __future__ import annotations

import pytest
from elvin_apps.tickertape.config import (
    Config,
    ConfigError,
    default_user,
    dumps,
    from_mapping,
    load,
    save,
)
from elvin_apps.tickertape.discovery import KnownGroups, group_names
from elvin_apps.tickertape.groups import (
    Group,
    GroupError,
    GroupList,
    group_clause,
    private_expression,
    public_expression,
    quote,
)
from elvin_apps.tickertape.palette import PALETTE, Palette, hash_colour, text_colour_on

from elvin.subscription import compile as compile_subscription
from elvin.subscription import parse

V3 = {"From": "a", "Message": "m", "Message-Id": "x"}


def matches(expression, attrs):
    return compile_subscription(expression).evaluate(attrs) is True


def test_public_expression_matches_protocol_forms():
    groups = GroupList([Group("Chat"), Group("Café"), Group("Secret", key="k"),
                        Group("Muted", subscribe=False)])
    expr = public_expression(groups, threads=["t-1"], extra='From == "boss"')
    parse(expr)  # valid subscription language
    assert 'fold-case(decompose-compat(Group)) == fold-case(decompose-compat("Chat"))' in expr
    assert matches(expr, {**V3, "Group": "CHAT"})                     # case folded
    assert matches(expr, {**V3, "Group": "cafe\u0301"})               # decomposed é
    assert matches(expr, {"TICKERTAPE": "chat", "USER": "u", "TICKERTEXT": "t"})  # legacy
    assert matches(expr, {"Group": "Other", "Message": "m", "Thread-Id": "t-1"})  # our thread
    assert matches(expr, {"From": "boss"})                            # extra subscription
    assert not matches(expr, {**V3, "Group": "Secret"})               # private: own sub
    assert not matches(expr, {**V3, "Group": "Muted"})                # not subscribed
    assert not matches(expr, {"Group": "Chat", "Message": "no From or Id"})  # required attrs


def test_private_expression_and_empty_list():
    expr = private_expression(Group("Secret", key="k"))
    assert matches(expr, {**V3, "Group": "secret"})
    assert public_expression(GroupList([Group("S", key="k")])) is None
    assert public_expression(GroupList(), legacy=False) is None


def test_quoting_is_safe():
    nasty = 'a"b\\c") || require(X) || ("'
    expr = group_clause([nasty])
    parse(expr)
    assert matches(expr, {"Group": nasty})
    assert not matches(expr, {"Group": "a", "X": 1})
    assert quote('"') == '"\\""'


@pytest.mark.parametrize("kwargs", [
    {"name": ""}, {"name": "  "}, {"name": "x" * 300}, {"name": "a\nb"},
    {"name": "G", "min_time": -1}, {"name": "G", "min_time": 100, "max_time": 10},
    {"name": "G", "colour": "red"}, {"name": "G", "max_time": True},
])
def test_group_validation(kwargs):
    with pytest.raises(GroupError):
        Group(**kwargs)


def test_group_lifetime_and_list():
    g = Group("Chat", min_time=10, max_time=100)
    assert g.lifetime(None, 600) == 100 and g.lifetime(5, 600) == 10 and g.lifetime(50, 9) == 50
    assert Group("X", max_time=0).lifetime(10**6, 1) == 10**6  # 0: no upper bound
    groups = GroupList([Group("Chat"), Group("chat"), Group("News")])
    assert groups.names() == ["Chat", "News"]  # same group after folding
    assert groups.find("CHAT").name == "Chat"
    groups.upsert(Group("NEWS", colour="#123456"))
    assert groups.find("news").colour == "#123456" and len(groups) == 2
    groups.remove("chat")
    assert groups.names() == ["NEWS"]


def test_palette_is_stable_and_overridable():
    assert hash_colour("Chat") == hash_colour("chat") == hash_colour("CHAT")
    assert hash_colour("Chat") in PALETTE
    names = ["Chat", "News", "lunch", "elvin", "dstc", "coffee", "sports", "Secret"]
    palette = Palette(GroupList([Group(n) for n in names]))
    colours = [palette.colour(n) for n in names]
    assert len(set(colours)) == len(names)  # configured groups never share a colour
    again = Palette(GroupList([Group(n) for n in [*names, "later"]]))
    assert [again.colour(n) for n in names] == colours  # appending keeps the others
    palette = Palette(GroupList([Group("Chat", colour="#010203")]))
    assert palette.colour("chat") == "#010203"
    assert palette.colour("Unconfigured") == hash_colour("Unconfigured")
    assert text_colour_on("#ffffff") == "#111111" and text_colour_on("#000000") == "#ffffff"


def test_config_round_trip(tmp_path):
    config = Config(user="me@here", speed=120.0, extra_subscription='From == "x"',
                    groups=[Group("Chat"), Group("Secret", key='k"ey\n', min_time=0,
                                                  max_time=60, colour="#AABBCC"),
                            Group("Quiet", subscribe=False)])
    path = save(config, tmp_path / "sub" / "tickertape.toml")
    assert (path.stat().st_mode & 0o777) == 0o600  # keys are in it
    again = load(path)
    assert again.user == "me@here" and again.speed == 120.0
    assert again.extra_subscription == 'From == "x"'
    assert [g.name for g in again.groups] == ["Chat", "Secret", "Quiet"]
    assert again.groups[1] == Group("Secret", key='k"ey\n', min_time=0, max_time=60,
                                    colour="#aabbcc")
    assert not again.groups[2].subscribe
    assert "key" in dumps(config)


def test_config_defaults_and_errors(tmp_path):
    missing = load(tmp_path / "nope.toml")
    assert missing.elvin is None and missing.groups  # defaults work with no file
    assert "@" in default_user()
    with pytest.raises(ConfigError, match="no such file"):
        load(tmp_path / "nope.toml", must_exist=True)
    bad = tmp_path / "bad.toml"
    bad.write_text("speed = [")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load(bad)
    for data, problem in [({"speed": "fast"}, "speed must be"),
                          ({"speed": 0}, "between"),
                          ({"colour": 1}, "unknown setting 'colour'"),
                          ({"always_on_top": 1}, "true/false"),
                          ({"groups": {"name": "x"}}, "array of tables"),
                          ({"groups": [{"subscribe": True}]}, "groups #1: needs a name"),
                          ({"groups": [{"name": "x", "min_time": "a"}]}, "min_time"),
                          ({"groups": [{"name": "x", "min_time": 9, "max_time": 1}]},
                           "groups #1"),
                          ({"groups": [{"name": "x", "colour": "blue"}]}, "colour")]:
        with pytest.raises(ConfigError, match=problem):
            from_mapping(data, "f.toml")
    assert from_mapping({"groups": []}).groups == []


def test_discovery_reads_both_forms():
    protocol_form = parse(group_clause(["Chat", "News"]) + " && require(Message)")
    plain = parse('Group == "lunch" || TICKERTAPE == "Old"')
    funcs = parse('equals(Group, "a", "b") && From == "x"')
    unrelated = parse('require(Group) && Message == "ping"')
    assert group_names(protocol_form) == {"Chat", "News"}
    assert group_names(plain) == {"lunch", "Old"}
    assert group_names(funcs) == {"a", "b"}
    assert group_names(unrelated) == set()
    known = KnownGroups()
    known.set_term(1, protocol_form)
    known.set_term(2, parse('Group == "chat"'))
    known.set_term(3, unrelated)
    assert known.counts() == {"Chat": 2, "News": 1}
    known.remove_term(1)
    assert known.names() == ["chat"]
