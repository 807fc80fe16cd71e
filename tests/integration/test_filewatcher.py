"""The filewatcher daemon against a real router and real files (tmp_path).

Each test starts a router (fixture ``router``), a ``FileWatcher`` in the test's
event loop with a root under tmp_path, and a consumer connection; it then
subscribes, changes files and checks the notifications and the watch set
(``FileWatcher.status()``, the same data as the status file).
"""

from __future__ import annotations

import asyncio
import errno
import io
import logging
import os
import shutil
import time
from pathlib import Path

import pytest
from elvin_apps.filewatcher.config import Config
from elvin_apps.filewatcher.daemon import FileWatcher
from elvin_apps.filewatcher.status import format_status, read_status

from elvin.client import connect
from tests.waiting import until


async def receive(sub, count: int = 1, timeout: float = 20.0) -> list[dict]:
    """The next ``count`` notifications on ``sub``, waiting for each."""
    return await receive_until(sub, lambda got: len(got) >= count, timeout,
                               f"{count} notification(s)")


async def receive_until(sub, done, timeout: float = 20.0,
                        what: str = "the notifications expected") -> list[dict]:
    """Notifications on ``sub``, from the next one on, until ``done(them)``."""
    got: list[dict] = []
    try:
        async with asyncio.timeout(timeout):
            while not done(got):
                got.append(dict((await sub.get()).attributes))
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}; received {got}") from None
    return got


async def subscribed(fw: FileWatcher, consumer, expression: str):
    """A new subscription of ``consumer``, once the daemon has planned for it
    (the daemon hears of it through its quench, after the router's reply)."""
    known = len(fw.status()["subscriptions"])
    sub = await consumer.subscribe(expression)
    await until(lambda: len(fw.status()["subscriptions"]) > known,
                what="the daemon to hear of the subscription")
    await fw.settled()
    return sub


async def before_marker(fw: FileWatcher, sub, directory: Path) -> list[dict]:
    """What ``sub`` has received, and not read, by the time a marker file
    written now in ``directory`` is announced: a "nothing (more) arrived"
    check by order rather than by waiting a while. The daemon announces
    changes in the order their paths went quiet, the router delivers its
    notifications in order, and the consumer hands each to its subscriptions
    as it arrives; so anything still on its way to ``sub`` comes first.
    ``directory`` must be under the watch that would report what is checked:
    the kernel keeps order within one inotify queue only."""
    marker = directory / f".marker-{time.monotonic_ns()}"
    probe = await sub.connection.subscribe(f'File-Path == "{marker}"')
    try:
        await until(lambda: any(str(marker) in s["watching"]
                                for s in fw.status()["subscriptions"]),
                    what="the daemon to watch for the marker")
        write(marker)
        await probe.get(timeout=20)
    finally:
        await probe.close()
    out = []
    while sub.pending:
        note = dict(sub.get_nowait().attributes)
        if note["File-Path"] != str(marker):
            out.append(note)
    return out


def events(notes: list[dict]) -> list[tuple[str, str]]:
    return [(n["File-Event"], n["File-Path"]) for n in notes]


def watched(fw: FileWatcher) -> dict[tuple[str, bool], dict]:
    return {(w["path"], w["recursive"]): w for w in fw.status()["watches"]}


def write(path: Path, text: str = "x") -> None:
    with open(path, "w") as f:
        f.write(text)


@pytest.fixture
def root(tmp_path) -> Path:
    r = tmp_path / "root"
    r.mkdir()
    return r


@pytest.fixture
async def start_watcher(router, tmp_path, root):
    started: list[FileWatcher] = []

    async def factory(url: str | None = None, **settings) -> FileWatcher:
        settings.setdefault("roots", [str(root)])
        settings.setdefault("debounce", 0.05)
        settings.setdefault("reconnect_grace", 3.0)
        settings.setdefault("status_file", str(tmp_path / "run" / "status.json"))
        config = Config(**settings).validate()
        fw = FileWatcher(config, url or router.url,
                         connect_options={"reconnect_delay": 0.05, "reconnect_max_delay": 0.5})
        await fw.start()
        started.append(fw)
        return fw

    yield factory
    for fw in started:
        await fw.close()


@pytest.fixture
async def consumer(router):
    conn = await connect(router.url, reconnect=True, reconnect_delay=0.05,
                         reconnect_max_delay=0.5)
    yield conn
    await conn.close()


# ---------------------------------------------------------------------------


