"""``python -m elvin_apps.biff``: the coffee biff app."""

from elvin_apps.biff.cli import entry

entry()
