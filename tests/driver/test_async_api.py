"""The asyncio API end to end on an embedded driver: back-pressure, cancellation, claims,
unblocking, late joiners, fragmented messages, sessions, close and linger, polls."""

from __future__ import annotations

import asyncio
import gc
import os
import pickle
import struct
import threading

import numpy as np
import pytest

import aeronio
from aeronio import ControlledPollAction
from aeronio.client import conductor as client_conductor
from aeronio.counters import SystemCounters
from aeronio.counters.counters_file import PUBLISHER_LIMIT_TYPE_ID, SUBSCRIBER_POSITION_TYPE_ID
from aeronio.driver.media_driver import MediaDriver
from aeronio.protocol.control import RemovePublication
from tests.support.cancelling import cancel_at_each_step
from tests.support.procs import await_until

pytestmark = pytest.mark.loops  # the awaitables' waits, wakes and cancellation on the loop

TERM_64K = "aeron:ipc?term-length=64k"
WINDOW_64K = 64 * 1024 // 2


async def image_of(sub, session_id: int | None = None, timeout: float = 5.0):
    def find():
        if session_id is None:
            return sub.images[0] if sub.images else None
        return sub.image_by_session_id(session_id)

    await await_until(lambda: find() is not None, timeout, "an image")
    return find()


def drain(sub, limit: int = 1_000_000) -> list[bytes]:
    """Everything available now, reassembled."""
    got: list[bytes] = []
    assembler = aeronio.FragmentAssembler(lambda buffer, header: got.append(bytes(buffer)))
    while len(got) < limit and sub.poll(assembler, 256):
        pass
    return got


async def receive(sub, count: int, timeout: float = 5.0) -> list[bytes]:
    got: list[bytes] = []
    assembler = aeronio.FragmentAssembler(lambda buffer, header: got.append(bytes(buffer)))

    async def run():
        while len(got) < count:
            if not sub.poll(assembler, 256):
                await asyncio.sleep(0.001)

    try:
        await asyncio.wait_for(run(), timeout)
    except TimeoutError:
        raise AssertionError(f"received {len(got)} of {count}: {got[-3:]}") from None
    return got


async def first_messages(subscription, n: int):
    """`async for` over the first `n` messages of `subscription`, then stop."""
    count = 0
    async for message in subscription:
        yield message
        count += 1
        if count == n:
            return


# -- back-pressure ------------------------------------------------------------------------


async def test_slow_subscriber_back_pressures_await_offer(aeron):
    sub = await aeron.add_subscription("aeron:ipc", 1)
    pub = await aeron.add_publication(TERM_64K, 1)
    image = await image_of(sub)
    count, size = 2_000, 200  # 2000 frames of 256 bytes: 16 windows of 32 KiB
    consumer_steps = 0
    waited = 0
    max_lag = 0
    overrun = []

    async def publish():
        nonlocal waited, max_lag
        for i in range(count):
            lag = pub.position - image.position
            max_lag = max(max_lag, lag)
            if lag > WINDOW_64K + 256:
                overrun.append((i, lag))
            before = consumer_steps
            await pub.offer(struct.pack("<I", i) + bytes([i % 251]) * (size - 4))
            if consumer_steps != before:
                waited += 1  # this offer could not append at once and yielded to the consumer

    got: list[bytes] = []

    async def consume():
        nonlocal consumer_steps
        while len(got) < count:
            sub.poll(lambda buffer, header: got.append(bytes(buffer)), 10)
            consumer_steps += 1
            await asyncio.sleep(0.0005)

    await asyncio.wait_for(asyncio.gather(publish(), consume()), 30)
    assert waited > 0
    assert max_lag >= WINDOW_64K  # the publisher ran into the limit...
    assert not overrun  # ...and never past it
    assert [struct.unpack_from("<I", m)[0] for m in got] == list(range(count))
    assert all(m == struct.pack("<I", i) + bytes([i % 251]) * (size - 4) for i, m in enumerate(got))
    assert image.position == pub.position


async def fill_window(pub, message: bytes) -> int:
    """try_offer until back-pressured; returns how many went in."""
    sent = 0
    while True:
        result = pub.try_offer(message)
        if result == aeronio.ADMIN_ACTION:
            continue
        if result < 0:
            assert result == aeronio.BACK_PRESSURED
            return sent
        sent += 1


async def test_cancelled_offer_leaves_the_log_clean(aeron):
    sub = await aeron.add_subscription("aeron:ipc", 2)
    pub = await aeron.add_publication(TERM_64K, 2)
    image = await image_of(sub)
    sent = await fill_window(pub, b"m" * 100)
    position = pub.position
    assert sent > 0 and position >= pub.position_limit

    task = asyncio.create_task(pub.offer(b"CANCELLED" * 10))
    await asyncio.sleep(0.05)
    assert not task.done()  # nobody consumes: it waits
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(pub.offer(b"TIMED-OUT" * 10), 0.05)
    with pytest.raises(TimeoutError):
        await pub.offer(b"OWN-TIMEOUT" * 10, timeout=0.05)

    assert pub.position == position
    assert position % 32 == 0
    got = drain(sub)
    assert got == [b"m" * 100] * sent  # no partial, blocked or cancelled frame
    assert image.position == position

    next_position = await asyncio.wait_for(pub.offer(b"next"), 5)
    assert next_position == position + 64
    assert await receive(sub, 1) == [b"next"]


async def test_reading_the_limit_asks_a_parked_driver_to_move_it(monkeypatch):
    """A publisher that watches its limit without offering (waiting for room for a batch) sees
    it move once the subscriber consumed, though nothing else wakes the driver: it parks at once
    after work, its timer and the client's keepalive are 30 s apart. Before, the limit stayed
    where it was until one of those (up to the timer interval: 1 s by default)."""
    monkeypatch.setattr(client_conductor, "KEEPALIVE_INTERVAL_S", 30.0)
    parked = {
        "timer_interval_ns": 30_000_000_000,
        "client_liveness_timeout_ns": 120_000_000_000,
        "conductor_idle_spins": 0,
    }
    async with (
        MediaDriver.launch(**parked) as driver,
        aeronio.connect(driver.dir) as client,
    ):
        sub = await client.add_subscription(TERM_64K, 19)
        pub = await client.add_publication(TERM_64K, 19)
        await await_until(lambda: pub.is_connected and sub.images, 5, "connected")
        start_limit = pub.position_limit
        for i in range(300):  # 300 frames of 64 B: less than a quarter of the term left
            assert pub.try_offer(struct.pack("<q", i) + bytes(24)) > 0
        assert pub.position_limit == start_limit
        assert len(drain(sub)) == 300
        consumed = sub.images[0].position
        await await_until(lambda: driver._runner._wakeup is not None, 5, "the driver parked")
        await await_until(
            lambda: pub.position_limit == consumed + WINDOW_64K, 5, "the limit to move"
        )


