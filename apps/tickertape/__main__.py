"""``python -m elvin_apps.tickertape``: the same as the ``tickertape`` command."""

from elvin_apps.tickertape.cli import entry

entry()
