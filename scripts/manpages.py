"""Write the suite's man pages (man/man1, man/man8) from the commands' parsers.

    python scripts/manpages.py            # write man/ (``make man``)
    python scripts/manpages.py --out .venv/share/man

``COMMANDS`` names, for every console script of pyproject.toml, the function
that builds the parser its entry point uses (and the parsers of its
subcommands that have one of their own). The pages are generated in a fixed
environment (``render_all`` is run in a child with ``PAGE_ENV``), so the
defaults that help texts compute from ``$XDG_*`` read as those variables'
names, the same on every machine. The pages are not committed: ``make
package-check`` writes man/ before it builds the sdist (setup.py installs man/
under share/man), and ``make`` writes them into .venv/share/man.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAN_DIR = ROOT / "man"

#: the environment the pages are rendered in: help texts that show a default
#: path computed from these say ``$XDG_STATE_HOME/...``, not one user's home
PAGE_ENV = {
    "HOME": "~", "XDG_CONFIG_HOME": "$XDG_CONFIG_HOME", "XDG_STATE_HOME": "$XDG_STATE_HOME",
    "XDG_DATA_HOME": "$XDG_DATA_HOME", "XDG_RUNTIME_DIR": "$XDG_RUNTIME_DIR",
    "XDG_CACHE_HOME": "$XDG_CACHE_HOME", "COLUMNS": "80", "LC_ALL": "C.UTF-8",
    "QT_QPA_PLATFORM": "offscreen",
}

ELVIN_URL = ("ELVIN_URL", "the router to use when neither -e/--elvin nor the config file "
                          "names one (else elvin://127.0.0.1:2917)")


def _call(spec: str, *args: object) -> Callable[[], argparse.ArgumentParser]:
    """``module:function`` called with ``args`` when the page is rendered."""
    module, _, name = spec.partition(":")
    return lambda: getattr(importlib.import_module(module), name)(*args)


#: command -> (section, parser builder, [(subcommand, builder)], environment, see also)
COMMANDS: dict[str, dict] = {
    "elvind": dict(
        section=8, parser=_call("elvin.router.arguments:build_parser"),
        commands=[("status", _call("elvin.router.admin:build_status_parser", "status")),
                  ("reload", _call("elvin.router.admin:build_status_parser", "reload"))],
        files=[("/etc/elvin/elvind.toml", "the configuration (--config), in TOML; keys as "
                                          "the long flags"),
               ("/run/elvind/status.json", "the status file that 'elvind status' reads "
                                           "(for root and the systemd unit)")],
        see_also=["ec(1)", "ep(1)", "elvin-domain(1)", "elvin-mobility-proxy(8)",
                  "systemctl(1)"]),
    "filewatcher": dict(
        section=8, parser=_call("elvin_apps.filewatcher.cli:build_parser"),
        commands=[("check", _call("elvin_apps.filewatcher.cli:build_parser")),
                  ("status", _call("elvin_apps.filewatcher.cli:build_status_parser", "status")),
                  ("reload", _call("elvin_apps.filewatcher.cli:build_status_parser", "reload"))],
        environment=[ELVIN_URL], see_also=["elvind(8)", "newswatcher(8)", "ec(1)"]),
    "newswatcher": dict(
        section=8, parser=_call("elvin_apps.newswatcher.cli:build_parser"),
        commands=[("check", _call("elvin_apps.newswatcher.cli:build_parser", "check")),
                  ("status", _call("elvin_apps.newswatcher.cli:build_parser", "status")),
                  ("reload", _call("elvin_apps.newswatcher.cli:build_parser", "reload"))],
        environment=[ELVIN_URL], see_also=["elvind(8)", "filewatcher(8)", "tickertape(1)"]),
    "elvin-mobility-proxy": dict(
        section=8, parser=_call("elvin.mobility.proxy:build_parser"),
        environment=[ELVIN_URL], see_also=["elvind(8)"]),
    "ec": dict(section=1, parser=_call("elvin.tools.ec:build_parser"),
               environment=[ELVIN_URL], see_also=["ep(1)", "elvind(8)", "elvin-explain(1)"]),
    "ep": dict(section=1, parser=_call("elvin.tools.ep:build_parser"),
               environment=[ELVIN_URL], see_also=["ec(1)", "elvind(8)"]),
    "elvin-domain": dict(section=1, parser=_call("elvin.federation.domain_cli:_parser"),
                         see_also=["elvind(8)"]),
    "elvin-explain": dict(section=1, parser=_call("elvin.tools.explain:build_parser"),
                          environment=[ELVIN_URL], see_also=["ec(1)", "elvind(8)"]),
    "elvin-archive": dict(section=1, parser=_call("elvin.tools.archive:build_parser"),
                          see_also=["elvin-pipeline(1)", "elvind(8)"]),
    "elvin-pipeline": dict(section=1, parser=_call("elvin.pipeline.cli:build_parser"),
                           see_also=["elvin-archive(1)", "elvind(8)"]),
    "tickertape": dict(section=1, parser=_call("elvin_apps.tickertape.cli:build_parser"),
                       environment=[ELVIN_URL], see_also=["biff(1)", "elvin-console(1)",
                                                          "elvind(8)"]),
    "biff": dict(section=1, parser=_call("elvin_apps.biff.cli:build_parser"),
                 environment=[ELVIN_URL], see_also=["tickertape(1)", "elvind(8)"]),
    "elvin-console": dict(section=1, parser=_call("elvin_apps.console.cli:build_parser"),
                          environment=[ELVIN_URL], see_also=["ec(1)", "ep(1)", "elvind(8)"]),
    "elvin-desktop-install": dict(section=1,
                                  parser=_call("elvin_apps.desktop.install:build_parser"),
                                  see_also=["tickertape(1)", "biff(1)", "elvin-console(1)"]),
}


def page_path(name: str, root: Path = MAN_DIR) -> Path:
    """Where ``name``'s page goes under ``root`` (``man8/elvind.8``)."""
    section = COMMANDS[name]["section"]
    return root / f"man{section}" / f"{name}.{section}"


def render_page(name: str) -> str:
    """The roff text of ``name``'s page, rendered in this process."""
    from elvin._version import __version__
    from elvin.manpage import Page, render

    spec = COMMANDS[name]
    return render(Page(
        name=name, section=spec["section"], parser=spec["parser"](),
        commands=[(sub, build()) for sub, build in spec.get("commands", ())],
        environment=spec.get("environment", ()), files=spec.get("files", ()),
        see_also=spec.get("see_also", ()), source=f"elvin-suite {__version__}",
        manual="Elvin suite"))


def render_all() -> dict[str, str]:
    """Every page, rendered in a child process with ``PAGE_ENV``."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("XDG_", "ELVIN_")) and k not in ("HOME", "COLUMNS")}
    env.update(PAGE_ENV)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--json"],
                         env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"rendering the man pages failed:\n{out.stderr}")
    return json.loads(out.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", metavar="DIR", type=Path, default=MAN_DIR,
                        help="where to write man1/ and man8/ (default man/)")
    args = parser.parse_args(argv)
    if args.json:         # the child of render_all
        json.dump({name: render_page(name) for name in COMMANDS}, sys.stdout)
        return 0
    pages = render_all()
    for name, text in pages.items():
        path = page_path(name, args.out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    print(f"wrote {len(pages)} man pages under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