# -- claims -------------------------------------------------------------------------------


async def test_claim_commits_on_exit_and_aborts_on_exception(aeron):
    sub = await aeron.add_subscription("aeron:ipc", 3)
    pub = await aeron.add_publication(TERM_64K, 3)
    await image_of(sub)

    async with pub.claim(5) as buffer:
        buffer[:] = b"first"
    with pytest.raises(RuntimeError, match="boom"):
        async with pub.claim(6) as buffer:
            buffer[:] = b"ABORTD"
            raise RuntimeError("boom")
    async with pub.claim(6) as buffer:
        buffer[:] = b"second"
    # The view handed out is released on exit: no late write into the log.
    with pytest.raises(ValueError):
        buffer[0] = 0

    assert await receive(sub, 2) == [b"first", b"second"]
    assert drain(sub) == []
    assert sub.images[0].position == pub.position


async def test_exclusive_publication_claim(aeron):
    sub = await aeron.add_subscription("aeron:ipc", 4)
    pub = await aeron.add_exclusive_publication(TERM_64K, 4)
    await image_of(sub)
    for i in range(3):
        async with pub.claim(4) as buffer:
            buffer[:] = struct.pack("<I", i)
    claim = pub.try_claim(4)
    claim.buffer[:] = b"gone"
    claim.abort()
    with pytest.raises(aeronio.ClaimError):
        claim.commit()
    assert await pub.offer(b"tail") == pub.position
    assert await receive(sub, 4) == [struct.pack("<I", i) for i in range(3)] + [b"tail"]


async def test_abandoned_claim_is_unblocked_by_the_driver(aeron):
    sub = await aeron.add_subscription("aeron:ipc", 5)
    pub = await aeron.add_publication(TERM_64K, 5)
    other = await aeron.add_publication(TERM_64K, 5)
    assert other.session_id == pub.session_id and other.log_file == pub.log_file
    image = await image_of(sub)
    unblocked = aeron.counters.counter(SystemCounters.UNBLOCKED_PUBLICATIONS)
    assert unblocked.get() == 0

    assert await pub.offer(b"before") > 0
    claim = pub.try_claim(100)  # abandoned: never committed nor aborted
    claim.buffer[:4] = b"LOST"
    after = [b"after-%d" % i for i in range(5)]
    for message in after:
        assert other.try_offer(message) > 0
    # Without a turn of the loop the driver cannot have acted: the reader stops at the claim.
    assert drain(sub) == [b"before"]
    assert image.position == claim.position - 160

    assert await receive(sub, 5, timeout=10) == after
    assert unblocked.get() == 1
    assert image.position == pub.position == other.position


# -- joining ------------------------------------------------------------------------------


async def test_late_joiner_starts_at_the_current_position(aeron):
    first = await aeron.add_subscription("aeron:ipc", 6)
    pub = await aeron.add_publication(TERM_64K, 6)
    await image_of(first)
    old = [b"old-%d" % i for i in range(10)]
    for message in old:
        await pub.offer(message)
    position = pub.position

    joined = []
    late = await aeron.add_subscription("aeron:ipc", 6, available_image=joined.append)
    image = await image_of(late)
    assert joined == [image]
    assert image.join_position == position
    assert image.position == position
    assert image.session_id == pub.session_id
    assert drain(late) == []

    await pub.offer(b"new")
    assert await receive(late, 1) == [b"new"]
    assert await receive(first, 11) == old + [b"new"]


async def test_offer_waits_until_a_subscriber_connects(aeron):
    pub = await aeron.add_publication(TERM_64K, 7)
    assert pub.try_offer(b"x") == aeronio.NOT_CONNECTED
    assert not pub.is_connected
    task = asyncio.create_task(pub.offer(b"waited"))
    await asyncio.sleep(0.02)
    assert not task.done()
    sub = await aeron.add_subscription("aeron:ipc", 7)
    position = await asyncio.wait_for(task, 5)
    assert position > 0 and pub.is_connected
    assert await receive(sub, 1) == [b"waited"]


# -- async iteration ----------------------------------------------------------------------


async def test_async_for_yields_whole_fragmented_messages(aeron):
    sub = await aeron.add_subscription("aeron:ipc", 8)
    pub = await aeron.add_publication("aeron:ipc?term-length=128k|mtu=1408", 8)
    await image_of(sub)
    rng = np.random.default_rng(7)
    sizes = [10_000, 1, 1376, 1377, 0, 10_000, 4_000, 16_384, 2_752, 2_753] * 3
    messages = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in sizes]

    async def publish():
        for message in messages:
            await pub.offer(message)

    async def collect():
        got = []
        async for message in sub:
            got.append(message)
            if len(got) == len(messages):
                return got

    producer = asyncio.create_task(publish())
    got = await asyncio.wait_for(collect(), 10)
    await asyncio.wait_for(producer, 5)
    assert [m.data for m in got] == messages
    assert all(isinstance(m.data, bytes) for m in got)
    assert all(m.header.session_id == pub.session_id for m in got)
    assert got[-1].header.position == pub.position


async def test_receive_waits_for_the_next_message(aeron):
    sub = await aeron.add_subscription("aeron:ipc", 9)
    pub = await aeron.add_publication(TERM_64K, 9)
    await image_of(sub)
    waiter = asyncio.create_task(sub.receive())
    await asyncio.sleep(0.02)
    assert not waiter.done()
    await pub.offer(b"wake")
    message = await asyncio.wait_for(waiter, 5)
    assert message.data == b"wake"


# The copying iterators poll the images a batch at a time; what they did not hand out (a loop
# left with break) comes first to any later read of the subscription, never skipped.


async def polled_past(aeron, stream: int, messages: list[bytes]):
    """A subscription whose iterator handed out messages[0] and holds the rest untaken."""
    sub = await aeron.add_subscription("aeron:ipc", stream)
    pub = await aeron.add_publication("aeron:ipc?term-length=64k|mtu=1408", stream)
    await image_of(sub)
    for message in messages:
        assert pub.try_offer(message) > 0
    async for message in sub:
        assert message.data == messages[0]
        break
    assert sub._untaken() == len(messages) - 1
    return pub, sub


