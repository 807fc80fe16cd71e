"""Reading incoming Tickertape notifications and building outgoing ones."""

from __future__ import annotations

import pytest
from elvin_apps.tickertape.attachment import (
    legacy_urls,
    safe_url,
    uri_list_attachment,
    urls_from_mime,
)
from elvin_apps.tickertape.message import MAX_TEXT, from_notification, timeout_seconds
from elvin_apps.tickertape.outgoing import ComposeError, Draft, build_notification

from elvin import Int64

V3 = {"Group": "Chat", "From": "alice@example.org", "Message": "hello",
      "Message-Id": "m-1", "org.tickertape.message": 3001}


def test_v3_message_fields():
    m = from_notification({**V3, "In-Reply-To": "m-0", "Thread-Id": "t-1",
                           "Replacement-Id": "r-1", "User-Agent": "x", "No-Archive": 1,
                           "Distribution": "local"}, secure=True)
    assert (m.group, m.sender, m.text, m.message_id) == ("Chat", "alice@example.org",
                                                          "hello", "m-1")
    assert (m.in_reply_to, m.thread_id, m.replacement_id) == ("m-0", "t-1", "r-1")
    assert m.no_archive and m.secure and m.version == 3001 and m.distribution == "local"
    assert m.timeout is None


def test_legacy_message_names():
    m = from_notification({"TICKERTAPE": "Chat", "USER": "bob", "TICKERTEXT": "old style",
                           "TIMEOUT": 5, "MIME_TYPE": "x-elvin/url",
                           "MIME_ARGS": "http://www.example.net/", "REPLACEMENT": "score"})
    assert (m.group, m.sender, m.text) == ("Chat", "bob", "old style")
    assert m.timeout == 300  # TIMEOUT is minutes
    assert m.urls == ("http://www.example.net/",)
    assert m.replacement_id == "score"
    assert m.local_id and m.message_id  # no Message-Id: we make one for local use


@pytest.mark.parametrize(("attrs", "seconds"), [
    ({"Timeout": 300, "org.tickertape.message": 3001}, 300),
    ({"Timeout": 30, "org.tickertape.message": 3001}, 30),      # v3: always seconds
    ({"Timeout": 30}, 1800),                                    # unversioned, < 60: minutes
    ({"Timeout": 1440}, 1440 * 60),                             # unversioned 1440: a day
    ({"Timeout": 1440, "org.tickertape.message": 3001}, 1440),
    ({"Timeout": 90}, 90),
    ({"Timeout": 5, "org.tickertape.message": 3000}, 300),      # older version: minutes
    ({"Timeout": 0}, 0),                                        # "briefly", not minutes
    ({"Timeout": -1}, -1),                                      # log only
    ({"Timeout": Int64(120), "org.tickertape.message": Int64(3001)}, 120),
    ({"Timeout": 61.5, "org.tickertape.message": 3001}, 61.5),
    ({"TIMEOUT": 2}, 120),
    ({"Timeout": "soon"}, None),
    ({}, None),
])
def test_timeout_rules(attrs, seconds):
    assert timeout_seconds(attrs) == seconds


@pytest.mark.parametrize("attrs", [
    {},
    {"Group": "Chat"},                                  # no text
    {"Message": "text only"},                           # no group
    {"Group": "", "From": "x", "Message": "m"},         # empty group
    {"Elvin-Status": "whatever", "Count": 3},
])
def test_not_a_message(attrs):
    assert from_notification(attrs) is None


@pytest.mark.parametrize("value", [42, Int64(2**40), 3.5, b"\x00\xff", float("nan")])
def test_wrong_types_become_text(value):
    m = from_notification({"Group": value, "From": value, "Message": value, "Message-Id": value,
                           "Timeout": "x", "In-Reply-To": value, "No-Archive": "yes"})
    assert m is not None
    assert isinstance(m.group, str) and m.group
    assert isinstance(m.text, str)
    assert m.timeout is None


