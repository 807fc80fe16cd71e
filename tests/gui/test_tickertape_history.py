"""The on-disk message log."""

from __future__ import annotations

from elvin_apps.tickertape.history import History
from elvin_apps.tickertape.message import Message


def msg(text, mid=None, **kw) -> Message:
    return Message(group=kw.pop("group", "Chat"), sender=kw.pop("sender", "alice"), text=text,
                   message_id=mid or f"id-{text}", **kw)


def test_survives_reopen(tmp_path):
    path = tmp_path / "data" / "history.sqlite3"
    history = History(path)
    history.add(msg("one", urls=("https://a.example/",), secure=True, timeout=30))
    history.add(msg("two", in_reply_to="id-one", thread_id="T"))
    assert history.pending == 2
    history.close()
    again = History(path)
    records = again.recent()
    assert [r.message.text for r in records] == ["one", "two"]
    first = records[0].message
    assert first.urls == ("https://a.example/",) and first.secure and first.timeout == 30
    assert records[1].message.in_reply_to == "id-one" and records[1].message.thread_id == "T"
    again.close()


def test_no_archive_is_not_stored(tmp_path):
    history = History(tmp_path / "h.sqlite3")
    assert history.add(msg("secret", no_archive=True)) is False
    assert history.add(msg("public")) is True
    assert [r.message.text for r in history.recent()] == ["public"]
    assert history.skipped_no_archive == 1
    history.close()


def test_search_and_limits(tmp_path):
    history = History(tmp_path / "h.sqlite3", max_messages=100)
    for i in range(250):
        history.add(msg(f"message {i}", sender="bob" if i % 2 else "carol"))
        if i % 50 == 49:
            history.flush()
    history.prune()
    assert history.count() == 100
    assert [r.message.text for r in history.recent(3)] == ["message 247", "message 248",
                                                           "message 249"]
    assert len(history.search("CAROL")) == 50
    assert [r.message.text for r in history.search("message 24")][-1] == "message 249"
    assert history.search("100%") == []  # LIKE wildcards are literal
    history.add(msg("100% sure"))
    assert [r.message.text for r in history.search("100%")] == ["100% sure"]
    history.close()


def test_thread(tmp_path):
    history = History(tmp_path / "h.sqlite3")
    history.add(msg("root", "r", received=1))
    history.add(msg("a", "a", in_reply_to="r", received=2))
    history.add(msg("b", "b", in_reply_to="a", received=3))
    history.add(msg("c", "c", thread_id="T", in_reply_to="r", received=4))
    history.add(msg("d", "d", thread_id="T", received=5))
    history.add(msg("other", "o", received=6))
    texts = [m.text for m in history.thread(msg("b", "b", in_reply_to="a"))]
    assert texts == ["root", "a", "b", "c", "d"]
    history.close()
