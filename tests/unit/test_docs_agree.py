"""What the docs say is what the tools do (issue 44): the include folder of
elvind's fragments, the newswatcher's wording of a wrong feed setting. The
admins' guide (docs/admins/) holds what the README held before it became a
front page (issue 47)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from elvin.config_file import ConfigError
from elvin.federation.domain_cli import main as domain_main

GOOD = """\
[domain]
name = "acme"

[[routers]]
name = "hub"
url = "ewaf://hub.example.com:2916"

[[routers]]
name = "edge"
url = "ewaf://edge.example.com"

[[links]]
from = "hub"
to = "edge"
"""

ROOT = Path(__file__).resolve().parents[2]
INCLUDE = "/etc/elvin/elvind.d/*.toml"


def test_one_include_folder_for_the_guide_the_unit_and_elvin_domain(tmp_path, capsys):
    # the operating page says how fragments are read, the event-domain page how
    # elvin-domain's are installed
    guides = [(ROOT / "docs" / "admins" / page).read_text()
              for page in ("service.md", "event-domains.md")]
    unit = (ROOT / "packaging" / "systemd" / "elvind.service").read_text()
    assert all(INCLUDE in guide for guide in guides) and INCLUDE in unit
    config_doc = (ROOT / "elvin" / "router" / "config.py").read_text()
    good = tmp_path / "acme.toml"
    good.write_text(GOOD)
    assert domain_main(["apply", str(good), "--out", str(tmp_path / "out")]) == 0
    said = capsys.readouterr().out
    for text in (*guides, unit, said, config_doc):
        folders = set(re.findall(r'include =[\s#]*\[\\?"([^"\\]+)\\?"\]', text))
        assert folders == {INCLUDE}, folders


def test_the_newswatcher_readme_quotes_the_error_it_gives():
    from elvin_apps.newswatcher.config import from_mapping

    readme = (ROOT / "apps" / "newswatcher" / "README.md").read_text()
    quoted = re.search(r"\(`(feeds #\d, interval: [^`]+)`\)", readme)
    assert quoted, "the README's example error"
    with pytest.raises(ConfigError) as info:
        from_mapping({"feeds": [{"name": "a", "url": "http://x/a"},
                                {"name": "b", "url": "http://x/b", "interval": "often"}]})
    assert str(info.value).endswith(quoted.group(1))
