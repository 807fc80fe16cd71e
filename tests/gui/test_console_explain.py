"""Explain a match inside the console: from a consumer's selected row, a
producer's draft or pasted ec text, each clause's result, the failing
clause marked. A real router; real widgets."""

from __future__ import annotations

from elvin_apps.console.explainview import FAILS_ROLE

import elvin.client
from tests.gui.test_console_app import Console, basic, rows, run, subscribe


def test_explain_marks_the_failing_clause(qt_loop, qtbot, router):
    async def scenario(console: Console):
        window = await console.open(basic(router.url))
        consumer = window.panes_of("consumer")[0]
        producer = window.panes_of("producer")[0]
        await subscribe(consumer, "require(Symbol)")
        async with elvin.client.connect(router.url) as conn:
            await conn.send({"Symbol": "ACME", "Price": 12.5})
            await rows(consumer, 1)
        assert not consumer.detail.explain_button.isEnabled()
        consumer.view.selectRow(0)
        consumer.detail.explain_button.click()
        dialog = window.explain_dialog
        assert dialog.isVisible()
        assert dialog.editor.expression() == "require(Symbol)"
        assert dialog.steps[0].result is True and dialog.failing == []
        assert "Matches" in dialog.verdict.text()
        assert dialog.index_label.text() == "Router index: name index (scanned): Symbol is present"

        dialog.editor.setExpression('Price < 10 && Symbol == "ACME"')
        assert dialog.index_label.text() == (
            'Router index: value index: Symbol == "ACME"; then checked: Price up to 10')
        assert dialog.failing_texts() == ["Price < 10"]
        top = dialog.tree.topLevelItem(0)
        assert top.text(0).endswith("false") and top.childCount() == 2
        price, symbol = top.child(0), top.child(1)
        assert price.data(0, FAILS_ROLE) is True and "fails here" in price.text(0)
        assert "Price = 12.5" in price.text(2) and price.font(1).bold()
        assert symbol.data(0, FAILS_ROLE) is False and symbol.text(0).endswith("true")
        assert "Does not match" in dialog.verdict.text()

        # the producer's draft ({Message: "hello"}), taken from the menu
        dialog._fill_take_menu()
        draft = next(a for a in dialog.take_menu.actions() if a.text() == "Draft of P")
        draft.trigger()
        assert dialog.steps[0].word == "bottom"
        assert dialog.failing_texts() == ["Price < 10", 'Symbol == "ACME"']
        assert "missing attribute Price" in top_child(dialog, 0).text(2)

        # pasted text: a mistake is named with its line; a good paste explains
        dialog.notification_edit.setPlainText('Price: 5\nSymbol: "ACME')
        assert "line 2" in dialog.notification_error.text() and dialog.steps == []
        dialog.notification_edit.setPlainText('Price: 5\nSymbol: "ACME"\n')
        assert dialog.steps[0].result is True and dialog.notification_error.text() == ""
        producer.explain_draft()                 # from the producer pane's button
        assert dialog.notification_edit.toPlainText().startswith('Message: "hello"')
        dialog.editor.setExpression('Price < 10 && (Symbol == "ACME" || Exchange == "ASX")'
                                    ' && Volume > 100')
        dialog.grab().save("/tmp/explain.png")

    run(qt_loop, qtbot, scenario)


def top_child(dialog, n: int):
    return dialog.tree.topLevelItem(0).child(n)


def test_explain_follows_every_keystroke_with_nothing_on_stderr(qtbot, capfd):
    """Typed one key at a time, each state is explained for the text as it
    is then: a valid prefix gets its verdict, an invalid one "Fix the
    subscription first." with an empty tree (the editor used to say whether
    the text was valid only after the dialog had asked)."""
    from elvin_apps.console.completion import AttributeNames
    from elvin_apps.console.explainview import ExplainDialog
    from PySide6.QtCore import Qt

    from elvin.errors import SubscriptionError
    from elvin.subscription import parse

    dialog = ExplainDialog(AttributeNames(), lambda: [])
    qtbot.addWidget(dialog)
    dialog.notification_edit.setPlainText('Price: 12.5\nSymbol: "ACME"\n')
    capfd.readouterr()
    typed = 'Price < 10 && Symbol == "ACME"'
    seen_valid = seen_invalid = 0
    for ch in typed:
        qtbot.keyClicks(dialog.editor.edit, ch)
        text = dialog.editor.expression()
        try:
            parse(text)
            valid = True
        except SubscriptionError:
            valid = False
        if valid:
            seen_valid += 1
            assert dialog.steps, text
            assert "Fix the subscription" not in dialog.verdict.text(), text
            assert dialog.tree.topLevelItemCount() == 1, text
        else:
            seen_invalid += 1
            assert dialog.steps == [] and dialog.tree.topLevelItemCount() == 0, text
            assert dialog.verdict.text() == "Fix the subscription first.", text
    assert seen_valid and seen_invalid
    assert "Does not match" in dialog.verdict.text()
    assert dialog.failing_texts() == ["Price < 10"]
    for _ in range(len('"ACME"')):                   # back into an invalid state
        qtbot.keyClick(dialog.editor.edit, Qt.Key.Key_Backspace)
        if not dialog.editor.isValid():
            assert dialog.verdict.text() == "Fix the subscription first."
    out = capfd.readouterr()
    assert out.err == "", out.err
