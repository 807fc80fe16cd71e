"""Register subscriptions by *shape*: parse, check and compile once per shape.

Most subscriptions a router sees differ only in their constants
(``Group == "g1" && require(Message)``, ``Group == "g2" && ...``). Their
*shape* is the token sequence with each literal replaced by its class
(string, int32, int64 or real64 literal): it decides everything the lark
parser does (LALR looks only at token types; the callbacks at operator,
function and name texts, which stay in the key), so one parse gives a
*template* that rebuilds the exact tree lark would make for any text of that
shape -- every node, value and character offset -- from the new tokens.

``ShapeCompiler.compile(text)`` therefore costs, for a known shape, one
regex pass over the text, the literal conversions (the parser's own
``_Builder.number`` and ``unescape``), the tree, and:

* **checks**: when the shape has no constant sub-expression (no node whose
  operands are all literals) the checker's verdict depends on the literals
  only through the literal range checks and the regex/wildcard patterns, so
  only those run (the checker's own ``leaf`` and ``string_predicate``); any
  other shape runs the whole checker;
* **code**: such a shape's folded tree is the tree itself, and the compiler
  writes the same code for any constants of the same *value class* (see
  ``_number_class``), so the source is generated once with sentinel
  constants, the sentinels become parameters of a factory function, and a
  subscription costs one call of the factory (a closure over its
  constants). Shapes whose code holds objects built from constants (sets of
  ``equals``, regex and wildcard matchers, ``contains`` alternations) are
  compiled per subscription by ``compiler.build``, as before.

Anything unusual -- a character the tokeniser does not know, a literal the
parser would reject, a shape the template cannot describe, a text longer than
``FAST_PATH_MAX`` -- goes the ordinary way (``parse`` + ``compiler.build``),
which also produces every error message. The result is the same either way;
``tests/unit/test_subscription_shapes.py`` checks it on random expressions.

Caches are bounded: at most ``MAX_SHAPES`` shapes (least recently used
dropped first), each with at most ``MAX_CODES`` code templates (one per
combination of numeric value classes).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from lark import Token

from elvin.errors import SubscriptionError
from elvin.subscription.analysis import _literal_key, index_constraint, required_names
from elvin.subscription.ast import LITERAL_KINDS, Kind, Node, names_in
from elvin.subscription.cancel import checkpoint
from elvin.subscription.checker import _Checker, check, fold
from elvin.subscription.compiler import build, generate
from elvin.subscription.parser import _Builder, parse_tree, unescape
from elvin.subscription.patterns import PatternError, glob_matcher, regex_matcher
from elvin.values import Int64

__all__ = ["FAST_PATH_MAX", "MAX_CODES", "MAX_LITERALS", "MAX_SHAPES", "Registered", "ShapeCompiler",
           "compile_text", "tokenise"]

#: texts longer than this (characters) skip the shape cache: they are rare,
#: and a shape is only worth learning if it comes back
FAST_PATH_MAX = 2048
#: More literals than this go the ordinary way: learning a shape's code costs
#: about the square of its literals (each is found and replaced in the
#: generated source; 35 ms for 20, 6 ms for 6), and real subscriptions that
#: differ only in their constants have a few (a tickertape's has one or two).
MAX_LITERALS = 4
#: shapes remembered (least recently used forgotten first)
MAX_SHAPES = 4096
#: code templates per shape (numeric value classes seen)
MAX_CODES = 16
#: position sets per literal-free subtree of a shape whose nodes are shared
_SHARED = 64

# The grammar's tokens (grammar.lark), in the order lark's basic lexer tries
# them: STRING, NUMBER and NAME (priority 2; their first characters never
# overlap), then the operators, longest first.
_TOKEN = (r"""(?:"(?:[^"\\]|\\[\s\S])*"|'(?:[^'\\]|\\[\s\S])*'"""
          r"""|[0-9][0-9A-Za-z_]*(?:\.(?:[0-9]*[eE][+-][0-9A-Za-z_]*|[0-9A-Za-z_]*))?"""
          r"""|(?:[A-Za-z_]|[^\x00-\x7f\s]|\\[\s\S])(?:[!#-&*+\--Z^-~]|[^\x00-\x7f\s]|\\[\s\S])*"""
          r"""|\|\||\^\^|&&|>>>|>>|<<|==|!=|<=|>=|[!<>|^&+\-*/%~(),])""")
