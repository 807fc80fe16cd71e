"""The layers the design keeps apart, checked on the imports themselves
(``ast``, not text): the protocol codec and the subscription language are
sans-IO (no sockets, asyncio, threads' event loops or Qt), and the apps
reach a router only through ``elvin.client`` (they may start the bundled
router, ``elvin.router.bundled``, which is how ``make run`` works)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.append((node.lineno, node.module))
    return out


def _offending(folder: str, forbidden) -> list[str]:
    found = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for line, module in _imports(path):
            if forbidden(module):
                found.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    return found


_IO = ("asyncio", "socket", "selectors", "ssl", "PySide6", "qasync", "elvin.client",
       "elvin.router", "elvin.qt")


@pytest.mark.parametrize("folder", ["elvin/protocol", "elvin/subscription"])
def test_the_codec_and_the_language_are_sans_io(folder):
    def forbidden(module: str) -> bool:
        return any(module == m or module.startswith(m + ".") for m in _IO)
    assert _offending(folder, forbidden) == []


def test_apps_reach_routers_only_through_the_client():
    def forbidden(module: str) -> bool:
        return (module == "elvin.router" or module.startswith("elvin.router.")) \
            and module != "elvin.router.bundled"
    assert _offending("apps", forbidden) == []


def _is_router(module: str) -> bool:
    return module == "elvin.router" or module.startswith("elvin.router.")


@pytest.mark.parametrize("folder", ["elvin/federation", "elvin/mobility", "elvin/discovery",
                                    "elvin/pipeline"])
def test_the_routers_services_do_not_reach_back_into_the_router(folder):
    """The router uses these packages, never the other way round: how the
    router hooks each one up lives in the router (``elvin.router.*_service``,
    ``elvin.router.fedhost``), so that the package stands on its own (a
    standalone ``elvin-mobility-proxy`` is the same proxy as the one inside
    ``elvind``). What a package shares with the router lives below both: the
    federation's pull matcher suspends a term whose pattern overran as the
    engine suspends a predicate, through ``elvin.subscription.suspension``
    (it imported ``elvin.router.engine`` for it, issue 46)."""
    assert _offending(folder, _is_router) == []


def test_the_language_does_not_reach_up_into_federation():
    """``elvin.subscription`` is below the federation as it is below the
    router: what both need of it is imported from it, never the reverse."""
    def forbidden(module: str) -> bool:
        return module == "elvin.federation" or module.startswith("elvin.federation.")
    assert _offending("elvin/subscription", forbidden) == []
