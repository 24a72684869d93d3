"""In-process wake-ups for one log: tasks park instead of spinning, writers ring only when
someone is parked.

- `data`: rung by appenders after an append; subscribers waiting for data park on it.
- `consumed`: rung by image readers after consuming; wakes the driver conductor (to raise the
  publisher limit) while a publisher waits for space.
- `limit`: rung by the conductor when it moves the publisher limit; back-pressured publishers
  park on it.

Parties in other processes are woken through the log's wake slots (aeronio.logbuffer.waker); a
parked task also wakes after its idle strategy's fallback interval.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from aeronio._core import Doorbell


class LogSignals:
    __slots__ = ("data", "consumed", "limit", "users")

    def __init__(self) -> None:
        self.data = Doorbell()
        self.consumed = Doorbell()
        self.limit = Doorbell()
        self.users = 0


_registry: dict[str, LogSignals] = {}
_lock = threading.Lock()


def acquire(log_file: str) -> LogSignals:
    """The signals of a log, shared by everyone in this process using it."""
    with _lock:
        signals = _registry.get(log_file)
        if signals is None:
            signals = _registry[log_file] = LogSignals()
        signals.users += 1
        return signals


def release(log_file: str) -> None:
    with _lock:
        signals = _registry.get(log_file)
        if signals is not None:
            signals.users -= 1
            if signals.users <= 0:
                del _registry[log_file]


def ring_all() -> None:
    """Wake every parked task of this process (after a cross-process wake-up)."""
    with _lock:
        everyone = list(_registry.values())
    for log_signals in everyone:
        for doorbell in (log_signals.data, log_signals.limit):
            if doorbell.waiters:
                doorbell.ring()


async def park(doorbells: list[Doorbell], timeout: float, still_idle: Callable[[], bool]) -> None:
    """Wait until one of `doorbells` rings or `timeout` passes, unless `still_idle()` says the
    wait is over already. The future is parked (and counted) before that check, so a ring from
    any thread cannot fall between the check and the wait."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    for doorbell in doorbells:
        doorbell.park(future)
    try:
        if still_idle():
            handle = loop.call_later(timeout, _wake, future)
            try:
                await future
            finally:
                handle.cancel()
    finally:
        for doorbell in doorbells:
            doorbell.unpark(future)


def _wake(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)