async def test_poll_hands_over_what_async_for_left_untaken_first(aeron):
    big = bytes(range(256)) * 12  # 3072 bytes: three fragments, reassembled
    pub, sub = await polled_past(aeron, 30, [b"m0", b"m1", big, b"m3"])
    got = []
    assert sub.poll(lambda buffer, header: got.append((bytes(buffer), header.flags)), 2) == 2
    assert sub.poll(lambda buffer, header: got.append((bytes(buffer), header.flags)), 10) == 1
    assert got == [(b"m1", 0xC0), (big, 0xC0), (b"m3", 0xC0)]  # whole, as unfragmented
    assert pub.try_offer(b"m4") > 0
    assert drain(sub) == [b"m4"]  # then the images, from where the iterator stopped


async def test_controlled_poll_views_and_receive_take_the_untaken_in_order(aeron):
    pub, sub = await polled_past(aeron, 31, [b"m0", b"m1", b"m2", b"m3", b"m4"])
    seen = []

    def abort_at_m2(buffer, header):
        if bytes(buffer) == b"m2":
            return aeronio.ControlledPollAction.ABORT  # left for the next read
        seen.append(bytes(buffer))
        return None

    assert sub.controlled_poll(abort_at_m2, 10) == 1
    assert (await anext(sub.messages(copy=False))).data == b"m2"
    assert (await sub.receive()).data == b"m3"
    views = sub.messages(copy=False)
    assert (await anext(views)).data == b"m4"
    assert pub.try_offer(b"m5") > 0
    assert bytes((await anext(views)).data) == b"m5"
    assert seen == [b"m1"]


async def test_an_unknown_action_on_an_untaken_message_is_an_error(aeron):
    pub, sub = await polled_past(aeron, 35, [b"m0", b"m1", b"m2"])
    with pytest.raises(ValueError, match="not a ControlledPollAction"):
        sub.controlled_poll(lambda buffer, header: 7, 10)
    assert (await sub.receive()).data == b"m1"  # left untaken, as an image's poll leaves it
    for poll in (sub.poll, sub.controlled_poll):
        with pytest.raises(TypeError, match="handler must be callable, not str"):
            poll("handler", 10)
    assert (await sub.receive()).data == b"m2"


async def test_batch_and_block_polls_refuse_while_messages_are_untaken(aeron):
    pub, sub = await polled_past(aeron, 32, [b"m0", b"m1"])
    for poll in (sub.batch_poll, sub.block_poll):
        with pytest.raises(aeronio.AeronError, match="1 messages polled by async for"):
            poll(lambda *args: None, 1024)
    assert [m.data for m in await anext(sub.batches())] == [b"m1"]
    assert sub.batch_poll(lambda batch: None, 1024) == 0  # nothing untaken: the images


async def test_batches_hand_the_untaken_at_most_fragment_limit_at_a_time(aeron):
    pub, sub = await polled_past(aeron, 36, [b"m0", b"m1", b"m2", b"m3", b"m4"])
    batches = sub.batches(2)
    assert [[m.data for m in await asyncio.wait_for(anext(batches), 5)] for _ in range(2)] == [
        [b"m1", b"m2"],
        [b"m3", b"m4"],
    ]
    assert sub._untaken() == 0


async def test_a_message_a_fragment_limit_cut_is_the_next_polls_first(aeron):
    """batches(2) over m0, a three-fragment message and m3 hands m0 and takes the message's
    first fragment into its image's assembly; the poll after hands the message whole (as one
    unfragmented fragment), then m3. Before: the later fragments alone, which the assembler
    dropped, the message lost without a word."""
    sub = await aeron.add_subscription("aeron:ipc", 37)
    pub = await aeron.add_publication("aeron:ipc?term-length=64k|mtu=1408", 37)
    await image_of(sub)
    big = bytes(range(256)) * 12  # three fragments
    for message in (b"m0", big, b"m3"):
        assert pub.try_offer(message) > 0
    assert [m.data for m in await anext(sub.batches(2))] == [b"m0"]
    got = []
    assembler = aeronio.FragmentAssembler(lambda b, h: got.append((bytes(b), h.flags)))
    assert sub.poll(assembler, 10) == 2
    assert got == [(big, 0xC0), (b"m3", 0xC0)]


# -- sessions -----------------------------------------------------------------------------


async def test_exclusive_gets_own_session_concurrent_share_one(aeron):
    sub = await aeron.add_subscription("aeron:ipc", 10)
    a = await aeron.add_publication(TERM_64K, 10)
    b = await aeron.add_publication(TERM_64K, 10)
    x = await aeron.add_exclusive_publication(TERM_64K, 10)
    y = await aeron.add_exclusive_publication(TERM_64K, 10)
    assert isinstance(x, aeronio.ExclusivePublication) and x.is_exclusive
    assert not a.is_exclusive
    assert a.session_id == b.session_id
    assert a.log_file == b.log_file
    assert len({a.session_id, x.session_id, y.session_id}) == 3
    assert len({a.log_file, x.log_file, y.log_file}) == 3
    await await_until(lambda: sub.image_count == 3, 5, "3 images")

    await a.offer(b"a1")
    await b.offer(b"b1")
    await a.offer(b"a2")
    await x.offer(b"x1")
    assert a.position == b.position  # one shared log
    shared = sub.image_by_session_id(a.session_id)
    got = []
    shared.poll(lambda buffer, header: got.append(bytes(buffer)), 10)
    assert got == [b"a1", b"b1", b"a2"]
    got = []
    sub.image_by_session_id(x.session_id).poll(
        lambda buffer, header: got.append((bytes(buffer), header.session_id)), 10
    )
    assert got == [(b"x1", x.session_id)]
    assert sub.image_by_session_id(y.session_id).position == 0 == y.position


async def test_closing_one_of_two_concurrent_publications_keeps_the_log(aeron):
    sub = await aeron.add_subscription("aeron:ipc", 11)
    a = await aeron.add_publication(TERM_64K, 11)
    b = await aeron.add_publication(TERM_64K, 11)
    alone = await aeron.add_publication(TERM_64K, 12)  # no subscriber: it goes after its linger
    alone_log = alone.log_file
    image = await image_of(sub)
    await a.close()
    await alone.close()
    assert a.try_offer(b"closed") == aeronio.CLOSED
    await await_until(  # the linger of what was closed with `a` has passed
        lambda: not os.path.exists(alone_log), 10, "the lone publication's log to go"
    )
    await aeron.add_subscription("aeron:ipc", 12)  # a round trip: all the driver said is heard
    assert sub.images == (image,)
    assert not image.is_end_of_stream
    assert await b.offer(b"still here") > 0
    assert await receive(sub, 1) == [b"still here"]


# -- close and linger ---------------------------------------------------------------------


