"""A manual page (roff, ``man(7)`` macros) from an ``argparse`` parser.

The suite's man pages are generated from the parsers the commands really use
(``scripts/manpages.py`` lists them), so a flag added to a parser is in its
page at the next ``make man``, and ``tests/unit/test_manpages.py`` fails
while a committed page lags behind its parser. No third-party generator: the
parsers here hold a few things a generic one renders badly (subcommands that
are separate parsers, ``%(default)s`` in help, suite-wide exit codes and
environment), and the roff needed is a few macros.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

__all__ = ["Page", "documented_actions", "help_text", "render", "value_text"]

#: the exit codes every tool of the suite uses (docs/architecture.md)
EXIT_CODES = (
    ("0", "success"),
    ("1", "a usage, configuration or input error"),
    ("2", "the router cannot be reached"),
    ("3", "any other failure (a request the router refused, a failed start)"),
)


@dataclass
class Page:
    """What one page says: the command's main parser, the parsers of its
    subcommands that are not argparse subparsers (``elvind status``), and
    what the parser does not hold."""

    name: str
    section: int
    parser: argparse.ArgumentParser
    #: (name, parser) of commands parsed by a parser of their own
    commands: Sequence[tuple[str, argparse.ArgumentParser]] = ()
    environment: Sequence[tuple[str, str]] = ()
    files: Sequence[tuple[str, str]] = ()
    see_also: Sequence[str] = ()
    #: the manual's title (.TH's fifth field)
    manual: str = "Elvin suite"
    source: str = ""
    extra_sections: Sequence[tuple[str, str]] = field(default_factory=tuple)


def _escape(text: str) -> str:
    """Text for a roff line: backslashes doubled, a leading control
    character guarded."""
    text = text.replace("\\", "\\e")
    return "\n".join(("\\&" + line) if line[:1] in (".", "'") else line
                     for line in text.split("\n"))


def _option(text: str) -> str:
    """An option name in bold, its dashes as roff's minus signs."""
    return "\\fB" + _escape(text).replace("-", "\\-") + "\\fR"


def _paragraphs(text: str | None) -> list[str]:
    if not text:
        return []
    out = []
    for para in re.split(r"\n\s*\n", text.strip()):
        out.append(".PP")
        out.append(_escape(" ".join(para.split())))
    return out