_SPACE = r"[ \t\r\n\f\v]*"
_SPACE_CHARS = " \t\r\n\f\v"
_PAIRS = re.compile(f"({_SPACE})({_TOKEN})")
_LITERAL_FIRST = frozenset("\"'0123456789")

_BUILDER = _Builder()
# key parts of literals: never the text of a token
_STRING_KEY, _INT32_KEY, _INT64_KEY, _REAL_KEY = "\x00s", "\x00i", "\x00l", "\x00r"


_new = object.__new__
_set_kind, _set_children, _set_value, _set_pos = (
    Node.kind.__set__, Node.children.__set__, Node.value.__set__,  # type: ignore[attr-defined]
    Node.pos.__set__)  # type: ignore[attr-defined]


def _node(kind: Kind, children: tuple, value: Any, pos: int) -> Node:
    """``Node(kind, children, value, pos)`` without the frozen dataclass's
    ``__init__`` (an ``object.__setattr__`` per field): half the cost, and
    a registration builds a tree of several nodes."""
    node = _new(Node)
    _set_kind(node, kind)
    _set_children(node, children)
    _set_value(node, value)
    _set_pos(node, pos)
    return node


class _Unusual(Exception):
    """The fast path does not handle this text: take the ordinary way."""


def tokenise(text: str) -> tuple[tuple, list[int], list[str], list[int]] | None:
    """``(shape key, token starts, token texts, literal token indexes)``, or
    None if the text holds something the tokeniser does not know (lark will
    say what is wrong with it)."""
    key: list[str] = []
    starts: list[int] = []
    texts: list[str] = []
    literals: list[int] = []
    pos = 0
    i = 0
    for space, tok in _PAIRS.findall(text):
        pos += len(space)
        starts.append(pos)
        pos += len(tok)
        texts.append(tok)
        c = tok[0]
        if c in _LITERAL_FIRST:
            literals.append(i)
            if c == '"' or c == "'":
                key.append(_STRING_KEY)
            elif tok[-1] in "lL":
                key.append(_INT64_KEY)
            elif "." in tok:
                key.append(_REAL_KEY)
            else:
                key.append(_INT32_KEY)
        else:
            key.append(tok)
        i += 1
    # findall skips what no token matches: then the tokens do not reach the end
    # (the same verdict as matching the text against (space token)+ space)
    if not texts or pos != len(text.rstrip(_SPACE_CHARS)):
        return None
    return tuple(key), starts, texts, literals


def _literal(tok: str, start: int) -> Node:
    """The leaf the parser makes of a literal token (its errors: _Unusual)."""
    if tok[0] in "\"'":
        body = tok[1:-1]
        return _node(Kind.STRING, (), unescape(body) if "\\" in body else body, start)
    try:
        return _BUILDER.number([Token("NUMBER", tok, start_pos=start)]).node
    except SubscriptionError:
        raise _Unusual from None


# -- value classes: what the compiler's code depends on besides the shape ---------------

_EXACT = 2 ** 53


def _number_class(kind: Kind, value: Any) -> tuple:
    """Everything ``compiler.py`` decides from a numeric literal's value (the
    sign, zero, integral reals, magnitudes beyond exact doubles), so that one
    code template serves every value of a class."""
    if kind is Kind.REAL64:
        return ("r", math.copysign(1.0, value) < 0, value == 0, float(value).is_integer(),
                abs(value) < _EXACT)
    return ("i" if kind is Kind.INT32 else "l", value < 0, value == 0, abs(value) > _EXACT)


