"""The traffic archive keeps private notifications private (issue 31).

A notification sent for key holders only (``deliver_insecure`` false) is
archived without its attributes and producer unless the router is started
with ``archive-private``; ``elvin-archive`` likewise for what it received
only through a secure match. What the archive writes is its owner's alone
(0600 files, 0700 directories). Version 1 archives (no ``private`` column)
are still read, and version 1 readers read version 2 files.
"""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from elvin.pipeline.archive import (
    ARROW_SCHEMA,
    ArchiveRecord,
    ArchiveWriter,
    archive_files,
    encoded_size,
    read_archive,
)
from elvin.pipeline.withheld import withheld_size
from elvin.router.cli import build_parser, make_config
from elvin.router.config import ConfigError, RouterConfig

from .archive_private_util import GROUP_KEY, PRIVATE, PUBLIC, SECRET, archive_traffic
from .test_archive_tool import finish, send_and_wait, start_tool

#: the version 1 schema: what readers written before the ``private`` column use
V1_SCHEMA = pa.schema([f for f in ARROW_SCHEMA if f.name != "private"],
                      metadata={b"elvin.archive.version": b"1"})


def rows_by_pyarrow(directory) -> list[dict]:
    files = archive_files(directory)
    assert files
    table = pa.concat_tables([pq.read_table(f) for f in files])
    assert table.schema.metadata[b"elvin.archive.version"] == b"2"
    return sorted(table.to_pylist(), key=lambda r: r["time"])


@pytest.mark.parametrize("size, kept", [(0, 256), (1, 256), (256, 256), (257, 512),
                                        (1000, 1024), (1024, 1024), (70000, 131072)])
def test_a_withheld_row_keeps_only_the_class_of_its_size(size, kept):
    assert withheld_size(size) == kept


def test_private_notifications_of_different_lengths_look_alike(tmp_path):
    import asyncio

    from elvin.client import connect
    from elvin.keys import Keys
    from elvin.router.embedded import EmbeddedRouter

    from .archive_private_util import send_traffic

    short, longer = {**PRIVATE, "Message": "no"}, {**PRIVATE, "Message": "no, because " * 10}
    assert encoded_size(short) != encoded_size(longer)
    config = RouterConfig(listen=["elvin://127.0.0.1:0"], discovery=False,
                          archive=str(tmp_path / "a"))
    router = EmbeddedRouter(config=config).start()

    async def traffic() -> None:
        async with connect(router.url) as producer:
            for message in (short, longer):
                await producer.send(message, keys=Keys.for_notification(producer=[GROUP_KEY]),
                                    deliver_insecure=False)
        await send_traffic(router.url)       # and the usual pair, once both went before

    try:
        asyncio.run(traffic())
    finally:
        router.stop()
    sizes = [r["size"] for r in rows_by_pyarrow(tmp_path / "a") if r["private"]]
    assert sizes == [256, 256, 256]


def test_private_notifications_are_archived_without_their_attributes(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="elvin.router")
    archive = archive_traffic(tmp_path / "archive")
    private, public = rows_by_pyarrow(archive)
    assert private["private"] is True and private["attributes"] == []
    assert private["producer"] is None
    # the size's class, not the size: that would tell the message's length
    assert private["size"] == withheld_size(encoded_size(PRIVATE)) == 256
    assert private["secure"] is True
    assert private["clients"] == 1 and private["subscriptions"] == 1
    assert public["private"] is False and public["producer"]
    assert {a["name"]: a["string"] for a in public["attributes"]} == PUBLIC
    for row in read_archive(archive):          # and through the library's reader
        assert SECRET not in repr(row)
    assert any("without their attributes" in r.getMessage() for r in caplog.records)


def test_archive_private_keeps_them_and_says_so(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="elvin.router")
    archive = archive_traffic(tmp_path / "archive", keep_private=True)
    private, public = read_archive(archive)
    assert private["private"] is True and private["attributes"] == PRIVATE
    assert private["producer"] is not None
    assert public["private"] is False and public["attributes"] == PUBLIC
    [warning] = [r for r in caplog.records if "keeps private notifications" in r.getMessage()]
    assert warning.levelno == logging.WARNING


