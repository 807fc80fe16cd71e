"""The plumbing of the suite's long-running programs, apart from the public API.

What a daemon or a desktop app needs of its host and nobody else does: telling
systemd how it is doing (``sdnotify``), reacting to SIGHUP and SIGTERM
(``daemon_control``), its state directory (``statedir``), the XDG directories
(``xdg``), whether Qt can show a window (``display_check``), the named points
where a crash test kills it (``crashpoints``), and ``make run`` (``run``).
The library's users import ``elvin`` (``keys``, ``values``, ``errors``,
``sync``...), never this package.
"""