async def test_subscribe_change_notify_then_unsubscribe_removes_the_watch(
        start_watcher, consumer, root, tmp_path):
    fw = await start_watcher()
    target = root / "a.txt"
    assert watched(fw) == {}
    sub = await consumer.subscribe(f'File-Path == "{target}"')
    await until(lambda: (str(root), False) in watched(fw), what="the watch")
    w = watched(fw)[(str(root), False)]
    assert w["backend"] == "inotify" and w["interests"] == [str(target)]
    assert w["os_watches"] == 1

    write(target, "hello")
    (n,) = await receive(sub)
    assert n["File-Event"] == "created" and n["File-Path"] == str(target)
    assert n["File-Size"] == 5 and n["File-Is-Dir"] == 0
    assert n["Filewatcher-Version"] == 1 and n["File-Host"] == fw.config.host
    assert n["File-Owner"] and abs(n["File-Mtime"] - os.stat(target).st_mtime_ns // 10**6) <= 1

    write(root / "other.txt")                 # same directory, not subscribed
    with open(target, "a") as f:
        f.write(" world")
    (n,) = await receive(sub)
    assert (n["File-Event"], n["File-Size"]) == ("modified", 11)

    os.chmod(target, 0o600)
    (n,) = await receive(sub)
    assert n["File-Event"] == "attrib"

    target.unlink()
    (n,) = await receive(sub)
    assert n["File-Event"] == "deleted" and "File-Size" not in n

    # the status file says the same, with the subscription
    status = read_status(fw.config.status_file)
    assert status["running"] and status["watches"][0]["path"] == str(root)
    (s,) = status["subscriptions"]
    assert s["watching"] == [str(target)] and str(target) in s["expression"]
    assert await before_marker(fw, sub, root) == []     # one notification per change

    await sub.close()
    await until(lambda: watched(fw) == {}, what="the watch to go")
    await until(lambda: read_status(fw.config.status_file)["watches"] == [],
                what="the status file to show it")
    assert fw.manager.os_watch_count() == 0


async def test_subscriptions_outside_the_roots_watch_nothing(
        start_watcher, consumer, root, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "escape").symlink_to(outside)
    fw = await start_watcher()
    subs = [
        'File-Path == "/etc/passwd"',
        'begins-with(File-Path, "/etc/")',
        f'File-Path == "{root}/../outside/secret"',
        f'File-Path == "{root}/escape/secret"',          # a symlink out of the root
        f'begins-with(File-Path, "{root}/escape/")',
        'regex(File-Path, "^/usr/")',
        f'wildcard(File-Path, "{outside}/*")',
    ]
    for text in subs:
        await consumer.subscribe(text)
    await until(lambda: len(fw.status()["subscriptions"]) == len(subs), what="all subscriptions")
    await fw.settled()
    status = fw.status()
    assert status["watches"] == []
    for s in status["subscriptions"]:
        assert s["watching"] == []
        assert any("outside the roots" in note for note in s["notes"]), s

    # and nothing is reported for changes there
    probe = await subscribed(fw, consumer, f'begins-with(File-Path, "{outside}")')
    write(outside / "secret")
    assert await before_marker(fw, probe, root) == []


async def test_a_tree_containing_the_root_watches_only_the_root(
        start_watcher, consumer, root):
    fw = await start_watcher()
    sub = await consumer.subscribe('begins-with(File-Path, "/")')
    await until(lambda: (str(root), True) in watched(fw), what="the root watch")
    assert list(watched(fw)) == [(str(root), True)]
    write(root / "f")
    (n,) = await receive(sub)
    assert n["File-Path"] == str(root / "f")


async def test_begins_with_tree_picks_up_files_created_later(start_watcher, consumer, root):
    www = root / "www"
    www.mkdir()
    fw = await start_watcher()
    sub = await consumer.subscribe(f'begins-with(File-Path, "{www}/")')
    await until(lambda: (str(www), True) in watched(fw), what="the tree watch")

    write(www / "index.html")
    (n,) = await receive(sub)
    assert (n["File-Event"], n["File-Path"]) == ("created", str(www / "index.html"))

    deep = www / "a" / "b"
    deep.mkdir(parents=True)
    # watchdog watches a new directory before it reports it
    got = await receive_until(sub, lambda got: ("created", str(deep)) in events(got))
    write(deep / "page.html")
    got += await receive_until(sub, lambda got: ("created", str(deep / "page.html"))
                               in events(got))
    paths = {(n["File-Event"], n["File-Path"], n["File-Is-Dir"]) for n in got}
    assert ("created", str(deep / "page.html"), 0) in paths
    assert ("created", str(www / "a"), 1) in paths

    write(root / "not-in-tree.txt")
    assert await before_marker(fw, sub, www) == []


async def test_moves_carry_both_paths(start_watcher, consumer, root):
    d = root / "d"
    d.mkdir()
    write(d / "old.txt", "content")
    fw = await start_watcher()
    sub = await consumer.subscribe(
        f'File-Path == "{d}/old.txt" || File-Dest-Path == "{d}/new.txt"')
    await until(lambda: (str(d), False) in watched(fw), what="the watch")
    await fw.settled()
    os.rename(d / "old.txt", d / "new.txt")
    (n,) = await receive(sub)
    assert n["File-Event"] == "moved"
    assert n["File-Path"] == str(d / "old.txt")
    assert n["File-Dest-Path"] == str(d / "new.txt")
    assert n["File-Size"] == 7

    # a subscriber of the destination only, through File-Dest-Path
    arrivals = await subscribed(fw, consumer, f'File-Dest-Path == "{d}/final.txt"')
    os.rename(d / "new.txt", d / "final.txt")
    (n,) = await receive(arrivals)
    assert (n["File-Path"], n["File-Dest-Path"]) == (str(d / "new.txt"), str(d / "final.txt"))


async def test_bursts_are_coalesced(start_watcher, consumer, root):
    fw = await start_watcher(debounce=0.15)
    target = root / "doc.txt"
    write(target, "v0")
    sub = await consumer.subscribe(f'File-Path == "{target}"')
    await until(lambda: (str(root), False) in watched(fw), what="the watch")
    await fw.settled()

    # an editor writing in place: truncate + several writes + chmod
    with open(target, "w") as f:
        for i in range(5):
            f.write(f"line {i}\n")
            f.flush()
    os.chmod(target, 0o640)
    got = await receive(sub)
    assert [n["File-Event"] for n in got] == ["modified"]

    # an atomic save: write a temporary file, rename it over the target
    tmp = root / ".doc.txt.swp"
    write(tmp, "v2 saved atomically")
    os.rename(tmp, target)
    got = await receive(sub)
    assert [(n["File-Event"], n["File-Path"]) for n in got] == [("modified", str(target))]
    assert got[0]["File-Size"] == len("v2 saved atomically")

    # vim's default: rename the original away, write a new file, delete the backup
    os.rename(target, root / "doc.txt~")
    write(target, "v3")
    os.unlink(root / "doc.txt~")
    got = await receive(sub)
    assert [n["File-Event"] for n in got] == ["modified"]
    assert await before_marker(fw, sub, root) == []     # each burst was one notification

    # a temporary file that comes and goes is nothing at all
    tree = await consumer.subscribe(f'begins-with(File-Path, "{root}/")')
    await until(lambda: (str(root), True) in watched(fw), what="the tree watch")
    await fw.settled()
    write(root / "transient")
    os.unlink(root / "transient")
    assert await before_marker(fw, tree, root) == []


async def test_unbounded_subscriptions_follow_the_policy(start_watcher, consumer, root,
                                                         tmp_path):
    fw = await start_watcher(unbounded="ignore")
    await consumer.subscribe("require(File-Path)")
    await consumer.subscribe('ends-with(File-Path, ".log")')
    await until(lambda: len(fw.status()["subscriptions"]) == 2, what="the subscriptions")
    await fw.settled()
    status = fw.status()
    assert status["watches"] == []
    for s in status["subscriptions"]:
        assert s["unbounded"] and any("ignored (policy)" in n for n in s["notes"])
    await fw.close()

    other = tmp_path / "second-root"
    other.mkdir()
    fw = await start_watcher(unbounded="roots", roots=[str(root), str(other)],
                             status_file=str(tmp_path / "status2.json"))
    sub = await consumer.subscribe('File-Event == "created" && ends-with(File-Path, ".log")')
    await until(lambda: len(watched(fw)) == 2, what="the roots to be watched")
    assert set(watched(fw)) == {(str(root), True), (str(other), True)}
    write(other / "x.log")
    write(other / "x.txt")
    (n,) = await receive(sub)
    assert n["File-Path"] == str(other / "x.log")
    assert await before_marker(fw, sub, other) == []


async def test_two_subscriptions_share_one_watch(start_watcher, consumer, root):
    www = root / "www"
    (www / "sub").mkdir(parents=True)
    fw = await start_watcher()
    a = await consumer.subscribe(f'begins-with(File-Path, "{www}/")')
    b = await consumer.subscribe(f'begins-with(File-Path, "{www}/") && File-Size > 0')
    c = await consumer.subscribe(f'File-Path == "{www}/sub/file"')   # inside the tree
    await until(lambda: len(fw.status()["subscriptions"]) == 3, what="the subscriptions")
    await fw.settled()
    assert list(watched(fw)) == [(str(www), True)]
    assert len(watched(fw)[(str(www), True)]["subscriptions"]) == 3
    await a.close()
    await b.close()
    await until(lambda: len(fw.status()["subscriptions"]) == 1, what="two to go")
    await fw.settled()
    assert list(watched(fw)) == [(str(www / "sub"), False)]
    write(www / "sub" / "file")
    (n,) = await receive(c)
    assert n["File-Path"] == str(www / "sub" / "file")


async def test_a_file_in_a_directory_that_does_not_exist_yet(start_watcher, consumer, root):
    fw = await start_watcher()
    target = root / "later" / "deeper" / "file.txt"
    sub = await consumer.subscribe(f'File-Path == "{target}"')
    await until(lambda: (str(root), False) in watched(fw), what="the pending watch")
    assert watched(fw)[(str(root), False)]["pending"]
    target.parent.mkdir(parents=True)
    write(target, "born")                  # probably before the daemon moved its watch
    got = await receive(sub)
    assert events(got) == [("created", str(target))]
    await until(lambda: (str(target.parent), False) in watched(fw), what="the moved watch")
    assert not watched(fw)[(str(target.parent), False)]["pending"]
    # once: not again from the catch-up scan of the new directory
    assert await before_marker(fw, sub, target.parent) == []
    write(target, "again")
    (n,) = await receive(sub)
    assert n["File-Event"] == "modified"

    # the directory goes away: back to pending on the nearest ancestor
    shutil.rmtree(root / "later")
    got = await receive(sub)
    assert [n["File-Event"] for n in got] == ["deleted"]
    await until(lambda: (str(root), False) in watched(fw), what="the watch to fall back")
    target.parent.mkdir(parents=True)
    write(target, "reborn")
    got = await receive(sub)
    assert [n["File-Event"] for n in got] == ["created"]
    await until(lambda: (str(target.parent), False) in watched(fw), what="the moved watch")
    assert await before_marker(fw, sub, target.parent) == []


async def test_reconnect_after_router_restart_keeps_working(start_watcher, router, root):
    fw = await start_watcher()
    consumer = await connect(router.url, reconnect=True, reconnect_delay=0.05,
                             reconnect_max_delay=0.5)
    try:
        target = root / "r.txt"
        sub = await consumer.subscribe(f'File-Path == "{target}"')
        await until(lambda: (str(root), False) in watched(fw), what="the watch")
        write(target, "1")
        (n,) = await receive(sub)
        assert n["File-Event"] == "created"
        reconnects = fw.conn.reconnects

        await asyncio.get_running_loop().run_in_executor(None, router.restart)
        await until(lambda: fw.conn.reconnects > reconnects and consumer.is_open,
                    what="both to reconnect")
        # the watch was kept through the outage, then confirmed by the restored quench
        assert (str(root), False) in watched(fw)
        await until(lambda: not fw.in_grace, timeout=10, what="the reconnection to settle")
        await fw.settled()
        write(target, "22")
        got = await receive(sub)
        assert [(n["File-Event"], n["File-Size"]) for n in got] == [("modified", 2)]
        assert fw.status()["connection"] == "connected"
        assert await before_marker(fw, sub, root) == []
    finally:
        await consumer.close()


async def test_changes_while_the_router_is_away_are_reported_after(
        start_watcher, make_router, root):
    router = make_router()
    fw = await start_watcher(url=router.url, reconnect_grace=5.0)
    consumer = await connect(router.url, reconnect=True, reconnect_delay=0.05,
                             reconnect_max_delay=0.3)
    try:
        target = root / "away.txt"
        write(target, "before")
        sub = await consumer.subscribe(f'File-Path == "{target}"')
        await until(lambda: (str(root), False) in watched(fw), what="the watch")
        await fw.settled()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, router.stop)
        await until(lambda: fw.conn.state != "open", what="the daemon to notice")
        failed = fw.counters["failed"]
        write(target, "changed while nobody could hear")
        await until(lambda: fw.counters["failed"] > failed,
                    what="the change to be handled (and not sent)")
        await loop.run_in_executor(None, router.start)
        got = await receive(sub)
        assert events(got) == [("modified", str(target))]
        # once: a re-scan after the grace does not report it again
        await until(lambda: not fw.in_grace, what="the reconnection to settle")
        await fw.settled()
        assert await before_marker(fw, sub, root) == []
    finally:
        await consumer.close()


