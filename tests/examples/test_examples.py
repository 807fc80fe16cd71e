"""The scripts in examples/ run, as a reader would run them, against a real router.

Each runs as a child process (``python examples/NAME.py --elvin URL``); a
script that waits for something (the subscriber, the quench producer) says so
on stdout first, and the test waits for that line, not for time to pass.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.waiting import wait_until

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TIMEOUT = 60


class Script:
    """A running example whose stdout lines are collected by a thread."""

    def __init__(self, name: str, *args: str, url: str) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("ELVIN_URL", None)
        self.proc = subprocess.Popen(
            [sys.executable, str(EXAMPLES / name), "--elvin", url, *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, prefix: str) -> str:
        return wait_until(lambda: next((ln for ln in self.lines if ln.startswith(prefix)), None)
                          or (self.proc.poll() is not None and self._failed()),
                          timeout=TIMEOUT, what=f"{prefix!r} from the example")

    def _failed(self):
        raise AssertionError(f"exited {self.proc.returncode}: {self.proc.stderr.read()}")

    def finish(self) -> list[str]:
        try:
            code = self.proc.wait(TIMEOUT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(TIMEOUT)
        stderr = self.proc.stderr.read()
        self.proc.stderr.close()
        assert code == 0, f"exit {code}: {stderr}"
        return self.lines


@pytest.fixture
def run(router_url):
    started: list[Script] = []

    def start(name: str, *args: str) -> Script:
        script = Script(name, *args, url=router_url)
        started.append(script)
        return script

    yield start
    for script in started:
        if script.proc.poll() is None:
            script.proc.kill()
            script.proc.wait()


def test_publish_and_subscribe(run):
    sub = run("subscribe.py", "require(Greeting)", "--count", "3")
    sub.wait_for("subscribed")
    assert run("publish.py", "--count", "3", "hello").finish() == ["sent 3"]
    lines = sub.finish()
    got = [line for line in lines if line.startswith("{")]
    assert len(got) == 3
    assert "'Greeting': 'hello'" in got[0] and "'Count': 1" in got[0]
    assert "'Count': 3" in got[2]


def test_quench_sends_only_what_a_subscriber_wants(run):
    producer = run("quench.py", "--count", "1")
    producer.wait_for("quenching")
    assert not any(line.startswith("sent") for line in producer.lines)   # nobody asked yet
    sub = run("subscribe.py", 'Greeting == "wanted"', "--count", "1")
    sub.wait_for("subscribed")
    assert producer.finish()[-1] == "sent Greeting='wanted'"
    assert "'Greeting': 'wanted'" in sub.finish()[-1]


def test_sync_api(run):
    assert run("sync_api.py").finish() == ["got Greeting=hi Count=2", "got Greeting=hi Count=3"]


def test_the_readme_example_runs_as_written(router_url, tmp_path):
    """The front page's ten-line example, run as a reader would paste it (only
    its router URL pointed at the test's router): it prints the message it sent
    to itself."""
    readme = (EXAMPLES.parent / "README.md").read_text()
    code = readme.split("```python\n", 1)[1].split("```", 1)[0]
    assert len(code.strip().splitlines()) <= 12, "the front page promises about ten lines"
    assert code.count('"elvin://127.0.0.1:2917"') == 1
    script = tmp_path / "readme_example.py"
    script.write_text(code.replace('"elvin://127.0.0.1:2917"', repr(router_url)))
    env = {k: v for k, v in os.environ.items() if k != "ELVIN_URL"}
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=TIMEOUT, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "me says hello\n"
