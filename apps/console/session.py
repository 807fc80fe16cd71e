"""The console's last session: the workspace it had when it quit.

A console that quits with a typed subscription and a statistics pane that
were never saved brings them back on the next start, as editors reopen
their last files: the routers, panes and subscriptions (``Workspace``) are
written to ``$XDG_STATE_HOME/elvin/console-session.json`` on the way out,
with the file the workspace came from, if any, so that the title and
"Save" still name it. Only a start with no workspace named (``--workspace``
or the config file's ``workspace``) restores it; a screenshot neither reads
nor writes it. A session file that cannot be read is logged and ignored:
the default workspace is shown instead.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from elvin_apps.console.workspace import Workspace, WorkspaceError, from_dict, to_dict

from elvin.daemon.xdg import state_home
from elvin.fileutil import atomic_write
from elvin.statefile import read_json_state

__all__ = ["load_session", "save_session", "session_path"]

log = logging.getLogger("elvin_apps.console")

VERSION = 1


def session_path() -> Path:
    return state_home() / "elvin" / "console-session.json"


def save_session(workspace: Workspace, path: Path | None, where: Path | None = None) -> None:
    """Remember ``workspace`` (opened from ``path``, or never saved)."""
    where = where or session_path()
    data = {"version": VERSION, "path": str(path) if path is not None else None,
            "workspace": to_dict(workspace)}
    try:
        atomic_write(where, json.dumps(data, indent=1, ensure_ascii=False) + "\n", mode=0o600)
    except OSError as exc:
        log.info("cannot remember the console's workspace in %s: %s", where, exc)


def load_session(where: Path | None = None) -> tuple[Workspace, Path | None] | None:
    """The last session's workspace and the file it came from, or None."""
    where = where or session_path()
    data = read_json_state(where, VERSION, log, "the console's last workspace")
    if data is None:
        return None
    try:
        workspace = from_dict(data.get("workspace"), str(where))
    except WorkspaceError as exc:
        log.info("the console's last workspace is ignored: %s", exc)
        return None
    path = data.get("path")
    return workspace, Path(path) if isinstance(path, str) and path else None