def test_huge_and_control_strings_are_cut_and_flattened():
    m = from_notification({**V3, "Message": "x" * 1_000_000, "From": "a\nb\x00c" * 1000,
                           "Group": "G\r\nroup"})
    assert len(m.text) == MAX_TEXT + 1 and m.text.endswith("…")
    assert "\n" not in m.sender and "\x00" not in m.sender and len(m.sender) < 600
    assert m.group == "G  roup"


def test_attachment_uri_list_and_unsafe_schemes():
    doc = uri_list_attachment(["https://example.org/a", "http://example.org/b"])
    assert urls_from_mime(doc) == ["https://example.org/a", "http://example.org/b"]
    evil = ("MIME-Version: 1.0\r\nContent-Type: text/uri-list\r\n\r\n# comment\r\n"
            "file:///etc/passwd\r\njavascript:alert(1)\r\nhttps://ok.example/\r\n")
    assert urls_from_mime(evil) == ["https://ok.example/"]
    assert safe_url("mailto:someone@example.org")
    assert safe_url("ftp://") is None and safe_url("http://a b") is None


def test_attachment_multipart_and_junk():
    multipart = ("MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=XX\r\n\r\n"
                 "--XX\r\nContent-Type: text/plain\r\n\r\nhi\r\n"
                 "--XX\r\nContent-Type: text/uri-list\r\n\r\nhttp://one.example/\r\n"
                 "--XX--\r\n")
    assert urls_from_mime(multipart) == ["http://one.example/"]
    assert urls_from_mime("https://bare.example/") == ["https://bare.example/"]
    for junk in ("", "Content-Type: text/uri-list\r\n\r\n", "\x00" * 100,
                 "Content-Type: multipart/mixed; boundary=\r\n\r\n--\r\n", "x" * 300_000):
        assert urls_from_mime(junk) == []
    assert legacy_urls("x-elvin/url", "https://a.example/") == ["https://a.example/"]
    assert legacy_urls("image/png", "https://a.example/") == []
    assert legacy_urls(None, 42) == []


def test_build_new_message():
    attrs = build_notification(Draft("Chat", "  hi there ", url="https://example.org/",
                                     timeout=60, no_archive=True), "me@host")
    assert attrs["Group"] == "Chat" and attrs["Message"] == "hi there"
    assert attrs["From"] == "me@host"
    assert attrs["org.tickertape.message"] == 3001 and isinstance(attrs["User-Agent"], str)
    assert len(attrs["Message-Id"]) == 36  # a UUID
    assert attrs["Timeout"] == 61          # one minute is sent as 61 (protocol)
    assert attrs["No-Archive"] == 1
    assert urls_from_mime(attrs["Attachment"]) == ["https://example.org/"]
    # older clients see it too
    assert (attrs["TICKERTAPE"], attrs["USER"], attrs["TICKERTEXT"]) == ("Chat", "me@host",
                                                                         "hi there")
    assert attrs["TIMEOUT"] == 1 and attrs["MIME_ARGS"] == "https://example.org/"
    assert "In-Reply-To" not in attrs and "Thread-Id" not in attrs
    # it reads back as the same message
    m = from_notification(attrs)
    assert (m.group, m.text, m.timeout, m.urls) == ("Chat", "hi there", 61,
                                                    ("https://example.org/",))


def test_build_reply_copies_group_and_thread():
    referent = from_notification({**V3, "Group": "Wïki", "Thread-Id": "thread-9"})
    attrs = build_notification(Draft("ignored", "re: hello", reply_to=referent), "me",
                               legacy=False)
    assert attrs["Group"] == "Wïki"
    assert attrs["In-Reply-To"] == "m-1"
    assert attrs["Thread-Id"] == "thread-9"
    assert attrs["Message-Id"] != "m-1"
    assert "TICKERTAPE" not in attrs and "Timeout" not in attrs


@pytest.mark.parametrize(("draft", "field"), [
    (Draft("", "text"), "Group"),
    (Draft("Chat", "   "), "Message"),
    (Draft("Chat", "x", url="file:///etc/passwd"), "URL"),
    (Draft("Chat", "x", url="not a url"), "URL"),
    (Draft("Chat", "x", timeout=-5), "Timeout"),
])
def test_build_rejects_with_field_name(draft, field):
    with pytest.raises(ComposeError, match=field):
        build_notification(draft, "me")