async def test_publication_close_ends_the_stream_then_image_goes_away(aeron):
    gone = []
    sub = await aeron.add_subscription("aeron:ipc", 12, unavailable_image=gone.append)
    pub = await aeron.add_publication(TERM_64K, 12)
    image = await image_of(sub)
    for i in range(3):
        await pub.offer(b"msg-%d" % i)
    end = pub.position
    assert not image.is_end_of_stream
    await pub.close()
    assert pub.is_closed
    # Not consumed yet: the driver keeps the image while draining.
    assert sub.images == (image,)
    assert not image.is_end_of_stream
    assert drain(sub) == [b"msg-0", b"msg-1", b"msg-2"]
    assert image.position == end
    assert image.is_end_of_stream
    assert sub.images == (image,) and not gone

    await await_until(lambda: gone, 5, "unavailable_image")
    assert gone == [image]
    assert sub.images == ()
    assert image.is_closed
    assert not sub.is_connected


async def test_unconsumed_image_goes_away_after_unblock_timeout_and_linger(aeron):
    gone = []
    sub = await aeron.add_subscription("aeron:ipc", 13, unavailable_image=gone.append)
    pub = await aeron.add_publication(TERM_64K, 13)
    image = await image_of(sub)
    await pub.offer(b"never read")
    await pub.close()
    await await_until(lambda: gone, 5, "unavailable_image")
    assert gone == [image] and sub.images == ()


async def test_a_views_reader_is_seen_where_it_got_to_and_lost_just_after_its_message(aeron):
    """messages(copy=False) stores sub-pos at each step, just before the message it lends: the
    driver sees a slow reader move. The image lost while it holds a message (its publication
    closed, the drain timed out) raises ImageUnavailableError just after that message."""
    sub = await aeron.add_subscription("aeron:ipc", 36)
    pub = await aeron.add_publication(TERM_64K, 36)
    image = await image_of(sub)
    ends = [await pub.offer(b"m%d" % i) for i in range(5)]
    assert ends == [64, 128, 192, 256, 320]
    views = sub.messages(copy=False)
    for i in range(3):
        assert (await anext(views)).data == b"m%d" % i
        assert image.position == [0, *ends][i]  # the one before consumed, this one lent
    await pub.close()
    await await_until(lambda: not sub.images, 5, "the image to go")
    with pytest.raises(aeronio.ImageUnavailableError) as lost:
        await asyncio.wait_for(anext(views), 5)
    assert (lost.value.session_id, lost.value.position) == (image.session_id, ends[2])
    assert f"went away at position {ends[2]}," in str(lost.value)


async def test_a_views_reader_holding_the_last_message_has_reached_the_end(aeron):
    """The last message of a stream lent out when the image goes: the stream was taken to its
    end, so nothing is reported lost."""
    sub = await aeron.add_subscription("aeron:ipc", 37)
    pub = await aeron.add_publication(TERM_64K, 37)
    image = await image_of(sub)
    for i in range(3):
        await pub.offer(b"m%d" % i)
    views = sub.messages(copy=False)
    assert [bytes((await anext(views)).data) for _ in range(3)] == [b"m0", b"m1", b"m2"]
    await pub.close()
    await await_until(lambda: not sub.images, 5, "the image to go")
    assert image.is_end_of_stream
    sub.poll(lambda *_: None, 10)  # raises a loss reported by the image's going
    await sub.close()
    with pytest.raises(StopAsyncIteration):
        await anext(views)


# -- timeouts and closed publications -------------------------------------------------------


async def test_offer_with_timeout_when_not_connected_raises_timeout(aeron):
    pub = await aeron.add_publication(TERM_64K, 14)
    with pytest.raises(TimeoutError, match="not connected"):
        await asyncio.wait_for(pub.offer(b"x", timeout=0.05), 5)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(pub.offer_batch([b"x", b"y"], timeout=0.05), 5)
    with pytest.raises(TimeoutError):
        async with pub.claim(10, timeout=0.05):
            pass
    assert pub.position == 0


async def test_offer_with_timeout_when_back_pressured_raises_timeout(aeron):
    sub = await aeron.add_subscription("aeron:ipc", 15)
    pub = await aeron.add_publication(TERM_64K, 15)
    await image_of(sub)
    sent = await fill_window(pub, bytes(500))
    position = pub.position
    with pytest.raises(TimeoutError, match="back-pressured"):
        await asyncio.wait_for(pub.offer(b"x", timeout=0.05), 5)
    assert pub.position == position
    assert len(drain(sub)) == sent


async def test_an_offer_batch_returns_its_own_position_while_a_thread_offers_too(aeron):
    """A concurrent publication's `offer_batch` on the loop returns the position after its own
    last message while a thread appends batches to the same log. Before, it read the
    appender's last batch position, which the thread's batch could overwrite in between."""
    sub = await aeron.add_subscription("aeron:ipc", 43)
    pub = await aeron.add_publication(TERM_64K, 43)
    await image_of(sub)
    by_position: dict[int, bytes] = {}
    stop = threading.Event()

    def other_writer() -> None:
        while not stop.is_set():
            pub.try_offer_batch([b"the thread's"] * 8)

    async def consume() -> None:
        async for message in sub:
            by_position[message.position] = message.data

    consumer = asyncio.create_task(consume())
    thread = threading.Thread(target=other_writer)
    thread.start()
    try:
        returned = {}
        for r in range(300):
            returned[r] = await pub.offer_batch(
                [b"mine %d.%d" % (r, i) for i in range(8)], timeout=10
            )
        end = pub.position
    finally:
        stop.set()
        await asyncio.to_thread(thread.join)
    await await_until(lambda: max(by_position, default=0) >= end, 10, "every message read")
    consumer.cancel()
    assert {r: by_position[p] for r, p in returned.items()} == {
        r: b"mine %d.7" % r for r in range(300)
    }


async def test_an_offer_batch_timed_out_part_way_says_how_many_went_in(aeron):
    sub = await aeron.add_subscription("aeron:ipc", 33)
    pub = await aeron.add_publication(TERM_64K, 33)
    await image_of(sub)
    batch = [i.to_bytes(4, "little") * 25 for i in range(1000)]  # 100 KB: over the window
    with pytest.raises(aeronio.OfferBatchTimeoutError, match="back-pressured") as timed_out:
        await pub.offer_batch(batch, timeout=0.05)
    assert isinstance(timed_out.value, TimeoutError)
    appended = timed_out.value.appended
    assert 0 < appended < len(batch)
    assert str(timed_out.value).startswith(f"offer_batch: {appended} of 1000 messages appended")
    assert drain(sub) == batch[:appended]  # the first ones, in order, and nothing else
    copied = pickle.loads(pickle.dumps(timed_out.value))
    assert (type(copied), copied.appended, str(copied)) == (
        aeronio.OfferBatchTimeoutError, appended, str(timed_out.value))  # fmt: skip


