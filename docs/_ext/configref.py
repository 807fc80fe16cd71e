"""The configuration reference, generated at build time from the declarations.

Two directives, used by docs/reference/*.rst:

``.. elvin-settings:: module:Class``
    A table of a config dataclass's settings. A class whose fields are
    declared with ``elvin.settings.setting`` says everything itself (key,
    type, default, bounds or choices, flag, help, reload); name its
    ``elvin.settings.SettingsTable`` (``module:SETTINGS``) for one part per
    section under a rubric, or add ``:section: NAME`` for one section only
    (``""`` the general).
    For the classes not declared so yet (the federation's tables, the
    newswatcher's feeds, the tickertape's groups): the TOML key (the field),
    its type, its default (the dataclass default, or ``default_factory()``
    for a lambda), the allowed range (the field's ``number()`` metadata) and
    what it means (the ``#:`` comment above the field or the comment after
    it, else the example's). Options:

    ``:keys: module:NAME``
        the validation table naming the accepted keys (a set): only those
        fields are listed
    ``:extra: a, b`` settings read by hand that the key table does not list
    ``:example: PATH`` a file (relative to the repository) whose TOML example's
    comments say what a setting means when nothing else does (default: the
    class's module docstring)
    ``:table: NAME, ...`` the example's table(s) these settings are in
    (``federation.connect``), looked up in this order

``.. elvin-options:: COMMAND``
    A table of a command's options (what ``--help`` says), its subcommands
    included, from the parser its entry point uses (``scripts/manpages.py``'s
    ``COMMANDS``, which the man pages come from too); or ``module:function``.

``.. elvin-connection-options::``
    The router's connection options with their minimum, default and maximum
    and what enforces each (``elvin.router.options.OPTIONS``, the ranges as
    ``OptionRanges`` starts from them).

Nothing here is written by hand about a setting: a setting added to a
dataclass (or a table) is in the reference at the next build.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import inspect
import io
import re
import textwrap
import tokenize
import types
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxDirective

__all__ = ["Setting", "declared", "example_comments", "field_comments", "settings", "setup"]


ROOT = Path(__file__).resolve().parents[2]


def _resolve(spec: str) -> Any:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name) if name else importlib.import_module(module)


# -- reading the declarations --------------------------------------------------

def field_comments(cls: type) -> dict[str, str]:
    """``field -> comment`` for the fields of ``cls``: the ``#:`` lines just
    above the field, else the comment at the end of its line."""
    source = textwrap.dedent(inspect.getsource(cls))
    comments: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string
    lines = source.split("\n")
    tree = ast.parse(source)
    out: dict[str, str] = {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    for stmt in body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        above = []
        n = stmt.lineno - 1
        while n >= 1 and lines[n - 1].strip().startswith("#:"):
            above.insert(0, lines[n - 1].strip()[2:].strip())
            n -= 1
        if above:
            out[stmt.target.id] = " ".join(above)
            continue
        trailing = comments.get(stmt.lineno) or comments.get(stmt.end_lineno or stmt.lineno)
        if trailing and not lines[stmt.lineno - 1].strip().startswith("#"):
            out[stmt.target.id] = trailing.lstrip("#").lstrip(":").strip()
    return out


def example_comments(text: str) -> dict[tuple[str, str], str]:
    """``(table, key) -> comment`` from a TOML example (a module's docstring,
    a README): ``connect-timeout = 10   # seconds a new channel has ...`` under
    ``[federation]`` is ``("federation", "connect_timeout")``; keys with
    underscores, "" for the top table."""
    out: dict[tuple[str, str], str] = {}
    table = ""
    for line in text.split("\n"):
        header = re.match(r"\s*\[\[?\s*([\w.-]+)\s*\]\]?", line)
        if header:
            table = header.group(1)
            continue
        match = re.match(r"\s*([A-Za-z][\w-]*)\s*=\s*[^#]*#\s*(.+)$", line)
        if match:
            out.setdefault((table, match.group(1).replace("-", "_")), match.group(2).strip())
    return out


@dataclasses.dataclass
class Setting:
    """One row of a settings table."""

    key: str
    type: str
    default: str
    range: str
    flag: str
    description: str
    reloadable: bool | None = None
    section: str = ""


def _default(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        factory = f.default_factory
        if isinstance(factory, types.LambdaType) and factory.__name__ == "<lambda>":
            value = factory()
        elif factory in (list, dict, set, tuple, frozenset):
            value = factory()
        elif inspect.isclass(factory):
            return f"{factory.__name__} defaults"
        else:
            return f"computed ({factory.__name__})"
    else:
        return "required"
    return _toml_default(sorted(value) if isinstance(value, (set, frozenset)) else value)


def _type(f: dataclasses.Field) -> str:
    t = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    return t.replace("typing.", "")


def declared(table: Any, section: str | None = None) -> list[Setting]:
    """The rows of a ``SettingsTable`` (or of a class declared with
    ``elvin.settings.setting``; empty when it is not), of one ``section`` or
    of all."""
    from elvin.settings import SettingsTable
    if not isinstance(table, SettingsTable):
        table = SettingsTable(table)
    return [Setting(key=s.key, type=s.type_name,
                    default=(table.default_text(s) if s.shown_default is not None
                             else _toml_default(s.default)),
                    range=str(s.bounds) if s.bounds else
                    ("one of " + ", ".join(s.choices) if s.choices else ""),
                    flag=s.flag or "", description=table.help(s),
                    # a tool with no reload has no reload column
                    reloadable=s.reloadable if table.reloadable else None,
                    section=s.section)
            for s in table if s.in_file and (section is None or s.section == section)]


def _toml_default(value: Any) -> str:
    """A default as TOML writes it (a dataclass: its own defaults)."""
    from elvin.settings import shown
    if dataclasses.is_dataclass(value):
        return f"{type(value).__name__} defaults"
    return shown(value)


def settings(cls: type, *, keys: Any = None, extra: frozenset[str] = frozenset(),
             example: str | None = None, example_table: str = "") -> list[Setting]:
    """The rows of a config dataclass not declared with
    ``elvin.settings.setting`` (its fields' defaults and ``number()``
    ranges, the comments beside them or in the example), in declaration
    order; with ``keys``, only the fields it names (and ``extra``)."""
    comments = field_comments(cls)
    tables = [t.strip() for t in example_table.split(",")]
    examples = example_comments(example if example is not None
                                else inspect.getmodule(cls).__doc__ or "")
    rows = []
    for f in dataclasses.fields(cls):
        name = f.name
        if name.startswith("_") or (keys is not None and name not in keys
                                    and name not in extra):
            continue
        declared = f.metadata.get("range")
        allowed = str(declared) if declared is not None else ""
        description = comments.get(name) or next(
            (examples[(t, name)] for t in tables if (t, name) in examples), "")
        rows.append(Setting(key=name, type=_type(f), default=_default(f),
                            range="" if allowed == "any" else allowed, flag="",
                            description=description))
    return rows


# -- docutils ------------------------------------------------------------------

_LITERAL = re.compile(r"``(.+?)``|`([^`]+)`")


def _inline(text: str) -> list[nodes.Node]:
    """Text with ``literal`` spans as literal nodes (the comments use both
    reST's double and Markdown's single backquotes)."""
    out: list[nodes.Node] = []
    pos = 0
    for match in _LITERAL.finditer(text):
        if match.start() > pos:
            out.append(nodes.Text(text[pos:match.start()]))
        literal = match.group(1) or match.group(2)
        out.append(nodes.literal(literal, literal))
        pos = match.end()
    if pos < len(text):
        out.append(nodes.Text(text[pos:]))
    return out


def _cell(content: str | list[nodes.Node]) -> nodes.entry:
    entry = nodes.entry()
    para = nodes.paragraph()
    if isinstance(content, str):
        para.extend(_inline(content))
    else:
        para.extend(content)
    entry += para
    return entry


def _table(headers: list[str], rows: list[list[Any]], widths: list[int]) -> nodes.table:
    table = nodes.table(classes=["elvin-config"])
    group = nodes.tgroup(cols=len(headers))
    table += group
    for width in widths:
        group += nodes.colspec(colwidth=width)
    head = nodes.thead()
    group += head
    row = nodes.row()
    for header in headers:
        row += _cell(header)
    head += row
    body = nodes.tbody()
    group += body
    for values in rows:
        row = nodes.row()
        for value in values:
            row += _cell(value)
        body += row
    return table


def _settings_list(rows: list[Setting]) -> nodes.definition_list:
    """One entry per setting: the key, then a line of facts (type, default,
    range, flag, reload) and what it means."""
    out = nodes.definition_list(classes=["elvin-settings"])
    for r in rows:
        item = nodes.definition_list_item()
        term = nodes.term()
        term += nodes.literal(r.key, r.key)
        item += term
        definition = nodes.definition()
        facts = nodes.paragraph(classes=["elvin-setting-facts"])
        parts: list[list[nodes.Node]] = [[nodes.emphasis(r.type, r.type)],
                                         [nodes.Text("default "), *_code(r.default)]]
        if r.range:
            parts.append([nodes.Text(r.range)])
        if r.flag:
            parts.append([nodes.Text("flag "), *_code(r.flag)])
        if r.reloadable is not None:
            parts.append([nodes.Text("applied on reload" if r.reloadable
                                     else "needs a restart")])
        for n, part in enumerate(parts):
            if n:
                facts += nodes.Text(" · ")
            facts.extend(part)
        definition += facts
        if r.description:
            para = nodes.paragraph()
            para.extend(_inline(r.description[:1].upper() + r.description[1:]))
            definition += para
        item += definition
        out += item
    return out


def _code(text: str) -> list[nodes.Node]:
    return [nodes.literal(text, text)] if text else []


class SettingsDirective(SphinxDirective):
    """``.. elvin-settings:: module:Class`` (see the module's docstring)."""

    required_arguments = 1
    option_spec = {
        "keys": directives.unchanged, "extra": directives.unchanged,
        "example": directives.unchanged, "table": directives.unchanged,
        "section": directives.unchanged,
    }

    def run(self) -> list[nodes.Node]:
        opt = self.options
        cls = _resolve(self.arguments[0])
        if "section" not in opt and hasattr(cls, "sections"):
            return _sectioned(cls)
        table = declared(cls, opt["section"].strip('"') if "section" in opt else None)
        if table:
            return [_settings_list(table)]
        extra = frozenset(n.strip() for n in opt.get("extra", "").split(",") if n.strip())
        rows = settings(
            cls, keys=_resolve(opt["keys"]) if "keys" in opt else None, extra=extra,
            example=(ROOT / opt["example"]).read_text(encoding="utf-8") if "example" in opt
            else None, example_table=opt.get("table", ""))
        if not rows:
            raise self.error(f"{self.arguments[0]}: no settings found")
        return [_settings_list(rows)]


def _sectioned(table: Any) -> list[nodes.Node]:
    """A ``SettingsTable``'s rows, section by section (the general first),
    each under a rubric with the section's description."""
    rows = declared(table)
    out: list[nodes.Node] = []
    for section in dict.fromkeys(r.section for r in rows):
        if section:
            out.append(nodes.rubric(section, section[:1].upper() + section[1:]))
            if table.sections.get(section):
                para = nodes.paragraph()
                para.extend(_inline(table.sections[section]))
                out.append(para)
        out.append(_settings_list([r for r in rows if r.section == section]))
    return out


class OptionsDirective(SphinxDirective):
    """``.. elvin-options:: module:function [argument]``: a parser's options."""

    required_arguments = 1
    optional_arguments = 1

    def run(self) -> list[nodes.Node]:
        from elvin.manpage import documented_actions, help_text, value_text
        if ":" in self.arguments[0]:
            parser = _resolve(self.arguments[0])(*self.arguments[1:])
            parsers = [("", parser)]
        else:
            spec = _commands()[self.arguments[0]]
            parser = spec["parser"]()
            parsers = [("", parser)] + [(name, build()) for name, build in spec.get("commands", ())]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend((name, sub) for name, sub in action.choices.items())
        out: list[nodes.Node] = []
        for command, p in parsers:
            if command:
                title = f"{parser.prog} {command}"
                out.append(nodes.rubric(title, title))
                if p.description:
                    out.append(nodes.paragraph(text=" ".join(p.description.split())))
            entries = nodes.definition_list(classes=["elvin-options"])
            for action in documented_actions(p):
                item = nodes.definition_list_item()
                term = nodes.term()
                names = ", ".join(action.option_strings) or value_text(p, action)
                term += nodes.literal(names, names)
                value = value_text(p, action) if action.option_strings else ""
                if value:
                    term += nodes.Text(" ")
                    term += nodes.emphasis(value, value)
                item += term
                definition = nodes.definition()
                definition += nodes.paragraph(text=help_text(p, action))
                item += definition
                entries += item
            out.append(entries)
        return out


def _commands() -> dict[str, dict]:
    """``scripts/manpages.py``'s table of the commands and their parsers."""
    import importlib.util
    path = ROOT / "scripts" / "manpages.py"
    spec = importlib.util.spec_from_file_location("elvin_manpages", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.COMMANDS


class ConnectionOptionsDirective(SphinxDirective):
    """``.. elvin-connection-options::``: the negotiable options' ranges."""

    def run(self) -> list[nodes.Node]:
        from elvin.router.options import DROP_POLICIES, OPTIONS, OptionRanges
        ranges = OptionRanges()
        policies = {"Send-Queue.Drop-Policy": ranges.send_drop_policy,
                    "Receive-Queue.Drop-Policy": ranges.receive_drop_policy}
        body: list[list[Any]] = []
        for option in sorted(OPTIONS, key=lambda o: o.name):
            if option.type == "int32":
                low, default, high = ranges.ints[option.name]
                body.append([_code(option.name), str(low), str(default), str(high),
                             option.enforced_by])
            elif option.name in policies:
                body.append([_code(option.name), "", _code(policies[option.name]),
                             ", ".join(DROP_POLICIES), option.enforced_by])
        return [_table(["Option", "Minimum", "Default", "Maximum / values", "Enforced by"],
                       body, [30, 12, 12, 22, 24])]


def setup(app) -> dict[str, Any]:
    app.add_directive("elvin-settings", SettingsDirective)
    app.add_directive("elvin-options", OptionsDirective)
    app.add_directive("elvin-connection-options", ConnectionOptionsDirective)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
