"""The console comes back as it was: quitting with an unsaved typed
subscription and a statistics pane, the next start shows them again (a real
console process each time, on a real router), and each window's title names
its workspace or, unsaved, its routers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from elvin_apps.console.session import load_session, save_session
from elvin_apps.console.workspace import ConsumerSpec, RouterSpec, RouterViewSpec, Workspace

from tests.gui.test_console_app import Console, basic, run
from tests.integration.process_util import stop
from tests.waiting import wait_until


def test_a_session_round_trips_and_garbage_is_ignored(tmp_path):
    where = tmp_path / "session.json"
    workspace = Workspace([RouterSpec("lab", "elvin://127.0.0.1:1")],
                          [ConsumerSpec(title="Mine", router="lab",
                                        subscription="require(Price)", subscribed=True),
                           RouterViewSpec(title="Stats", router="lab")])
    save_session(workspace, None, where)
    restored, path = load_session(where)
    assert path is None and restored == workspace
    save_session(workspace, tmp_path / "w.json", where)
    assert load_session(where)[1] == tmp_path / "w.json"
    for garbage in ("{", "[]", json.dumps({"version": 1, "workspace": {"panes": 3}})):
        where.write_text(garbage)
        assert load_session(where) is None


def test_the_title_names_the_routers_of_an_unsaved_workspace(qt_loop, qtbot, router):
    async def scenario(console: Console):
        window = await console.open(basic(router.url))
        title = window.windowTitle()
        assert "unsaved workspace" not in title
        assert title.startswith("unsaved: ") and router.url.removeprefix("elvin://") in title
        assert title.endswith("— Elvin console")

    run(qt_loop, qtbot, scenario)


def _console(url: str, env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "w") as out:
        return subprocess.Popen([sys.executable, "-m", "elvin_apps.console", "--elvin", url,
                                 "--log-level", "info"],
                                env=env, text=True, stdout=out, stderr=subprocess.STDOUT)


def test_a_console_restores_the_workspace_it_quit_with(router_url, tmp_path):
    run_dir = Path(tempfile.mkdtemp(prefix="rt-", dir="/tmp"))
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "HOME": str(tmp_path),
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_STATE_HOME": str(tmp_path / "state"),
           "XDG_RUNTIME_DIR": str(run_dir)}
    env.pop("ELVIN_URL", None)
    session = tmp_path / "state" / "elvin" / "console-session.json"
    # what the user left: a typed subscription and a statistics pane, unsaved
    mine = Workspace([RouterSpec("default", router_url)],
                     [ConsumerSpec(title="Typed", router="default",
                                   subscription='require(Price) && Symbol == "ACME"'),
                      RouterViewSpec(title="Stats", router="default")])
    save_session(mine, None, session)
    log = tmp_path / "console.log"
    first = _console(router_url, env, log)
    try:
        # it started with that workspace: quitting (SIGTERM closes the window
        # once it is up) writes the same back
        wait_until(lambda: first.poll() is not None or "window up:" in log.read_text(), 60,
                   "the console's window to be up")
        assert first.poll() is None, log.read_text()
        assert "unsaved: default" in log.read_text()
    finally:
        stop(first)
        shutil.rmtree(run_dir, ignore_errors=True)
    assert first.returncode == 0, log.read_text()          # closed, not killed
    restored, path = load_session(session)
    assert path is None
    assert [(p.kind, p.title) for p in restored.panes] == [("consumer", "Typed"),
                                                          ("router", "Stats")]
    assert restored.panes[0].subscription == 'require(Price) && Symbol == "ACME"'
