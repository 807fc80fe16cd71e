"""Every public name of the library's public modules has a docstring.

"Public" here: a module's public names are its ``__all__`` where it has one, else
the names it defines itself (classes and functions whose ``__module__`` is that
module) that do not start with an underscore; for each public class, its public
members are the attributes whose names do not start with an underscore and
that are defined by a class of this suite in its MRO (a method, classmethod,
staticmethod or property; names inherited from ``object``, ``Exception``,
``enum`` or Qt are theirs to document). The API reference (docs/api/) renders
the same modules and names, so an undocumented name would show there as a bare
signature.
"""

from __future__ import annotations

import importlib
import inspect

import pytest

pytest.importorskip("PySide6")   # elvin.qt is part of the public API

#: the modules the API reference documents (docs/api/*.rst)
API_MODULES = (
    "elvin", "elvin.client", "elvin.sync", "elvin.qt", "elvin.quenching", "elvin.keys",
    "elvin.errors", "elvin.client.errors", "elvin.values", "elvin.discovery",
)


def public_names(module) -> list[str]:
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [name for name, value in vars(module).items()
            if not name.startswith("_") and (inspect.isclass(value) or inspect.isfunction(value))
            and value.__module__ == module.__name__]


def _ours(cls: type) -> bool:
    mod = getattr(cls, "__module__", "") or ""
    return mod == "elvin" or mod.startswith(("elvin.", "elvin_apps."))


def public_members(cls: type) -> list[tuple[str, object]]:
    """The public members ``cls`` gets from classes of this suite."""
    seen: dict[str, object] = {}
    for klass in reversed(cls.__mro__):
        if not _ours(klass):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_"):
                continue
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            elif isinstance(value, property):
                value = value.fget
            if inspect.isfunction(value):
                seen[name] = value
            elif name in seen:          # overridden by a non-function (a field)
                del seen[name]
    return sorted(seen.items())


def undocumented(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    missing = []
    for name in public_names(module):
        obj = getattr(module, name)
        if inspect.isclass(obj):
            if not obj.__doc__ or not _ours(obj):
                if not obj.__doc__:
                    missing.append(name)
            elif obj.__doc__ == getattr(obj.__mro__[1], "__doc__", None):
                missing.append(name)                 # inherited from its base only
            for member, fn in public_members(obj):
                if not inspect.getdoc(fn):
                    missing.append(f"{name}.{member}")
        elif callable(obj) and not inspect.getdoc(obj):
            missing.append(name)
    return missing


@pytest.mark.parametrize("module_name", API_MODULES)
def test_api_module_names_exist(module_name):
    module = importlib.import_module(module_name)
    assert module.__doc__, f"{module_name} has no module docstring"
    for name in getattr(module, "__all__", ()):
        assert hasattr(module, name), f"{module_name}.__all__ names {name!r}, which it lacks"


@pytest.mark.parametrize("module_name", API_MODULES)
def test_every_public_name_has_a_docstring(module_name):
    missing = undocumented(module_name)
    assert not missing, f"{module_name}: no docstring on {', '.join(missing)}"


def test_the_check_finds_a_missing_docstring():
    """The check itself: a class with an undocumented public method is caught."""
    class Documented:
        """Has a docstring."""

        def method(self):
            pass

    Documented.__module__ = "elvin.example"
    assert [name for name, _ in public_members(Documented)] == ["method"]
    assert not inspect.getdoc(public_members(Documented)[0][1])
