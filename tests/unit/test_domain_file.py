"""Topology files (elvin.federation.topology_file): loading, errors that name
the file, table and problem, and the per-router federation fragments."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elvin.federation.domain import CycleError, DiamondError, Policy
from elvin.federation.topology_file import (
    TopologyFileError,
    federation_config,
    load_topology,
    parse_topology,
    render_fragment,
)
from elvin.tomlwrite import toml_string

GOOD = """\
[domain]
name = "acme"
default_consumer = "edge2"

[[routers]]
name = "hub"
url = "ewaf://hub.example.com:2916"
client_url = "elvin://hub.example.com"

[[routers]]
name = "edge1"
url = "ewaf://edge1.example.com"

[[routers]]
name = "edge2"
url = "ewaf://edge2.example.com:2999"

[[links]]
from = "hub"
to = "edge1"
outgoing = "require(News)"

[[links]]
from = "hub"
to = "edge2"
incoming = "Group == \\"x\\""
"""


def routers(*names: str) -> str:
    return "".join(f'[[routers]]\nname = "{n}"\nurl = "ewaf://{n}.example.com:2916"\n\n'
                   for n in names)


def links(*pairs: str) -> str:
    out = ""
    for pair in pairs:
        a, b = pair.split(">")
        out += f'[[links]]\nfrom = "{a}"\nto = "{b}"\n\n'
    return out


def write(tmp_path: Path, text: str, name: str = "topo.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load_error(tmp_path: Path, text: str) -> TopologyFileError:
    path = write(tmp_path, text)
    with pytest.raises(TopologyFileError) as info:
        load_topology(path)
    assert info.value.path == str(path)
    assert str(info.value).startswith(str(path))
    return info.value


# --- loading ---------------------------------------------------------------------

def test_load_a_good_file(tmp_path):
    topo = load_topology(write(tmp_path, GOOD))
    assert topo.name == "acme"
    assert list(topo.routers) == ["hub", "edge1", "edge2"]
    hub = topo.routers["hub"]
    assert hub.federation_uri.port == 2916 and hub.client_uri.port == 2917
    assert topo.routers["edge1"].federation_uri.port == 2916     # the federation default
    d = topo.domain
    assert [(m.id, m.name) for m in d.members] == [(0, "hub"), (1, "edge1"), (2, "edge2")]
    assert [str(link) for link in d.links] == ["hub -> edge1", "hub -> edge2"]
    assert d.link("hub", "edge1").outgoing == "require(News)"
    assert d.link("hub", "edge1").incoming is None
    assert d.link("hub", "edge2").incoming == 'Group == "x"'
    assert d.default_supplier.name == "hub" and d.default_consumer.name == "edge2"
    assert topo.qos.cycles is Policy.FORBID and topo.qos.diamonds is Policy.FORBID
    assert d.downstream("hub") == ["edge1", "edge2"]
    assert [(link.index, link.line) for link in topo.links] == [(1, 18), (2, 23)]


def test_domain_name_defaults_to_the_file_stem(tmp_path):
    topo = load_topology(write(tmp_path, routers("a"), "office.toml"))
    assert topo.name == "office" and topo.domain.links == []


def test_unknown_router_in_a_link(tmp_path):
    err = load_error(tmp_path, routers("hub", "edge") + links("hub>egde"))
    assert err.table == "links #1 (hub -> egde)"
    assert err.line == 9
    assert "unknown router 'egde' in 'to'" in err.problem
    assert "did you mean 'edge'?" in err.problem
    err = load_error(tmp_path, routers("hub") + links("zzz>hub"))
    assert "unknown router 'zzz' in 'from' (routers: hub)" in str(err)


def test_duplicate_router_names(tmp_path):
    err = load_error(tmp_path, routers("a", "b") + '[[routers]]\nname = "a"\n'
                                                   'url = "ewaf://other:2916"\n')
    assert err.table == "routers #3 ('a')" and err.line == 9
    assert "duplicate router name 'a'" in err.problem and "#1" in err.problem


def test_duplicate_endpoint(tmp_path):
    text = routers("a") + '[[routers]]\nname = "b"\nurl = "ewaf://A.example.com"\n'
    assert "same endpoint as router 'a'" in str(load_error(tmp_path, text))


@pytest.mark.parametrize("field,url,needle", [
    ("url", "elvin://hub:2917", "bad federation url"),
    ("url", "http://hub", "not an ewaf URI"),
    ("url", "ewaf://hub:99999", "bad port"),
    ("client_url", "ewaf://hub:2916", "bad client_url"),
])
def test_bad_url_scheme(tmp_path, field, url, needle):
    text = '[[routers]]\nname = "hub"\nurl = "ewaf://hub"\n'.replace(
        'url = "ewaf://hub"', f'{field} = "{url}"' if field == "url"
        else f'url = "ewaf://hub"\n{field} = "{url}"')
    err = load_error(tmp_path, text)
    assert err.table == "routers #1 ('hub')"
    assert needle in err.problem and url in err.problem


def test_toml_syntax_error_names_the_line(tmp_path):
    err = load_error(tmp_path, routers("a") + "[[links]]\nfrom = = 'a'\n")
    assert err.line == 6
    assert "TOML syntax error" in str(err) and "line 6" in str(err)


@pytest.mark.parametrize("text,table,needle", [
    (routers("a") + "[qos]\ncycles = 'never'\n", "[qos]", "expected \"forbid\" or \"allow\""),
    (routers("a") + "[qos]\ncycle = 'allow'\n", "[qos]", "did you mean 'cycles'?"),
    ("colour = 1\n" + routers("a"), "top level", "unknown key 'colour'"),
    ("", "[[routers]]", "no routers"),
    ('[[routers]]\nurl = "ewaf://a"\n', "routers #1", "missing 'name'"),
    ('[[routers]]\nname = "a"\n', "routers #1 ('a')", "missing 'url'"),
    ('[[routers]]\nname = "a b"\nurl = "ewaf://a"\n', "routers #1 ('a b')",
     "bad router name"),
    ('[[routers]]\nname = "a"\nurl = 2916\n', "routers #1 ('a')",
     "'url' must be a string, not an integer"),
    (routers("a") + links("a>a"), "links #1 (a -> a)", "cannot link to itself"),
    (routers("a", "b") + links("a>b", "a>b"), "links #2 (a -> b)", "duplicate link"),
    (routers("a", "b") + '[[links]]\nfrom = "a"\nto = "b"\noutgoing = ""\n',
     "links #1 (a -> b)", "'outgoing' is empty"),
    (routers("a", "b") + '[[links]]\nfrom = "a"\nto = "b"\nvia = "c"\n',
     "links #1", "unknown key 'via'"),
    (routers("a") + '[domain]\ndefault_supplier = "b"\n', "[domain]", "unknown router 'b'"),
    ("routers = 3\n" + routers("a"), "", "TOML syntax error"),
    ("links = 3\n" + routers("a"), "[[links]]", "must be an array of tables"),
])
def test_structural_errors(tmp_path, text, table, needle):
    err = load_error(tmp_path, text)
    assert err.table == table
    assert needle in err.problem


def test_unreadable_files(tmp_path):
    with pytest.raises(TopologyFileError, match="cannot read the file") as info:
        load_topology(tmp_path / "missing.toml")
    assert info.value.path.endswith("missing.toml")
    path = tmp_path / "latin1.toml"
    path.write_bytes(b'[[routers]]\nname = "caf\xe9"\n')
    with pytest.raises(TopologyFileError, match="not UTF-8") as info:
        load_topology(path)
    assert info.value.line == 2


def test_filters_can_be_validated():
    def validate(expr: str) -> None:
        if "(" in expr and ")" not in expr:
            raise ValueError("unbalanced parenthesis")
    text = routers("a", "b") + '[[links]]\nfrom = "a"\nto = "b"\nincoming = "require(X"\n'
    with pytest.raises(TopologyFileError, match="bad incoming filter 'require\\(X'"):
        parse_topology(text, "t.toml", validate_filter=validate)


# --- QoS refusals ---------------------------------------------------------------

def test_a_cyclic_file_is_refused_with_the_cycle(tmp_path):
    err = load_error(tmp_path, routers("a", "b", "c") + links("a>b", "b>c", "c>a"))
    assert err.table == "links #3 (c -> a)"
    assert err.line == 21
    text = str(err)
    assert "would create a cycle" in text and "a -> b -> c -> a" in text
    [(spec, exc)] = err.refusals
    assert (spec.source, spec.target) == ("c", "a")
    assert isinstance(exc, CycleError) and exc.cycles == [("a", "b", "c")]


def test_every_refused_link_is_reported(tmp_path):
    text = routers("a", "b", "c", "d") + links("a>b", "b>c", "c>a", "a>c", "c>d", "d>b")
    err = load_error(tmp_path, text)
    assert err.table == "[[links]]"
    kinds = [(spec.index, type(exc)) for spec, exc in err.refusals]
    assert kinds == [(3, CycleError), (4, DiamondError), (6, CycleError)]
    text = str(err)
    assert "3 links refused" in text
    assert "from a to c:" in text and "a -> b -> c" in text
    assert "b -> c -> d -> b" in text


def test_allow_in_the_file_accepts_cycles_and_diamonds(tmp_path):
    text = ("[qos]\ncycles = 'allow'\ndiamonds = 'allow'\n"
            + routers("a", "b", "c") + links("a>b", "b>c", "c>a", "a>c"))
    topo = load_topology(write(tmp_path, text))
    assert topo.domain.cycles() == [("a", "b", "c"), ("a", "c")]
    [diamond] = topo.domain.diamonds()
    assert diamond.paths == (("a", "b", "c"), ("a", "c"))
    text = "[qos]\ncycles = 'allow'\n" + routers("a", "b", "c") + links("a>b", "b>c", "c>a")
    load_topology(write(tmp_path, text))
    err = load_error(tmp_path, text + links("a>c"))
    assert "diamonds forbidden by [qos]" in str(err)


# --- federation fragments -----------------------------------------------------------

def fragments(topo) -> dict[str, dict]:
    """Each router's rendered fragment, parsed back (it must be valid TOML
    holding exactly federation_config)."""
    out = {}
    for name in topo.routers:
        parsed = tomllib.loads(render_fragment(topo, name))
        assert list(parsed) == ["federation"]
        expected = {k: v for k, v in federation_config(topo, name).items() if v != []}
        assert parsed["federation"] == expected
        out[name] = parsed["federation"]
    return out


def flows(topo, frags) -> dict[tuple[str, str], tuple]:
    """The directed flows the fragments configure, checking both ends agree:
    (sender, receiver) -> (sender's outgoing, receiver's incoming)."""
    connections = {}
    for name, fed in frags.items():
        assert fed["router_domain"] == name
        assert fed["listen"] == topo.routers[name].url
        for entry in fed.get("connect", []):
            assert entry["url"] == topo.routers[entry["router"]].url
            pair = frozenset((name, entry["router"]))
            assert pair not in connections, "one connection per pair"
            connections[pair] = (name, entry)
    accepted = {}
    for name, fed in frags.items():
        for entry in fed.get("accept", []):
            pair = frozenset((name, entry["router"]))
            assert pair in connections and connections[pair][0] == entry["router"]
            accepted[pair] = (name, entry)
    assert accepted.keys() == connections.keys()
    result = {}
    for pair in connections:
        (dialer, d_entry), (acceptor, a_entry) = connections[pair], accepted[pair]
        for src, src_e, dst, dst_e in ((dialer, d_entry, acceptor, a_entry),
                                       (acceptor, a_entry, dialer, d_entry)):
            if src_e["outgoing"] is not False or dst_e["incoming"] is not False:
                assert src_e["outgoing"] is not False and dst_e["incoming"] is not False
                result[(src, dst)] = (src_e["outgoing"], dst_e["incoming"])
    return result


def test_fragments_form_exactly_the_topology(tmp_path):
    topo = load_topology(write(tmp_path, GOOD))
    frags = fragments(topo)
    assert flows(topo, frags) == {("hub", "edge1"): ("require(News)", True),
                                  ("hub", "edge2"): (True, 'Group == "x"')}
    hub = frags["hub"]
    assert hub["listen"] == "ewaf://hub.example.com:2916"
    assert [c["router"] for c in hub["connect"]] == ["edge1", "edge2"]
    assert "accept" not in hub
    assert frags["edge1"]["accept"] == [{"router": "hub", "outgoing": False,
                                         "incoming": True}]


def test_a_two_way_pair_gets_one_connection(tmp_path):
    text = ("[qos]\ncycles = 'allow'\ndiamonds = 'allow'\n"
            + routers("a", "b", "c", "lonely") + links("b>a", "a>b", "b>c", "c>a"))
    topo = load_topology(write(tmp_path, text))
    frags = fragments(topo)
    got = flows(topo, frags)
    assert set(got) == {(link.source.name, link.target.name) for link in topo.domain.links}
    assert [c["router"] for c in frags["b"]["connect"]] == ["a", "c"]   # b dials a: first link
    # redundant paths: every fragment asks for the shortest-path trees
    assert frags["lonely"] == {"router_domain": "lonely", "routing": "trees",
                               "listen": "ewaf://lonely.example.com:2916"}


def test_a_domain_with_a_single_path_leaves_routing_alone(tmp_path):
    topo = load_topology(write(tmp_path, routers("a", "b") + links("a>b")))
    assert all("routing" not in frag for frag in fragments(topo).values())


@given(st.text())
def test_toml_strings_round_trip(text):
    assert tomllib.loads(f"x = {toml_string(text)}")["x"] == text


@given(st.lists(st.text(min_size=1).filter(lambda s: s.strip() == s and s), min_size=2,
                max_size=2))
def test_fragment_filters_round_trip(filters):
    outgoing, incoming = filters
    text = (routers("a", "b") + "[[links]]\nfrom = 'a'\nto = 'b'\n"
            f"outgoing = {toml_string(outgoing)}\nincoming = {toml_string(incoming)}\n")
    topo = parse_topology(text, "t.toml")
    frags = {n: tomllib.loads(render_fragment(topo, n))["federation"] for n in ("a", "b")}
    assert frags["a"]["connect"][0]["outgoing"] == outgoing
    assert frags["b"]["accept"][0]["incoming"] == incoming
