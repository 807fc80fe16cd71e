"""The console's Browse pane: everything on a router as a tree, with no
subscription written (MQTT Explorer's view), on a real router that
publishes the names in use (Elvin-Router-Attributes); on one that does not,
one line saying so."""

from __future__ import annotations

import asyncio

from elvin_apps.console.browse import BrowsePane, browse_expression
from elvin_apps.console.browseindex import LEFT_OUT_COUNTED, MAX_NAMES, BrowseIndex
from elvin_apps.console.consumer import ConsumerPane
from elvin_apps.console.received import Received
from elvin_apps.console.window import default_workspace
from elvin_apps.console.workspace import BrowseSpec, ConsumerSpec, dumps, loads

import elvin.client
from elvin.client.subscription import Notification
from elvin.router.census import CENSUS_ATTRIBUTE
from elvin.subscription import parse
from tests.gui.test_console_app import Console, basic, rows, run
from tests.waiting import until


async def send_until(conn, notification: dict, seen) -> None:
    """Send ``notification`` until ``seen()``: the first one with a name the
    router had not listed arrives before the pane subscribes to it."""
    for _ in range(200):
        await conn.send(notification)
        try:
            await until(seen, 0.1, "shown")
            return
        except AssertionError:
            continue
    raise AssertionError(f"never shown: {notification}")


def test_browse_shows_everything_as_a_tree_without_a_subscription(qt_loop, qtbot, make_router):
    router = make_router(stats_interval=0.3)

    async def scenario(console: Console):
        window = await console.open(basic(router.url, BrowseSpec(title="B", router="local")))
        browse: BrowsePane = window.panes_of("browse")[0]
        await until(lambda: browse.census_seen, 10, "the router's list of names")
        async with elvin.client.connect(router.url) as producer:
            await send_until(producer, {"Group": "Chat", "From": "ann", "Message": "hi"},
                             lambda: "Group" in browse.rows())
            for text in ("lunch?", "yes"):
                await producer.send({"Group": "Chat", "From": "bob", "Message": text})
            await producer.send({"Group": "ops", "From": "cat", "Message": "deploy"})
            await send_until(producer, {"Symbol": "ACME", "Price": 12.5},
                             lambda: "Price" in browse.rows())
            await until(lambda: "ops" in browse.rows()["Group"][1], 10)
            tree = browse.rows()
            assert set(tree["Group"][1]) == {"Chat", "ops"}
            assert int(tree["Group"][1]["ops"]) == 1 and int(tree["Group"][1]["Chat"]) >= 3
            assert tree["Price"][1] == {}                 # a real: a measurement
            assert tree["Symbol"][1] == {"ACME": tree["Symbol"][1]["ACME"]}
            assert "Browsing everything on local" in browse.status_label.text()
            assert browse.sub is not None and "require(Group)" in browse.sub.expression
            assert "Elvin-Router-Attributes" not in browse.rows()
            shown = [browse.tree.topLevelItem(i).text(0)
                     for i in range(browse.tree.topLevelItemCount())]
            assert shown == sorted(browse.index.names, key=str.casefold)   # every name

            # a name that appears later is followed
            await send_until(producer, {"Temperature": 21.5, "Room": "kitchen"},
                             lambda: "Room" in browse.rows())
            assert "kitchen" in browse.rows()["Room"][1]

            # a value row: its latest notification, and a consumer for it
            chat = browse._value_items[("Group", "Chat")]
            browse.tree.setCurrentItem(chat)
            assert browse.detail.record.attributes["Group"] == "Chat"
            assert browse.subscription_for("Group", "Chat") == 'Group == "Chat"'
            browse.consumer_button.click()
            consumer: ConsumerPane = window.panes_of("consumer")[-1]
            assert consumer.editor.expression() == 'Group == "Chat"'
            await until(lambda: consumer.subscribed, 10)
            await producer.send({"Group": "Chat", "From": "dan", "Message": "after"})
            await producer.send({"Group": "ops", "From": "eve", "Message": "not this"})
            await rows(consumer, 1)
            assert consumer.model.rows()[-1].attributes["From"] == "dan"
        assert "notifications" in browse.stats_label.text()
        assert loads(dumps(window.workspace())).panes[0].kind == "browse"

    run(qt_loop, qtbot, scenario)


