"""newswatcher config: the TOML file, its errors, --feed URLs."""

from __future__ import annotations

from pathlib import Path

import pytest
from elvin_apps.newswatcher.config import (
    ConfigError,
    FeedConfig,
    HttpSettings,
    feed_from_url,
    from_mapping,
    load,
    normalise_url,
)

GOOD = """
elvin = "elvin://router.example:2917"
data_dir = "state"

[defaults]
interval = 600
groups = ["news"]
timeout = 1200

[http]
timeout = 5
max_bytes = 100000
min_host_interval = 2.5
max_per_host = 1

[[feeds]]
name = "lwn"
url = "https://lwn.net/headlines/rss"
interval = 300
groups = ["news", "linux"]
from = "LWN.net"

[[feeds]]
name = "local"
url = "feeds/local.xml"
initial_items = 5
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "newswatcher.toml"
    path.write_text(text)
    return path


def test_full_file(tmp_path):
    config = load(write(tmp_path, GOOD), must_exist=True)
    assert config.elvin == "elvin://router.example:2917"
    assert config.data_dir == tmp_path / "state"          # relative to the file
    assert config.http == HttpSettings(timeout=5.0, max_bytes=100000, min_host_interval=2.5,
                                       max_per_host=1)
    lwn, local = config.feeds
    assert lwn == FeedConfig("lwn", "https://lwn.net/headlines/rss", 300, ("news", "linux"),
                             "LWN.net", 1200, None)
    assert lwn.from_ == "LWN.net"
    assert local.url == (tmp_path / "feeds/local.xml").resolve().as_uri()
    assert local.interval == 600 and local.groups == ("news",) and local.from_ == "local"
    assert local.initial_items == 5 and local.timeout == 1200
    assert config.feed("lwn") is lwn and config.feed("nope") is None


def test_missing_default_file_gives_defaults(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    config = load()
    assert config.feeds == [] and config.elvin is None and not config.scoop


def test_missing_named_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load(tmp_path / "absent.toml", must_exist=True)


@pytest.mark.parametrize("text, where", [
    ("[[feeds]]\nname = 'a'\n", "feeds #1, url: missing"),
    ("[[feeds]]\nname = 'a'\nurl = 'http://x/'\ninterval = 'often'\n", "feeds #1, interval"),
    ("[[feeds]]\nname = 'a'\nurl = 'http://x/'\ninterval = 0\n", "out of range"),
    ("[[feeds]]\nname = 'a'\nurl = 'gopher://x/'\n", "unsupported scheme"),
    ("[[feeds]]\nname = 'a'\nurl = 'http:///nohost'\n", "has no host"),
    ("[[feeds]]\nname = 'a'\nurl = 'http://x/'\n[[feeds]]\nname = 'a'\nurl = 'http://y/'\n",
     "feeds #2, name: 'a' is used by another feed"),
    ("[[feeds]]\nname = 'a'\nurl = 'http://x/'\ngroup = 'news'\n", "feeds #1, group: unknown key"),
    ("[[feeds]]\nname = 'a'\nurl = 'http://x/'\ngroups = []\n", "feeds #1, groups"),
    ("[[feeds]]\nname = ''\nurl = 'http://x/'\n", "feeds #1, name: empty"),
    ("[http]\nmax_per_host = 0\n", "http.max_per_host"),
    ("[http]\nbackoff_initial = 100\nbackoff_max = 10\n", "backoff_max"),
    ("elvin = 'nonsense://'\n", "elvin:"),
    ("scoop = 'yes'\n", "scoop: must be true or false"),
    ("feeds = 3\n", "feeds: must be"),
    ("this is not toml", "not valid TOML"),
])
def test_errors_name_file_and_key(tmp_path, text, where):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load(path, must_exist=True)
    assert str(path) in str(info.value)
    assert where in str(info.value)


def test_groups_as_a_single_string_and_deduplicated():
    config = from_mapping({"feeds": [{"name": "a", "url": "http://x/", "groups": "tech"},
                                     {"name": "b", "url": "http://y/",
                                      "groups": ["x", " x ", "y"]}]})
    assert config.feeds[0].groups == ("tech",)
    assert config.feeds[1].groups == ("x", "y")


def test_feed_from_url_names(tmp_path):
    defaults = FeedConfig("", "", interval=60)
    a = feed_from_url("https://www.example.org/feed.xml", defaults)
    assert a.name == "example.org" and a.interval == 60 and a.url.startswith("https://")
    b = feed_from_url("https://example.org/other.xml", defaults, taken={"example.org"})
    assert b.name == "example.org-2"
    path = tmp_path / "my feed.xml"
    c = feed_from_url(str(path), defaults)
    assert c.name == "my-feed" and c.url == path.resolve().as_uri()
    with pytest.raises(ConfigError):
        feed_from_url("ftp://example.org/x", defaults)


def test_file_urls(tmp_path):
    target = tmp_path / "x.xml"
    assert normalise_url(target.as_uri(), "t") == target.resolve().as_uri()
    assert normalise_url("x.xml", "t", tmp_path) == target.resolve().as_uri()
    with pytest.raises(ConfigError, match="only local"):
        normalise_url("file://otherhost/x.xml", "t")
