"""``python -m elvin.pipeline`` = ``elvin-pipeline``."""

from elvin.pipeline.cli import entry

entry()
