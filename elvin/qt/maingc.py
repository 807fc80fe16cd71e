"""Python's cyclic garbage collector, run on the Qt main thread only.

Python collects cycles in whichever thread allocates when a threshold is
crossed: an executor thread of the event loop, an embedded router's thread. A
Qt object freed there is destroyed in the wrong thread, its timers cannot be
stopped, and the next timer event crashes the process. ``run_app`` installs
``MainThreadGC`` for every app of the suite.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer

__all__ = ["MainThreadGC"]


class MainThreadGC(QObject):
    """Run Python's cyclic garbage collector on the Qt main thread only.

    Python collects cycles in whichever thread happens to allocate when a
    threshold is crossed: a resolver thread of the event loop, the bundled
    router's thread. A Qt object freed there is destroyed in the wrong thread,
    its timers are not stopped ("Timers cannot be stopped from another
    thread"), and the next timer event crashes the process. This is the
    classic PyQt/PySide recipe: turn automatic collection off and collect
    from a main-thread timer, generation by generation, as the thresholds
    say.
    """

    def __init__(self, interval_ms: int = 500, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.threshold = gc.get_threshold()
        self.collections = 0
        gc.disable()
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self.check)
        self._timer.start()

    def check(self) -> None:
        """Collect the generations whose thresholds were crossed since the last check (the
        timer calls it on the main thread).
        """
        counts = gc.get_count()
        if counts[0] < self.threshold[0]:
            return
        generation = 0
        if counts[1] >= self.threshold[1]:
            generation = 1
            if counts[2] >= self.threshold[2]:
                generation = 2
        gc.collect(generation)
        self.collections += 1

    def stop(self) -> None:
        """Back to automatic collection (after one last main-thread pass)."""
        self._timer.stop()
        gc.collect()
        gc.enable()