async def test_an_offer_batch_cancelled_part_way_leaves_position_where_its_part_ended(aeron):
    """An exclusive publication's position says exactly how many went in before the cancel."""
    sub = await aeron.add_subscription("aeron:ipc", 38)
    pub = await aeron.add_exclusive_publication(TERM_64K, 38)
    await image_of(sub)
    batch = [i.to_bytes(4, "little") * 250 for i in range(200)]  # 200 KB: over the window
    framed = 1056  # a 32-byte header and the message, aligned to 32 bytes
    task = asyncio.create_task(pub.offer_batch(batch))
    await await_until(
        lambda: pub.position and pub.position + framed > pub.position_limit, 10, "a wait"
    )
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    appended, rest = divmod(pub.position, framed)
    assert (0 < appended < len(batch), rest) == (True, 0)
    assert drain(sub) == batch[:appended]  # the first ones, in order, and nothing else


async def test_an_offer_batch_cancelled_part_way_says_how_many_went_on_a_shared_log(aeron):
    """A concurrent publication's position is no count (others may write the log): the
    CancelledError carries it, and an outer timeout's TimeoutError has that as its cause."""
    sub = await aeron.add_subscription("aeron:ipc", 39)
    pub = await aeron.add_publication(TERM_64K, 39)
    await image_of(sub)
    batch = [i.to_bytes(4, "little") * 250 for i in range(200)]  # 200 KB: over the window
    task = asyncio.create_task(pub.offer_batch(batch))
    await await_until(lambda: pub.position + 1056 > pub.position_limit, 10, "a wait")
    task.cancel()
    with pytest.raises(asyncio.CancelledError) as cancelled:
        await task
    appended = cancelled.value.appended
    assert 0 < appended < len(batch)
    assert f"offer_batch: {appended} of 200 messages appended" in cancelled.value.__notes__
    assert drain(sub) == batch[:appended]  # exactly those, in order
    with pytest.raises(TimeoutError) as timed_out:  # the rest, under a timeout of the caller's
        async with asyncio.timeout(0.05):
            await pub.offer_batch(batch[appended:])
    went = timed_out.value.__cause__.appended
    assert 0 < went < len(batch) - appended
    assert drain(sub) == batch[appended : appended + went]


async def test_an_offer_batch_cancelled_in_the_loops_turn_says_how_many_went(aeron):
    """Between parts offer_batch gives the loop its turn (here at every part): cancelled there,
    after a part went in, the CancelledError says how many too (before: only a wait's did)."""
    sub = await aeron.add_subscription("aeron:ipc", 42)
    pub = await aeron.add_publication(TERM_64K, 42)
    await image_of(sub)
    batch = [i.to_bytes(4, "little") * 250 for i in range(200)]  # 200 KB: over the window
    before = aeronio._core._set_loop_turn_ns(0)  # a turn due at every look
    try:
        task = asyncio.create_task(pub.offer_batch(batch))
        while pub.position == 0:  # the first part went in; the task is in its next turn
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError) as cancelled:
            await task
    finally:
        aeronio._core._set_loop_turn_ns(before)
    appended = cancelled.value.appended
    assert 0 < appended < len(batch)
    assert drain(sub) == batch[:appended]


async def test_an_offer_block_past_the_limit_parks_and_lets_the_loop_run(aeron):
    """A block that starts below the limit but ends past it waits for room for all of it:
    parked, the loop runs other tasks meanwhile. Before, the park saw room (the position below
    the limit) and returned at once: the wait spun without yielding (one turn in seconds)."""
    sub = await aeron.add_subscription("aeron:ipc", 41)
    pub = await aeron.add_exclusive_publication(TERM_64K, 41)
    await image_of(sub)
    await await_until(lambda: pub.position_limit == WINDOW_64K, 10, "the window")
    for _ in range(31):
        assert pub.try_offer(bytes(1024 - 32)) > 0
    assert pub.try_offer(bytes(960 - 32)) > 0
    assert pub.position_limit - pub.position == 64
    block = bytearray(1024)
    struct.pack_into("<iBBHi", block, 0, 1024, 0, 0xC0, 1, pub.position)
    loop = asyncio.get_running_loop()
    ticks = [loop.time()]

    async def tick():
        while True:
            await asyncio.sleep(0.005)
            ticks.append(loop.time())

    ticker = asyncio.create_task(tick())
    try:
        with pytest.raises(TimeoutError, match="back-pressured"):
            await pub.offer_block(block, timeout=1.0)
    finally:
        ticker.cancel()
    ticks.append(loop.time())
    longest = max(b - a for a, b in zip(ticks, ticks[1:], strict=False))
    assert longest < 0.5, f"the loop ran nothing else for {longest:.3f} s"
    assert len(drain(sub)) == 32  # the block went nowhere
    assert await pub.offer_block(block, timeout=10) == WINDOW_64K + 1024 - 64


async def test_an_offer_batch_waiting_on_a_lost_driver_raises_the_drivers_error(aeron, monkeypatch):
    sub = await aeron.add_subscription("aeron:ipc", 34)
    pub = await aeron.add_publication(TERM_64K, 34)
    await image_of(sub)
    lost = aeronio.DriverTimeoutError("media driver lost (simulated)")

    def check_alive():
        raise lost

    monkeypatch.setattr(pub._conductor, "check_alive", check_alive)
    with pytest.raises(aeronio.DriverTimeoutError) as raised:  # a TimeoutError too: not wrapped
        await pub.offer_batch([bytes(100)] * 1000)
    assert raised.value is lost


async def test_a_close_called_while_another_runs_returns_once_that_one_finished():
    """Before: the second close returned at once, most publications still open and the
    client's own driver still running."""
    client = await aeronio.connect().__aenter__()
    dir = client.driver_dir
    publications = [await client.add_publication("aeron:ipc", 70 + i) for i in range(20)]
    first = asyncio.create_task(client.close())
    await asyncio.sleep(0)  # the first close is under way
    await client.close()
    assert all(publication.is_closed for publication in publications)
    assert not os.path.exists(dir)  # its own driver closed, and removed its directory
    await first


async def test_close_wakes_a_waiting_offer(aeron):
    pub = await aeron.add_publication(TERM_64K, 16)
    task = asyncio.create_task(pub.offer(b"x"))
    await asyncio.sleep(0.01)
    assert not task.done()
    await pub.close()
    with pytest.raises(aeronio.PublicationClosedError):
        await asyncio.wait_for(task, 5)


# -- batches ------------------------------------------------------------------------------


