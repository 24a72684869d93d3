"""Idle strategies: what a task does when it has nothing to do (no data, no space).

Each strategy's `idle(attempt, park)` is awaited with the number of consecutive idle attempts
(0 first) and `park(timeout)`, a coroutine that parks the task until a writer, the conductor or
the driver notifies it (or `timeout` seconds pass). Work found resets `attempt` to 0.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

Park = Callable[[float], Awaitable[None]]


class IdleStrategy(Protocol):
    async def idle(self, attempt: int, park: Park) -> None: ...


class BusySpinIdleStrategy:
    """Spin: return at once, yielding to the event loop only every `yield_every` attempts so that
    other tasks (keepalives, an embedded driver, the other end in this process) still run.
    Lowest latency; burns a core. Use in a process dedicated to one stream."""

    def __init__(self, yield_every: int = 1000):
        self.yield_every = yield_every

    async def idle(self, attempt: int, park: Park) -> None:
        """Return at once; yield to the loop every `yield_every` attempts."""
        if attempt % self.yield_every == self.yield_every - 1:
            await asyncio.sleep(0)


class YieldingIdleStrategy:
    """Yield to the event loop on every attempt: low latency, still a busy core."""

    async def idle(self, attempt: int, park: Park) -> None:
        """Yield to the loop once."""
        await asyncio.sleep(0)


class BackoffIdleStrategy:
    """Spin, then yield, then sleep for exponentially longer (up to `max_park_s`); needs no
    notification, wakes up late by up to `max_park_s`."""

    def __init__(
        self,
        max_spins: int = 10,
        max_yields: int = 20,
        min_park_s: float = 1e-4,
        max_park_s: float = 1e-3,
    ):
        self.max_spins = max_spins
        self.max_yields = max_yields
        self.min_park_s = min_park_s
        self.max_park_s = max_park_s

    async def idle(self, attempt: int, park: Park) -> None:
        """Spin, then yield, then sleep for `attempt`'s back-off period."""
        if attempt < self.max_spins:
            return
        if attempt < self.max_spins + self.max_yields:
            await asyncio.sleep(0)
            return
        parks = attempt - self.max_spins - self.max_yields
        await asyncio.sleep(min(self.max_park_s, self.min_park_s * (2 ** min(parks, 30))))


class NotifyingIdleStrategy:
    """The default: yield to the loop a few dozen times (tens of microseconds, so a reply that is
    on its way is caught without a system call), then park until notified. Writers (in any
    process) wake a parked task only when one is parked, so an idle task costs nothing;
    `fallback_s` bounds the wait should a notification be missed (e.g. more parked processes
    than a log's wake slots)."""

    def __init__(self, max_yields: int = 50, fallback_s: float = 0.1):
        self.max_yields = max_yields
        self.fallback_s = fallback_s

    async def idle(self, attempt: int, park: Park) -> None:
        """Yield for the first `max_yields` attempts, then `park` until notified (at most
        `fallback_s`)."""
        if attempt < self.max_yields:
            await asyncio.sleep(0)
        else:
            await park(self.fallback_s)


DEFAULT_IDLE_STRATEGY = NotifyingIdleStrategy()
