"""Desktop applications of the Elvin suite, installed as ``elvin_apps``."""
