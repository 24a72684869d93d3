"""`aeronio.run(main)`: asyncio.run for a service, where SIGTERM and SIGINT unwind `main`.

Under plain `asyncio.run` a SIGTERM ends the process at once: an embedded driver's directory
(its logs, often hundreds of MB of /dev/shm) stays behind until the next driver starts. Here
both signals cancel the main task instead, so its `async with` blocks close clients and drivers
and remove what they made; then the process exits as the signal asks (SIGINT raises
KeyboardInterrupt, SIGTERM exits with status 128 + 15).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
SIGNALS = (signal.SIGTERM, signal.SIGINT)


def run(main: Coroutine[Any, Any, T], *, debug: bool | None = None) -> T:
    """Run `main` on a new event loop until it returns; SIGTERM or SIGINT cancel it."""
    received: list[int] = []

    async def guarded() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None  # a coroutine that asyncio.run runs is a task

        def on_signal(signum: int) -> None:
            received.append(signum)
            task.cancel()

        for signum in SIGNALS:
            loop.add_signal_handler(signum, on_signal, signum)
        try:
            return await main
        finally:
            for signum in SIGNALS:
                loop.remove_signal_handler(signum)

    try:
        return asyncio.run(guarded(), debug=debug)
    except asyncio.CancelledError:
        if not received:
            raise
        if received[0] == signal.SIGINT:
            raise KeyboardInterrupt from None
        raise SystemExit(128 + received[0]) from None