async def test_offer_batch_sequence_and_records(aeron):
    sub = await aeron.add_subscription("aeron:ipc", 17)
    pub = await aeron.add_publication(TERM_64K, 17)
    await image_of(sub)
    messages = [b"batch-%d" % i for i in range(3_000)]  # many windows
    records = np.arange(4_000, dtype="<u8").view(np.uint8).reshape(4_000, 8)

    async def publish():
        await pub.offer_batch(messages)
        await pub.offer_batch(records)

    got = []

    async def consume():
        assembler = aeronio.FragmentAssembler(lambda buffer, header: got.append(bytes(buffer)))
        while len(got) < 7_000:
            if not sub.poll(assembler, 100):
                await asyncio.sleep(0.0005)

    await asyncio.wait_for(asyncio.gather(publish(), consume()), 20)
    assert got[:3_000] == messages
    assert [int.from_bytes(m, "little") for m in got[3_000:]] == list(range(4_000))


async def test_an_empty_batch_is_at_the_publications_position(aeron):
    """Not the position after an earlier batch: nothing went in since that one."""
    sub = await aeron.add_subscription("aeron:ipc", 84)
    pub = await aeron.add_publication(TERM_64K, 84)
    await image_of(sub)
    assert await pub.offer_batch([b"a", b"b"]) == 128
    assert await pub.offer(b"c") == 192
    assert await pub.offer_batch([]) == 192
    assert await pub.offer_batch(np.zeros((0, 8), np.uint8)) == 192
    assert drain(sub) == [b"a", b"b", b"c"]


# -- poll variants ------------------------------------------------------------------------


async def test_controlled_poll_actions(aeron):
    sub = await aeron.add_subscription("aeron:ipc", 18)
    pub = await aeron.add_publication(TERM_64K, 18)
    image = await image_of(sub)
    positions = [await pub.offer(b"c%d" % i) for i in range(6)]
    seen = []

    def abort_at_c2(buffer, header):
        if bytes(buffer) == b"c2":
            return ControlledPollAction.ABORT
        seen.append(bytes(buffer))
        return ControlledPollAction.CONTINUE

    assert sub.controlled_poll(abort_at_c2, 10) == 2
    assert seen == [b"c0", b"c1"]
    assert image.position == positions[1]

    def break_after_first(buffer, header):
        seen.append(bytes(buffer))
        return ControlledPollAction.BREAK

    assert sub.controlled_poll(break_after_first, 10) == 1
    assert seen[-1] == b"c2" and image.position == positions[2]

    commits = []

    def commit_each(buffer, header):
        seen.append(bytes(buffer))
        commits.append(image.position)
        return ControlledPollAction.COMMIT

    assert sub.controlled_poll(commit_each, 10) == 3
    assert seen[-3:] == [b"c3", b"c4", b"c5"]
    # Each COMMIT moved the position to the end of the fragment before the next handler call.
    assert commits == [positions[2], positions[3], positions[4]]
    assert image.position == positions[5]

    await pub.offer(b"c6")
    assert sub.controlled_poll(lambda buffer, header: None, 10) == 1  # None = CONTINUE
    assert image.position == pub.position
    await pub.offer(b"c7")
    with pytest.raises(ValueError):
        sub.controlled_poll(lambda buffer, header: 99, 10)


async def test_block_poll_delivers_whole_frames(aeron):
    sub = await aeron.add_subscription("aeron:ipc", 19)
    pub = await aeron.add_publication(TERM_64K, 19)
    image = await image_of(sub)
    messages = [bytes([i]) * (i * 13) for i in range(20)]
    for message in messages:
        await pub.offer(message)
    blocks = []
    total = sub.block_poll(
        lambda block, session_id, term_id: blocks.append((bytes(block), session_id, term_id)),
        1 << 20,
    )
    assert total == pub.position == image.position
    assert len(blocks) == 1
    block, session_id, term_id = blocks[0]
    assert session_id == pub.session_id and term_id == pub.initial_term_id
    assert len(block) == total
    payloads, offset = [], 0
    while offset < len(block):
        length = struct.unpack_from("<i", block, offset)[0]
        assert length >= 32
        payloads.append(block[offset + 32 : offset + length])
        offset += (length + 31) & ~31
    assert payloads == messages
    assert sub.block_poll(lambda *args: blocks.append(args), 1 << 20) == 0


async def test_block_poll_limit_stops_at_a_frame_boundary(aeron):
    sub = await aeron.add_subscription("aeron:ipc", 20)
    pub = await aeron.add_publication(TERM_64K, 20)
    image = await image_of(sub)
    for _ in range(4):
        await pub.offer(bytes(40))  # 96-byte frames
    blocks = []
    assert sub.block_poll(lambda block, s, t: blocks.append(len(block)), 200) == 192
    assert image.position == 192
    assert sub.block_poll(lambda block, s, t: blocks.append(len(block)), 200) == 192
    assert blocks == [192, 192]


async def test_batch_poll(aeron):
    sub = await aeron.add_subscription("aeron:ipc", 21)
    pub = await aeron.add_publication(TERM_64K, 21)
    image = await image_of(sub)
    dtype = np.dtype([("id", "<u4"), ("price", "<f8")])
    records = np.zeros(50, dtype=dtype)
    records["id"] = np.arange(50)
    records["price"] = np.arange(50) * 1.5
    for record in records:
        await pub.offer(record.tobytes())
    await pub.offer(b"odd-size")
    batches = []

    def handler(batch):
        batches.append((len(batch), [bytes(m) for m in batch.messages()], batch.session_id))

    assert sub.batch_poll(handler, 20) == 20
    assert sub.batch_poll(handler, 1000) == 31
    assert sub.batch_poll(handler, 1000) == 0
    assert [n for n, _, _ in batches] == [20, 31]
    flat = [m for _, ms, _ in batches for m in ms]
    assert flat == [r.tobytes() for r in records] + [b"odd-size"]
    assert {s for _, _, s in batches} == {pub.session_id}
    assert image.position == pub.position

    for record in records[:10]:
        await pub.offer(record.tobytes())
    views = []
    sub.batch_poll(lambda batch: views.append(batch.records(dtype).copy()), 100)
    assert (views[0] == records[:10]).all()


async def test_poll_delivers_headers(aeron):
    sub = await aeron.add_subscription("aeron:ipc", 22)
    pub = await aeron.add_publication(TERM_64K, 22)
    await image_of(sub)
    end = await pub.offer(b"hello")
    headers = []
    assert sub.poll(lambda buffer, header: headers.append(header.copy()), 10) == 1
    (header,) = headers
    assert header.session_id == pub.session_id
    assert header.stream_id == 22
    assert header.term_id == pub.initial_term_id
    assert header.flags & 0xC0 == 0xC0
    assert header.frame_length == 32 + 5
    assert header.position == end


