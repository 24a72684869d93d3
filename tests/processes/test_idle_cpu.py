"""Waking without spinning: a client process with nothing to do under the default idle strategy
uses (almost) no CPU, measured from /proc over a few seconds, yet wakes when data or credit
arrives from another process.

The CPU check is a resource check (CPU seconds per wall second), not a timing check; the wake-up
waits are bounded only so that a missed wake-up fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import time

import pytest

import aeronio
from tests.support.procs import IPC, Procs, await_until, cpu_seconds, procs_fixture

pytestmark = pytest.mark.slow  # each test measures CPU over seconds

MEASURE_S = 3.0
MAX_CORE_SHARE = 0.02

procs = pytest.fixture(procs_fixture, name="procs")


@pytest.fixture(scope="module")
def driver_dir():
    """One standalone driver (64 KiB terms) for the module; each test uses its own stream."""
    procs = Procs()
    try:
        dir = procs.new_dir()
        procs.driver(dir, "--ipc-term-length", "65536")
        yield dir
    finally:
        procs.close()


async def core_share(pid: int, seconds: float = MEASURE_S) -> float:
    """CPU seconds the process used per wall second, over `seconds` (this loop keeps running,
    so this process's client goes on sending keepalives)."""
    await asyncio.sleep(0.2)  # let the child settle into its idle loop
    cpu0, wall0 = cpu_seconds(pid), time.monotonic()
    await asyncio.sleep(seconds)
    cpu1, wall1 = cpu_seconds(pid), time.monotonic()
    share = (cpu1 - cpu0) / (wall1 - wall0)
    print(f"pid {pid}: {share:.2%} of a core over {wall1 - wall0:.1f} s")
    return share


async def test_idle_subscriber_with_an_image_sleeps_and_wakes_on_data(driver_dir, procs):
    stream = 501
    async with aeronio.connect(driver_dir, driver_timeout_s=5) as aeron:
        publication = await aeron.add_publication(IPC, stream)
        reader = procs.role("idle_reader", dir=driver_dir, stream=stream, want_image=True)
        assert await reader.aexpect_json("ready", 20) == {"images": 1}
        await await_until(lambda: publication.is_connected, 10, "the subscriber")

        share = await core_share(reader.pid)
        assert share < MAX_CORE_SHARE, f"idle subscriber used {share:.1%} of a core"

        await publication.offer(b"wake up", timeout=10)
        assert await reader.aexpect("got", 10) == "wake up"
        assert await reader.await_exit(10) == 0, reader.describe()


async def test_idle_subscriber_without_an_image_sleeps_and_wakes_on_a_new_publication(
    driver_dir, procs
):
    stream = 502
    reader = procs.role("idle_reader", dir=driver_dir, stream=stream, want_image=False)
    assert await reader.aexpect_json("ready", 20) == {"images": 0}

    share = await core_share(reader.pid)
    assert share < MAX_CORE_SHARE, f"idle subscriber used {share:.1%} of a core"

    async with aeronio.connect(driver_dir, driver_timeout_s=5) as aeron:
        publication = await aeron.add_publication(IPC, stream)
        await publication.offer(b"first message", timeout=10)  # waits until the image is there
        assert await reader.aexpect("got", 10) == "first message"
        assert await reader.await_exit(10) == 0, reader.describe()


async def test_the_measurement_sees_a_spinning_subscriber(driver_dir, procs):
    """The same measurement on a subscriber with the yielding (spinning) idle strategy: a busy
    process shows up, so the checks above can fail."""
    reader = procs.role(
        "idle_reader", dir=driver_dir, stream=504, want_image=False, idle_strategy="yielding"
    )
    await reader.aexpect_json("ready", 20)
    share = await core_share(reader.pid, 1.0)
    assert share > 10 * MAX_CORE_SHARE, f"a spinning subscriber used only {share:.1%} of a core"


async def test_back_pressured_publisher_sleeps_and_wakes_on_credit(driver_dir, procs):
    stream = 503
    async with aeronio.connect(driver_dir, driver_timeout_s=5) as aeron:
        subscription = await aeron.add_subscription(IPC, stream)
        publisher = procs.role("blocked_publisher", dir=driver_dir, stream=stream)
        blocked = await publisher.aexpect_json("blocked", 20)
        assert blocked["sent"] > 0

        share = await core_share(publisher.pid)
        assert share < MAX_CORE_SHARE, f"back-pressured publisher used {share:.1%} of a core"

        received = []
        async with asyncio.timeout(20):
            async for message in subscription:
                received.append(message.data)
                if message.data == b"final":
                    break
        assert len(received) == blocked["sent"] + 1
        assert all(m.startswith(b"fill-%d" % i) for i, m in enumerate(received[:-1]))
        await publisher.aexpect_json("offered", 10)
        assert await publisher.await_exit(10) == 0, publisher.describe()
