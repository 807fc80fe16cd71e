"""The man pages: one per console script, generated from the parser its entry
point uses, naming every option, and formatted by man(1) without a warning."""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _manpages():
    spec = importlib.util.spec_from_file_location("manpages", ROOT / "scripts" / "manpages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


manpages = _manpages()
pytest.importorskip("PySide6")    # the desktop apps' parsers live beside their Qt code


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return manpages.render_all()


def test_every_console_script_has_a_page():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(manpages.COMMANDS) == set(scripts)


def test_daemons_in_section_8_tools_in_section_1():
    daemons = {"elvind", "filewatcher", "newswatcher", "elvin-mobility-proxy"}
    for name, spec in manpages.COMMANDS.items():
        assert spec["section"] == (8 if name in daemons else 1), name


@pytest.mark.parametrize("name", sorted(manpages.COMMANDS))
def test_each_parser_yields_a_page(name, pages):
    text = pages[name]
    section = manpages.COMMANDS[name]["section"]
    assert text.startswith(f'.TH "{name.upper()}" "{section}"')
    for heading in ("NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS"):
        assert f"\n.SH {heading}\n" in text, (name, heading)
    # every option of the parser, and of its subcommands, is described
    parser = manpages.COMMANDS[name]["parser"]()
    parsers = [parser] + [build() for _, build in manpages.COMMANDS[name].get("commands", ())]
    for p in list(parsers):
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(action.choices.values())
    for p in parsers:
        for action in p._actions:
            if action.help is argparse.SUPPRESS:
                continue
            for option in action.option_strings:
                assert "\\fB" + option.replace("-", "\\-") + "\\fR" in text, (name, option)


@pytest.mark.skipif(shutil.which("man") is None, reason="no man(1) here")
def test_man_formats_the_pages_without_warnings(tmp_path, pages):
    for name in sorted(manpages.COMMANDS):
        path = manpages.page_path(name, tmp_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(pages[name], encoding="utf-8")
        out = subprocess.run(["man", "--warnings", "-E", "UTF-8", "-l", str(path)],
                             capture_output=True, text=True, timeout=60,
                             env={"MANWIDTH": "80", "LC_ALL": "C.UTF-8", "PATH": "/usr/bin:/bin"})
        assert out.returncode == 0, out.stderr
        assert out.stderr == "", (name, out.stderr)
        assert re.search(rf"^{name.upper()}\(\d\)", out.stdout, re.M), out.stdout[:200]


def test_roff_escaping():
    from elvin.manpage import Page, render
    parser = argparse.ArgumentParser(prog="demo", description="Demo tool. More.")
    parser.add_argument("--path", default="C:\\x", help=".starts with a dot (default %(default)s)")
    text = render(Page("demo", 1, parser))
    assert "\n\\&.starts with a dot (default C:\\ex)\n" in text
    assert "demo \\- Demo tool\n" in text