async def test_exceptions_in_handlers_propagate_and_skip_the_fragment(aeron):
    sub = await aeron.add_subscription("aeron:ipc", 23)
    pub = await aeron.add_publication(TERM_64K, 23)
    await image_of(sub)
    await pub.offer(b"bad")
    await pub.offer(b"good")

    def handler(buffer, header):
        if bytes(buffer) == b"bad":
            raise KeyError("bad")

    with pytest.raises(KeyError):
        sub.poll(handler, 10)
    assert drain(sub) == [b"good"]


async def test_subscription_close_stops_iteration_and_receive_raises(aeron):
    """Closed, a subscription ends `async for` (StopAsyncIteration), and `receive()`, which
    is no iteration, raises SubscriptionClosedError: waiting when it closes too."""
    sub = await aeron.add_subscription("aeron:ipc", 24)
    waiting = asyncio.ensure_future(sub.receive())
    await asyncio.sleep(0)  # it waits for a message
    await sub.close()
    for receiving in (waiting, sub.receive()):
        with pytest.raises(aeronio.SubscriptionClosedError, match="subscription .* is closed"):
            await asyncio.wait_for(receiving, 5)
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(sub.__anext__(), 5)


# -- resource hygiene ---------------------------------------------------------------------


def live_futures() -> int:
    gc.collect()
    return sum(
        1
        for o in gc.get_objects()
        if isinstance(o, asyncio.Future) and not isinstance(o, asyncio.Task)
    )


class CountingParks(aeronio.NotifyingIdleStrategy):
    """Every idle a park of at most 1 ms (no yields first), counted."""

    def __init__(self) -> None:
        super().__init__(0, fallback_s=0.001)
        self.parks = 0

    async def idle(self, attempt, park) -> None:
        self.parks += 1
        await super().idle(attempt, park)


async def test_idle_waits_do_not_accumulate_parked_futures(aeron):
    """A task waiting for data (or for a subscriber) wakes at its idle strategy's fallback;
    each wake must not leave its future parked on the doorbell, or an idle `async for` grows
    without bound until the next message arrives. Here both waiters park 1 ms at a time,
    counted: hundreds of wakes, against the 20 futures allowed to grow."""
    idle = CountingParks()
    async with aeronio.connect(aeron.driver_dir, idle_strategy=idle) as client:
        sub = await client.add_subscription("aeron:ipc", 25)
        pub = await client.add_publication(TERM_64K, 25)
        await image_of(sub)
        lonely = await client.add_publication(TERM_64K, 26)  # nobody subscribes to stream 26
        before = live_futures()
        receiver = asyncio.create_task(sub.receive())
        offer = asyncio.create_task(lonely.offer(b"never connected"))
        await await_until(lambda: idle.parks >= 400, 60, "400 parks of the two waiters")
        grown = live_futures() - before
        offer.cancel()
        await pub.offer(b"done")
        assert (await asyncio.wait_for(receiver, 5)).data == b"done"
        with pytest.raises(asyncio.CancelledError):
            await offer
        assert grown < 20, f"{grown} futures accumulated over {idle.parks} parks"


async def test_closed_image_is_inert(aeron):
    """After its subscription closed, an Image delivers nothing and writes no counter: its
    subscriber-position counter was freed and may already belong to someone else."""
    sub = await aeron.add_subscription("aeron:ipc", 27)
    pub = await aeron.add_publication(TERM_64K, 27)
    image = await image_of(sub)
    for i in range(3):
        await pub.offer(b"unread-%d" % i)
    await sub.close()
    assert image.is_closed
    # A new publication takes the freed counter id for its publisher limit.
    other = await aeron.add_exclusive_publication(TERM_64K, 28)
    limit = other.position_limit
    got = []
    delivered = image.poll(lambda buffer, header: got.append(bytes(buffer)), 10)
    assert other.position_limit == limit, "a closed image moved another publication's limit"
    assert (delivered, got) == (0, [])


def maps_of(path: str) -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if path in line)


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs Linux /proc/self/maps")
async def test_client_unmaps_the_log_of_a_deleted_publication(aeron):
    """Once a publication is closed, its image gone and the driver deleted its log file, the
    client must not keep the log mapped (the shared memory is only freed when the last mapping
    goes): a service creating publications over time would otherwise grow without bound."""
    gone = []
    sub = await aeron.add_subscription("aeron:ipc", 29, unavailable_image=gone.append)
    pub = await aeron.add_publication(TERM_64K, 29)
    await image_of(sub)
    await pub.offer(b"x")
    assert drain(sub) == [b"x"]
    log_file = pub.log_file
    assert maps_of(log_file) >= 1  # the client's (and, embedded, the driver's) mapping
    await pub.close()
    await await_until(lambda: gone, 5, "unavailable_image")
    await await_until(lambda: not os.path.exists(log_file), 5, "the log file to be deleted")
    del pub
    gone.clear()
    gc.collect()
    assert maps_of(log_file) == 0


async def test_a_command_cancelled_as_the_driver_answers_is_cancelled(aeron):
    """Cancelled at every step of an add (before the driver answers, as it answers), the add
    raises CancelledError and never hands out a subscription (asyncio.wait_for on Python 3.11
    loses a cancel that meets the answer); what the driver made for it is released, even when
    its answer came just before the cancel."""
    publication = await aeron.add_publication("aeron:ipc", 77)  # each subscription: a sub-pos
    added = []

    async def add_forever():
        while True:
            added.append(await aeron.add_subscription("aeron:ipc", 77))

    def subscriber_positions() -> int:
        return sum(
            info.type_id == SUBSCRIBER_POSITION_TYPE_ID for info in aeron.counters.for_each()
        )

    await cancel_at_each_step(add_forever, 40)
    for subscription in added:
        await subscription.close()
    await await_until(lambda: subscriber_positions() == 0, 5, "every subscription released")
    assert not aeron._conductor._abandoned
    await publication.close()


