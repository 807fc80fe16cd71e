"""What the examples share: the router's URL from ``--elvin`` or ``ELVIN_URL``."""

from __future__ import annotations

import argparse
import os

DEFAULT_URL = "elvin://127.0.0.1:2917"


def parser(description: str) -> argparse.ArgumentParser:
    """An argument parser with ``--elvin URL``."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--elvin", "-e", metavar="URL",
                   default=os.environ.get("ELVIN_URL", DEFAULT_URL),
                   help="the router (default: $ELVIN_URL, else %(default)s)")
    return p
