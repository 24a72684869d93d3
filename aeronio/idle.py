"""Idle strategies: what a task does when it has nothing to do (no data, no space).

Each strategy's `idle(attempt, park)` is awaited with the number of consecutive idle attempts
(0 first) and `park(timeout)`, a coroutine that parks the task until a writer, the conductor or
the driver notifies it (or `timeout` seconds pass). Work found resets `attempt` to 0.
"""

from __future__ import annotations

import asyncio
import math
import numbers
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from aeronio.errors import ConfigurationError

Park = Callable[[float], Awaitable[None]]


def check_count(value: object, name: str, low: int) -> None:
    """An integer (any `numbers.Integral`, numpy's too, not a `bool`) of at least `low`."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < low:
        raise ConfigurationError(f"{name} {value!r} must be an integer of at least {low}")


def check_seconds(value: object, name: str, zero: bool = False) -> None:
    """A finite number of seconds (any `numbers.Real`, as `deadline` takes, not a bool), above 0
    (or 0, `zero`)."""
    if (
        not isinstance(value, numbers.Real)
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value < 0
        or (value == 0 and not zero)
    ):
        least = "at least 0" if zero else "above 0"
        raise ConfigurationError(f"{name} {value!r} must be a finite number of seconds {least}")


def deadline(timeout: float | None) -> float | None:
    """The monotonic time `timeout` seconds from now (None: none); due at once for 0 or less.
    ConfigurationError for a timeout that is no number, or NaN (it never comes due)."""
    if timeout is None:
        return None
    if not isinstance(timeout, numbers.Real) or isinstance(timeout, bool) or math.isnan(timeout):
        raise ConfigurationError(f"timeout {timeout!r} must be a number of seconds or None")
    return time.monotonic() + timeout


class IdleStrategy(Protocol):
    async def idle(self, attempt: int, park: Park) -> None: ...


class BusySpinIdleStrategy:
    """Spin: return at once, yielding to the event loop only every `yield_every` attempts so that
    other tasks (keepalives, an embedded driver, the other end in this process) still run.
    Lowest latency; burns a core. Use in a process dedicated to one stream."""

    def __init__(self, yield_every: int = 1000):
        check_count(yield_every, "yield_every", 1)  # 0 or less: never a yield, a frozen loop
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
        check_count(max_spins, "max_spins", 0)
        check_count(max_yields, "max_yields", 0)
        check_seconds(min_park_s, "min_park_s", zero=True)
        check_seconds(max_park_s, "max_park_s", zero=True)
        if min_park_s > max_park_s:
            raise ConfigurationError(f"min_park_s {min_park_s} is above max_park_s {max_park_s}")
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
        check_count(max_yields, "max_yields", 0)
        check_seconds(fallback_s, "fallback_s")
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
