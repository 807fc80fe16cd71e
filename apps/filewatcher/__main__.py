"""``python -m elvin_apps.filewatcher``: the same as the ``filewatcher`` command."""

import sys

from elvin_apps.filewatcher.cli import main

sys.exit(main())
