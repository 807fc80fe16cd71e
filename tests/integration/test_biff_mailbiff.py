"""The mail biff example: filewatcher notifications in, mail presence out.

The filewatcher is played by a plain connection sending what it sends
(File-Event, File-Path, File-Size); another mail biff watches the result.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from elvin_apps.biff import mailbiff

import elvin
from tests.waiting import until


def test_the_example_is_short():
    lines = Path(mailbiff.__file__).read_text().splitlines()
    assert len(lines) < 40


async def test_mail_biff_from_filewatcher_notifications(router_url, capsys):
    mbox = "/var/mail/alice"
    watcher = asyncio.create_task(mailbiff.watch(mbox, router_url, user="alice"))
    async with elvin.connect(router_url) as conn:
        office = mailbiff.MailBiff(user="office", heartbeat=5, reply_delay=0.05)
        await office.start(conn)
        await until(lambda: "alice" in {m.user for m in office.members}, 5)
        await asyncio.sleep(0.2)   # the watcher's file subscription is in place

        async def file_event(event: str, size: int, path: str = mbox) -> None:
            await conn.send({"File-Event": event, "File-Path": path, "File-Size": size,
                             "File-Type": "file"})

        await file_event("modified", 2048)
        await until(lambda: office.count == 1, 3, "alice has mail")
        assert office.summary() == "1 with new mail: alice (new mail)"
        await file_event("modified", 0, "/var/mail/bob")     # not hers
        await file_event("created", 0)                        # not a modification
        await asyncio.sleep(0.3)
        assert office.count == 1
        await file_event("modified", 0)                       # read and emptied
        await until(lambda: office.count == 0, 3, "alice read her mail")
        await file_event("modified", 100)
        await until(lambda: office.count == 1, 3)
        await file_event("modified", 50)                      # shrank: some were read
        await until(lambda: office.count == 0, 3)

        watcher.cancel()                                      # Ctrl-C: departure
        await asyncio.gather(watcher, return_exceptions=True)
        await until(lambda: [m.user for m in office.members] == ["office"], 3)
        await office.stop()
    out = capsys.readouterr().out
    assert "1 with new mail: alice (new mail)" in out and "Nobody has new mail" in out
