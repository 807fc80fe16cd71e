"""The mobility proxy inside ``elvind`` (``elvind --mobility``), as a service.

The proxy (``elvin.mobility.proxy``) is a plain client of a router and
knows nothing of routers' insides; this module is the router's side of
the hook-up. It starts a proxy as an internal client over an in-process
channel (``elvin.router.localchannel``), whose one hook makes its buffers
safe on disk before the router answers anyone, and keeps those buffers in
the router's state directory. It lives with the router, not with the
proxy, so that the imports run one way: the router uses mobility, never
the other way round.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

from elvin.errors import RouterStartError
from elvin.protocol import parse_uri
from elvin.router.localchannel import connect_local
from elvin.router.services import StartPoint, StopPoint

if TYPE_CHECKING:
    from elvin.daemon.statedir import StateDir
    from elvin.mobility.proxy import MobilityProxy
    from elvin.router.config import RouterConfig
    from elvin.router.session import ChannelHost

__all__ = ["MobilityService", "start_in_router"]

log = logging.getLogger("elvin.mobility")


async def start_in_router(router: ChannelHost, config: RouterConfig, urls: list[str],
                          state_dir: StateDir | None,
                          interest: Callable[[], Sequence[str]] | None = None,
                          unreachable: Callable[[float], Collection[str]] | None = None
                          ) -> MobilityProxy:
    """Start a proxy as an internal client of ``router``, whose listeners
    (``urls``) are bound, through the public client API over an in-process
    channel. It answers to every URL the router listens on. Its key comes
    from the router's ``mobility_key_file`` (``load_key_file``), else from its
    state, else it is random. With the router's state directory it keeps its
    buffers there (``MobilityStore``), and takes them back now. ``interest``:
    the router's federation peers that may not know yet what its
    subscribers want now (``FederationService.interest_pending``), which
    move-out and move-in replies wait for; ``unreachable``: those of them
    down for long enough that waiting cannot help
    (``FederationService.interest_unreachable``)."""
    # imported only when mobility is on: a router without it loads none of it
    from elvin.mobility.proxy import MobilityProxy, ProxyConfig, load_key_file
    from elvin.mobility.store import MobilityStore

    plain = [u for u in urls if "/ssl," not in u]
    if not plain:
        raise RuntimeError("the mobility proxy needs a plain TCP listen URI")
    aliases = set(urls)
    url = plain[0]
    port = parse_uri(url).port
    for host in ("0.0.0.0", "[::]"):
        if f"//{host}:" in url:
            url = url.replace(f"//{host}:", "//127.0.0.1:")
    for host in ("127.0.0.1", "localhost"):
        aliases.add(f"elvin://{host}:{port}")
    key_file = config.mobility_key_file
    proxy_config = ProxyConfig(id=url, aliases=tuple(aliases),
                               quota=config.mobility_quota, expiry=config.mobility_expiry,
                               key=load_key_file(key_file) if key_file else None,
                               announce_wait=config.mobility_announce_wait)
    store = None
    if state_dir is not None:
        store = MobilityStore.open(state_dir.path, reset=config.state_reset)
    else:
        log.info("mobility buffers are in memory only (no --state-dir): a restart of the "
                 "router loses them")
    proxy = MobilityProxy(url, proxy_config, store=store,
                          connector=lambda: connect_local(router, url), interest=interest,
                          unreachable=unreachable)
    try:
        return await proxy.start()
    except BaseException:
        if store is not None:
            store.close()
        raise


class MobilityService:
    """``elvind --mobility``: a proxy that starts once the listeners are bound
    but before they accept, so that it has its subscriptions back before
    anyone can publish, and stops after every other session is gone, since
    it buffers for moved-out clients until nobody can publish."""

    name = "mobility proxy"
    starts = StartPoint.BOUND
    stops = StopPoint.AFTER_LAST_SESSION
    reloads: frozenset[str] = frozenset()

    def __init__(self, router: ChannelHost, config: RouterConfig,
                 urls: Callable[[], list[str]],
                 state_dir: Callable[[], StateDir | None],
                 interest: Callable[[], Sequence[str]] | None = None,
                 unreachable: Callable[[float], Collection[str]] | None = None) -> None:
        self._router = router
        self._interest = interest
        self._unreachable = unreachable
        self._config = config
        self._urls = urls
        self._state_dir = state_dir
        #: the running proxy, else None
        self.proxy: MobilityProxy | None = None

    async def start(self) -> None:
        if not self._config.mobility:
            return
        from elvin.daemon.statedir import StateError
        try:
            self.proxy = await start_in_router(self._router, self._config, self._urls(),
                                               self._state_dir(), self._interest,
                                               self._unreachable)
        except StateError:
            raise                       # (it names the state directory and the way out)
        except Exception as exc:  # noqa: BLE001 - re-raised as RouterStartError
            raise RouterStartError(f"cannot start the mobility proxy: {exc}") from None

    async def stop(self) -> None:
        proxy, self.proxy = self.proxy, None
        if proxy is not None:
            await proxy.stop()

    async def reconfigure(self, config: RouterConfig) -> str | None:
        """Nothing: every mobility setting needs a restart (none is reloadable),
        so a reload names them instead."""
        return None