async def test_an_add_cancelled_after_its_image_came_lets_go_of_the_image(aeron, monkeypatch):
    """The driver's answer and the image of a subscription can come in one read: the image is
    mapped and handed to available_image before the add's task resumes. Cancelled then, the
    add raises, and the image goes with the subscription: its log was left mapped (and its
    signals held) for the life of the client, as nothing tracked it any more."""
    publication = await aeron.add_publication(TERM_64K, 79)
    conductor = aeron._conductor
    on_image_ready = conductor._on_image_ready
    seen = []
    adding: asyncio.Task | None = None

    def cancel_after(ready):
        on_image_ready(ready)
        assert adding is not None
        adding.cancel()

    monkeypatch.setattr(conductor, "_on_image_ready", cancel_after)
    adding = asyncio.create_task(
        aeron.add_subscription("aeron:ipc", 79, available_image=seen.append)
    )
    with pytest.raises(asyncio.CancelledError):
        await adding
    monkeypatch.undo()
    (image,) = seen  # it came, and was handed out
    assert image.is_closed and not conductor._images
    assert (
        publication.log_file not in conductor._logs or conductor._logs[publication.log_file][1] == 1
    )
    await await_until(
        lambda: (
            not any(
                info.type_id == SUBSCRIBER_POSITION_TYPE_ID for info in aeron.counters.for_each()
            )
        ),
        5,
        "the subscription removed from the driver",
    )
    await publication.close()
    assert publication.log_file not in conductor._logs


async def test_an_add_its_client_closes_under_is_refused_or_closed_with_it(aeron):
    """An add still waiting when its client closes raises (its answer may never come); one
    answered just before is closed with the client: none hands out a live publication, and
    the driver releases them all."""
    raised = 0
    for steps in range(16):
        client = await aeronio.connect(aeron.driver_dir)
        adding = asyncio.create_task(
            client.add_exclusive_publication("aeron:ipc?term-length=64k", 78)
        )
        for _ in range(steps):
            await asyncio.sleep(0)
        await client.close()
        try:
            publication = await adding
        except aeronio.AeronError as e:  # not yet sent, or waiting when the close began
            assert str(e) in (
                "the Aeron client is closed",
                "the Aeron client closed before AddPublication was answered",
                "the Aeron client closed before AddPublication was done",
            )
            raised += "before" in str(e)
        else:
            assert publication.is_closed
    assert raised
    await await_until(
        lambda: not any(" 78 aeron:ipc" in info.label for info in aeron.counters.for_each()),
        30,
        "the publications of the closed clients released",
    )


@pytest.mark.parametrize("kind", ["publication", "subscription", "counter"])
async def test_a_close_cancelled_while_the_ring_is_full_still_removes(aeron, monkeypatch, kind):
    """A close waits to write its remove while the to-driver ring buffer is full; cancelled
    there, what it closed (marked closed at once, so never closed again) stayed in the driver
    until the client closed. Its remove is now written once the ring has room."""
    stream = {"publication": 81, "subscription": 82, "counter": 83}[kind]
    other = await aeron.add_publication(TERM_64K, stream)  # the subscription's image
    if kind == "publication":
        made = await aeron.add_exclusive_publication(TERM_64K, stream)  # not `other`'s
        type_id = PUBLISHER_LIMIT_TYPE_ID
    elif kind == "subscription":
        made = await aeron.add_subscription("aeron:ipc", stream)
        type_id = SUBSCRIBER_POSITION_TYPE_ID
        await image_of(made)
    else:
        made = await aeron.add_counter(1001, f"closed under a full ring {stream}")
        type_id = 1001

    def held() -> bool:  # its counter in the driver (a system counter's id may be its id)
        return any(
            (info.type_id, info.registration_id) == (type_id, made.registration_id)
            for info in aeron.counters.for_each()
        )

    assert held()
    transport = aeron._conductor.transport
    write = transport._write
    full = asyncio.Event()

    def refused(command) -> bool:
        full.set()
        return False

    monkeypatch.setattr(transport, "_write", refused)  # the ring buffer full
    closing = asyncio.create_task(made.close())
    await full.wait()
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    monkeypatch.setattr(transport, "_write", write)  # room again
    await await_until(lambda: not held(), 10, f"the {kind} removed from the driver")
    await other.close()


async def test_requests_meeting_their_clients_close(aeron, monkeypatch):
    """While its client closes: an add begun then is refused, removes waiting (asked before
    the close or during it) are done (the close releases everything), and an add cancelled as
    the close fails it is cancelled, leaving nothing to undo."""
    client = await aeronio.connect(aeron.driver_dir)
    held = await client.add_publication("aeron:ipc?term-length=64k", 79)
    await client.add_publication("aeron:ipc?term-length=64k", 81)  # the close removes it
    late = await client.add_publication("aeron:ipc?term-length=64k", 82)
    removing = asyncio.ensure_future(held.close())
    adding = asyncio.ensure_future(client.add_subscription("aeron:ipc", 79))
    await asyncio.sleep(0)  # both sent, waiting for their answers
    conductor = client._conductor
    release, gate = conductor.release_publication, asyncio.Event()

    async def release_when_let(publication, revoke):
        if publication is not late:
            await gate.wait()
        await release(publication, revoke)

    send = conductor.transport.send

    async def send_but_late_remove(command):
        if not (isinstance(command, RemovePublication) and command.registration_id == late_id):
            await send(command)  # the late remove's answer never comes: the close must end it

    late_id = late.registration_id
    monkeypatch.setattr(conductor, "release_publication", release_when_let)
    monkeypatch.setattr(conductor.transport, "send", send_but_late_remove)
    closing = asyncio.ensure_future(client.close())
    await asyncio.sleep(0)  # the close failed what waits, and waits to remove the other one
    adding.cancel()  # before the add wakes to its failure
    assert not conductor.is_closed
    with pytest.raises(aeronio.AeronError, match="^the Aeron client is closed$"):
        await client.add_publication("aeron:ipc?term-length=64k", 80)
    removing_late = asyncio.ensure_future(late.close())  # asked while the client closes
    await asyncio.sleep(0)
    gate.set()
    await closing
    await removing  # done, no error
    await asyncio.wait_for(removing_late, 5)  # done too, not left for the driver timeout
    with pytest.raises(asyncio.CancelledError):
        await adding
    assert not conductor._abandoned


async def test_a_request_waiting_when_its_driver_is_lost_raises_why(aeron, monkeypatch):
    """The driver lost while a command waits for its answer: the command raises what was
    lost, at once, not a timeout of its own."""
    client = await aeronio.connect(aeron.driver_dir)
    conductor = client._conductor

    async def unanswered(command):  # sent nowhere: its answer never comes
        pass

    monkeypatch.setattr(conductor.transport, "send", unanswered)
    waiting = asyncio.ensure_future(client.add_subscription("aeron:ipc", 83))
    await asyncio.sleep(0)
    conductor._fail(aeronio.DriverTimeoutError("media driver on D lost: it closed"))
    with pytest.raises(aeronio.DriverTimeoutError, match="^media driver on D lost: it closed$"):
        await asyncio.wait_for(waiting, 5)
    assert not conductor._abandoned
    await client.close()
