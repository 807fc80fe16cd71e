"""Console-script entry points of the desktop apps (``pyproject.toml``).

Each checks that its extra is installed before it imports anything of the
app, so that ``tickertape`` on a core-only install says
``tickertape needs the GUI libraries: pip install 'elvin-suite[gui]'``
instead of an ImportError (``elvin.extras``).
"""

from __future__ import annotations

from elvin.extras import launcher

tickertape = launcher("tickertape", "gui", "elvin_apps.tickertape.cli:main")
biff = launcher("biff", "gui", "elvin_apps.biff.cli:main")
console = launcher("elvin-console", "gui", "elvin_apps.console.cli:main")
# the watchers are daemons without Qt: only their own library is needed
newswatcher = launcher("newswatcher", "apps", "elvin_apps.newswatcher.cli:main",
                       modules=("feedparser",))
filewatcher = launcher("filewatcher", "apps", "elvin_apps.filewatcher.cli:main",
                       modules=("watchdog",))
