"""``python -m elvin_apps.newswatcher``: the same as the ``newswatcher`` command."""

from elvin_apps.launch import newswatcher

newswatcher()
