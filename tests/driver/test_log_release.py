"""Logs are released when their image or publication ends, in the driver and in its clients,
at once: no reference cycle leaves a log mapped (or a receive buffer held) until the garbage
collector's next full collection."""

from __future__ import annotations

import contextlib
import gc
import os
import shutil

import pytest

import aeronio
from aeronio.driver.media_driver import MediaDriver
from bench.hostile.churn import cycle
from tests.support.holdings import allocated_counters, held
from tests.support.ports import free_port
from tests.support.procs import await_until, new_driver_dir

CYCLES = 5


@contextlib.contextmanager
def garbage_collector_off():
    """gc disabled; on leaving, what a collection finds unreachable is handed to the body's
    `found` list (by type: module-qualified names), then freed."""
    found: list[str] = []
    gc.collect()
    gc.disable()
    try:
        yield found
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        found += [f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.garbage]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


@pytest.mark.parametrize("channel", ["aeron:ipc", "aeron:udp?endpoint=127.0.0.1:{port}"])
async def test_ended_streams_logs_are_unmapped_without_the_garbage_collector(channel):
    dir = new_driver_dir()
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(shutil.rmtree, dir, ignore_errors=True)
        found = cleanup.enter_context(garbage_collector_off())
        async with MediaDriver.launch(
            dir, timer_interval_ns=10_000_000, publication_linger_ns=10_000_000
        ) as driver:
            async with aeronio.connect(dir, driver_timeout_s=5) as aeron:
                await (await aeron.add_subscription("aeron:ipc", 1)).close()
                baseline = allocated_counters(dir)
                await watch_settled(driver)  # a scan of /proc holds a file open while it runs
                before = held(os.getpid(), dir)
                channel = channel.format(port=free_port())
                for _ in range(CYCLES):
                    await cycle(aeron, channel)
                resources = driver.conductor.resources
                await await_until(
                    lambda: (
                        not resources.images
                        and not resources.publications
                        and allocated_counters(dir) == baseline
                    ),
                    30,
                    "the streams to end in the driver",
                )
                assert os.listdir(os.path.join(dir, "publications")) == []
                # Within a few duty cycles (the data path lets go of a sender at its next
                # rebuild), with the garbage collector off.
                await await_until(
                    lambda: held(os.getpid(), dir)["logs_mapped"] == 0,
                    10,
                    lambda: f"logs still mapped: {held(os.getpid(), dir)}",
                )
                await watch_settled(driver)
                after = held(os.getpid(), dir)
                assert after["fds"] == before["fds"], (before, after)
    # And the driver left no reference cycle behind (no receive buffer waits for the collector).
    assert not [name for name in found if name.startswith("aeronio.driver.")], found


async def watch_settled(driver: MediaDriver) -> None:
    """The driver's command watch is not scanning, nor waiting to (after a client's open)."""
    rules = driver.command_watch.rules
    await await_until(lambda: not (rules.scanning or rules.settling), 10, "a settled watch")
