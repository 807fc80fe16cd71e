"""Router configuration: TOML, validation, flags."""

from __future__ import annotations

import pytest

from elvin.router.cli import build_parser, make_config
from elvin.router.config import ConfigError, RouterConfig, load_config, parse_listen_uri


def write(tmp_path, text):
    path = tmp_path / "elvind.toml"
    path.write_text(text)
    return path


def test_full_config(tmp_path):
    path = write(tmp_path, '''
listen = ["elvin://0.0.0.0:2917", "elvin:4.0/tcp,none,xdr/127.0.0.1:0"]
log_level = "debug"
stats-interval = 2
max-protocol-errors = 3
[options]
"Packet.Max-Length" = 65536
"Subscription.Max-Count" = { min = 16, default = 20, max = 30 }
"Send-Queue.Drop-Policy" = "newest"
''')
    config = load_config(path)
    assert config.listen[1].endswith(":0")
    assert config.log_level == "debug" and config.stats_interval == 2
    assert config.max_protocol_errors == 3
    assert config.options.ints["Packet.Max-Length"][1] == 65536
    assert config.options.ints["Subscription.Max-Count"] == (16, 20, 30)
    assert config.options.send_drop_policy == "newest"


@pytest.mark.parametrize("text, message", [
    ('listen = [\n', "line"),
    ('bogus = 1\n', "unknown setting 'bogus'"),
    ('\n\nlog-level = 3\n', "line 3"),
    ('listen = "tcp://x"\n', "bad listen URI"),
    ('log-level = "loud"\n', "log-level"),
    ('[options]\n"No.Such" = 1\n', "unknown connection option"),
    ('[options]\n"Subscription.Max-Count" = { min = 20, default = 17 }\n', "min <= default"),
    ('[options]\n"Send-Queue.Drop-Policy" = "random"\n', "Drop-Policy"),
    ('listen = "elvin:4.0/ssl,none,xdr/127.0.0.1:2918"\n', "tls-cert"),
])
def test_errors_name_file_and_problem(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(path) in str(info.value) and message in str(info.value)


def test_listen_uri_with_port_zero():
    assert parse_listen_uri("elvin://127.0.0.1:0").port == 0
    assert parse_listen_uri("elvin://127.0.0.1").port == 2917


def test_flags_override_file(tmp_path):
    path = write(tmp_path, 'listen = "elvin://127.0.0.1:1234"\nlog-level = "error"\n')
    args = build_parser().parse_args(["--config", str(path), "--listen",
                                      "elvin://127.0.0.1:5678", "--log-level", "DEBUG"])
    config = make_config(args)
    assert config.listen == ["elvin://127.0.0.1:5678"] and config.log_level == "debug"


def test_defaults_validate():
    assert RouterConfig().validate().listen == ["elvin://127.0.0.1:2917"]


def test_mobility_key_file_in_toml_and_flags(tmp_path):
    key = tmp_path / "mobility.key"
    key.write_bytes(b"\x00raw key\xff")
    path = write(tmp_path, f'mobility = true\nmobility-key-file = "{key}"\n')
    assert load_config(path).validate().mobility_key_file == str(key)
    args = build_parser().parse_args(["--mobility", "--mobility-key-file", str(key)])
    config = make_config(args)
    assert config.mobility and config.mobility_key_file == str(key)
    assert RouterConfig().mobility_key_file is None


@pytest.mark.parametrize("make, message", [
    (lambda p: None, "No such file"),
    (lambda p: p.write_bytes(b""), "is empty"),
    (lambda p: p.mkdir(), "cannot read mobility key file"),
])
def test_bad_mobility_key_file_is_a_clear_config_error(tmp_path, make, message):
    key = tmp_path / "mobility.key"
    make(key)
    path = write(tmp_path, f'mobility = true\nmobility-key-file = "{key}"\n')
    with pytest.raises(ConfigError) as info:
        load_config(path).validate(str(path))
    text = str(info.value)
    assert str(path) in text and "mobility-key-file" in text
    assert str(key) in text and message in text
    args = build_parser().parse_args(["--mobility", "--mobility-key-file", str(key)])
    with pytest.raises(ConfigError) as info:
        make_config(args)
    assert str(key) in str(info.value) and message in str(info.value)


def test_quench_key_and_no_quench_flag(tmp_path):
    assert RouterConfig().quench is True
    assert load_config(write(tmp_path, "quench = false\n")).quench is False
    assert make_config(build_parser().parse_args(["--no-quench"])).quench is False
    assert make_config(build_parser().parse_args([])).quench is True
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, '\nquench = "no"\n'))
    assert "line 2" in str(info.value) and "'quench' must be true or false" in str(info.value)


