"""The optional parts of the suite and what to say when one is missing.

``pip install elvin-suite`` installs the core only (the library, ``elvind``,
``ec``, ``ep`` and the other command-line tools: lark and regex); the GUI
apps, the feed and file watchers and the Spark pipeline need extras
(``pyproject.toml``'s ``[project.optional-dependencies]``, mirrored in
``EXTRAS`` below). A command started without its extra must not die on an
``ImportError`` traceback deep in Qt or Spark: ``require`` checks *before*
anything heavy is imported and says, in one line, which extra to install::

    tickertape needs the GUI libraries: pip install 'elvin-suite[gui]'

The check asks the import system whether the modules can be found, without
importing them (PySide6 and PySpark take seconds to import).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass

DISTRIBUTION = "elvin-suite"
EXIT_MISSING_EXTRA = 1   # a usage problem, as the suite's tools report them


@dataclass(frozen=True)
class Extra:
    """One extra of ``pyproject.toml``: the import names of its packages and
    how to call them in a sentence."""

    name: str
    description: str
    modules: tuple[str, ...]


EXTRAS: dict[str, Extra] = {extra.name: extra for extra in (
    Extra("uvloop", "uvloop", ("uvloop",)),
    Extra("gui", "the GUI libraries", ("PySide6", "qasync", "tomlkit")),
    Extra("apps", "the desktop apps' libraries",
          ("PySide6", "qasync", "tomlkit", "watchdog", "feedparser")),
    Extra("pipeline", "the pipeline libraries (Spark, Arrow)",
          ("pyspark", "pyarrow", "pandas", "matplotlib")),
)}

#: what the traffic archive (``elvin.pipeline.archive``: ``elvind --archive``,
#: ``elvin-archive``) needs of the ``[pipeline]`` extra
ARCHIVE_MODULES = ("pyarrow", "numpy")


def module_available(module: str) -> bool:
    """True when ``module`` can be imported (it is not imported here)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):    # a broken parent package counts as missing
        return False


def missing_modules(modules: tuple[str, ...] | list[str]) -> list[str]:
    return [module for module in modules if not module_available(module)]


def install_hint(extra: str) -> str:
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def missing_extra_message(command: str, extra: str,
                          modules: tuple[str, ...] | None = None) -> str | None:
    """The one line ``command`` prints when ``modules`` (by default all of
    ``extra``'s) are not all installed, else None.

    A command that needs only part of an extra (newswatcher needs feedparser,
    not Qt) names the part; the hint is always the whole extra, which is what
    pip can install."""
    spec = EXTRAS[extra]
    wanted = spec.modules if modules is None else modules
    missing = missing_modules(wanted)
    if not missing:
        return None
    what = spec.description if modules is None else " and ".join(missing)
    return f"{command} needs {what}: {install_hint(extra)}"


def require(command: str, extra: str, modules: tuple[str, ...] | None = None) -> None:
    """Exit with status 1 and the one-line message when the extra is missing."""
    message = missing_extra_message(command, extra, modules)
    if message is not None:
        print(message, file=sys.stderr)
        raise SystemExit(EXIT_MISSING_EXTRA)


def launcher(command: str, extra: str, target: str,
             modules: tuple[str, ...] | None = None) -> Callable[[], None]:
    """A console-script entry point: checks the extra, then imports and calls
    ``target`` (``"package.module:function"``), so that nothing of the
    command is imported before the check."""

    def launch() -> None:
        require(command, extra, modules)
        module_name, _, function = target.partition(":")
        result = getattr(importlib.import_module(module_name), function)()
        if isinstance(result, int):
            raise SystemExit(result)

    launch.__name__ = launch.__qualname__ = command.replace("-", "_")
    launch.__doc__ = f"The ``{command}`` command (needs the ``[{extra}]`` extra)."
    return launch
