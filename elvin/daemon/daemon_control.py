"""What the suite's daemons (``elvind``, ``filewatcher``, ``newswatcher``) do
the same way with signals, and how their ``reload`` commands learn the verdict.

Signals (``DaemonSignals``):

* SIGTERM, SIGINT: stop cleanly (systemd sends SIGTERM);
* SIGHUP: re-read the configuration and apply what can change while running,
  and reopen the log file (so ``logrotate``'s ``postrotate`` may send either);
* SIGUSR1: only reopen the log file.

Each is logged when it arrives; systemd hears ``RELOADING=1`` ... ``READY=1``
around a reload and ``STOPPING=1`` (``elvin.daemon.sdnotify``).

Verdicts (``ReloadRecord``, ``ask_reload``): a daemon keeps the outcome of
its last reload (a serial number, when, whether it was applied and what it
said) in its status file; ``DAEMON reload`` reads the status, sends SIGHUP to
the pid in it, waits for a newer serial and prints the daemon's own words,
exiting 0 when applied and 1 when refused. A signal alone cannot carry an
answer back, and the status file is already how ``status`` learns about the
daemon, so it carries this one too.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from elvin.cli_common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    fail,
    reopen_log_files,
    setup_logging,
)
from elvin.daemon import sdnotify
from elvin.fileutil import pid_alive

__all__ = ["DaemonSignals", "ReloadRecord", "ask_reload", "change", "other_instance",
           "reload_logging",
           "read_status_file", "reload_verdict", "show_status"]

#: seconds ``reload`` waits for the daemon's verdict
RELOAD_TIMEOUT = 15.0


@dataclass
class ReloadRecord:
    """The outcome of a daemon's last reload, as its status file keeps it."""

    serial: int = 0
    at: float | None = None
    ok: bool = True
    message: str = "not reloaded since start"

    def record(self, ok: bool, message: str) -> None:
        self.serial += 1
        self.at = time.time()
        self.ok = ok
        self.message = message

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class DaemonSignals:
    """Installs the daemons' signal handlers on ``loop``.

    ``stop(signame)`` is called for SIGTERM/SIGINT; ``reload()`` (plain or
    async, returning ``(applied, message)``) for SIGHUP, after the logs are
    reopened; its verdict goes into ``record`` and the log. One reload runs
    at a time: a SIGHUP during one runs it again afterwards.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, log: logging.Logger, *,
                 stop: Callable[[str], None],
                 reload: Callable[[], tuple[bool, str] | Awaitable[tuple[bool, str]]] | None,
                 record: ReloadRecord | None = None,
                 on_reloaded: Callable[[], None] | None = None) -> None:
        self.loop = loop
        self.log = log
        self.stop = stop
        self.reload = reload
        self.record = record if record is not None else ReloadRecord()
        self.on_reloaded = on_reloaded
        self._task: asyncio.Task | None = None
        self._again = False
        self._installed: list[signal.Signals] = []

    def install(self) -> DaemonSignals:
        handlers = {signal.SIGTERM: self._stop, signal.SIGINT: self._stop,
                    signal.SIGHUP: self._hup, signal.SIGUSR1: self._usr1}
        for sig, handler in handlers.items():
            try:
                self.loop.add_signal_handler(sig, handler, sig)
            except (NotImplementedError, RuntimeError, ValueError):  # pragma: no cover
                continue
            self._installed.append(sig)
        return self

    def remove(self) -> None:
        for sig in self._installed:
            try:
                self.loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError, ValueError):  # pragma: no cover
                pass
        self._installed.clear()

    async def close(self) -> None:
        """Remove the handlers and wait for a reload that is running."""
        self.remove()
        task, self._task = self._task, None
        if task is not None:
            try:
                await task
            except Exception:  # noqa: BLE001, S110 - already logged by _run
                pass

    def _stop(self, sig: signal.Signals) -> None:
        self.log.info("%s received: stopping", sig.name)
        sdnotify.stopping(f"{sig.name} received: stopping")
        self.stop(sig.name)

    def _usr1(self, _sig: signal.Signals) -> None:
        files = reopen_log_files()
        self.log.info("SIGUSR1 received: %s", f"reopened {', '.join(files)}" if files
                      else "no log file to reopen (logging to stderr)")

    def _hup(self, _sig: signal.Signals) -> None:
        if self._task is not None and not self._task.done():
            self._again = True
            return
        self._task = self.loop.create_task(self._run())

    async def _run(self) -> None:
        while True:
            self._again = False
            files = reopen_log_files()
            self.log.info("SIGHUP received: reloading the configuration%s",
                          f" (reopened {', '.join(files)})" if files else "")
            await self.reload_now()
            if not self._again:
                return

    async def reload_now(self) -> tuple[bool, str]:
        """Run the reload and record its verdict (also for tests)."""
        sdnotify.reloading("reloading the configuration")
        if self.reload is None:
            ok, message = True, "nothing to reload"
        else:
            try:
                result = self.reload()
                if inspect.isawaitable(result):
                    result = await result
                ok, message = result
            except Exception as exc:  # a reload must never stop the daemon
                self.log.exception("reload failed")
                ok, message = False, f"reload failed: {exc}"
        self.record.record(ok, message)
        if ok:
            self.log.info("reload: %s", message)
        else:
            self.log.error("reload refused, keeping the running configuration: %s", message)
        sdnotify.ready(f"reloaded: {message}" if ok else f"reload refused: {message}")
        if self.on_reloaded is not None:
            self.on_reloaded()
        return ok, message


def change(name: str, old: object, new: object) -> str:
    """``name (old -> new)``, as a reload says what it applied."""
    def shown(value: object) -> str:
        if value is None or value == "":
            return "none"
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        if isinstance(value, (list, tuple)):
            return ", ".join(map(str, value)) or "none"
        return str(value)
    return f"{name} ({shown(old)} -> {shown(new)})"


def reload_logging(prog: str, old: tuple[str, str | None], new: tuple[str, str | None],
                   applied: list[str], failed: list[str]) -> bool:
    """Switch the log to ``new`` (level, file) if it differs from ``old``,
    noting the change in ``applied`` or the failure in ``failed``; whether
    the new settings are in force."""
    if old == new:
        return True
    try:
        setup_logging(new[0], new[1] or None, prog=prog)
    except OSError as exc:
        failed.append(f"log-file {new[1]}: cannot open: {exc.strerror or exc}")
        return False
    for name, before, after in (("log-level", old[0], new[0]), ("log-file", old[1], new[1])):
        if before != after:
            applied.append(change(name, before, after))
    return True


def reload_verdict(applied: list[str], restart: list[str],
                   failed: list[str] = ()) -> tuple[bool, str]:  # type: ignore[assignment]  # never mutated: () stands for []
    """``(ok, message)`` of a reload: what was applied, what failed, what
    needs a restart (the daemons word it the same way)."""
    parts = []
    if applied:
        parts.append("applied " + ", ".join(applied))
    if failed:
        parts.append("FAILED " + "; ".join(failed))
    if restart:
        parts.append("needs a restart: " + ", ".join(restart))
    return not failed, "; ".join(parts) or "no changes"


def read_status_file(path: str | os.PathLike, daemon: str, error: type[Exception],
                     valid: Callable[[dict], bool]) -> dict[str, Any]:
    """A daemon's status file, with ``running`` added (is the pid in it
    alive?); ``error`` (the daemon's ``StatusError``) saying why there is
    none to read: missing (is DAEMON running?), unreadable, not its status
    (``valid(data)`` false)."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise error(f"no status file at {path}: is {daemon} running? (or give "
                    "--status-file, or the --config it runs with)") from None
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise error(f"{path} is not a {daemon} status file ({exc})") from None
    if not isinstance(data, dict) or not valid(data):
        raise error(f"{path} is not a {daemon} status file")
    data["running"] = pid_alive(data.get("pid"))
    return data


def other_instance(status: Mapping[str, Any], config_path: str | os.PathLike | None,
                   path: str | os.PathLike, daemon: str) -> str | None:
    """Why the running daemon whose ``status`` (read from ``path``) this is
    is not the one ``config_path`` (the command's ``--config``) names: it
    runs with another configuration file, or none; None when it is that one,
    or no file was named. ``DAEMON status``/``reload`` then act on none."""
    if config_path is None or not status.get("running", True):
        return None
    ran = status.get("config")
    if ran and os.path.realpath(str(ran)) == os.path.realpath(config_path):
        return None
    return (f"{path} is the status of {daemon} pid {status.get('pid')}, which runs with "
            f"{ran or 'no --config file'}, not {os.fspath(config_path)} (give the status of "
            f"the {daemon} you mean)")


def show_status(data: Mapping[str, Any], as_json: bool,
                format_status: Callable[[Mapping[str, Any], Any], None]) -> int:
    """``DAEMON status``: the status as JSON or as ``format_status`` words
    it, on stdout; exit 0 when the daemon runs, 3 when the file is stale."""
    if as_json:
        json.dump(data, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        format_status(data, sys.stdout)
    return EXIT_OK if data.get("running") else EXIT_FAILURE


def ask_reload(prog: str, read_status: Callable[[], Mapping[str, Any]], *,
               timeout: float = RELOAD_TIMEOUT, poll: float = 0.1,
               sleep: Callable[[float], None] = time.sleep) -> int:
    """``DAEMON reload``: SIGHUP to the pid in the status (``read_status()``
    raises the command's own ``ToolError``-like exception when there is none,
    which the caller reports), then the daemon's verdict: exit 0 when it
    applied the file, 1 when it refused it, 3 when it cannot be asked or
    does not answer within ``timeout``."""
    status = read_status()
    pid = status.get("pid")
    if not pid_alive(pid):
        return fail(prog, f"no running {prog.split()[0]} (pid {pid} in the status file)",
                    EXIT_FAILURE)
    before = _serial(status)
    try:
        os.kill(pid, signal.SIGHUP)
    except OSError as exc:
        return fail(prog, f"cannot signal pid {pid}: {exc.strerror or exc}", EXIT_FAILURE)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sleep(poll)
        try:
            status = read_status()
        except Exception:  # noqa: BLE001, S112 - the file is being replaced: try again
            continue
        if _serial(status) > before:
            verdict = status.get("reload") or {}
            message = str(verdict.get("message", ""))
            if verdict.get("ok"):
                print(f"{prog}: pid {pid} reloaded: {message}", flush=True)
                return EXIT_OK
            return fail(prog, f"pid {pid} refused the new configuration: {message}",
                        EXIT_USAGE)
        if not pid_alive(pid):
            return fail(prog, f"pid {pid} exited instead of reloading", EXIT_FAILURE)
    return fail(prog, f"asked pid {pid} to reload, but it did not say how it went within "
                      f"{timeout:g} s (see its log)", EXIT_FAILURE)


def _serial(status: Mapping[str, Any]) -> int:
    verdict = status.get("reload")
    serial = verdict.get("serial") if isinstance(verdict, Mapping) else None
    return serial if isinstance(serial, int) else 0
