"""``python -m elvin_apps.newswatcher``: the same as the ``newswatcher`` command."""

from elvin_apps.newswatcher.cli import entry

entry()