def test_what_the_archive_writes_is_its_owners_alone(tmp_path):
    old = os.umask(0o022)              # a usual umask: would give 0644 / 0755
    try:
        archive = archive_traffic(tmp_path / "new" / "archive")
    finally:
        os.umask(old)
    assert stat.S_IMODE(archive.stat().st_mode) == 0o700
    for path in archive.rglob("*"):
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))


def test_archive_private_flag_and_setting(tmp_path):
    args = build_parser().parse_args(["--archive", str(tmp_path), "--archive-private"])
    assert make_config(args).archive_private is True
    path = tmp_path / "elvind.toml"
    path.write_text(f'archive = "{tmp_path}"\narchive-private = true\n')
    assert make_config(build_parser().parse_args(["--config", str(path)])).archive_private
    path.write_text("archive-private = true\n")
    with pytest.raises(ConfigError, match="archive-private is set but there is no archive"):
        make_config(build_parser().parse_args(["--config", str(path)]))
    path.write_text('archive-private = "yes"\n')
    with pytest.raises(ConfigError, match="'archive-private' must be true or false"):
        make_config(build_parser().parse_args(["--config", str(path)]))
    assert RouterConfig().archive_private is False


def test_version_1_files_are_read_and_version_1_readers_read_version_2(tmp_path):
    archive = tmp_path / "archive"
    with ArchiveWriter(archive) as writer:
        writer.append(ArchiveRecord({"n": 2}, time=1_700_000_100.0, private=True))
    hour = archive_files(archive)[0].parent
    v1 = pa.table({"time": pa.array([1_700_000_000_000], pa.timestamp("ms", tz="UTC")),
                   "producer": ["1/127.0.0.1:5"],
                   "attributes": [[{"name": "n", "type": 1, "int32": 1, "int64": None,
                                    "real64": None, "string": None, "opaque": None}]],
                   "subscriptions": [1], "clients": [1], "secure": [False], "size": [12]},
                  schema=V1_SCHEMA)
    pq.write_table(v1, hour / "part-v1.parquet")
    rows = read_archive(archive)
    assert [(r["attributes"], r["private"]) for r in rows] == [({"n": 1}, False),
                                                               ({"n": 2}, True)]
    for path in archive_files(archive):             # an old reader, its schema
        assert pq.read_table(path, schema=V1_SCHEMA).num_rows == 1


# -- elvin-archive ---------------------------------------------------------------------

@pytest.mark.parametrize("keep", [False, True])
async def test_elvin_archive_writes_secure_only_deliveries_only_if_asked(router, tmp_path,
                                                                          keep):
    from elvin.client import connect
    from elvin.keys import Keys

    key = tmp_path / "group.key"
    key.write_text(f'"{GROUP_KEY.decode()}"\n', encoding="utf-8")
    archive = tmp_path / "archive"
    proc = start_tool("-e", router.url, "-P", str(key), *(["--archive-private"] if keep else []),
                      "require(Message)", str(archive))
    try:
        async with connect(router.url) as producer:
            await producer.send(PRIVATE, keys=Keys.for_notification(producer=[GROUP_KEY]),
                                deliver_insecure=False)
            await producer.send({**PUBLIC, "Group": "g"})
        await send_and_wait(router.url, [{"Group": "end"}], 1)
    except BaseException:
        proc.kill()
        raise
    status, err = finish(proc, 15)
    assert status == 0, err
    rows = read_archive(archive)
    private = next(r for r in rows if r["private"])
    size = encoded_size(PRIVATE)
    assert private["secure"] is True
    assert private["size"] == (size if keep else withheld_size(size))
    assert private["attributes"] == (PRIVATE if keep else {})
    public = [r for r in rows if not r["private"]]
    assert [r["attributes"]["From"] for r in public] == ["bob"]


def test_elvin_archive_says_what_x_without_archive_private_means(router, tmp_path):
    key = tmp_path / "group.key"
    key.write_text('"k"\n', encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "elvin.tools.archive", "-e", router.url,
                             "-P", str(key), "-x", "require(x)", str(tmp_path / "a")],
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        assert "-x without --archive-private archives only the time" in line
    finally:
        finish(proc, 15)