def _sentinel(kind: Kind, cls: tuple, slot: int, family: int) -> Any:
    """A constant of class ``cls`` whose text appears nowhere else in generated
    code (``family`` gives a second, different set for the cross-check)."""
    if kind is Kind.STRING:
        return f"\x00{family}:{slot}\x00"
    if cls[2]:                          # zero: the class has one value, no parameter
        return -0.0 if kind is Kind.REAL64 and cls[1] else (0.0 if kind is Kind.REAL64 else 0)
    base = 1_000_003_000 + 100_000 * family + 37 * slot
    if kind is Kind.REAL64:
        if cls[4]:
            value = float(base) if cls[3] else base + 0.25
        else:
            value = float(2 ** 60 + 2 ** 12 * (base % 1_000_000))
    elif kind is Kind.INT64 and cls[3]:
        value = 2 ** 60 + base
    else:
        value = base
    return -value if cls[1] else value


class _CodeTemplate:
    """A factory ``make(*params) -> (matches, evaluate)`` for one shape and
    numeric value classes, with the order of its parameters."""

    __slots__ = ("make", "params")

    def __init__(self, make: Callable, params: tuple[tuple[Any, str, str], ...]) -> None:
        self.make = make
        #: (literal slot, form, parameter name); form "v" value, "f" float,
        #: "q" Int64, or for a regex() / wildcard() matcher "r" / "w" with a
        #: tuple of the slots of its patterns
        self.params = params


#: what a matcher parameter is built with, by form
_MATCHER_FORMS = {Kind.FUNC_REGEX: "r", Kind.FUNC_WILDCARD: "w"}
_MATCHER_MAKERS = {"r": regex_matcher, "w": glob_matcher}


def _parameterise(tree: Node, slots: list[Node], values: list[Any]) -> tuple[str, dict,
                                                                             list] | None:
    """Source with sentinel ``values`` in the literal ``slots`` of ``tree``
    replaced by parameter names; None if the code holds objects built from
    the constants (sets, matchers), which a parameter cannot stand for."""
    replace = {id(node): value for node, value in zip(slots, values, strict=True)}

    def swap(node: Node) -> Node:
        if id(node) in replace:
            return Node(node.kind, value=replace[id(node)], pos=node.pos)
        if not node.children:
            return node
        return Node(node.kind, tuple(swap(c) for c in node.children), node.value, node.pos)

    matchers: dict[str, tuple[Kind, tuple]] = {}
    try:
        source, namespace = generate(swap(tree), matchers=matchers)
    except PatternError:
        return None                     # a sentinel is no pattern: built per subscription
    params: list[tuple[Any, str, str]] = []
    string_slots = {value: slot for slot, value in enumerate(values)
                    if slots[slot].kind is Kind.STRING}
    for name, (kind, patterns) in matchers.items():
        # a matcher built from the constants: a parameter, built per subscription
        if not all(p in string_slots for p in patterns):
            return None
        params.append((tuple(string_slots[p] for p in patterns), _MATCHER_FORMS[kind], name))
        del namespace[name]
    leftovers: list[str] = []
    for slot, (node, value) in enumerate(zip(slots, values, strict=True)):
        if node.kind is Kind.STRING:
            pattern = re.escape(repr(value))
            source, count = re.subn(pattern, f"_p{slot}v", source)
            if count:
                params.append((slot, "v", f"_p{slot}v"))
            continue
        if value == 0:
            continue
        leftovers.append(str(abs(int(value))) if node.kind is not Kind.REAL64
                         else repr(abs(value)))
        float_text = repr(float(value))
        source, count = re.subn(r"(?<![\w.])" + re.escape(float_text) + r"(?![\w.])",
                                f"_p{slot}f", source)
        if count:
            params.append((slot, "f", f"_p{slot}f"))
        if node.kind is not Kind.REAL64:
            source, count = re.subn(r"(?<![\w.])" + re.escape(repr(int(value))) + r"(?![\w.])",
                                    f"_p{slot}v", source)
            if count:
                params.append((slot, "v", f"_p{slot}v"))
            for name, obj in list(namespace.items()):
                if type(obj) is Int64 and obj == value:
                    source = re.sub(r"\b" + name + r"\b", f"_p{slot}q", source)
                    del namespace[name]
                    params.append((slot, "q", f"_p{slot}q"))
    if "\\x00" in source or any(text in source for text in leftovers):
        return None                     # a sentinel survived in some other form
    from elvin.subscription.compiler import _BASE_NAMESPACE
    if any(name not in _BASE_NAMESPACE for name in namespace if name != "__builtins__"):
        return None                     # sets, matchers...: built per subscription
    return source, namespace, params


