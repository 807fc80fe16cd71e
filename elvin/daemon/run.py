"""``make run``: the bundled router, with the tickertape on top of it.

Looks for a router first: ``ELVIN_URL`` if set, else router discovery (a
default router on the LAN, or the scope in ``ELVIN_SCOPE``; ``ELVIN_DISCOVERY``
tunes or disables it, see ``elvin.discovery``); an ``ELVIN_URL`` that is not
an Elvin URI is said, and ``make run`` exits with status 1. Only when nothing answers does
it start ``elvind`` on the default URL (unless a router already answers
there), then the tickertape in the foreground when there is a display to show it on,
after putting the apps in the desktop's menu (``elvin-desktop-install``).
When a display is set but Qt cannot use it (missing xcb libraries, no X server
answering), it says why in one line, naming the libraries and their Debian
packages, instead of letting Qt abort. On a machine without a display it keeps the router in the foreground and says
how to reach it, so that ``make run`` is useful on a server too. Ctrl-C,
SIGTERM and SIGHUP stop both: the children run in sessions of their own, so
only the launcher gets the terminal's signals, and it stops them in order.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time

from elvin.daemon.display_check import display_problem
from elvin.protocol import parse_uri
from elvin.router_url import DEFAULT_URL, RouterURLError, choose_router_url

DEFAULT_HOST, DEFAULT_PORT = parse_uri(DEFAULT_URL).host, parse_uri(DEFAULT_URL).port


def router_answers(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def find_router(timeout: float | None = None) -> str | None:
    """``ELVIN_URL``, else the first router discovery finds (within
    ``timeout``, default ``elvin.discovery.APP_TIMEOUT``), else None: the
    suite's rule (``elvin.router_url``) with no flag and no config file.
    ``RouterURLError`` for an ``ELVIN_URL`` that is not an Elvin URI."""
    choice = choose_router_url(discover=True, timeout=timeout)
    return choice.url if choice.chosen else None


def has_display() -> bool:
    """A real screen, or a platform plugin the user chose on purpose."""
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
                or os.environ.get("QT_QPA_PLATFORM") or sys.platform in ("darwin", "win32"))


class _Stop(Exception):
    """A signal asked the launcher to stop (SIGTERM, SIGHUP, SIGINT)."""


def _stop_on_signals() -> None:
    """SIGTERM (a service manager, ``kill``, make forwarding its own),
    SIGHUP (the terminal closed) and SIGINT (Ctrl-C) all stop the launcher
    the same way: by unwinding to ``main``'s ``finally``, which stops the
    children it started. Further signals are ignored meanwhile, so that the
    clean-up itself is not interrupted."""
    def handler(signum: int, _frame: object) -> None:
        for sig in _STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        raise _Stop(signal.Signals(signum).name)

    for sig in _STOP_SIGNALS:
        signal.signal(sig, handler)


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def _child_setup() -> None:
    """In each child, before it runs: its own session, so that the
    terminal's signals (Ctrl-C, a hang-up) reach only the launcher, which
    stops its children in order (an elvind that got the terminal's SIGHUP
    would reload and live on as an orphan); and, on Linux, SIGTERM if the
    launcher dies without cleaning up (SIGKILL)."""
    os.setsid()
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def _spawn(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, *args], preexec_fn=_child_setup)


def start_router(url: str = DEFAULT_URL) -> subprocess.Popen | None:
    host, port = parse_uri(url).host, parse_uri(url).port
    if router_answers(host, port):
        print(f"make run: a router already answers at {url}; using it", flush=True)
        return None
    router = _spawn("-m", "elvin.router", "--listen", url)
    deadline = time.monotonic() + 15
    while not router_answers(host, port):
        if router.poll() is not None:
            raise SystemExit(f"make run: elvind exited with status {router.returncode}")
        if time.monotonic() > deadline:
            stop(router)
            raise SystemExit(f"make run: elvind did not start listening at {url}")
        time.sleep(0.1)
    print(f"make run: elvind is listening at {url}", flush=True)
    return router


def stop(process: subprocess.Popen | None) -> None:
    if process is not None and process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def install_desktop_entries() -> None:
    """The apps' menu entries and icons (``elvin-desktop-install``), so
    that after ``make run`` they are in the desktop's applications menu too.
    A failure is said in one line and does not stop the run."""
    try:
        done = subprocess.run([sys.executable, "-m", "elvin_apps.desktop.install", "--quiet"],
                              capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        print(f"make run: the menu entries were not installed: {exc}", flush=True)
        return
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no reason given"])[-1]
        print(f"make run: the menu entries were not installed: {said}", flush=True)


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="make run", description="Start the bundled router (unless one is found) and "
        "the tickertape on top of it.")
    parser.add_argument("--router-url", default=DEFAULT_URL, metavar="URL",
                        help=f"where to start the bundled router when none is found "
                        f"(default {DEFAULT_URL})")
    args = parser.parse_args(argv)
    try:
        parse_uri(args.router_url)
    except ValueError as exc:
        parser.error(f"--router-url {args.router_url!r}: {exc}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    _stop_on_signals()
    router = tickertape = None
    try:
        try:
            url = find_router()
        except RouterURLError as exc:
            return exc.report("make run")
        if url:
            print(f"make run: using the router at {url}", flush=True)
        else:
            url, router = args.router_url, start_router(args.router_url)
        has_tickertape = importlib.util.find_spec("elvin_apps.tickertape") is not None
        problem = display_problem() if has_tickertape and has_display() else None
        if has_tickertape and has_display() and problem is None:
            install_desktop_entries()
            tickertape = _spawn("-m", "elvin_apps.tickertape", "--elvin", url)
            return tickertape.wait()
        if problem is not None:
            why = f"the tickertape cannot start: {problem}"
        else:
            why = "no display found" if has_tickertape else "the tickertape is not installed"
        print(f"make run: {why}, so only the router runs. Try:\n"
              f"  .venv/bin/ec -e {url} 'require(Message)'\n"
              f"  printf 'Group: \"Chat\"\\nFrom: \"me\"\\nMessage: \"hello\"\\n"
              f"Message-Id: \"1\"\\n---\\n' | "
              f".venv/bin/ep -e {url}\n"
              "Ctrl-C stops it.", flush=True)
        if router is None:
            return 0
        return router.wait()
    except (KeyboardInterrupt, _Stop):
        return 0
    finally:
        # the tickertape first (it says goodbye to the router), then the router
        stop(tickertape)
        stop(router)


if __name__ == "__main__":
    sys.exit(main())
