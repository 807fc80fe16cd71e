"""Raw Elvin keys written as text: the one reader of key files and key lines.

Avis's ``ec``/``ep`` key files, and so ours (``-P``/``-C``) and the console's
key editor, write a *raw* key as

* ``[00 de ad be ef]``: bytes in hex (spaces anywhere),
* ``"some characters"``: a UTF-8 string, a backslash escaping the next
  character,
* ``#<any data>``: (files only) everything after the ``#`` up to the end of
  the file, taken as bytes exactly.

With the first two forms a file or an editor holds several keys, one a line;
blank lines and lines starting with ``//`` are skipped.

Bare text (``secret`` without quotes) is refused, everywhere: Avis refuses it
in key files, and accepting it in one place only made a file that works in
the console fail in ``ec``; worse, ``de ad be ef`` typed without brackets
would silently become an 11-byte string key that matches nothing. The error
says which forms are meant. (Until issue 20 the console accepted bare text.)

Sans-IO: text or bytes in, raw keys out; the scheme rules (which side hashes
what) are ``elvin.keys``'s, see docs/keys.md.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["KeyTextError", "parse_key_file", "parse_key_line", "parse_key_lines"]

FORMS = '[hex bytes], "string" or #raw data'


class KeyTextError(ValueError):
    """Key text that cannot be read; the message names where and why."""


def parse_key_line(line: str) -> bytes:
    """One raw key: ``[hex bytes]`` or ``"quoted string"``."""
    text = line.strip()
    if text.startswith("[") and text.endswith("]"):
        try:
            key = bytes.fromhex("".join(text[1:-1].split()))
        except ValueError:
            raise KeyTextError(f"{text!r} is not hex bytes (e.g. [de ad be ef])") from None
    elif len(text) >= 2 and text[0] == text[-1] == '"':
        out, escaped = [], False
        for ch in text[1:-1]:
            if escaped or ch != "\\":
                out.append(ch)
                escaped = False
            else:
                escaped = True
        key = "".join(out).encode("utf-8")
    else:
        raise KeyTextError(f"expected {FORMS}, not {text[:40]!r}")
    if not key:
        raise KeyTextError("empty key")
    return key


def parse_key_lines(lines: Iterable[str], what: str = "key") -> list[bytes]:
    """Every key in ``lines`` (blank lines and ``//`` comments skipped);
    errors say ``"{what} line N: ..."``."""
    keys = []
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("//"):
            continue
        try:
            keys.append(parse_key_line(stripped))
        except KeyTextError as exc:
            raise KeyTextError(f"{what} line {number}: {exc}") from None
    return keys


def parse_key_file(data: bytes, path: str = "<keys>") -> list[bytes]:
    """The keys of a key file's contents: one ``#raw`` key, or key lines.
    A file without any key is an error (a ``-P`` that adds nothing is a
    mistake worth reporting)."""
    stripped = data.lstrip()
    if stripped.startswith(b"#"):
        key = stripped[1:]
        if not key:
            raise KeyTextError(f"key file {path!r}: empty raw key after '#'")
        return [key]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise KeyTextError(f"key file {path!r}: not UTF-8 text (use #<raw data> for binary "
                           f"keys): {exc}") from None
    keys = parse_key_lines(text.splitlines(), f"key file {path!r},")
    if not keys:
        raise KeyTextError(f"key file {path!r} holds no key")
    return keys