async def test_garbage_subscriptions_do_not_break_the_daemon(start_watcher, router, root):
    fw = await start_watcher(max_paths_per_subscription=1000)
    consumer = await connect(router.url, options={"Subscription.Max-Length": 1 << 20})
    many_dirs = ", ".join(f'"{root}/d{i}/f"' for i in range(1500))
    one_dir = ", ".join(f'"{root}/flat/f{i}"' for i in range(900))
    texts = [
        'regex(File-Path, "^(((a|b)*c)+|[[:alpha:]]{3,}\\\\w)$")',
        'regex(File-Path, "^[^/]+$")',
        'regex(File-Path, "^\\\\/\\\\.\\\\.\\\\/x")',
        f'regex(File-Path, "^{root}/[a")',
        'wildcard(File-Path, "[")',
        'wildcard(File-Path, "\\\\")',
        'File-Path == 42',
        'File-Path == "relative/path"',
        'begins-with(File-Path, "no-slash")',
        f'equals(File-Path, {many_dirs})',          # over max-paths: unbounded, ignored
        f'equals(File-Path, {one_dir})',            # 900 files in one directory: one watch
        'fold-case(File-Path) == "/ROOT"',
        '!(File-Path == "/x")',
        'File-Path == File-Dest-Path',
        f'begins-with(File-Path, "{root}/a") && begins-with(File-Path, "{root}/b")',
    ]
    accepted = []
    for text in texts:
        try:
            accepted.append(await consumer.subscribe(text))
        except Exception as exc:  # noqa: BLE001 - the router may refuse some: fine, not our concern
            print("refused:", text[:60], exc)
    await until(lambda: len(fw.status()["subscriptions"]) == len(accepted),
                what="all subscriptions")
    await fw.settled()
    status = fw.status()
    # '^[^/]+$' and the wildcard "[" have no literal prefix: the whole root, once;
    # everything else is folded into it or watches nothing
    assert [(w["path"], w["recursive"]) for w in status["watches"]] == [(str(root), True)]
    notes = " ".join(" ".join(s["notes"]) for s in status["subscriptions"])
    assert "more than 1000 paths" in notes
    assert (root / "flat").exists() is False
    # the daemon still works
    ok = await consumer.subscribe(f'File-Path == "{root}/still-works"')
    await until(lambda: fw.manager.route(str(root / "still-works")), what="the new watch")
    write(root / "still-works")
    got = await receive(ok)
    assert [n["File-Path"] for n in got] == [str(root / "still-works")]
    await consumer.close()


