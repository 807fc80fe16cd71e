"""Per-key views of a consumer pane: the tree with counts and latest values
per key value, the detail compared with the previous notification of the
same key, one plot line per key value broken at gaps. A real router."""

from __future__ import annotations

import math

from elvin_apps.console.chart import segments
from elvin_apps.console.workspace import dumps, loads

import elvin.client
from tests.gui.test_console_app import Console, basic, rows, run, subscribe

TRAFFIC = [{"Symbol": "ACME", "Price": 10.0, "Exchange": "ASX"},
           {"Symbol": "BETA", "Price": 50.0, "Exchange": "NYSE"},
           {"Symbol": "ACME", "Price": 11.0, "Exchange": "ASX"},
           {"Symbol": "BETA", "Price": 51.0, "Exchange": "NYSE"},
           {"Symbol": "ACME", "Halted": 1, "Exchange": "ASX"},
           {"Symbol": "ACME", "Price": 12.5, "Exchange": "ASX"},
           {"Exchange": "ASX", "Price": 1.0}]


def test_key_views_tree_diff_and_plot(qt_loop, qtbot, router):
    async def scenario(console: Console):
        window = await console.open(basic(router.url))
        consumer = window.panes_of("consumer")[0]
        await subscribe(consumer, "require(Exchange)")
        async with elvin.client.connect(router.url) as conn:
            for notification in TRAFFIC:
                await conn.send(notification)
            await rows(consumer, len(TRAFFIC))

        # without a key the detail compares with the row above (another symbol)
        consumer.view.selectRow(3)
        assert consumer.detail.changes()["Symbol"] == "changed"
        assert not consumer.key_tree.isVisible()

        index = consumer.key_combo.findData("Symbol")
        assert index > 0
        consumer.key_combo.setCurrentIndex(index)
        consumer.key_combo.activated.emit(index)
        assert consumer.key_tree.isVisible()
        tree = consumer.key_tree.row_texts()
        assert list(tree) == ["ACME", "BETA", "(none)"]
        assert tree["ACME"][0] == "4" and tree["BETA"][0] == "2" and tree["(none)"][0] == "1"
        assert "Price=12.5" in tree["ACME"][1]
        # the same row now compares with BETA's previous notification: #2
        changes = consumer.detail.changes()
        assert changes["Symbol"] == "" and changes["Exchange"] == "" and \
            changes["Price"] == "changed"
        assert "compared with #2, the previous one of Symbol BETA" in \
            consumer.detail.header.text()

        # the tree selects the newest notification of a key value
        item = consumer.key_tree.items["ACME"]
        consumer.key_tree.setCurrentItem(item)
        assert consumer.selected_record().seq == 6
        assert "compared with #5" in consumer.detail.header.text()
        item.setExpanded(True)
        assert {item.child(i).text(0) for i in range(item.childCount())} == {
            "Symbol", "Price", "Exchange"}

        # one line per key value; ACME's breaks where Price was missing
        consumer.set_plotted(["Price"])
        plot = consumer.plot
        assert [label for label, _c in plot.chart.series] == ["ACME", "BETA", "(none)"]
        acme = plot.values("ACME")
        assert acme[:2] == [10.0, 11.0] and math.isnan(acme[2]) and acme[3] == 12.5
        assert plot.values("BETA") == [50.0, 51.0]
        assert plot.chart.title == "Price by Symbol"
        async with elvin.client.connect(router.url) as conn:
            await conn.send({"Symbol": "GAMMA", "Price": 7.0, "Exchange": "ASX"})
            await rows(consumer, len(TRAFFIC) + 1)
        assert "GAMMA" in consumer.key_tree.items and plot.values("GAMMA") == [7.0]
        assert [label for label, _c in plot.chart.series][-1] == "GAMMA"

        spec = consumer.to_spec()
        assert spec.key == "Symbol"
        assert loads(dumps(window.workspace())).panes[0].key == "Symbol"
        consumer.set_key("")
        assert not consumer.key_tree.isVisible() and plot.chart.series == [("Price", "#1565c0")]
        consumer.view.selectRow(3)
        assert consumer.detail.changes()["Symbol"] == "changed"

    run(qt_loop, qtbot, scenario)


def test_plot_lines_break_at_gaps_and_missing_values():
    steady = [(float(t), 1.0) for t in range(10)]
    assert segments(steady, break_gaps=True) == [steady]
    gap = steady + [(30.0, 2.0), (31.0, 2.0)]
    assert segments(gap, break_gaps=True) == [steady, [(30.0, 2.0), (31.0, 2.0)]]
    assert segments(gap) == [gap]                     # rates and counts: never broken
    holed = [(0.0, 1.0), (1.0, math.nan), (2.0, 3.0)]
    assert segments(holed) == [[(0.0, 1.0)], [(2.0, 3.0)]]


def test_key_index_is_bounded_and_finds_the_previous_of_a_key():
    from elvin_apps.console.keyindex import KeyIndex, previous_of_key
    from elvin_apps.console.received import Received
    records = [Received(n + 1, float(n), {"Seq": n, "Group": "ab"[n % 2]}, False)
               for n in range(5)]
    index = KeyIndex("Seq", limit=3)
    assert index.feed(records) == ["0", "1", "2"]
    assert index.overflow == 2 and index.values() == ["0", "1", "2"]
    assert previous_of_key(records, 4, "Group").seq == 3
    assert previous_of_key(records, 1, "Group") is None
    assert previous_of_key(records, 1, "").seq == 1        # no key: the row above
