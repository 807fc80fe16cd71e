"""``python -m elvin_apps.biff``: the coffee biff app."""

from elvin_apps.launch import biff

biff()
