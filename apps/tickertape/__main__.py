"""``python -m elvin_apps.tickertape``: the same as the ``tickertape`` command."""

from elvin_apps.launch import tickertape

tickertape()
