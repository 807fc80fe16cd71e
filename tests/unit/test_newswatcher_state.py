"""newswatcher state: the dedup store survives restarts and crashes."""

from __future__ import annotations

import json
import os

import pytest
from elvin_apps.newswatcher.state import MIN_KEEP, StateStore, atomic_write


def test_round_trip(tmp_path):
    path = tmp_path / "state.json"
    store = StateStore.open(path)
    assert store.is_new("http://a/", "x") and store.feed("http://a/").first_poll
    store.mark_seen("http://a/", ["x", "y"])
    store.set_validators("http://a/", '"etag"', "Wed, 01 May 2024 12:00:00 GMT", when=5.0)
    assert store.dirty
    store.flush()
    assert not store.dirty
    again = StateStore.open(path)
    assert not again.is_new("http://a/", "x") and not again.is_new("http://a/", "y")
    assert again.is_new("http://a/", "z") and again.is_new("http://b/", "x")
    st = again.feed("http://a/")
    assert (st.etag, st.last_modified, st.last_success) == (
        '"etag"', "Wed, 01 May 2024 12:00:00 GMT", 5.0)
    assert not st.first_poll


def test_trim_keeps_the_newest(tmp_path):
    store = StateStore(tmp_path / "s.json")
    ids = [f"id{i}" for i in range(MIN_KEEP + 100)]
    store.mark_seen("u", ids)
    store.mark_seen("u", ["id0"])            # seen again: becomes the newest
    store.trim("u", feed_size=10)
    assert len(store.feed("u").seen) == MIN_KEEP
    assert not store.is_new("u", "id0") and not store.is_new("u", ids[-1])
    assert store.is_new("u", "id1")
    store.trim("u", feed_size=1000)          # a big feed keeps 3x its size
    assert len(store.feed("u").seen) == MIN_KEEP


def test_corrupt_file_is_set_aside(tmp_path, caplog):
    path = tmp_path / "state.json"
    path.write_text("{not json")
    store = StateStore.open(path)
    assert store.feeds == {}
    assert (tmp_path / "state.json.corrupt").read_text() == "{not json"
    assert not path.exists()
    assert "unreadable" in caplog.text


@pytest.mark.parametrize("content", ['[]', '{"feeds": {"u": {"seen": 3}}}'])
def test_wrong_shapes_are_corrupt(tmp_path, content):
    path = tmp_path / "state.json"
    path.write_text(content)
    assert StateStore.open(path).feeds == {}


def test_atomic_write_leaves_no_temporary_and_replaces(tmp_path):
    path = tmp_path / "sub" / "f.json"
    atomic_write(path, b"one")
    atomic_write(path, b"two")
    assert path.read_bytes() == b"two"
    assert os.listdir(path.parent) == ["f.json"]


def test_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "state.json"
    store = StateStore(path)
    store.mark_seen("u", ["a"])
    store.save()

    def broken_replace(*args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    store.mark_seen("u", ["b"])
    store.flush()                           # logs, does not raise
    assert store.dirty
    assert json.loads(path.read_text())["feeds"]["u"]["seen"] == ["a"]
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]