def _code_template(tree: Node, slots: list[Node], classes: list[tuple]) -> _CodeTemplate | None:
    made = []
    for family in (1, 2):
        values = [_sentinel(node.kind, cls, slot, family)
                  for slot, (node, cls) in enumerate(zip(slots, classes, strict=True))]
        made.append(_parameterise(tree, slots, values))
    if made[0] is None or made[1] is None or made[0][0] != made[1][0]:
        return None     # not parameterisable, or the code depends on the values
    source, namespace, params = made[0]
    names = [name for _slot, _form, name in params]
    # the parameters become defaults of the functions, not closure cells: a
    # cell per parameter per subscription would cost 40 bytes each
    defaults = "".join(f", {name}={name}" for name in names)
    source = re.sub(r"^def (\w+)\(a(?=[,)])", lambda m: f"def {m.group(1)}(a{defaults}",
                    source, flags=re.MULTILINE)
    body = "".join("    " + line + "\n" for line in source.splitlines())
    factory = (f"def _make({', '.join(names)}):\n{body}"
               "    return _matches, _evaluate\n")
    exec(compile(factory, "<subscription shape>", "exec"), namespace)  # noqa: S102
    return _CodeTemplate(namespace["_make"], tuple(params))


# -- shapes ---------------------------------------------------------------------------

class _Shape:
    """What one shape's first text taught: how to rebuild the tree, which
    checks depend on the constants, and code templates."""

    __slots__ = ("template", "build", "slot_tokens", "negated", "simple", "checks", "codes",
                 "numeric_slots", "names", "index", "slot_kinds", "layout")

    def __init__(self) -> None:
        self.template: tuple = ()
        self.build: Callable[[list[int], list[Node]], Node] = _no_build
        self.slot_tokens: list[int] = []    # literal slot -> token index of its value
        self.negated: list[bool] = []       # literal slot -> written with a leading '-'
        self.simple = False
        self.checks: list[tuple] = []       # template paths of nodes to re-check
        self.codes: dict[tuple, _CodeTemplate | None] = {}
        self.numeric_slots: list[int] = []
        self.slot_kinds: list[Kind] = []
        self.names: frozenset[str] = frozenset()
        #: (attribute, literal slots) of the index constraint, or None; and
        #: the required names (both decided by the shape: see _index_slots)
        self.index: tuple[tuple[str, tuple[int, ...]] | None, frozenset[str]] | None = None
        #: the _Layout of the first text compiled with this shape
        self.layout: _Layout | None = None


def _no_build(starts: list[int], leaves: list[Node]) -> Node:
    raise _Unusual


