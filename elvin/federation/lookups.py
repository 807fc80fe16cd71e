"""The DNS lookups that matching a dialling router against host names takes,
bounded so that routers not yet admitted cannot tie up the router.

Anyone who can reach a federation listener can send a FedConnRqst, and one
from an address outside a name-based ``hosts`` rule costs a reverse lookup
(and forward ones). The system resolver blocks a thread for as long as it
takes, and giving up on the wait does not give the thread back. Run on the
loop's default executor, a handful of peers whose reverse zones never answer
would fill it, and with it everything else that uses it (asyncio's
``getaddrinfo`` for the federation's own dials among them). So lookups here:

* run on a small executor of their own (``MAX_LOOKUPS`` threads);
* are bounded: a lookup that would need a thread while all are busy --
  counted until the thread really returns, not until the wait is given
  up -- raises ``ResolverBusy`` at once (the peer is refused, saying so)
  rather than queueing without bound;
* are shared: peers asking the same question while it is being asked wait
  for the one answer;
* are remembered for a short while, answers (``POSITIVE_TTL``) and failures
  (``NEGATIVE_TTL``) both, so a peer redialling in a loop costs one lookup
  a minute, not one a dial.

The blocking functions are ``socket.gethostbyaddr`` and ``socket.getaddrinfo``
looked up when called (or the ones given), the seam tests use.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from elvin.federation.hosts import Resolver, ResolverBusy

__all__ = ["MAX_LOOKUPS", "NEGATIVE_TTL", "POSITIVE_TTL", "HostLookups"]

#: threads, and so lookups under way at once
MAX_LOOKUPS = 4
#: seconds an answer, and a failure, is remembered
POSITIVE_TTL = 60.0
NEGATIVE_TTL = 10.0
#: answers remembered at most (the oldest go first)
MAX_REMEMBERED = 4096


def _reverse(address: str) -> tuple[str, ...]:
    host, aliases, _ = socket.gethostbyaddr(address)
    return (host, *aliases)


def _forward(name: str) -> tuple[str, ...]:
    infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    # an IPv4 or IPv6 sockaddr starts with the address text; only a Python built
    # without IPv6 hands back AF_INET6 as (int, bytes), which names no peer address
    hosts = (info[4][0] for info in infos)
    return tuple(dict.fromkeys(host for host in hosts if isinstance(host, str)))


class HostLookups(Resolver):
    """A ``Resolver`` over the system's resolver, bounded, shared and
    cached (see the module). ``timeout()`` is how long one wait lasts (the
    federation's ``connect_timeout``); ``close`` lets the threads go."""

    def __init__(self, timeout: Callable[[], float],
                 reverse: Callable[[str], Sequence[str]] = _reverse,
                 forward: Callable[[str], Sequence[str]] = _forward,
                 max_lookups: int = MAX_LOOKUPS) -> None:
        super().__init__(self._addresses, self._names)
        self._timeout = timeout
        self._reverse_fn = reverse
        self._forward_fn = forward
        self.max_lookups = max_lookups
        self._executor: ThreadPoolExecutor | None = None
        #: questions being asked: (kind, text) -> the future of the answer
        self._asking: dict[tuple[str, str], asyncio.Future] = {}
        #: (kind, text) -> (expiry on the monotonic clock, answer or OSError)
        self._remembered: dict[tuple[str, str], tuple[float, Any]] = {}
        self.lookups = 0               # questions asked of the system resolver
        self.cache_hits = 0
        self.refused = 0               # not asked: every thread busy

    @property
    def busy(self) -> int:
        """Lookups whose thread has not returned yet."""
        return len(self._asking)

    async def _addresses(self, name: str) -> Sequence[str]:
        return await self._ask("forward", name.lower().rstrip("."), self._forward_fn)

    async def _names(self, address: str) -> Sequence[str]:
        return await self._ask("reverse", address, self._reverse_fn)

    async def _ask(self, kind: str, text: str, fn: Callable[[str], Sequence[str]],
                   ) -> Sequence[str]:
        key = (kind, text)
        entry = self._recall(key)
        if entry is not None:
            self.cache_hits += 1
            result = entry[1]
        else:
            future = self._asking.get(key) or self._start(key, fn)
            try:
                result = await asyncio.wait_for(asyncio.shield(future), self._timeout())
            except TimeoutError:
                raise OSError(f"no answer to the {kind} lookup of {text} in time") from None
        if isinstance(result, OSError):
            raise OSError(*result.args)
        return result

    def _recall(self, key: tuple[str, str]) -> tuple[float, Any] | None:
        entry = self._remembered.get(key)
        if entry is None:
            return None
        if entry[0] <= time.monotonic():
            del self._remembered[key]
            return None
        return entry

    def _start(self, key: tuple[str, str], fn: Callable[[str], Sequence[str]],
               ) -> asyncio.Future:
        if len(self._asking) >= self.max_lookups:
            self.refused += 1
            raise ResolverBusy(f"{len(self._asking)} host-name lookups already under way "
                              "(the most allowed at once)")
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.max_lookups,
                                                thread_name_prefix="federation-dns")
        self.lookups += 1
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor, _outcome, fn, key[1])
        self._asking[key] = future
        future.add_done_callback(lambda done: self._answered(key, done))
        return future

    def _answered(self, key: tuple[str, str], future: asyncio.Future) -> None:
        """On the loop, once the thread returned (however long after the
        waiters gave up): the thread is free, the answer remembered."""
        if self._asking.get(key) is future:
            del self._asking[key]
        if future.cancelled():
            return
        result = future.result()
        ttl = NEGATIVE_TTL if isinstance(result, BaseException) else POSITIVE_TTL
        if len(self._remembered) >= MAX_REMEMBERED:
            for old in list(self._remembered)[:MAX_REMEMBERED // 4]:
                del self._remembered[old]
        self._remembered[key] = (time.monotonic() + ttl, result)

    def close(self) -> None:
        """Stop taking lookups; threads still blocked finish on their own."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        self._asking.clear()


def _outcome(fn: Callable[[str], Sequence[str]], text: str) -> Any:
    """``fn(text)`` as a tuple, or the ``OSError`` it raised (the thread's
    side: a failure is an answer to remember, not an error)."""
    try:
        return tuple(fn(text))
    except OSError as exc:
        return exc
    except (UnicodeError, ValueError) as exc:     # a name the resolver cannot take
        return OSError(str(exc))
