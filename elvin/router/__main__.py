"""``python -m elvin.router`` runs ``elvind``."""

import sys

from elvin.router.cli import main

sys.exit(main())
