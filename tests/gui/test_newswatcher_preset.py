"""The tickertape's news preset dialog builds valid, quench-friendly subscriptions."""

from __future__ import annotations

import json

from elvin_apps.newswatcher.config import FeedConfig
from elvin_apps.newswatcher.preset import (
    NewsPresetDialog,
    build_expression,
    known_feeds,
    split_words,
)
from elvin_apps.newswatcher.selection import feed_could_match
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialogButtonBox

from elvin.subscription import compile as compile_subscription
from elvin.subscription import parse

ARTICLE = {"News-Feed": "lwn", "News-Title": "Python 3.13 on Linux", "News-Author": "Jonathan",
           "News-Categories": "|python|linux|"}


def matches(expression: str, attrs: dict) -> bool:
    return compile_subscription(expression).evaluate(attrs) is True


def test_build_expression_shapes():
    assert build_expression() == "require(News-Feed)"
    assert build_expression(["lwn"]) == 'News-Feed == "lwn"'
    assert build_expression(["lwn", "hn"]) == 'equals(News-Feed, "lwn", "hn")'
    expr = build_expression(["lwn"], ["PYTHON", "rust"], author="Jon", categories=["Linux"])
    parse(expr)
    assert matches(expr, ARTICLE)
    assert not matches(expr, {**ARTICLE, "News-Feed": "hn"})
    assert not matches(expr, {**ARTICLE, "News-Title": "Go 1.22"})
    assert not matches(expr, {**ARTICLE, "News-Author": "Jake"})
    all_words = build_expression([], ["python", "rust"], all_words=True)
    assert not matches(all_words, ARTICLE)
    assert matches(all_words, {**ARTICLE, "News-Title": "Rust and Python"})
    quoted = build_expression(['we"ird\\feed'], ['say "hi"'])
    parse(quoted)
    assert matches(quoted, {"News-Feed": 'we"ird\\feed', "News-Title": 'They say "HI"'})


def test_split_words():
    assert split_words('python, rust  "free software" Python') == [
        "python", "rust", "free software"]


def test_expression_lets_the_newswatcher_skip_other_feeds():
    lwn, hn = FeedConfig("lwn", "http://a/"), FeedConfig("hn", "http://b/")
    ast = parse(build_expression(["lwn"], ["python"]))
    assert feed_could_match(ast, lwn) and not feed_could_match(ast, hn)


def test_dialog(qtbot):
    dialog = NewsPresetDialog(["lwn", "hn", "planet"], selected=["hn"])
    qtbot.addWidget(dialog)
    assert dialog.expression() == 'News-Feed == "hn"'
    dialog.feed_list.item(0).setCheckState(Qt.CheckState.Checked)
    qtbot.keyClicks(dialog.title_words, "Python rust")
    qtbot.keyClicks(dialog.author, "Jon")
    expected = ('equals(News-Feed, "lwn", "hn") && (contains(fold-case(News-Title), "python")'
                ' || contains(fold-case(News-Title), "rust")) && '
                'contains(fold-case(News-Author), "jon")')
    assert dialog.expression() == expected
    assert dialog.preview.toPlainText() == expected.replace(" && ", "\n&& ")
    assert dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).isEnabled()
    dialog.all_words.setChecked(True)
    assert '"python") && contains(fold-case(News-Title), "rust")' in dialog.expression()
    qtbot.keyClicks(dialog.other_feeds, "extra")
    assert dialog.chosen_feeds() == ["lwn", "hn", "extra"]
    parse(dialog.preview.toPlainText())


def test_preview_never_breaks_a_clause_across_lines(qtbot):
    """Long clauses are not wrapped (a wrap broke fold-case at its hyphen):
    each laid-out block of the preview is one line, one clause."""
    dialog = NewsPresetDialog(["lwn"])
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    qtbot.keyClicks(dialog.title_words, "python rust golang haskell ocaml")
    qtbot.keyClicks(dialog.author, "Jonathan Corbet")
    document = dialog.preview.document()
    block = document.begin()
    blocks = []
    while block.isValid():
        blocks.append((block.text(), block.layout().lineCount()))
        block = block.next()
    assert len(blocks) == 3
    assert all(lines == 1 for _text, lines in blocks), blocks
    parse(dialog.preview.toPlainText())


def test_empty_feed_list_is_explained(qtbot):
    dialog = NewsPresetDialog([])
    qtbot.addWidget(dialog)
    dialog.show()
    assert dialog.feed_list.isHidden() and dialog.no_feeds.isVisible()
    assert "no newswatcher" in dialog.no_feeds.text()
    assert dialog.expression() == "require(News-Feed)"
    full = NewsPresetDialog(["lwn"])
    qtbot.addWidget(full)
    full.show()
    assert full.feed_list.isVisible() and full.no_feeds.isHidden()


def test_known_feeds_from_status_then_config(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    config = tmp_path / "nw.toml"
    config.write_text('[[feeds]]\nname = "fromconfig"\nurl = "http://e.org/"\n')
    assert known_feeds(data, config) == ["fromconfig"]
    (data / "status.json").write_text(json.dumps({"feeds": [{"name": "running"}]}))
    assert known_feeds(data, config) == ["running"]
    assert known_feeds(tmp_path / "none", tmp_path / "none.toml") == []


def test_known_feeds_include_the_system_services(tmp_path):
    """A newswatcher run as the system service (another user, its state in
    /var/lib/newswatcher) is found too: the dialog said "no newswatcher on
    this computer" while one ran."""
    mine, service = tmp_path / "mine", tmp_path / "var-lib-newswatcher"
    mine.mkdir()
    service.mkdir()
    (service / "status.json").write_text(json.dumps({"feeds": [{"name": "lwn"},
                                                               {"name": "hn"}]}))
    assert known_feeds(mine, tmp_path / "none.toml", system_dirs=[service]) == ["lwn", "hn"]
    (mine / "status.json").write_text(json.dumps({"feeds": [{"name": "mine"},
                                                            {"name": "hn"}]}))
    assert known_feeds(mine, tmp_path / "none.toml", system_dirs=[service]) == \
        ["mine", "hn", "lwn"]
    etc = tmp_path / "etc-newswatcher.toml"
    etc.write_text('[[feeds]]\nname = "configured"\nurl = "http://e.org/"\n')
    assert known_feeds(tmp_path / "none", tmp_path / "none.toml", system_dirs=[],
                       system_configs=[etc]) == ["configured"]
