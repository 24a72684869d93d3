"""The standalone driver: `aeronio driver` runs the media driver on its own event loop in its
own process until SIGINT or SIGTERM (or a client's TERMINATE_DRIVER, when the driver's
`terminate_driver_enabled` allows it), then shuts down cleanly."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from aeronio.driver.context import DriverContext
from aeronio.driver.media_driver import MediaDriver


async def run(ctx: DriverContext, ready_message: bool = True) -> None:
    """Run a driver with `ctx` until the process is told to stop."""
    driver = await MediaDriver(ctx).start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    if ready_message:
        print(f"aeronio driver pid {os.getpid()} on {driver.dir}", flush=True)
    try:  # until a signal, or a client's TERMINATE_DRIVER (ctx.terminate_driver_enabled)
        waits = [asyncio.ensure_future(e.wait()) for e in (stop, driver.terminated)]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
        await driver.close()
        if ready_message:
            print("aeronio driver stopped", file=sys.stderr, flush=True)
