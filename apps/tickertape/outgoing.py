"""The notification a user sends: a new message or a reply.

Protocol v3 says what a message must carry (Group, From, Message,
Message-Id) and how a reply is initialised from its referent (Group copied
verbatim, In-Reply-To = the referent's Message-Id, Thread-Id copied when
present). We also send the pre-v3 names by default so that old clients on the
same router still show our messages (the protocol allows "attributes from
earlier versions of the Tickertape protocol for compatibility").
"""

from __future__ import annotations

from dataclasses import dataclass

from elvin_apps.tickertape import USER_AGENT
from elvin_apps.tickertape.attachment import safe_url, uri_list_attachment
from elvin_apps.tickertape.message import PROTOCOL_VERSION, Message, new_message_id


class ComposeError(ValueError):
    """What the user typed cannot be sent (the message names the field)."""


@dataclass(frozen=True)
class Draft:
    """What the compose dialog collected."""

    group: str
    text: str
    url: str = ""
    timeout: int | None = None  # seconds; None: do not send a Timeout
    no_archive: bool = False
    reply_to: Message | None = None
    thread_id: str | None = None  # start an extra-group thread with this id
    replacement_id: str | None = None


def build_notification(draft: Draft, sender: str, *, legacy: bool = True,
                       message_id: str | None = None) -> dict[str, object]:
    """The attributes to send for ``draft``; raises :class:`ComposeError`."""
    group = draft.group.strip()
    text = draft.text.strip()
    if draft.reply_to is not None:
        group = draft.reply_to.group  # copied verbatim (protocol 6.3)
    if not group:
        raise ComposeError("Group: choose or type a group to send to")
    if not text:
        raise ComposeError("Message: there is nothing to send")
    if not sender.strip():
        raise ComposeError("From: set your user name in the settings")
    url = draft.url.strip()
    if url and not safe_url(url):
        raise ComposeError(f"URL: {url!r} is not an http, https, ftp or mailto URL")
    if draft.timeout is not None and not 0 <= draft.timeout <= 7 * 24 * 3600:
        raise ComposeError("Timeout: between 0 seconds and a week")

    attrs: dict[str, object] = {
        "Group": group,
        "From": sender,
        "Message": text,
        "Message-Id": message_id or new_message_id(),
        "org.tickertape.message": PROTOCOL_VERSION,
        "User-Agent": USER_AGENT,
    }
    thread_id = draft.thread_id
    if draft.reply_to is not None:
        referent = draft.reply_to
        if not referent.local_id:
            attrs["In-Reply-To"] = referent.message_id
        thread_id = referent.thread_id or thread_id
    if thread_id:
        attrs["Thread-Id"] = thread_id
    timeout = draft.timeout
    if timeout is not None:
        if timeout == 60:
            timeout = 61  # protocol: a one-minute timeout SHOULD be sent as 61
        attrs["Timeout"] = timeout
    if url:
        attrs["Attachment"] = uri_list_attachment([url])
    if draft.no_archive:
        attrs["No-Archive"] = 1
    if draft.replacement_id:
        attrs["Replacement-Id"] = draft.replacement_id
    if legacy:
        attrs["TICKERTAPE"] = group
        attrs["USER"] = sender
        attrs["TICKERTEXT"] = text
        if timeout is not None:
            attrs["TIMEOUT"] = max(1, round(timeout / 60))
        if url:
            attrs["MIME_TYPE"] = "x-elvin/url"
            attrs["MIME_ARGS"] = url
        if draft.replacement_id:
            attrs["REPLACEMENT"] = draft.replacement_id
    return attrs