def help_text(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The action's help as ``--help`` shows it (``%(default)s`` expanded), on one line."""
    formatter = parser._get_formatter()
    return " ".join(formatter._expand_help(action).split()) if action.help else ""


_help = help_text


def documented_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The parser's actions that ``--help`` lists, subcommands left out."""
    return [action for _title, actions in _actions(parser) for action in actions]


def value_text(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """What an option takes, as ``--help`` writes it (``FILE``, ``{a,b}``); "" for a flag."""
    if action.nargs == 0:
        return ""
    formatter = parser._get_formatter()
    if not action.option_strings:
        return formatter._metavar_formatter(action, action.dest)(1)[0]
    return formatter._format_args(action, formatter._get_default_metavar_for_optional(action))


def _invocation(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    formatter = parser._get_formatter()
    if not action.option_strings:
        return "\\fI" + _escape(formatter._metavar_formatter(action, action.dest)(1)[0]) + "\\fR"
    names = ", ".join(_option(s) for s in action.option_strings)
    if action.nargs == 0:
        return names
    value = formatter._format_args(action, formatter._get_default_metavar_for_optional(action))
    return f"{names} \\fI{_escape(value)}\\fR"


def _actions(parser: argparse.ArgumentParser) -> Iterable[tuple[str, list[argparse.Action]]]:
    for group in parser._action_groups:
        actions = [a for a in group._group_actions
                   if a.help is not argparse.SUPPRESS
                   and not isinstance(a, argparse._SubParsersAction)]
        if actions:
            yield group.title or "options", actions


def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser, str]]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            seen = set()
            for name, sub in action.choices.items():
                if id(sub) in seen:
                    continue          # an alias
                seen.add(id(sub))
                out.append((name, sub, helps.get(name, "")))
    return out


def _usage(parser: argparse.ArgumentParser) -> str:
    """argparse's usage, as wrapped for 80 columns, without ``usage:``."""
    lines = parser.format_usage().rstrip().split("\n")
    indent = len("usage: ")
    return "\n".join([lines[0].removeprefix("usage: ")]
                     + [line[indent:] if line[:indent].isspace() else line.strip()
                        for line in lines[1:]])


def _options_block(parser: argparse.ArgumentParser) -> list[str]:
    lines = []
    for _title, actions in _actions(parser):
        for action in actions:
            lines.append(".TP")
            lines.append(_invocation(parser, action))
            lines.append(_escape(_help(parser, action)) or "\\&")
    return lines


def _first_sentence(text: str | None) -> str:
    text = " ".join((text or "").split())
    match = re.match(r"(.+?[.:;])(\s|$)", text)
    sentence = match.group(1) if match else text
    return sentence.rstrip(".:;")


def render(page: Page) -> str:
    """The page's roff source."""
    parser = page.parser
    name = page.name
    lines = [
        f'.TH "{name.upper()}" "{page.section}" "" "{_escape(page.source)}" '
        f'"{_escape(page.manual)}"',
        ".SH NAME",
        f"{_escape(name).replace('-', chr(92) + '-')} \\- {_escape(_first_sentence(parser.description))}",
        ".SH SYNOPSIS",
        ".nf",
        _escape(_usage(parser)),
    ]
    for _name, sub in page.commands:
        lines.append(_escape(_usage(sub)))
    lines.append(".fi")
    lines.append(".SH DESCRIPTION")
    lines.extend(_paragraphs(parser.description))
    lines.extend(_paragraphs(parser.epilog))
    options = _options_block(parser)
    if options:
        lines.append(".SH OPTIONS")
        lines.extend(options)
    subs = _subparsers(parser)
    if subs or page.commands:
        lines.append(".SH COMMANDS")
        for sub_name, sub, sub_help in subs:
            lines.append(f".SS {_escape(sub_name)}")
            lines.extend(_paragraphs(sub.description or sub_help))
            lines.append(".PP")
            lines.append(".nf")
            lines.append(_escape(_usage(sub)))
            lines.append(".fi")
            lines.extend(_options_block(sub))
        for sub_name, sub in page.commands:
            lines.append(f".SS {_escape(sub_name)}")
            lines.extend(_paragraphs(sub.description))
            lines.extend(_paragraphs(sub.epilog))
            lines.append(".PP")
            lines.append(".nf")
            lines.append(_escape(_usage(sub)))
            lines.append(".fi")
            lines.extend(_options_block(sub))
    for title, text in page.extra_sections:
        lines.append(f".SH {title.upper()}")
        lines.extend(_paragraphs(text))
    lines.append(".SH EXIT STATUS")
    for code, meaning in EXIT_CODES:
        lines.append(".TP")
        lines.append(f"\\fB{code}\\fR")
        lines.append(_escape(meaning))
    if page.environment:
        lines.append(".SH ENVIRONMENT")
        for var, meaning in page.environment:
            lines.append(".TP")
            lines.append(f"\\fB{_escape(var)}\\fR")
            lines.append(_escape(meaning))
    if page.files:
        lines.append(".SH FILES")
        for path, meaning in page.files:
            lines.append(".TP")
            lines.append(f"\\fI{_escape(path)}\\fR")
            lines.append(_escape(meaning))
    if page.see_also:
        lines.append(".SH SEE ALSO")
        lines.append(", ".join(f"\\fB{_escape(ref.split('(')[0]).replace('-', chr(92) + '-')}\\fR"
                               f"({ref.split('(')[1]}" for ref in page.see_also))
    return "\n".join(lines) + "\n"