def _builder(template: tuple) -> Callable[[list[int], list[Node]], Node]:
    """``build(starts, leaves)``: the template's tree as one generated
    expression (no recursion, positional ``Node`` arguments).

    A subtree holding no literal (a name, ``require(Message)``) is the same
    for every text of the shape up to its tokens' positions, so it is made
    once per set of positions and shared (up to ``_SHARED`` sets per subtree):
    nodes are immutable, and most subscriptions of a shape place it alike."""
    namespace: dict[str, object] = {"Node": _node, "_NAME": Kind.NAME}
    helpers: list[str] = []

    def constant(t: tuple) -> bool:
        return t[0] == "N" or (t[0] == "O" and all(constant(c) for c in t[2]))

    def positions(t: tuple) -> list[int]:
        return [t[2]] if t[0] == "N" else [t[3], *(i for c in t[2] for i in positions(c))]

    def make(t: tuple, inner: Callable[[tuple], str]) -> str:
        if t[0] == "L":
            return f"L[{t[1]}]"
        if t[0] == "N":
            name = f"_n{len(namespace)}"
            namespace[name] = t[1]
            return f"Node(_NAME, (), {name}, s[{t[2]}])"
        kind = f"_k{int(t[1])}"
        namespace[kind] = t[1]
        children = "".join(inner(c) + ", " for c in t[2])
        return f"Node({kind}, ({children}), None, s[{t[3]}])"

    def whole(t: tuple) -> str:         # inside a shared subtree: made as one
        return make(t, whole)

    def expr(t: tuple) -> str:
        if not constant(t):
            return make(t, expr)
        j = len(helpers)
        namespace[f"_c{j}"] = {}
        at = positions(t)
        key = f"s[{at[0]}]" if len(at) == 1 else "(" + "".join(f"s[{i}], " for i in at) + ")"
        helpers.append(f"def _m{j}(s):\n"
                       f"    node = {whole(t)}\n"
                       f"    if len(_c{j}) < {_SHARED}:\n"
                       f"        _c{j}[{key}] = node\n"
                       "    return node\n")
        return f"(_c{j}.get({key}) or _m{j}(s))"

    body = expr(template)
    source = "".join(helpers) + f"def _build(s, L):\n    return {body}\n"
    exec(compile(source, "<subscription shape>", "exec"), namespace)  # noqa: S102
    return namespace["_build"]  # type: ignore[return-value]


def _learn(tree: Node, starts: list[int], texts: list[str], literals: list[int]) -> _Shape:
    """A shape from a parsed and checked tree and its tokens (_Unusual if the
    tree cannot be described by its tokens)."""
    at = {start: i for i, start in enumerate(starts)}
    literal_set = set(literals)
    shape = _Shape()
    slots_by_token: dict[int, int] = {}

    def visit(node: Node) -> tuple:
        ti = at.get(node.pos)
        if ti is None:
            raise _Unusual
        if node.kind in LITERAL_KINDS:
            negated = texts[ti] == "-"
            lit = ti + 1 if negated else ti
            if lit not in literal_set or lit in slots_by_token:
                raise _Unusual
            made = _literal(texts[lit], starts[lit])
            value = -made.value if negated else made.value  # type: ignore[operator]
            if made.kind is not node.kind or type(value) is not type(node.value) \
                    or value != node.value:
                raise _Unusual
            slot = len(shape.slot_tokens)
            shape.slot_kinds.append(node.kind)
            slots_by_token[lit] = slot
            shape.slot_tokens.append(lit)
            shape.negated.append(negated)
            return ("L", slot, ti)
        if node.kind is Kind.NAME:
            return ("N", node.value, ti)
        return ("O", node.kind, tuple(visit(c) for c in node.children), ti)

    shape.template = visit(tree)
    if len(slots_by_token) != len(literals):
        raise _Unusual
    shape.build = _builder(shape.template)
    shape.simple = _no_constant_operands(tree)
    if shape.simple:
        shape.checks = _constant_checks(shape.template, shape.slot_kinds)
        shape.index = _index_slots(shape)
    shape.numeric_slots = [i for i, lit in enumerate(shape.slot_tokens)
                           if texts[lit][0] not in "\"'"]
    shape.names = names_in(tree)
    return shape


