"""A UDP publisher process that leaves right after its last offer loses nothing: its embedded
driver lingers the publication until the receivers acknowledged everything (bounded by the
linger timeout, and said when it runs out) before it goes."""

from __future__ import annotations

import asyncio
import signal
import struct

import pytest

import aeronio
from tests.support.exiting_publisher import message
from tests.support.ports import free_port
from tests.support.procs import module_argv, procs_fixture

procs = pytest.fixture(procs_fixture, name="procs")
pytestmark = pytest.mark.slow

STREAM = 31
WORKER = "tests.support.exiting_publisher"


def channel() -> str:
    return f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=64k"


async def receive_slowly(subscription, got: list[bytes], count: int) -> None:
    """A message per millisecond at most, until all `count` arrived and the stream ended (its
    image at end of stream). The publisher is back-pressured to the end, so when it leaves, a
    window of messages (128 here) is not yet sent or acknowledged."""
    assembler = aeronio.FragmentAssembler(lambda buffer, header: got.append(bytes(buffer)))
    while True:
        subscription.poll(assembler, 1)
        images = subscription.images
        if len(got) >= count and images and images[0].is_end_of_stream:
            return
        await asyncio.sleep(0.001)  # the pace, not a wait for anything


@pytest.mark.parametrize("how", ["exit", "sigterm"])
async def test_a_udp_publisher_that_exits_right_after_offering_loses_nothing(procs, how):
    """1000 messages of 200 bytes (256 with their header) through a 32 KiB window to a slow
    receiver. All arrive, in order, and the stream ends (the image sees its end of stream)."""
    count, size = 1_000, 200
    uri = channel()
    async with aeronio.connect() as aeron:
        subscription = await aeron.add_subscription(uri, STREAM)
        publisher = procs.spawn(
            [*module_argv(WORKER), uri, str(STREAM), str(count), str(size), how], "publisher"
        )
        got: list[bytes] = []
        receiving = asyncio.create_task(receive_slowly(subscription, got, count))
        try:
            await publisher.aexpect("offered", timeout=60)
            if how == "sigterm":
                publisher.send_signal(signal.SIGTERM)
            assert await publisher.await_exit(timeout=30) == (0 if how == "exit" else 143)
            await asyncio.wait_for(asyncio.shield(receiving), 30)
        except TimeoutError:
            ended = [image.is_end_of_stream for image in subscription.images]
            raise AssertionError(f"received {len(got)} of {count}, end of stream {ended}") from None
        finally:
            receiving.cancel()
        assert [struct.unpack_from("<q", m)[0] for m in got] == list(range(count))
        assert got == [message(i, size) for i in range(count)]


async def test_a_linger_nobody_acknowledges_ends_at_its_timeout_and_says_so(procs):
    """The receiver never consumes, so it never acknowledges: the publisher's driver lingers its
    publication for the linger timeout (1 s), not longer, and warns what was not acknowledged."""
    linger_s = 1.0
    uri = channel()
    async with aeronio.connect() as aeron:
        await aeron.add_subscription(uri, STREAM)  # never polled
        publisher = procs.spawn(
            [*module_argv(WORKER), uri, str(STREAM), "10", "100", "exit", str(int(linger_s * 1e9))],
            "publisher",
        )
        end = int(await publisher.aexpect("offered", timeout=60))
        assert await publisher.await_exit(timeout=30) == 0
        closed = float(publisher.expect("closed", timeout=5))
    assert linger_s <= closed < linger_s + 5, closed
    assert "not acknowledged" in publisher.stderr and f"up to {end}" in publisher.stderr
