"""An asyncio event loop on an injected clock: time moves only when the loop would wait, and then
straight to its next timer. A test that counts timers (duty cycles per deadline, heartbeats)
asserts exact counts and instants, however busy the machine: `asyncio.sleep(0.55)` on this loop
runs every timer due in those 0.55 s, in order, and takes no real time.

What arrives from outside (a thread's `call_soon_threadsafe`, a socket) is still seen: the loop
looks at its selector without waiting before it moves the clock.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class _JumpingSelector(selectors.DefaultSelector):
    """Never waits for a timer: a select with a timeout that finds nothing ready moves the
    loop's clock by that timeout instead."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:  # no timer at all: only the outside can wake the loop
            return super().select(None)
        ready = super().select(0)
        if not ready and timeout > 0:
            self._loop.now += timeout
        return ready


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """`time()` is `now` (seconds, from 0), moved by the loop's own waits only."""

    def __init__(self) -> None:
        self.now = 0.0
        super().__init__(_JumpingSelector(self))

    def time(self) -> float:
        return self.now


def run(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """`main()` run to its end on a new VirtualTimeLoop, closed after."""
    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(main())


def on_virtual_time(test: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    """A test coroutine function made a plain test that runs it on a VirtualTimeLoop."""

    def run_test() -> None:
        run(test)

    run_test.__name__, run_test.__doc__ = test.__name__, test.__doc__
    return run_test
