"""Every command-line tool, refused by the router: one clear line, the
documented exit status, never a traceback (DESIGN.md: 0 ok, 1 usage or input
error, 2 cannot reach the router, 3 other failure).

The refusal is the commonest Nack a tool meets before it does anything: a
full router (``max-connections`` without ``redirect-to``) answers ConnRqst
with Nack IMPL_LIMIT. What a router without quench refuses later is covered
by each tool's own tests (``elvind --no-quench``).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import elvin.sync

PYTHON = sys.executable


@pytest.fixture(scope="module")
def full_router():
    """A router that takes one client, and that client: the next is refused."""
    from elvin.router.embedded import EmbeddedRouter

    router = EmbeddedRouter(max_connections=1).start()
    holder = elvin.sync.connect(router.url)
    yield router
    holder.close()
    router.stop()


def tools(url: str, tmp: str) -> dict[str, tuple[list[str], int]]:
    """name -> (command, the exit status its documentation gives)."""
    feed = os.path.join(tmp, "feed.xml")
    with open(feed, "w") as f:
        f.write("<rss><channel><title>t</title></channel></rss>")
    return {
        "ec": ([PYTHON, "-m", "elvin.tools.ec", "-e", url, "require(x)"], 3),
        "ep": ([PYTHON, "-m", "elvin.tools.ep", "-e", url], 3),
        "elvin-archive": ([PYTHON, "-m", "elvin.tools.archive", "-e", url, "require(x)",
                           os.path.join(tmp, "archive")], 3),
        "filewatcher": ([PYTHON, "-m", "elvin_apps.filewatcher", "--root", tmp, "--elvin", url,
                         "--status-file", os.path.join(tmp, "status.json")], 3),
        "newswatcher": ([PYTHON, "-m", "elvin_apps.newswatcher", "--feed", feed, "--elvin", url,
                         "--data-dir", os.path.join(tmp, "news")], 3),
        "elvin-mobility-proxy": ([PYTHON, "-c", "import sys; from elvin.mobility.proxy import "
                                  "main; sys.exit(main())", "--elvin", url], 3),
    }


@pytest.mark.parametrize("name", ["ec", "ep", "elvin-archive", "filewatcher", "newswatcher",
                                  "elvin-mobility-proxy"])
def test_a_refused_connection_is_one_line_and_exit_3(full_router, tmp_path, name):
    command, status = tools(full_router.url, str(tmp_path))[name]
    result = subprocess.run(command, input="", capture_output=True, text=True, timeout=60,
                            env=dict(os.environ, HOME=str(tmp_path)))
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == status, result.stderr
    # elvin-archive always ends with its total ("0 notifications written to DIR")
    lines = [line for line in result.stderr.strip().splitlines()
             if not (name == "elvin-archive" and "notifications written to" in line)]
    assert len(lines) == 1, lines
    assert "Too many connections" in lines[0] and "IMPL_LIMIT" in lines[0]
    assert f":{full_router.port}" in lines[0]


@pytest.mark.parametrize("module", ["elvin_apps.tickertape", "elvin_apps.biff",
                                    "elvin_apps.console"])
def test_gui_apps_refused_show_it_without_a_traceback(full_router, tmp_path, module):
    """The GUI apps keep retrying and show the router's answer in their
    status widget; ``--screenshot`` (which must not wait for ever) exits 2."""
    result = subprocess.run(
        [PYTHON, "-m", module, "--elvin", full_router.url, "--screenshot",
         str(tmp_path / "shot.png")], capture_output=True, text=True, timeout=90,
        env=dict(os.environ, HOME=str(tmp_path), QT_QPA_PLATFORM="offscreen"))
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, result.stderr