def _index_slots(shape: _Shape) -> tuple | None:
    """The index constraint and required names of a shape without constant
    operands. ``analysis._constraint`` takes the attribute and the kind of
    each literal from the shape and only the values from the literals, so it
    is run once on a tree of distinct sentinel literals and the keys it
    returns are traced back to their slots. (When an ``&&`` has two
    constrained sides it keeps the one with fewer distinct values: with
    sentinels, the fewer literals; any side is sound.)"""
    leaves = []
    by_key: dict[object, int] = {}
    for slot, kind in enumerate(shape.slot_kinds):
        value = _sentinel(kind, (None, False, False, False, True) if kind is Kind.REAL64
                          else (None, False, False, False), slot, 3)
        leaf = Node(kind, value=value)
        key = _literal_key(leaf)
        if key in by_key:
            return None
        by_key[key] = slot
        leaves.append(leaf)
    tree = shape.build(_Positions(), leaves)  # type: ignore[arg-type]
    constraint = index_constraint(tree)
    required = required_names(tree)
    if constraint is None:
        return None, required
    attr, keys = constraint
    try:
        slots = tuple(sorted(by_key[k] for k in keys))
    except KeyError:
        return None
    return (attr, slots), required


def _index_hint(shape: _Shape, leaves: list[Node]) -> tuple | None:
    index = shape.index
    if index is None:
        return None
    constraint, required = index
    if constraint is None:
        return index
    attr, slots = constraint
    if len(slots) == 1:
        leaf = leaves[slots[0]]
        # a string is its own index key (analysis.index_value)
        key = leaf.value if leaf.kind is Kind.STRING else _literal_key(leaf)
        return (attr, frozenset((key,))), required
    return (attr, frozenset([_literal_key(leaves[s]) for s in slots])), required


def _no_constant_operands(tree: Node) -> bool:
    """No node has only literal operands: nothing folds, and the checker's
    verdict depends on the literals only through ``_constant_checks``."""
    for node in tree.walk():
        if node.children and all(c.kind in LITERAL_KINDS for c in node.children):
            return False
    return True


def _constant_checks(template: tuple, slot_kinds: list[Kind]) -> list[tuple]:
    """Template paths of the nodes whose check depends on a constant's value:
    numeric literals (ranges) and regex / wildcard calls (their patterns); a
    string literal alone is never wrong."""
    out: list[tuple] = []
    stack: list[tuple[tuple, tuple]] = [(template, ())]
    while stack:
        t, path = stack.pop()
        if t[0] == "O":
            if t[1] in (Kind.FUNC_REGEX, Kind.FUNC_WILDCARD):
                out.append(path)
            for i, child in reversed(list(enumerate(t[2]))):
                stack.append((child, (*path, i)))
        elif t[0] == "L" and slot_kinds[t[1]] is not Kind.STRING:
            out.append(path)
    return out


class Registered:
    """What the router keeps of a compiled subscription: the checked tree,
    ``matches(attrs) -> bool`` and ``evaluate(attrs) -> True/False/None``."""

    __slots__ = ("text", "ast", "matches", "evaluate", "names", "index", "placement")

    def __init__(self, text: str, ast: Node, matches: Callable[[Mapping], bool],
                 evaluate: Callable[[Mapping], bool | None],
                 names: frozenset[str] | None = None, index: tuple | None = None) -> None:
        self.text = text
        self.ast = ast
        self.matches = matches
        self.evaluate = evaluate
        #: the attribute names the tree refers to, when the shape told
        self.names = names
        #: ``(index_constraint(ast), required_names(ast))`` when the shape told
        self.index = index
        #: where the router's index files the tree, when worked out with the
        #: compile (``elvin.router.engine.place``, on the router's worker thread)
        self.placement: Any = None

    def __repr__(self) -> str:
        return f"Registered({self.text!r})"


def compile_text(text: str) -> Registered:
    """The ordinary way, with no cache: parse (lark), check, fold, build.
    Shares no state, so a worker thread may run it (the router compiles
    long expressions so, off its loop)."""
    tree = parse_tree(text)
    check(tree, text)
    matches, evaluate, _source = build(fold(tree))
    checkpoint()
    return Registered(text, tree, matches, evaluate)


