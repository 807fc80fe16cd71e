"""Micro-benchmark of the subscription language.

Prints evaluations per second of the compiled tickertape subscription
``require(Message) && fold-case(Group) == "chat" || Group == "elvin"`` against
typical tickertape notifications (matching on each branch, and not
matching), for ``matches`` (the router's question) and ``evaluate`` (the
exact three-valued result), numeric comparisons (reals are ordered as Java's
``Double.compareTo``: the written-out tests of a literal comparison), and the
mean parse and parse+compile time over a few hundred typical subscriptions.
Run: .venv/bin/python bench/subscription_eval.py
"""

from __future__ import annotations

import random
import time

from elvin.subscription import compile, parse
from elvin.values import Int64

TICKERTAPE = 'require(Message) && fold-case(Group) == "chat" || Group == "elvin"'


def notification(group: str) -> dict:
    return {
        "Group": group,
        "From": "alice@example.org",
        "Message": "Has anyone seen the coffee biff today? The pot is empty again.",
        "Timeout": 10,
        "Message-Id": "07cf0b15003409-5i3N7XDKbPVaQ-28cf-22",
    }


NOTIFICATIONS = {
    "match (fold-case branch)": notification("Chat"),
    "match (== branch)": notification("elvin"),
    "no match": notification("elvin-dev"),
    "no match (Group is int32)": {**notification("x"), "Group": 7},
    "no match (no Message/Group)": {"From": "bob", "Timeout": 10, "Id": Int64(5)},
}

#: numeric subscriptions: (expression, notification)
NUMERIC = [
    ("Price > 10.5", {"Symbol": "ACME", "Price": 12.25}),
    ("Price > 10.5", {"Symbol": "ACME", "Price": 9}),
    ("Load > 0", {"Load": 0.75}),
    ("Load > 0", {"Load": 3}),
    ("Load == 0.0", {"Load": 0.75}),
    ("Count >= 100 && Count < 200", {"Count": Int64(150)}),
    ("equals(Port, 80, 443, 8080.0)", {"Port": 443}),
    ("Used * 100 / Total > 90", {"Used": 95.0, "Total": 100}),
]

TEMPLATES = [
    'require(Message) && fold-case(Group) == "{g}" || Group == "{h}"',
    '(TICKERTAPE == "{g}" || TICKERTAPE == "{h}") && ! regex(USER, "[Ss]egall")',
    'wildcard(TICKERTEXT, "*[Hh]ello*") && TIMEOUT > {n}',
    "(require (Message) && require (From) && (fold-case (Group) == \"{g}@home\" || "
    "fold-case (From) == \"{h}@home\")) || (require (TICKERTEXT) && require (USER) && "
    "fold-case (TICKERTAPE) == \"{g}@home\" || fold-case (USER) == \"{h}@home\")",
    "Presence-Protocol < {n} && string (Groups) && string (User) && "
    "equals (Presence-Info, 'initial', 'update', 'xyz') && fold-case (User) != \"{g}@home\" && "
    "(contains (fold-case (Groups), \"|{g}|\", \"|elvin|\", \"|{h}|\") || "
    "(equals (fold-case (User), \"foobar@dsto\", \"{h}@home\")))",
    'equals(Group, "{g}", "{h}", "elvin", "chat")',
    'Group == "{g}" && Timeout >= {n} && size(Message) < 1024',
    'begins-with(Message-Id, "{g}") || ends-with(From, "@{h}.org")',
    'load * 100 > {n} && host == "{g}" && int32(cpus)',
    'regex(Subject, "^(Re|Fwd): .*{g}") && !contains(fold-case(From), "{h}")',
]


def rate(fn, arg, seconds: float = 0.2, repeats: int = 5) -> float:
    """Best of ``repeats`` runs of about ``seconds`` each (the machine is shared)."""
    best = 0.0
    batch = 10000
    for _ in range(repeats):
        n = 0
        start = time.perf_counter()
        while True:
            for _ in range(batch):
                fn(arg)
            n += batch
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                break
        best = max(best, n / elapsed)
    return best


def typical_expressions(count: int = 300) -> list[str]:
    rnd = random.Random(42)
    words = ["chat", "elvin", "dstc", "tickertape", "home", "dev", "lunch", "ops"]
    out = []
    for i in range(count):
        template = TEMPLATES[i % len(TEMPLATES)]
        out.append(template.format(g=rnd.choice(words) + str(rnd.randrange(100)),
                                   h=rnd.choice(words), n=rnd.randrange(1, 5000)))
    return out


def main() -> None:
    sub = compile(TICKERTAPE)
    print(f"subscription: {TICKERTAPE}")
    for question in ("matches", "evaluate"):
        fn = getattr(sub, question)
        for label, attrs in NOTIFICATIONS.items():
            per_second = rate(fn, attrs)
            print(f"  {question:8} {label:30} {per_second:>12,.0f} evaluations/s "
                  f"({1e9 / per_second:5.0f} ns) -> {fn(attrs)}")

    print("numeric comparisons (matches):")
    for text, attrs in NUMERIC:
        fn = compile(text).matches
        per_second = rate(fn, attrs)
        shown = ", ".join(f"{k}={v!r}" for k, v in attrs.items())
        print(f"  {text:32} {shown:28} {per_second:>12,.0f} evaluations/s "
              f"({1e9 / per_second:5.0f} ns) -> {fn(attrs)}")

    expressions = typical_expressions()
    compile(expressions[0])   # builds the LALR tables once
    for label, fn in (("parse", parse), ("parse+compile", compile)):
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            for text in expressions:
                fn(text)
            best = min(best, time.perf_counter() - start)
        print(f"  {label:14} {best / len(expressions) * 1e6:8.1f} us per expression "
              f"(mean over {len(expressions)} typical subscriptions)")


if __name__ == "__main__":
    main()
