"""filewatcher: a daemon that emits an Elvin notification when a watched file
changes, watching only what some subscription asks for (quench).

Modules, one job each:

* ``attributes``  the notification attribute set (names, types, version)
* ``config``      TOML file + command-line settings, validated
* ``pathset``     subscription AST -> the paths to watch (``Interest``), within roots
* ``watches``     reference-counted watchdog observers, polling fallback, snapshots
* ``coalesce``    burst coalescing (debounce) of raw file-system events
* ``status``      the status file the daemon writes and ``filewatcher status`` prints
* ``daemon``      wires the above to an ``elvin.client`` connection
* ``cli``         the ``filewatcher`` command
"""

__version__ = "0.1.0"