# a literal token of each key class, as the tokeniser (``_TOKEN``) takes it: an
# atomic group, so that a match never splits a token the tokeniser would not
_NUMBER = r"(?>[0-9][0-9A-Za-z_]*(?:\.(?:[0-9]*[eE][+-][0-9A-Za-z_]*|[0-9A-Za-z_]*))?)"
_LITERAL_PATTERNS = {
    _INT32_KEY: r"(?![0-9][0-9A-Za-z_]*\.)" + _NUMBER + r"(?<![lL])",
    _INT64_KEY: _NUMBER + r"(?<=[lL])",
    _REAL_KEY: r"(?=[0-9][0-9A-Za-z_]*\.)" + _NUMBER + r"(?<![lL])",
}


class _Layout:
    """One spelling of a shape: its text with each literal a group, matched
    as a whole. A text it matches has exactly the tokens of the text that
    taught it but for the literals' texts (the fixed parts are the same
    characters, and each literal is one token of the same class), so it
    needs no tokenising: its token starts are the taught ones shifted by the
    literals' change in length."""

    __slots__ = ("pattern", "shape", "starts", "literals", "lengths", "after", "_placed")

    def __init__(self, shape: _Shape, text: str, starts: list[int], texts: list[str],
                 literals: list[int], key: tuple) -> None:
        parts = []
        pos = 0
        for lit in literals:
            tok = texts[lit]
            pattern = _LITERAL_PATTERNS.get(key[lit])
            if pattern is None:             # a string: in the quotes it was written with
                q = tok[0]
                pattern = f"{q}(?:[^{q}\\\\]|\\\\[\\s\\S])*{q}"
            parts.append(re.escape(text[pos:starts[lit]]))
            parts.append(f"({pattern})")
            pos = starts[lit] + len(tok)
        parts.append(re.escape(text[pos:]))
        self.pattern = re.compile("".join(parts))
        self.shape = shape
        self.starts = starts
        self.literals = literals
        self.lengths = [len(texts[lit]) for lit in literals]
        #: token index -> how many literals come before it
        self.after = [sum(1 for lit in literals if lit < i) for i in range(len(starts))]
        #: literal lengths -> token starts (a few sets of lengths recur)
        self._placed: dict[tuple[int, ...], list[int]] = {tuple(self.lengths): starts}

    def place(self, groups: tuple[str, ...]) -> tuple[list[int], dict[int, str]]:
        """(token starts, literal token index -> text) of a matching text."""
        lengths = tuple(map(len, groups))
        starts = self._placed.get(lengths)
        if starts is None:
            shifts = [0]
            for length, taught in zip(lengths, self.lengths, strict=True):
                shifts.append(shifts[-1] + length - taught)
            starts = [start + shifts[k] for start, k in zip(self.starts, self.after, strict=True)]
            if len(self._placed) < _SHARED:
                self._placed[lengths] = starts
        return starts, dict(zip(self.literals, groups, strict=True))


#: spellings tried before tokenising (most recently used first)
_RECENT_LAYOUTS = 8


