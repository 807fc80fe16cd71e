"""Discovery and redirect settings of elvind: TOML keys, flags, validation."""

from __future__ import annotations

import pytest

from elvin.discovery import advertised_urls
from elvin.router.cli import build_parser, make_config
from elvin.router.config import ConfigError, RouterConfig, load_config


def write(tmp_path, text):
    path = tmp_path / "elvind.toml"
    path.write_text(text)
    return path


def test_defaults_suit_a_lan_router():
    config = RouterConfig()
    assert config.discovery and config.discovery_default
    assert (config.discovery_address, config.discovery_port) == ("224.4.0.1", 2917)
    assert config.discovery_scope == "" and config.max_connections == 0
    assert config.redirect_to is None


def test_toml_keys(tmp_path):
    path = write(tmp_path, '''
discovery = true
discovery-scope = "lab"
discovery_default = false
discovery-address = "127.0.0.1"
discovery-port = 4000
discovery-interface = "127.0.0.1"
max-connections = 100
redirect-to = "elvin://other.example.org:2917"
''')
    config = load_config(path)
    assert config.discovery and not config.discovery_default
    assert config.discovery_scope == "lab"
    assert (config.discovery_address, config.discovery_port) == ("127.0.0.1", 4000)
    assert config.discovery_interface == "127.0.0.1"
    assert config.max_connections == 100
    assert config.redirect_to == "elvin://other.example.org:2917"


@pytest.mark.parametrize("text, message", [
    ('discovery = "yes"\n', "'discovery' must be true or false"),
    ('discovery-scope = "a:b"\n', "discovery-scope 'a:b' may not contain ':'"),
    ('discovery-address = "somewhere"\n', "not an IPv4 address"),
    ('discovery-port = 70000\n', "out of range"),
    ('discovery-port = "2917"\n', "must be a number"),
    ('max-connections = -1\n', "max-connections"),
    ('redirect-to = "elvin://"\n', "bad redirect-to URI"),
])
def test_bad_settings_are_named(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, text))


def test_flags_override_the_file(tmp_path):
    path = write(tmp_path, 'discovery-scope = "file"\nmax-connections = 5\n')
    args = build_parser().parse_args([
        "--config", str(path), "--discovery-scope", "flag", "--no-discovery-default",
        "--discovery-address", "127.0.0.1", "--discovery-port", "0",
        "--max-connections", "2", "--redirect-to", "elvin://spare:2917"])
    config = make_config(args)
    assert config.discovery_scope == "flag" and not config.discovery_default
    assert config.discovery_port == 0 and config.max_connections == 2
    assert config.redirect_to == "elvin://spare:2917"
    assert config.discovery   # not touched by a flag


def test_no_discovery_flag():
    assert not make_config(build_parser().parse_args(["--no-discovery"])).discovery
    assert make_config(build_parser().parse_args([])).discovery


def test_advertised_urls_replace_wildcards():
    urls = advertised_urls(["elvin://0.0.0.0:2917", "elvin://127.0.0.1:2918",
                            "elvin:4.0/ssl,none,xdr/0.0.0.0:2919"])
    assert "elvin://127.0.0.1:2918" in urls
    assert not any("0.0.0.0" in url for url in urls)
    assert any(url.endswith(":2917") and url.startswith("elvin://") for url in urls)
    assert any(url.startswith("elvin:4.0/ssl,none,xdr/") and url.endswith(":2919")
               for url in urls)
