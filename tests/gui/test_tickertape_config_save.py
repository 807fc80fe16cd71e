"""Saving the tickertape's settings into the file the user wrote.

Groups may be written as an array of tables (``[[groups]]``, what the app
writes first) or inline (``groups = [{name = "Chat"}]``, what people often
type); adding, removing and reordering groups must save in both forms and
keep the user's comments. Real files, read back with the app's loader.
"""

from __future__ import annotations

import tomllib
from dataclasses import replace

import pytest
from elvin_apps.tickertape.config import load, save
from elvin_apps.tickertape.groups import Group

INLINE = """\
# my ticker
user = "me@host"  # who I am
groups = [
    {name = "Chat"},  # everyone
    {name = "ops", colour = "#ff0000"},  # the on-call lot
]
# the end
"""

TABLES = """\
# my ticker
user = "me@host"  # who I am

# everyone
[[groups]]
name = "Chat"  # all of us

[[groups]]
name = "ops"  # the on-call lot
colour = "#ff0000"
"""


@pytest.mark.parametrize("text", [INLINE, TABLES], ids=["inline", "tables"])
def test_groups_added_removed_and_reordered_are_saved_with_comments(tmp_path, text):
    path = tmp_path / "tickertape.toml"
    path.write_text(text)

    config = load(path)
    config.groups.append(Group("coffee", subscribe=False))          # added
    save(config)
    again = load(path)
    assert [(g.name, g.subscribe) for g in again.groups] == \
        [("Chat", True), ("ops", True), ("coffee", False)]
    assert again.groups[1].colour == "#ff0000"
    saved = path.read_text()
    assert "# my ticker" in saved and "# who I am" in saved
    assert "# the on-call lot" in saved
    tomllib.loads(saved)

    again.groups = [g for g in again.groups if g.name != "Chat"]      # removed
    save(again)
    third = load(path)
    assert [g.name for g in third.groups] == ["ops", "coffee"]
    assert "# the on-call lot" in path.read_text()

    third.groups.reverse()                                           # reordered
    save(third)
    fourth = load(path)
    assert [g.name for g in fourth.groups] == ["coffee", "ops"]
    assert fourth.groups[1].colour == "#ff0000"
    assert "# my ticker" in path.read_text() and "# who I am" in path.read_text()


def test_an_inline_file_keeps_its_inline_form(tmp_path):
    path = tmp_path / "tickertape.toml"
    path.write_text(INLINE)
    config = load(path)
    config.groups.append(Group("coffee"))
    save(config)
    saved = path.read_text()
    assert "[[groups]]" not in saved
    assert '{name = "coffee"}' in saved
    assert saved.startswith(INLINE.split("]\n")[0].rsplit("\n", 1)[0])   # the rest untouched
    assert saved.endswith("]\n# the end\n")

    config = load(path)                              # an entry edited in place stays tidy
    config.groups[0] = replace(config.groups[0], colour="#00ff00")
    save(config)
    saved = path.read_text()
    assert '    {name = "Chat", colour = "#00ff00"},  # everyone\n' in saved
    assert load(path).groups[0].colour == "#00ff00"


def test_command_line_overrides_never_reach_the_file(qtbot, tmp_path):
    """``--dock window --user visitor`` last one run: a settings change
    saves the font but the file keeps its own dock and user, until the user
    picks a dock in the dialog."""
    from elvin_apps.tickertape.controller import TickerController
    from elvin_apps.tickertape.history import History
    from elvin_apps.tickertape.model import ScrollerModel
    from elvin_apps.tickertape.window import TickerWindow

    path = tmp_path / "tickertape.toml"
    path.write_text('user = "me@host"  # who I am\ndock = "bottom"\n\n[[groups]]\nname = "Chat"\n')
    config = load(path)
    config.override("dock", "window")              # what cli.main does with the flags
    config.override("user", "visitor@elsewhere")
    window = TickerWindow(TickerController(config, ScrollerModel(),
                                           History(tmp_path / "h.sqlite3")))
    qtbot.addWidget(window)
    window.place(None)
    assert window.dock is None or not window.dock.docked   # the override is in force

    dialog = window.open_settings()
    dialog.size_spin.setValue(15)
    dialog.accept()
    saved = load(path)
    assert saved.font_size == 15.0
    assert (saved.dock, saved.user) == ("bottom", "me@host")
    assert (config.dock, config.user) == ("window", "visitor@elsewhere")
    assert "# who I am" in path.read_text()

    dialog = window.open_settings()                  # chosen in the app: saved
    dialog.set_dock_choice("top")
    dialog.accept()
    saved = load(path)
    assert (saved.dock, saved.user) == ("top", "me@host")
    window.close()


def test_an_override_is_not_written_into_a_first_file(tmp_path):
    path = tmp_path / "tickertape.toml"
    config = load(path)
    config.override("user", "visitor@elsewhere")
    config.override("dock", "window")
    config.font_size = 14.0
    save(config)
    saved = load(path)
    assert saved.user != "visitor@elsewhere" and saved.dock == "top"
    assert saved.font_size == 14.0
