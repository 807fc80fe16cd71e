"""``python -m elvin_apps.console``: the same as the ``elvin-console`` command."""

from elvin_apps.launch import console

console()
