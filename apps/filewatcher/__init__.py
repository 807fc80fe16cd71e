"""filewatcher: a daemon that emits an Elvin notification when a watched file
changes, watching only what some subscription asks for (quench).

Modules, one job each:

* ``attributes``  the notification attribute set (names, types, version)
* ``config``      TOML file + command-line settings, validated
* ``pathset``     subscription AST -> the paths to watch (``Interest``), within roots
* ``watches``     reference-counted watchdog observers, polling fallback, snapshots
* ``coalesce``    burst coalescing (debounce) of raw file-system events
* ``status``      the status file the daemon writes and ``filewatcher status`` prints
* ``link``        the router connection and its quench
* ``grace``       the watches kept through a reconnection
* ``reconcile``   what the subscriptions want -> what is watched
* ``intake``      file-system events -> notifications
* ``outbox``      notifications -> the router, and what became of them
* ``rescan``      the changes live events missed, from the snapshots
* ``report``      the status file's content, and when it is written
* ``chores``      re-plan and re-scan requests between the parts
* ``daemon``      ``FileWatcher``: the parts above, composed
* ``cli``         the ``filewatcher`` command
"""

from elvin._version import __version__ as __version__
