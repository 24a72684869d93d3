"""What a publisher sees of delivery: `await publication.wait_sent()` (the driver's sender has
sent everything offered), and a closing embedded driver that waits for its released
publications, bounded, saying what its receivers did not acknowledge."""

import asyncio
import logging
import time

import pytest

import aeronio
from tests.driver.test_udp_driver import connected
from tests.support.ports import free_port

STREAM = 41
WINDOW_MESSAGES = 128  # 200-byte messages (256 with their header) in a 32 KiB receiver window


def channel() -> str:
    return f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=64k"


async def offer_past_the_window(pub, count: int = WINDOW_MESSAGES + 64) -> int:
    """Offer more than a receiver window of 200-byte messages; the position after them."""
    for i in range(count):
        await pub.offer(i.to_bytes(8, "little") + bytes(192), timeout=10)
    return pub.position


async def test_wait_sent_waits_for_the_sender_and_times_out_naming_the_positions():
    """The subscriber does not read: the sender stops at its window, so not everything is sent
    until it reads."""
    async with aeronio.connect() as aeron:
        uri = channel()
        sub = await aeron.add_subscription(uri, STREAM)
        pub = await aeron.add_publication(uri, STREAM)
        await connected(pub, sub)
        end = await offer_past_the_window(pub)
        with pytest.raises(TimeoutError, match=rf"sent up to \d+, not {end}, within 0.2 s"):
            await pub.wait_sent(timeout=0.2)
        got = []

        async def read() -> None:
            while len(got) < WINDOW_MESSAGES + 64:
                if not sub.poll(lambda buffer, header: got.append(bytes(buffer)), 64):
                    await asyncio.sleep(0.001)

        reader = asyncio.create_task(read())
        assert await pub.wait_sent(timeout=20) == end
        await asyncio.wait_for(reader, 20)


async def test_wait_sent_of_an_ipc_publication_returns_at_once():
    async with aeronio.connect() as aeron:
        pub = await aeron.add_publication("aeron:ipc?term-length=64k", STREAM)
        assert await pub.wait_sent(timeout=0) == pub.position == 0


async def test_a_closing_driver_waits_for_its_publications_at_most_the_linger_and_says_so(
    caplog,
):
    """Another client's subscription never reads: the publication cannot deliver. Closing the
    driver waits for it until the linger timeout (300 ms), then warns what is lost."""
    caplog.set_level(logging.WARNING, logger="aeronio.driver")
    linger_s = 0.3
    uri = channel()
    owner = await aeronio.connect(publication_linger_ns=int(linger_s * 1e9))
    reader = await aeronio.connect(owner.driver_dir, driver_timeout_s=2)  # loses its driver
    try:
        sub = await reader.add_subscription(uri, STREAM)
        pub = await owner.add_publication(uri, STREAM)
        await connected(pub, sub)
        end = await offer_past_the_window(pub)
        started = time.monotonic()
        await owner.close()
        took = time.monotonic() - started
    finally:
        await reader.close()
    assert linger_s <= took < linger_s + 5, took
    (warning,) = [r.getMessage() for r in caplog.records if "not acknowledged" in r.getMessage()]
    assert f"ended with the driver: its receivers have not acknowledged up to {end}" in warning
