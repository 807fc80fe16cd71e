"""``python -m elvin_apps.filewatcher``: the same as the ``filewatcher`` command."""

from elvin_apps.launch import filewatcher

filewatcher()