def test_a_router_that_does_not_list_its_names_is_said_in_one_line(qt_loop, qtbot,
                                                                   make_router):
    router = make_router(stats_interval=0.1, attribute_names=False)

    async def scenario(console: Console):
        window = await console.open(basic(router.url, BrowseSpec(title="B", router="local")))
        browse: BrowsePane = window.panes_of("browse")[0]
        browse.census_timeout = 0.5
        browse.on_router_changed()               # start again with the short wait
        await until(lambda: "does not say" in browse.status_label.text(), 10)
        text = browse.status_label.text()
        assert "Elvin-Router-Attributes" in text and "use a consumer pane" in text
        assert "\n" not in text and not browse.census_seen

    run(qt_loop, qtbot, scenario)


def test_a_first_start_opens_on_browse(qt_loop, qtbot, router):
    async def scenario(console: Console):
        window = await console.open(default_workspace(router.url))
        browse = window.panes_of("browse")[0]
        await until(lambda: not browse.visibleRegion().isEmpty(), 5)
        consumer = window.panes_of("consumer")[0]
        assert consumer.visibleRegion().isEmpty()                # a tab behind
        assert window.dock_host.tabifiedDockWidgets(window.docks[browse]) == \
            [window.docks[consumer]]
        assert not window.panes_of("producer")[0].visibleRegion().isEmpty()

    run(qt_loop, qtbot, scenario)


def test_browse_expression_reads_back_for_odd_names():
    names = ["Group", "Price-Now", "with space", "quo'te", "back\\slash", "1st"]
    expression = browse_expression(names)
    parse(expression)                          # valid
    # marked as a browser's (elvin.census.BROWSE_TERM), then the names
    assert expression.startswith("require(Elvin-Browse) || require(Group) || ")


def test_consumer_spec_from_browse_is_subscribed(qt_loop, qtbot, router):
    async def scenario(console: Console):
        window = await console.open(basic(router.url, ConsumerSpec(title="C", router="local")))
        pane = window.open_consumer('Group == "Chat"', "local")
        await until(lambda: pane.subscribed, 10)

    run(qt_loop, qtbot, scenario)


def test_a_census_that_comes_while_browsing_restarts_is_not_lost(qt_loop, qtbot, make_router):
    """The router's list grows while the pane is restarting (it holds its
    lock, waiting for the router to take the browsing subscription): the
    new name is subscribed to once the restart is done."""
    router = make_router(stats_interval=0.3)

    async def scenario(console: Console):
        window = await console.open(basic(router.url, BrowseSpec(title="B", router="local")))
        browse: BrowsePane = window.panes_of("browse")[0]
        async with elvin.client.connect(router.url) as producer:
            await send_until(producer, {"Group": "Chat", "Message": "hi"},
                             lambda: "Group" in browse.rows())
        conn = browse.connection()
        before = browse.census_sub
        restart = asyncio.ensure_future(browse._start(conn))   # as on a new connection
        # past the census subscription, waiting inside _subscribe_names
        await until(lambda: browse.census_sub not in (None, before) and browse._lock.locked(),
                    10, "the restart waiting for the router", interval=0)
        assert not restart.done()
        browse._census(Notification({CENSUS_ATTRIBUTE: 1, "Attribute-Names": "Zeta",
                                     "Attribute-Counts": "1"}))   # the router's next list
        await restart
        await until(lambda: "Zeta" in browse.subscribed_names, 10, "Zeta subscribed to")
        assert "require(Zeta)" in browse.sub.expression

    run(qt_loop, qtbot, scenario)


