"""One reader of raw key text for ec/ep key files and the console: the same
forms are accepted and refused in both (bare text is refused everywhere)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from elvin.keytext import KeyTextError, parse_key_file, parse_key_line, parse_key_lines


@pytest.mark.parametrize("line, key", [
    ("[de ad be ef]", b"\xde\xad\xbe\xef"),
    ("[dead BEEF]", b"\xde\xad\xbe\xef"),
    ('"secret"', b"secret"),
    ('"a \\"quoted\\" \\\\ word"', b'a "quoted" \\ word'),
    ('  "caf\u00e9"  ', "caf\u00e9".encode()),
])
def test_the_two_line_forms(line, key):
    assert parse_key_line(line) == key
    assert parse_key_file(line.encode("utf-8") + b"\n") == [key]


@pytest.mark.parametrize("line, words", [
    ("secret", "expected [hex bytes]"),
    ("de ad be ef", "expected [hex bytes]"),     # brackets forgotten: not a string key
    ("[zz]", "not hex bytes"),
    ('""', "empty key"),
    ("[]", "empty key"),
])
def test_bad_lines_are_refused_alike_in_files_and_the_console(line, words):
    words = re.escape(words)
    with pytest.raises(KeyTextError, match=words):
        parse_key_line(line)
    with pytest.raises(KeyTextError, match=f"producer key line 2: .*{words}"):
        parse_key_lines(['"ok"', line], "producer key")
    with pytest.raises(KeyTextError, match=f"key file 'k', line 2: .*{words}"):
        parse_key_file(b'"ok"\n' + line.encode() + b"\n", "k")


def test_files_skip_blanks_and_comments_and_take_raw_data():
    assert parse_key_file(b'// mine\n\n[01]\n  "two"\n') == [b"\x01", b"two"]
    assert parse_key_file(b"  #\x00\xff raw\n") == [b"\x00\xff raw\n"]
    with pytest.raises(KeyTextError, match="holds no key"):
        parse_key_file(b"// nothing\n", "k")
    with pytest.raises(KeyTextError, match="not UTF-8"):
        parse_key_file(b"\xff\xfe", "k")


def test_ec_refuses_a_bare_text_key_file_in_one_line(tmp_path):
    """The tools report the shared reader's message (exit 1, no traceback)."""
    path = tmp_path / "consumer.key"
    path.write_text("secret\n")
    result = subprocess.run([sys.executable, "-m", "elvin.tools.ec", "-e", "elvin://127.0.0.1:1",
                             "-C", str(path), "require(x)"], capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0
    assert "line 1: expected [hex bytes]" in result.stderr
