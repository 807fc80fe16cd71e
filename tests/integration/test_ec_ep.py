"""ec and ep as subprocesses against a real router."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

PYTHON = sys.executable
TIME_LINE = re.compile(r"^\$time \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d{4}$")

EVERY_TYPE = r'''Kind: "round trip"
Int32: 42
Negative: -42
Int32-Min: -2147483648
Int32-Max: 2147483647
Int64: 1234L
Negative-Int64: -9223372036854775808L
Small-Int64: -1L
Real: 3.1415
Negative-Real: -0.25
Huge-Real: 1.0e+300
Tiny-Real: 1.5e-300
Infinity: -Infinity
String: "hello world"
Quotes: "say \"hi\" to 'them'"
Backslash: "C:\\temp\\new"
Both: "\\\"\\"
Unicode: "ünïcødé ☃"
Multi-Line: "first\
second"
Empty-String: ""
Opaque: [de ed be ef f0 0d]
Empty-Opaque: []
Escaped\:Name: 1
---
Kind: "round trip"
Second: 2
---
'''


class Ec:
    """A running ec subprocess whose stdout is collected by a thread."""

    def __init__(self, *args: str, env=None) -> None:
        self.proc = subprocess.Popen([PYTHON, "-m", "elvin.tools.ec", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, encoding="utf-8", env=env)
        self.lines: list[str] = []
        self.err: list[str] = []
        self.connected = threading.Event()
        threading.Thread(target=self._read_out, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read_out(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    def _read_err(self) -> None:
        for line in self.proc.stderr:
            self.err.append(line)
            if "Connected to server" in line:
                self.connected.set()

    def wait_connected(self, timeout=20) -> None:
        if not self.connected.wait(timeout):
            self.stop()
            raise AssertionError(f"ec did not connect: {''.join(self.err)}")

    def notifications(self, count: int, timeout=15) -> list[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if sum(1 for line in self.lines if line == "---\n") >= count:
                break
            time.sleep(0.05)
        text = "".join(self.lines)
        blocks = [b + "---\n" for b in text.split("---\n")[:-1]]
        assert len(blocks) >= count, f"got {len(blocks)} notifications: {text!r}"
        return blocks

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise


def ep(*args: str, input: str, timeout=30, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "elvin.tools.ep", *args], input=input.encode(),
                          capture_output=True, timeout=timeout, env=env)


def attribute_text(block: str) -> str:
    lines = block.splitlines(keepends=True)
    assert TIME_LINE.match(lines[0].rstrip("\n")), lines[0]
    return "".join(lines[1:])


def test_every_value_type_round_trips(router_url, tmp_path: Path):
    ec = Ec("-e", router_url, 'Kind == "round trip"')
    try:
        ec.wait_connected()
        source = tmp_path / "in.txt"
        source.write_text(EVERY_TYPE, encoding="utf-8")
        result = ep("-e", router_url, input=source.read_text(encoding="utf-8"))
        assert result.returncode == 0, result.stderr
        blocks = ec.notifications(2)
        expected = EVERY_TYPE.split("---\n")
        assert attribute_text(blocks[0]) == expected[0] + "---\n"
        assert attribute_text(blocks[1]) == expected[1] + "---\n"

        # ec's output, $time lines and all, is accepted by ep unchanged
        ec2 = Ec("-e", router_url, 'Kind == "round trip" && require(Int32)')
        try:
            ec2.wait_connected()
            again = ep("-e", router_url, input="".join(blocks))
            assert again.returncode == 0, again.stderr
            (block,) = ec2.notifications(1)
            assert attribute_text(block) == expected[0] + "---\n"
        finally:
            assert ec2.stop() == 0
    finally:
        assert ec.stop() == 0
    assert "ec: Connected to server elvin:4.0/tcp,none,xdr/127.0.0.1:" in "".join(ec.err)


def test_last_notification_without_separator_is_sent(router_url):
    ec = Ec("-e", router_url, "require(Tail)")
    try:
        ec.wait_connected()
        result = ep("-e", router_url, input='Tail: 1\n---\n# a comment\nTail: 2\n')
        assert result.returncode == 0, result.stderr
        blocks = ec.notifications(2)
        assert [attribute_text(b) for b in blocks[:2]] == ["Tail: 1\n---\n", "Tail: 2\n---\n"]
    finally:
        ec.stop()


def test_ep_bad_line_reports_position_and_keeps_earlier(router_url):
    ec = Ec("-e", router_url, "require(Good) || require(Bad)")
    try:
        ec.wait_connected()
        result = ep("-e", router_url,
                    input="Good: 1\n---\nGood: 2\n---\nBad: 12x\n---\nGood: 3\n---\n")
        assert result.returncode == 1
        stderr = result.stderr.decode()
        assert re.match(r"ep: line 5, column \d+: ", stderr), stderr
        blocks = ec.notifications(2)
        assert [attribute_text(b) for b in blocks] == ["Good: 1\n---\n", "Good: 2\n---\n"]
        time.sleep(0.3)
        assert len(ec.notifications(2)) == 2
    finally:
        ec.stop()


def test_ep_errors(router_url):
    result = ep("-e", "elvin:/bogus,none,xdr/host", input="")
    assert result.returncode == 1
    assert "elvin:/bogus,none,xdr/host" in result.stderr.decode()
    result = ep("-e", "elvin://127.0.0.1:1", input="A: 1\n---\n")
    assert result.returncode == 2
    assert "127.0.0.1:1" in result.stderr.decode()
    result = ep("-e", router_url, input='S: "unterminated\n---\n')
    assert result.returncode == 1 and result.stderr.decode().startswith("ep: line ")
    result = ep("-e", router_url, "-x", input="A: 1\n")
    assert result.returncode == 1 and b"-x" in result.stderr
    result = ep("--no-such-option", input="")
    assert result.returncode == 1


def test_ec_errors(router_url):
    def run(*args):
        return subprocess.run([PYTHON, "-m", "elvin.tools.ec", *args], capture_output=True,
                              text=True, timeout=30)
    result = run("-e", router_url, "a == == 1")
    assert result.returncode == 1
    assert "offset 5" in result.stderr and "^" in result.stderr
    result = run("-e", "elvin://", "require(x)")
    assert result.returncode == 1 and "elvin://" in result.stderr
    result = run("-e", "elvin://127.0.0.1:1", "require(x)")
    assert result.returncode == 2 and "127.0.0.1:1" in result.stderr
    result = run("-e", router_url)
    assert result.returncode == 1
    result = run("--version")
    assert result.returncode == 0 and "ec" in result.stdout
    result = run("--help")
    assert result.returncode == 0 and "-e URL" in result.stdout


def test_keys_from_files(router_url, tmp_path: Path):
    key = tmp_path / "producer.key"
    key.write_text("[de ad be ef]\n", encoding="utf-8")
    other = tmp_path / "other.key"
    other.write_text('"another key"\n', encoding="utf-8")
    ec = Ec("-e", router_url, "-x", "-P", str(key), "require(Secret)")
    try:
        ec.wait_connected()
        assert ep("-e", router_url, input="Secret: 1\n---\n").returncode == 0
        assert ep("-e", router_url, "-P", str(other), input="Secret: 2\n---\n").returncode == 0
        assert ep("-e", router_url, "-x", "--producer-key", str(key),
                  input="Secret: 3\n---\n").returncode == 0
        (block,) = ec.notifications(1)
        assert attribute_text(block) == "Secret: 3\n---\n"
        time.sleep(0.3)
        assert len(ec.notifications(1)) == 1
    finally:
        ec.stop()
    bad = tmp_path / "bad.key"
    bad.write_text("not a key\n", encoding="utf-8")
    result = ep("-e", router_url, "-P", str(bad), input="")
    assert result.returncode == 1 and "bad.key" in result.stderr.decode()


def test_elvin_url_environment(router_url):
    env = dict(os.environ, ELVIN_URL=router_url)
    ec = Ec("require(FromEnv)", env=env)
    try:
        ec.wait_connected()
        assert ep(input="FromEnv: 1\n---\n", env=env).returncode == 0
        (block,) = ec.notifications(1)
        assert attribute_text(block) == "FromEnv: 1\n---\n"
    finally:
        assert ec.stop() == 0


def test_ec_quench_events(router_url):
    import elvin.sync
    ec = Ec("-e", router_url, "--quench", "Watched")
    try:
        ec.wait_connected()
        with elvin.sync.connect(router_url) as conn:
            sub = conn.subscribe('Watched == "x"')
            blocks = ec.notifications(1)
            assert 'Quench-Event: "add"' in blocks[0]
            assert 'Subscription: "Watched == \\"x\\""' in blocks[0]
            sub.close()
            blocks = ec.notifications(2)
            assert 'Quench-Event: "remove"' in blocks[1]
    finally:
        assert ec.stop() == 0


def test_ec_quench_at_a_router_without_quench_keeps_consuming(make_router):
    plain = make_router(quench=False)
    ec = Ec("-e", plain.url, "--quench", "Watched", "require(Watched)")
    try:
        ec.wait_connected()
        said = [line for line in ec.err if "quench" in line]
        assert len(said) == 1 and "does not support quench" in said[0], ec.err
        assert ep("-e", plain.url, input='Watched: "still here"\n---\n').returncode == 0
        (block,) = ec.notifications(1)
        assert attribute_text(block) == 'Watched: "still here"\n---\n'
    finally:
        assert ec.stop() == 0
    assert "Traceback" not in "".join(ec.err)
    # with nothing but --quench there is nothing to do: one line, status 3
    result = subprocess.run([PYTHON, "-m", "elvin.tools.ec", "-e", plain.url, "--quench",
                             "Watched"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 3
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("ec: ") and f":{plain.port} does not support quench" in line
    assert line.endswith("no quench events to print")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ec_exits_cleanly_on_signal(router_url, sig):
    ec = Ec("-e", router_url, "require(x)")
    ec.wait_connected()
    ec.proc.send_signal(sig)
    assert ec.proc.wait(10) == 0


def test_ec_reports_router_shutdown(router):
    ec = Ec("-e", router.url, "require(x)")
    ec.wait_connected()
    router.stop()
    assert ec.proc.wait(15) == 2
    time.sleep(0.1)
    assert "disconnected" in "".join(ec.err) and "shutting down" in "".join(ec.err)
