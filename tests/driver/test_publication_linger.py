"""What a publisher sees of delivery: `await publication.wait_sent()` (the driver's sender has
sent everything offered), and a closing embedded driver that waits for its released
publications, bounded, saying what its receivers did not acknowledge."""

import asyncio
import logging
import time

import pytest

import aeronio
from aeronio.logbuffer.descriptor import LOG_END_OF_STREAM_POSITION_OFFSET
from tests.driver.test_async_api import first_messages
from tests.driver.test_udp_driver import connected
from tests.support.ports import free_port
from tests.support.procs import await_until

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


async def test_a_stream_read_after_its_end_arrived_is_acknowledged_and_stops_lingering(caplog):
    """The subscriber reads a publication's last messages (less than a quarter window: no
    status message is due for them) only once the end of its stream arrived, and its image
    ends at the driver's next timer (every 10 ms here). The image's farewell, a status message
    flagged end-of-stream, acknowledges them: the publication stops lingering long before its
    30 s linger, and nothing is reported lost. Three publications, one after another, so that
    the image's end falls at different times against the periodic status messages."""
    caplog.set_level(logging.WARNING, logger="aeronio.driver")
    async with aeronio.connect(publication_linger_ns=30 * 10**9, timer_interval_ns=10**7) as aeron:
        uri = channel()
        sub = await aeron.add_subscription(uri, STREAM)
        for _ in range(3):
            await read_after_the_end(aeron, sub, uri, count=20)
    assert [r.getMessage() for r in caplog.records if "acknowledged" in r.getMessage()] == []


async def read_after_the_end(aeron: aeronio.Aeron, sub, uri: str, count: int) -> None:
    """A publication of `count` messages, closed; its image read once the end arrived; until
    the publication ended (at most 10 s)."""
    pub = await aeron.add_publication(uri, STREAM)
    session = pub.session_id

    def image():
        return next((i for i in sub.images if i.session_id == session), None)

    await await_until(lambda: pub.is_connected and image(), 10, "the publication's image")
    metadata = image().metadata
    assert sender_counters(aeron, session)
    end = await offer_past_the_window(pub, count)
    await pub.close()

    def end_arrived() -> bool:
        return metadata.get_int64_volatile(LOG_END_OF_STREAM_POSITION_OFFSET) == end

    await await_until(end_arrived, 10, "the end of the stream at the receiver")
    read = 0

    async def read_all() -> None:
        nonlocal read
        while read < count:
            read += sub.poll(lambda buffer, header: None, count)
            await asyncio.sleep(0.001)

    await asyncio.wait_for(read_all(), 10)
    await await_until(lambda: not sender_counters(aeron, session), 10, "the publication's end")


def sender_counters(aeron: aeronio.Aeron, session_id: int) -> list[str]:
    """The labels of the sender's counters of session `session_id` (freed as it ends)."""
    return [
        c.label
        for c in aeron.counters.for_each()
        if c.label.startswith("snd-pos:") and f" {session_id} {STREAM} " in c.label
    ]


async def test_a_spy_behind_when_the_receivers_are_gone_still_reads_to_the_end(caplog):
    """A publication's receiver reads everything and leaves, the publication closes, and its spy
    (in the publisher's driver) reads on slowly, one message every 100 ms, past the 2 s after
    which no receiver is left: the linger waits for the spy, which reads to the end of the
    stream, and nothing is reported lost."""
    caplog.set_level(logging.WARNING, logger="aeronio.driver")
    count = 30
    gone: list[tuple[int, bool]] = []  # the spy's image as it went: position, end of stream
    async with aeronio.connect(publication_linger_ns=30 * 10**9, timer_interval_ns=10**7) as aeron:
        uri = channel()
        sub = await aeron.add_subscription(uri, STREAM)
        spy = await aeron.add_subscription(
            f"aeron-spy:{uri}",
            STREAM,
            unavailable_image=lambda image: gone.append((image.position, image.is_end_of_stream)),
        )
        pub = await aeron.add_publication(uri, STREAM)
        await await_until(lambda: pub.is_connected and sub.images and spy.images, 10, "images")
        sent = [await pub.offer(i.to_bytes(8, "little"), timeout=10) for i in range(count)]
        async with asyncio.timeout(10):
            received = [message.position async for message in first_messages(sub, count)]
        assert received == sent
        await sub.close()
        await pub.close()

        spied = []
        async with asyncio.timeout(30):
            while len(spied) < count and not gone:  # a slow spy: a message every 100 ms
                spy.poll(lambda buffer, header: spied.append(header.position), 1)
                await asyncio.sleep(0.1)
        assert spied == sent
        await await_until(lambda: not sender_counters(aeron, pub.session_id), 10, "the end")
        assert gone == [(sent[-1], True)]
    assert [r.getMessage() for r in caplog.records if "ended" in r.getMessage()] == []