async def test_inotify_limit_falls_back_to_polling(consumer, root):
    from watchdog.observers import Observer

    class NoWatchesLeft(Observer):
        def schedule(self, *args, **kwargs):
            raise OSError(errno.ENOSPC, "inotify watch limit reached")

    fw = FileWatcher(Config(roots=[str(root)], debounce=0.05, poll_interval=0.1,
                            status_file=str(root.parent / "poll-status.json")).validate(),
                     consumer.url, inotify_factory=NoWatchesLeft)
    await fw.start()
    try:
        target = root / "polled.txt"
        sub = await consumer.subscribe(f'File-Path == "{target}"')
        await until(lambda: (str(root), False) in watched(fw), what="the watch")
        w = watched(fw)[(str(root), False)]
        assert w["backend"] == "polling" and "inotify watch limit" in w["error"]
        write(target, "polled")
        (n,) = await receive(sub)
        assert (n["File-Event"], n["File-Path"]) == ("created", str(target))
    finally:
        await fw.close()


async def test_overflow_rescans_and_reports_missed_changes(start_watcher, consumer, root):
    fw = await start_watcher()
    a, b = root / "a.txt", root / "b.txt"
    write(a, "a")
    sub = await consumer.subscribe(f'begins-with(File-Path, "{root}/")')
    await until(lambda: (str(root), True) in watched(fw), what="the watch")
    await fw.settled()
    # lose every live event for a while, as an inotify overflow would; a
    # file that comes and goes last says when the others are lost for sure
    real = fw.manager.handler.deliver
    lost: list = []
    fw.manager.handler.deliver = lost.extend
    write(a, "changed")
    write(b, "new")
    last = root / "last"
    write(last)
    last.unlink()
    await until(lambda: any(e.kind == "deleted" and e.path == str(last) for e in lost),
                what="the live events to be lost")
    fw.manager.handler.deliver = real
    assert await before_marker(fw, sub, root) == []
    fw.rescanner.overflowed()              # what the inotify hook reports
    got = await receive(sub, 2)
    assert sorted(events(got)) == [("created", str(b)), ("modified", str(a))]
    assert fw.counters["overflows"] == 1 and fw.counters["rescans"] >= 1
    # a second re-scan finds nothing new: no duplicates
    assert await fw.rescan("again") == 0
    assert await before_marker(fw, sub, root) == []


