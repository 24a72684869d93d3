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
from aeronio.logbuffer.descriptor import FRAME_ALIGNMENT, HEADER_LENGTH, align
from tests.support.ports import free_port
from tests.support.procs import (
    IPC,
    Procs,
    await_until,
    check_payload,
    cpu_seconds,
    make_payload,
    payload_size,
    procs_fixture,
)

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


# -- the driver: parked until something needs it ---------------------------------------------
#
# An idle driver wakes only for a deadline that exists (for a UDP stream: Aeron's heartbeat every
# 100 ms, a status message every 200 ms, riding on the heartbeat's wake-up; the timer every
# second; the keepalives), or for what it is woken by (a command, a socket, an append, a
# consumer). The figures measured here are printed; docs/benchmarks.md has those of
# bench/idle_cpu.py (10 s each).

DRIVER_MEASURE_S = 5.0


def udp_channel() -> str:
    return f"aeron:udp?endpoint=127.0.0.1:{free_port()}"


async def test_idle_embedded_driver_with_a_udp_stream_parks_and_wakes(procs):
    service = procs.role("idle_service", stdin=True, channel=udp_channel())
    await service.aexpect_json("ready", 30)
    share = await core_share(service.pid, DRIVER_MEASURE_S)
    assert share < MAX_CORE_SHARE, f"idle service with a UDP stream used {share:.2%} of a core"
    service.send("after the idle time")
    assert await service.aexpect("got", 10) == "after the idle time"
    assert await service.await_exit(10) == 0, service.describe()


async def test_idle_embedded_driver_with_nothing_open_parks(procs):
    service = procs.role("idle_service", stdin=True)
    await service.aexpect_json("ready", 30)
    share = await core_share(service.pid, DRIVER_MEASURE_S)
    assert share < MAX_CORE_SHARE, f"idle embedded driver used {share:.2%} of a core"
    service.send("stop")
    assert await service.await_exit(10) == 0, service.describe()


async def test_idle_standalone_driver_with_two_client_processes_parks_and_wakes(procs):
    dir = procs.new_dir()
    driver = procs.driver(dir, "--ipc-term-length", "65536")
    publisher = procs.role("idle_ipc_client", stdin=True, dir=dir, stream=601, side="pub")
    subscriber = procs.role("idle_ipc_client", dir=dir, stream=601, side="sub")
    await publisher.aexpect("ready", 30)
    await subscriber.aexpect("ready", 30)
    shares = await asyncio.gather(
        *(core_share(child.pid, DRIVER_MEASURE_S) for child in (driver, publisher, subscriber))
    )
    for child, share in zip((driver, publisher, subscriber), shares, strict=True):
        assert share < MAX_CORE_SHARE, f"idle {child.name} used {share:.2%} of a core"
    publisher.send("woken")
    assert await subscriber.aexpect("got", 10) == "woken"
    assert await publisher.await_exit(10) == 0, publisher.describe()
    assert await subscriber.await_exit(10) == 0, subscriber.describe()


async def test_the_measurement_sees_a_driver_that_ticks(procs):
    """The same measurement on a driver that runs its timer every millisecond (what the driver
    did before it parked until its deadlines): a ticking driver shows up."""
    service = procs.role(
        "idle_service", stdin=True, channel=udp_channel(), timer_interval_ns=1_000_000
    )
    await service.aexpect_json("ready", 30)
    share = await core_share(service.pid, 2.0)
    assert share > MAX_CORE_SHARE, f"a ticking driver used only {share:.2%} of a core"
    service.send("stop")  # it removes its driver's directory as it exits
    assert await service.await_exit(10) == 0, service.describe()


# -- a try_offer publisher: the limit moves without the conductor's timer -----------------------
#
# A publisher that only polls (`try_offer`, sleeping on back-pressure: Aeron's classic loop) is
# not parked on anything, yet the conductor, parked until its next deadline, must move its limit
# as soon as a consumer frees space (MappedLog.want_limit). The driver's timer is set to 5 s
# here, so it cannot be what moves the limit: a window of 32 KiB per timer tick would take 20
# minutes for these 8 MiB.

STREAMED = 8 * 1024 * 1024


async def try_offer_all(publication, count: int) -> None:
    sent = 0
    while sent < count:
        result = publication.try_offer(make_payload(0, sent))
        if result > 0:
            sent += 1
        elif result in (aeronio.BACK_PRESSURED, aeronio.ADMIN_ACTION, aeronio.NOT_CONNECTED):
            await asyncio.sleep(0.001)
        else:
            raise AssertionError(f"try_offer: {result}")


def message_count(total_bytes: int) -> int:
    count, length = 0, 0
    while length < total_bytes:
        length += align(HEADER_LENGTH + payload_size(0, count), FRAME_ALIGNMENT)
        count += 1
    return count


@pytest.mark.parametrize("subscriber_in", ["another process", "the publisher's process"])
async def test_a_polling_publisher_is_not_held_by_a_parked_conductor(procs, subscriber_in):
    dir = procs.new_dir()
    procs.driver(dir, "--ipc-term-length", "65536", "--timer-interval-ns", str(5 * 10**9))
    count = message_count(STREAMED)
    async with aeronio.connect(dir) as aeron:
        publication = await aeron.add_publication(IPC, 701)
        if subscriber_in == "another process":
            subscriber = procs.role(
                "checking_subscriber", dir=dir, stream=701, expected={"0": count}, timeout=60
            )
            await subscriber.aexpect("ready", 30)
            await publication.wait_connected(10)
            async with asyncio.timeout(60):
                await try_offer_all(publication, count)
            result = await subscriber.aexpect_json("result", 60)
            assert result["errors"] == [] and result["received"] == count, result
        else:
            subscription = await aeron.add_subscription(IPC, 701)
            await publication.wait_connected(10)
            received = []

            async def consume() -> None:
                async for message in subscription:
                    received.append(message.data)
                    if len(received) == count:
                        return

            async with asyncio.timeout(60):
                await asyncio.gather(try_offer_all(publication, count), consume())
            assert [check_payload(m)[:2] for m in received] == [(0, seq) for seq in range(count)]
    assert publication.position >= STREAMED
