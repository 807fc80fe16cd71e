"""Build the optional compiled accelerator (``make accel``) into this Python's site-packages.

The accelerator is ``elvin_xdrfast`` (source: ``elvin/protocol/_xdrfast.c``), the
happy path of ``xdrprim.read_attrs`` and of ``fastpath.decode_notify_emit``. Nothing
needs it: ``elvin/protocol/_accel.py`` uses it when it imports, and ``ELVIN_PURE=1`` turns it off. It is built here, on
request, rather than by ``pip install``, so that the core install stays pure Python
and installs where there is no compiler. The ``.so`` goes into the running
interpreter's site-packages (the venv's), never into the source tree.

Run: .venv/bin/python scripts/build_accel.py [--remove]
Exit status 1, with the compiler's message, when it cannot be built.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "elvin" / "protocol" / "_xdrfast.c"
NAME = "elvin_xdrfast"


def _installed() -> list[Path]:
    return sorted(Path(sysconfig.get_paths()["platlib"]).glob(f"{NAME}.*"))


def build() -> Path:
    """Compile the extension in a temporary directory; returns the installed file."""
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext

    with tempfile.TemporaryDirectory(prefix="elvin-accel-") as tmp:
        dist = Distribution({"name": NAME, "ext_modules": [
            Extension(NAME, [str(SOURCE)], extra_compile_args=["-O2"])]})
        cmd = build_ext(dist)
        cmd.build_lib = str(Path(tmp) / "lib")
        cmd.build_temp = str(Path(tmp) / "temp")
        cmd.ensure_finalized()
        cmd.run()
        (built,) = Path(cmd.build_lib).glob(f"{NAME}.*")
        for old in _installed():
            old.unlink()
        target = Path(sysconfig.get_paths()["platlib"]) / built.name
        shutil.copyfile(built, target)
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--remove", action="store_true", help="remove the built accelerator")
    args = parser.parse_args()
    if args.remove:
        for old in _installed():
            old.unlink()
            print(f"removed {old}")
        return 0
    try:
        target = build()
    except Exception as exc:  # noqa: BLE001 -- any build failure: say so, the pure path stays
        print(f"accelerator not built ({type(exc).__name__}: {exc}); the pure-Python path "
              "is used", file=sys.stderr)
        return 1
    print(f"accelerator built: {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