async def test_the_daemon_sends_nothing_nobody_wants(start_watcher, consumer, root):
    fw = await start_watcher()
    sub = await consumer.subscribe(
        f'begins-with(File-Path, "{root}/") && File-Event == "deleted"')
    await until(lambda: (str(root), True) in watched(fw), what="the watch")
    await fw.settled()
    write(root / "f")
    await until(lambda: fw.counters["quenched"] >= 1, what="the creation, which nobody wants")
    (root / "f").unlink()
    (n,) = await receive(sub)
    assert n["File-Event"] == "deleted"
    await until(lambda: fw.counters["sent"] + fw.counters["quenched"] >= 2, what="counters")
    assert fw.counters["sent"] == 1 and fw.counters["quenched"] >= 1


# -- a router without quench (elvind --no-quench, as Avis) -----------------------


async def restart_with(router, **settings) -> None:
    """``router.restart(**settings)`` off the event loop (it blocks)."""
    await asyncio.to_thread(lambda: router.restart(**settings))


def status_text(fw: FileWatcher) -> str:
    out = io.StringIO()
    format_status({**fw.status(), "running": True}, out)
    return out.getvalue()


async def test_no_quench_router_watches_the_roots_and_announces_everything(
        start_watcher, make_router, root, caplog):
    caplog.set_level(logging.INFO)
    plain = make_router(quench=False)
    fw = await start_watcher(url=plain.url)          # starts: no traceback, no exit
    assert fw.no_quench
    await until(lambda: watched(fw), what="the roots to be watched")
    assert set(watched(fw)) == {(str(root), True)}
    status = fw.status()
    assert status["quench"] == "off"
    assert [s["id"] for s in status["subscriptions"]] == ["no-quench"]
    assert "quench: router has no quench: announcing everything under the roots" \
        in status_text(fw)
    async with connect(plain.url) as consumer:
        sub = await consumer.subscribe(f'begins-with(File-Path, "{root}/")')
        (root / "deep").mkdir()
        write(root / "deep" / "a.txt")
        await receive_until(sub, lambda got: ("created", str(root / "deep" / "a.txt"))
                            in events(got))
    said = [r for r in caplog.records if r.name == "elvin_apps.filewatcher"
            and "router has no quench" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING


async def test_back_to_quench_when_the_router_has_it_again(start_watcher, make_router, root):
    """Restarted with quench, the router's subscriptions drive the watches
    again; restarted without, the daemon falls back to the roots again."""
    router = make_router(quench=False)
    fw = await start_watcher(url=router.url, reconnect_grace=0.3)
    assert fw.no_quench and fw.status()["quench"] == "off"
    consumer = await connect(router.url, reconnect=True, reconnect_delay=0.05,
                             reconnect_max_delay=0.3)
    try:
        target = root / "only.txt"
        sub = await consumer.subscribe(f'File-Path == "{target}"')
        reconnects = fw.conn.reconnects
        await restart_with(router, quench=True)
        await until(lambda: fw.conn.reconnects > reconnects and consumer.is_open,
                    what="both to reconnect")
        await until(lambda: fw.status()["quench"] == "on", what="quench again")
        await until(lambda: set(watched(fw)) == {(str(root), False)} and not fw.in_grace,
                    what="the watch the subscription asks for (and no more)")
        assert "router has no quench" not in status_text(fw)
        write(target, "1")
        (n,) = await receive(sub)
        assert (n["File-Event"], n["File-Path"]) == ("created", str(target))

        reconnects = fw.conn.reconnects
        await restart_with(router, quench=False)
        await until(lambda: fw.conn.reconnects > reconnects, what="the reconnection")
        await until(lambda: fw.status()["quench"] == "off", what="the fallback")
        await until(lambda: set(watched(fw)) == {(str(root), True)} and not fw.in_grace,
                    what="the roots to be watched again")
    finally:
        await consumer.close()
