"""A router in a background thread, for tests and for applications that want
a private router.

    with EmbeddedRouter() as router:          # 127.0.0.1, a free port
        connect(router.url)                   # "elvin://127.0.0.1:PORT"
        router.restart()                      # stop, then start on the SAME port
        router.restart(quench=False)          # ... with other settings

``EmbeddedRouter(port=0, host="127.0.0.1", config=None, **settings)``:
``settings`` are ``RouterConfig`` fields (e.g. ``stats_interval=0.2``;
``quench=False`` emulates a router without quench, as Avis; or
``federation=FederationConfig(...)``: ``federation_urls`` then gives the
bound ``ewaf://`` URLs, and ``restart()`` keeps their ports too). The
router runs on its own event loop in a daemon thread; ``start()`` returns
once it is listening (or raises what stopped it), ``stop()`` once it has
sent Disconn to every client and closed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from collections.abc import Callable
from typing import Any

from elvin.router.config import RouterConfig
from elvin.router.server import Router

log = logging.getLogger("elvin.router")

__all__ = ["EmbeddedRouter"]


def _new_loop(use_uvloop: bool) -> asyncio.AbstractEventLoop:
    if use_uvloop:
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


class EmbeddedRouter:
    def __init__(self, port: int = 0, host: str = "127.0.0.1",
                 config: RouterConfig | None = None, **settings: Any) -> None:
        self.host = host
        self._requested_port = port
        # a private router is not advertised unless asked (discovery=True or a
        # config that says so): tests and apps' bundled routers stay private
        base = config if config is not None else RouterConfig(discovery=False)
        self.config = dataclasses.replace(base, **settings) if settings else base
        self.router: Router | None = None
        self.port: int | None = None
        #: the bound federation listen URLs (ewaf://...), once started
        self.federation_urls: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # -- addresses --------------------------------------------------------------------
    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("the embedded router is not started")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"elvin://{host}:{self.port}"

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self._loop

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- lifecycle -----------------------------------------------------------------------
    def start(self, timeout: float = 10.0) -> EmbeddedRouter:
        if self.running:
            return self
        port = self.port if self.port is not None else self._requested_port
        host = f"[{self.host}]" if ":" in self.host else self.host
        config = dataclasses.replace(self.config, listen=[f"elvin://{host}:{port}"])
        if config.federation is not None and self.federation_urls:
            # restart: listen for federation on the ports bound the first time
            config = dataclasses.replace(config, federation=dataclasses.replace(
                config.federation, listen=list(self.federation_urls)))
        started = threading.Event()
        failure: list[BaseException] = []
        loop = _new_loop(config.use_uvloop)
        router = Router(config)

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(router.start())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                failure.append(exc)
                started.set()
                loop.close()
                return
            started.set()
            try:
                loop.run_until_complete(router.serve_forever())
            finally:
                try:
                    pending = asyncio.all_tasks(loop)
                    for task in pending:
                        task.cancel()
                    if pending:
                        loop.run_until_complete(
                            asyncio.gather(*pending, return_exceptions=True))
                finally:
                    loop.close()

        thread = threading.Thread(target=run, name=f"elvind-embedded-{port}", daemon=True)
        thread.start()
        if not started.wait(timeout):
            raise RuntimeError("the embedded router did not start in time")
        if failure:
            thread.join(timeout)
            raise failure[0]
        self._loop, self._thread, self.router = loop, thread, router
        self.port = router.ports[0]
        if router.federation is not None:
            self.federation_urls = router.federation.urls
        return self

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float = 10.0) -> Any:
        """Run ``fn(*args)`` on the router's loop and return its result."""
        if self._loop is None:
            raise RuntimeError("the embedded router is not started")

        async def run() -> Any:
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        loop, thread, router = self._loop, self._thread, self.router
        if loop is None or thread is None or router is None:
            return
        if thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(router.stop(), loop).result(timeout)
            except Exception:  # stopping: the thread is joined anyway
                log.debug("embedded router: stop failed", exc_info=True)
            thread.join(timeout)
        self._loop = self._thread = None

    def restart(self, timeout: float = 10.0, **settings: Any) -> EmbeddedRouter:
        """Stop, then start again on the same port; ``settings`` (RouterConfig
        fields) change the configuration first, e.g. ``restart(quench=False)``
        to find out how clients cope with a different router there."""
        self.stop(timeout)
        if settings:
            self.config = dataclasses.replace(self.config, **settings)
        return self.start(timeout)

    def __enter__(self) -> EmbeddedRouter:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = self.url if self.port is not None else "not started"
        return f"<EmbeddedRouter {state}{'' if self.running else ' (stopped)'}>"