class ShapeCompiler:
    """``compile(text) -> Registered`` (or ``SubscriptionError``), sharing
    parse templates and code across subscriptions of one shape. Sans-IO, not
    thread-safe: use one per thread."""

    def __init__(self, max_shapes: int = MAX_SHAPES) -> None:
        self.max_shapes = max_shapes
        self._shapes: dict[tuple, _Shape | None] = {}
        self._recent: list[_Layout] = []
        self.fast = 0        # texts compiled from a known shape (statistics, tests)
        self.slow = 0        # texts compiled the ordinary way

    def __len__(self) -> int:
        return len(self._shapes)

    def compile(self, text: str) -> Registered:
        if isinstance(text, str) and len(text) <= FAST_PATH_MAX:
            recent = self._recent
            for i, layout in enumerate(recent):
                match = layout.pattern.fullmatch(text)
                if match is not None:
                    if i:
                        recent.insert(0, recent.pop(i))
                    try:
                        return self._known(text, layout.shape, *layout.place(match.groups()))
                    except _Unusual:
                        return self._slow(text)
            tokens = tokenise(text)
            if tokens is not None and len(tokens[3]) <= MAX_LITERALS:
                try:
                    return self._fast(text, *tokens)
                except _Unusual:
                    pass
        return self._slow(text)

    def _slow(self, text: str) -> Registered:
        self.slow += 1
        return compile_text(text)

    def _fast(self, text: str, key: tuple, starts: list[int], texts: list[str],
              literals: list[int]) -> Registered:
        shapes = self._shapes
        shape = shapes.pop(key, False)
        if shape is False:
            tree = parse_tree(text)     # errors: as from the ordinary way
            check(tree, text)
            try:
                shape = _learn(tree, starts, texts, literals)
            except _Unusual:
                shape = None
            if len(shapes) >= self.max_shapes:
                del shapes[next(iter(shapes))]
        shapes[key] = shape             # (re)inserted last: least recently used first
        if shape is None:
            raise _Unusual
        if shape.layout is None:
            try:
                shape.layout = _Layout(shape, text, starts, texts, literals, key)
            except re.error:            # cannot happen; then the shape has no layout
                pass
        if shape.layout is not None and shape.layout not in self._recent:
            self._recent.insert(0, shape.layout)
            del self._recent[_RECENT_LAYOUTS:]
        return self._known(text, shape, starts, texts)

    def _known(self, text: str, shape: _Shape, starts: list[int],
               texts: list[str] | dict[int, str]) -> Registered:
        """A text of a known shape (``texts``: at least its literal tokens)."""
        leaves = []
        for lit, negated in zip(shape.slot_tokens, shape.negated, strict=True):
            leaf = _literal(texts[lit], starts[lit])
            if negated:
                leaf = Node(leaf.kind, value=-leaf.value, pos=starts[lit - 1])  # type: ignore
            leaves.append(leaf)
        tree = shape.build(starts, leaves)
        if shape.simple:
            checker = _Checker(text) if shape.checks else None
            try:
                for path in shape.checks:
                    node = tree
                    for i in path:
                        node = node.children[i]
                    if node.kind in LITERAL_KINDS:
                        checker.leaf(node)
                    else:
                        checker.string_predicate(node)
            except SubscriptionError:
                raise _Unusual from None    # the ordinary way says it as the checker does
            code = self._code(shape, leaves)
            if code is not None:
                args = []
                for slot, form, _name in code.params:
                    if form == "v":
                        args.append(leaves[slot].value)
                    elif form == "f":
                        args.append(float(leaves[slot].value))  # type: ignore[arg-type]
                    elif form == "q":
                        args.append(Int64(leaves[slot].value))  # type: ignore[arg-type]
                    else:
                        args.append(_MATCHER_MAKERS[form](tuple(leaves[s].value
                                                                for s in slot)))
                matches, evaluate = code.make(*args)
                self.fast += 1
                return Registered(text, tree, matches, evaluate, shape.names,
                                  _index_hint(shape, leaves))
        else:
            check(tree, text)
        self.fast += 1
        matches, evaluate, _source = build(fold(tree))
        return Registered(text, tree, matches, evaluate, shape.names)

    def _code(self, shape: _Shape, leaves: list[Node]) -> _CodeTemplate | None:
        classes = tuple(_number_class(leaves[i].kind, leaves[i].value)
                        for i in shape.numeric_slots) if shape.numeric_slots else ()
        codes = shape.codes
        code = codes.get(classes, False)
        if code is not False:
            return code
        if len(codes) >= MAX_CODES:
            return None
        all_classes = []
        numeric = dict(zip(shape.numeric_slots, classes, strict=True))
        for i in range(len(leaves)):
            all_classes.append(numeric.get(i, ()))
        tree = shape.build(_Positions(), leaves)  # type: ignore[arg-type]
        code = codes[classes] = _code_template(tree, leaves, all_classes)
        return code


class _Positions:
    """Any index -> -1: a tree without positions (code does not depend on them)."""

    def __getitem__(self, index: int) -> int:
        return -1
