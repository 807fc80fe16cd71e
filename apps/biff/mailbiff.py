"""Mail biff: who has new mail, from the filewatcher's notifications on a mailbox.
Usage: python -m elvin_apps.biff.mailbiff /var/mail/alice [--elvin URL] [--user NAME]"""
import argparse
import asyncio
import contextlib
import os

from elvin_apps.biff import Biff, quote

from elvin.client import DEFAULT_URL, connect


class MailBiff(Biff):
    domain, active_label, empty_text = "mail", "with new mail", "Nobody has new mail"


async def watch(mbox: str, url: str, user: str | None = None) -> None:
    async with connect(url, reconnect=True) as conn:
        biff = MailBiff(user=user)
        biff.add_listener(lambda b: print(b.summary(), flush=True))
        await biff.start(conn)
        changes = await conn.subscribe(f'File-Path == {quote(mbox)} && File-Event == "modified"')
        size = -1
        try:
            async for change in changes:   # the mbox grew: new mail; shrank: mail was read
                new = n if isinstance(n := change.get("File-Size"), int) else size + 1
                await (biff.activate("new mail") if new > size and new else biff.deactivate())
                size = new
        finally:
            await biff.stop()

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mbox", help="the mailbox file the filewatcher watches")
    parser.add_argument("--elvin", default=os.environ.get("ELVIN_URL", DEFAULT_URL))
    parser.add_argument("--user")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):   # Ctrl-C: leave (departure is sent)
        asyncio.run(watch(os.path.abspath(args.mbox), args.elvin, args.user))