def test_the_index_keeps_at_most_max_names_and_counts_the_rest():
    index = BrowseIndex()
    records = [Received(i, 0.0, {"Group": "Chat", f"made-up-{i}": i}, False)
               for i in range(MAX_NAMES + 500)]
    changed = index.feed(records, 1.0)
    assert len(index.names) == MAX_NAMES == 2000
    assert "Group" in index.names and index.names["Group"].count == MAX_NAMES + 500
    assert len(index.left_out_names) == 501 and not index.left_out_capped
    assert set(changed) <= set(index.names)
    index.feed([Received(0, 0.0, {f"more-{i}": 1}, False)
                for i in range(LEFT_OUT_COUNTED)], 2.0)
    assert len(index.names) == MAX_NAMES
    assert len(index.left_out_names) == LEFT_OUT_COUNTED and index.left_out_capped  # bounded
    index.clear()
    assert not index.left_out_names and not index.left_out_capped


def test_names_past_the_bound_are_said_to_be_left_out(qt_loop, qtbot, make_router, tmp_path):
    """A producer that makes up a new name in every notification: the tree
    stops growing at the bound and the pane says how many were left out."""
    router = make_router(stats_interval=0.3)

    async def scenario(console: Console):
        window = await console.open(basic(router.url, BrowseSpec(title="B", router="local")))
        browse: BrowsePane = window.panes_of("browse")[0]
        browse.index.max_names = 12                    # the same bound, smaller
        async with elvin.client.connect(router.url) as producer:
            await send_until(producer, {"Group": "Chat", "Message": "hi"},
                             lambda: "Group" in browse.rows())
            for i in range(30):
                await producer.send({"Group": "Chat", f"Sensor-{i:02}": i})
            await until(lambda: "left out" in browse.stats_label.text(), 10, "left out said")
            await until(lambda: browse.index.names["Group"].count >= 31, 10)
        assert browse.tree.topLevelItemCount() == 12
        assert len(browse.index.names) == 12
        left = 30 - (12 - 2)                            # Group and Message are kept
        assert f"{left} more names left out" in browse.stats_label.text()
        assert "only the first 12 are shown" in browse.stats_label.text()
        window.resize(1000, 600)
        window.grab().save(str(tmp_path / "browse-left-out.png"))

    run(qt_loop, qtbot, scenario)


def test_browse_shows_what_flowed_before_it_opened(qt_loop, qtbot, make_router):
    """A one-off event sent before the console opened, and the first
    notification that carries a new name, both appear (the router replays
    its recent notifications to the browsing subscription, elvin.router.recent);
    a notification seen live is not counted twice; the router's own
    statistics add no names."""
    router = make_router(stats_interval=0.3)

    async def scenario(console: Console):
        async with elvin.client.connect(router.url) as producer:
            await producer.send({"Deploy": "v1.2", "Host": "web1"})   # before anyone looks
            watcher = await producer.subscribe("require(Deploy)")     # it has been handled
            await watcher.close()
            window = await console.open(basic(router.url, BrowseSpec(title="B", router="local")))
            browse: BrowsePane = window.panes_of("browse")[0]
            await until(lambda: "Deploy" in browse.rows(), 10, "the event sent before")
            assert int(browse.rows()["Deploy"][1]["v1.2"]) == 1
            # a name nobody has listed yet: its first notification is shown
            await producer.send({"Host": "web2", "Alarm": "disk full"})
            await until(lambda: "Alarm" in browse.rows(), 10, "the first Alarm")
            await until(lambda: browse.sub is not None and "Alarm" in browse.sub.expression, 10)
            await asyncio.sleep(0.5)          # a replay duplicate would have come by now
            browse.tick()
            assert int(browse.rows()["Alarm"][1]["disk full"]) == 1
            assert int(browse.rows()["Host"][1]["web2"]) == 1       # came live, then replayed
            assert not [n for n in browse.rows() if n.startswith("Elvin-Router-")]

    run(qt_loop, qtbot, scenario)