def test_attribute_names_key_turns_the_census_off(tmp_path):
    """The census (Elvin-Router-Attributes) is on unless the file says otherwise,
    and survives beside the other flags (archive-private) in one file."""
    assert RouterConfig().attribute_names is True
    both = load_config(write(tmp_path, "attribute-names = false\n"
                                     f"archive = '{tmp_path / 'archive'}'\narchive-private = true\n"))
    assert both.attribute_names is False and both.archive_private is True
    assert make_config(build_parser().parse_args([])).attribute_names is True
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, "attribute-names = 1\n"))
    assert "'attribute-names' must be true or false" in str(info.value)


def test_routers_started_together_have_distinct_ids() -> None:
    """Two routers made in one process within the same second (embedded routers,
    a quick restart) must not share an id: federation takes the id as the default
    domain, and the console takes a new id as a restart."""
    from elvin.router.server import Router

    ids = {Router().router_id for _ in range(3)}
    assert len(ids) == 3


def test_state_dir_in_the_file_and_as_flags_and_reset_only_as_a_flag(tmp_path):
    path = write(tmp_path, f'state-dir = "{tmp_path / "s"}"\n')
    config = load_config(path)
    assert config.state_dir == str(tmp_path / "s") and not config.state_reset
    flags = make_config(build_parser().parse_args(["--state-dir", str(tmp_path / "t")]))
    assert flags.state_dir == str(tmp_path / "t") and not flags.state_reset
    over = make_config(build_parser().parse_args(["--config", str(path), "--state-dir",
                                                  str(tmp_path / "u"), "--state-reset"]))
    assert over.state_dir == str(tmp_path / "u") and over.state_reset
    reset = make_config(build_parser().parse_args(["--config", str(path), "--state-reset"]))
    assert reset.state_dir == str(tmp_path / "s") and reset.state_reset


@pytest.mark.parametrize("text, message", [
    ("state-dir = 3\n", "'state-dir' must be a string"),
    ("state-reset = \"yes\"\n", "state-reset is not a setting"),
    ("state-dir = \"/tmp/x\"\nstate-reset = true\n",
     "line 2: state-reset is not a setting: to move the state aside once, run elvind "
     "--state-reset"),
    ('state-dir = ""\n', "state-dir: empty directory name"),
])
def test_bad_state_settings_name_the_problem(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, text))


def test_door_limits_in_the_file_and_their_errors(tmp_path):
    config = load_config(write(tmp_path, "max-connections-per-address = 10\n"
                                         "max-pre-session = 0\nframe-timeout = 2.5\n"
                                         "max-keys-per-subscription = 3\n"))
    assert config.max_connections_per_address == 10 and config.max_pre_session == 0
    assert config.frame_timeout == 2.5 and config.max_keys_per_subscription == 3
    with pytest.raises(ConfigError, match=r"line 2: max-partial-bytes must be 0 \(no limit\)"):
        load_config(write(tmp_path, "\nmax-partial-bytes = -1\n"))
    with pytest.raises(ConfigError, match="pre-session-max-length must be positive"):
        load_config(write(tmp_path, "pre-session-max-length = 0\n"))


def test_every_door_limit_is_documented_and_reloadable():
    """Each limit is declared with its help (the config reference is made
    from it), is in the admins' limits page's table, and SIGHUP applies it."""
    from pathlib import Path

    import elvin.router.config as config_module

    root = Path(__file__).resolve().parents[2]
    guide = (root / "docs" / "admins" / "limits.md").read_text()
    rows = "\n".join(line for line in guide.splitlines() if line.startswith("| `"))
    names = [*config_module.DOOR_LIMITS, "pre_session_max_length", "frame_timeout"]
    for name in names:
        key = name.replace("_", "-")
        assert config_module.SETTINGS[name].help, key
        assert f"`{key}`" in rows, key
        assert name in config_module.RELOADABLE, name
