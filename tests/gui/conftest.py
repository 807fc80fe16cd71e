"""Fixtures for the Qt tests (``router`` and ``make_router`` come from
``tests/conftest.py``).

* ``qt_loop``        a qasync event loop on the Qt event loop, as the apps run
                     (``elvin.qt.run_app``); closed after the test, its pending
                     tasks cancelled first (one left by a passing test fails it).
* ``main_thread_gc`` cyclic garbage collected on the main thread only, as the
                     apps do (``elvin.qt.maingc.MainThreadGC``). Autouse: every
                     Qt test may run beside a router's or a resolver's thread,
                     where a collection would delete Qt objects on the wrong
                     thread.
* ``scroller``       the tickertape's scrolling line (200 px/s, 800 px wide,
                     links not opened) over the test module's ``model``.
"""

from __future__ import annotations

import asyncio
import gc

import pytest


@pytest.fixture(autouse=True)
def main_thread_gc():
    """A Qt object collected in the router's or a resolver's thread would
    leave a dangling timer behind: collect before and after the test, never
    during it."""
    gc.collect()
    gc.disable()
    yield
    gc.collect()
    gc.enable()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Remember whether the test itself failed (for ``qt_loop``)."""
    report = yield
    if report.when == "call":
        item.elvin_call_failed = report.failed
    return report


@pytest.fixture
def qt_loop(qapp, request):
    """A qasync loop for the test. Tasks still pending at the end are
    cancelled before it closes (``elvin.qt.cancel_pending``, as ``run_app``
    does); a test that passed and left one running fails, since every task
    needs an owner that ends it (a failed test's leftovers are only
    cancelled: its own failure is the news)."""
    import qasync

    from elvin.qt.app import cancel_pending
    loop = qasync.QEventLoop(qapp, already_running=False)
    asyncio.set_event_loop(loop)
    yield loop
    try:
        left = cancel_pending(loop)
    finally:
        loop.close()
        asyncio.set_event_loop(None)
    if left and not getattr(request.node, "elvin_call_failed", True):
        pytest.fail(f"tasks left running by the test: {left}")


def leave(widget) -> None:
    """Tell ``widget`` the pointer left it (the offscreen pointer starts over it)."""
    from PySide6.QtCore import QEvent
    from PySide6.QtWidgets import QApplication

    QApplication.sendEvent(widget, QEvent(QEvent.Type.Leave))


@pytest.fixture
def scroller(qtbot, model):
    from elvin_apps.tickertape.scroller import ScrollerWidget

    widget = ScrollerWidget(model, speed=200)
    widget.open_urls = False
    widget.resize(800, widget.sizeHint().height())
    qtbot.addWidget(widget)
    widget.show()
    qtbot.waitExposed(widget)
    qtbot.wait(20)
    leave(widget)
    return widget
