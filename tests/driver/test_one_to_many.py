"""One publication, many receivers, with real drivers and sockets on loopback: multicast (with
interface=127.0.0.1, so nothing leaves the host), multi-destination-cast (manual and dynamic
destinations) and the one-to-many flow control strategies (max, min, tagged), plus a spy of a
multicast publication.

Every receiver has its own embedded driver (each `aeronio.connect()` launches one), so the
receivers are as independent as on different hosts: their own sockets, receiver ids, images and
status messages (but for one test of two endpoints in one driver, each its own receiver).
Every wait is bounded and says what it waited for.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import time

import pytest

import aeronio
from aeronio.counters import (
    FLOW_CONTROL_RECEIVERS_TYPE_ID,
    MDC_DESTINATIONS_TYPE_ID,
    SENDER_LIMIT_TYPE_ID,
    SENDER_POSITION_TYPE_ID,
    SYSTEM_COUNTER_TYPE_ID,
    SystemCounters,
)
from aeronio.driver.channel_endpoints import DESTINATION_TIMEOUT_NS
from aeronio.driver.flow_control import RECEIVER_TIMEOUT_NS
from aeronio.driver.receiver_state import IMAGE_LIVENESS_TIMEOUT_NS
from aeronio.protocol.frames import (
    HDR_TYPE_DATA,
    HDR_TYPE_SETUP,
    Frame,
    iter_frames,
    nak_frame,
    status_message,
)
from tests.support.ports import free_port
from tests.support.procs import await_until, procs_fixture

procs = pytest.fixture(procs_fixture, name="procs")

TERM = 64 * 1024
HOST = "127.0.0.1"
MTU = 1408  # the default
# Sizes 4 B .. 8 KiB (the largest message of a 64 KiB term); 1377 and up are fragmented (MTU
# 1408 less the 32-byte header), 33 and 700 keep the frames unaligned to the MTU.
SIZES = (4, 100, 1376, 1377, 3000, 8192, 33, 700)


def multicast(group: str, port: int, extra: str = "") -> str:
    """A multicast channel kept on loopback: data on `group`, control on the next address."""
    return f"aeron:udp?endpoint={group}:{port}|interface={HOST}|term-length=64k{extra}"


def payload(i: int, size: int) -> bytes:
    return i.to_bytes(4, "little") + bytes((i + k) % 251 for k in range(size - 4))


def messages(count: int, sizes: tuple[int, ...] = SIZES) -> list[bytes]:
    return [payload(i, sizes[i % len(sizes)]) for i in range(count)]


def counter(aeron, type_id: int, registration_id: int) -> int:
    """The value of the counter of `type_id` registered to `registration_id` in `aeron`'s driver."""
    counter_id = aeron.counters.find_by_type_id_and_registration_id(type_id, registration_id)
    assert counter_id is not None, f"no counter of type {type_id} for {registration_id}"
    return aeron.counters.get_counter_value(counter_id)


def system_counter(aeron, which: SystemCounters) -> int:
    for info in aeron.counters.for_each():
        if info.type_id == SYSTEM_COUNTER_TYPE_ID and info.label == which.label:
            return info.value
    raise AssertionError(f"no system counter {which.label!r}")


async def counted_more(aeron, which: SystemCounters, what: str, more: int = 2) -> None:
    """Until `aeron`'s driver counted `more` more of `which` (heartbeats, status messages):
    proof that the stream went on past now, so what was to come before has come."""
    start = system_counter(aeron, which)
    await await_until(
        lambda: system_counter(aeron, which) >= start + more, 10, f"{more} more {what}"
    )


class Receiver:
    """Reads a subscription into `received` (data) and `positions` (each message's end
    position) in a task, from `start()` until `stop()`; an image lost is kept in `lost`, with
    the count of messages received before it, and the reading goes on."""

    def __init__(self, sub: aeronio.Subscription, name: str):
        self.sub = sub
        self.name = name
        self.received: list[bytes] = []
        self.positions: list[int] = []
        self.lost: list[tuple[int, aeronio.ImageUnavailableError]] = []
        self._task: asyncio.Task | None = None

    def start(self) -> Receiver:
        self._task = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        while True:
            try:
                async for message in self.sub:
                    self.received.append(message.data)
                    self.positions.append(message.position)
                return
            except aeronio.ImageUnavailableError as error:
                self.lost.append((len(self.received), error))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def wait_for(self, count: int, timeout: float) -> None:
        await await_until(
            lambda: len(self.received) >= count,
            timeout,
            f"{self.name} to receive {count} messages (has {len(self.received)})",
        )


class Producer:
    """Offers `expected` in a task, recording each message's end position. From each index in
    `slow_at` on it offers one message every 2 ms (so that what the test does there happens
    with live traffic) until `fast()`; `reached[i]` is set as it gets to index i."""

    def __init__(self, pub: aeronio.Publication, expected: list[bytes], slow_at=()):
        self.pub = pub
        self.expected = expected
        self.positions: list[int] = []
        self.reached = {i: asyncio.Event() for i in slow_at}
        self.slow = False
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        for i, message in enumerate(self.expected):
            if i in self.reached:
                self.slow = True
                self.reached[i].set()
            self.positions.append(await self.pub.offer(message, timeout=20))
            if self.slow:
                await asyncio.sleep(0.002)

    def fast(self) -> None:
        self.slow = False

    async def at(self, index: int, timeout: float = 20) -> None:
        try:
            async with asyncio.timeout(timeout):
                await self.reached[index].wait()
        except TimeoutError:
            raise AssertionError(f"the producer never got to message {index}") from None

    def first_at_or_after(self, position: int) -> int:
        """The index of the first message that starts at or after `position`."""
        starts = [0, *self.positions[:-1]]
        return next((i for i, start in enumerate(starts) if start >= position), len(starts))

    async def done(self, timeout: float) -> None:
        async with asyncio.timeout(timeout):
            await self.task


async def image_of(sub: aeronio.Subscription, timeout: float = 10) -> aeronio.Image:
    await await_until(lambda: sub.images, timeout, f"an image on {sub.channel}")
    return sub.images[0]


def assert_joined_live(
    name: str, receiver: Receiver, producer: Producer, join: int, since: int
) -> None:
    """`receiver` joined at `join` (at or after the stream's position `since` when it
    subscribed) and got exactly the messages that start at or after it, in order."""
    assert join >= since > 0, f"{name} joined at {join}, before the live position {since}"
    first = producer.first_at_or_after(join)
    assert first < len(producer.expected), f"{name} joined at {join}, after the last message"
    assert receiver.received == producer.expected[first:], (
        f"{name} (joined at {join}) got {len(receiver.received)} messages, expected "
        f"{len(producer.expected) - first} from message {first} on, in order"
    )
    assert receiver.positions == producer.positions[first:]


# -- 1. multicast ----------------------------------------------------------------------------


async def test_multicast_delivers_everything_to_every_receiver_and_a_late_joiner_joins_live():
    """Three receivers on their own drivers get every message once, in order, byte-identical
    (4 B to 8 KiB, fragmented ones included, across ~80 term rotations of a 64 KiB term); a
    fourth that subscribes after 1200 messages gets an image at the live position and exactly
    the messages from there on."""
    channel = multicast("224.20.30.1", free_port())
    expected = messages(3000)
    async with contextlib.AsyncExitStack() as stack:
        a = await stack.enter_async_context(aeronio.connect())
        drivers = [await stack.enter_async_context(aeronio.connect()) for _ in range(3)]
        subs = [await driver.add_subscription(channel, 10) for driver in drivers]
        pub = await a.add_publication(channel, 10)
        await await_until(lambda: pub.is_connected, 10, "the multicast publication to connect")
        for sub in subs:
            assert (await image_of(sub)).join_position == 0
        receivers = [Receiver(sub, f"receiver {i}").start() for i, sub in enumerate(subs)]
        producer = Producer(pub, expected, slow_at=(1200,))
        await producer.at(1200)
        since = pub.position
        late_driver = await stack.enter_async_context(aeronio.connect())
        late_sub = await late_driver.add_subscription(channel, 10)
        late = Receiver(late_sub, "the late joiner").start()
        join = (await image_of(late_sub)).join_position
        producer.fast()
        await producer.done(30)
        for receiver in [*receivers, late]:
            await await_until(
                lambda r=receiver: r.positions and r.positions[-1] == pub.position,
                30,
                f"{receiver.name} to get the last message",
            )
            await receiver.stop()
        for receiver in receivers:
            assert receiver.received == expected, receiver.name
            assert receiver.positions == producer.positions, receiver.name
        assert_joined_live("the late joiner", late, producer, join, since)
        assert pub.position > 50 * TERM  # many term rotations
        assert counter(a, FLOW_CONTROL_RECEIVERS_TYPE_ID, pub.registration_id) == 4


# -- 2. multi-destination-cast, manual ------------------------------------------------------


async def test_mdc_manual_destinations_added_and_removed_while_publishing():
    """A manual MDC publication sends to the destinations it adds: one added mid-stream joins
    at the live position and gets everything after in order; one removed mid-stream gets
    nothing more while the other keeps getting everything. mdc-num-dests goes 0, 1, 2, 1."""
    control = f"{HOST}:{free_port()}"
    endpoints = [f"aeron:udp?endpoint={HOST}:{free_port()}" for _ in range(2)]
    expected = messages(3000)
    async with contextlib.AsyncExitStack() as stack:
        a = await stack.enter_async_context(aeronio.connect())
        b = [await stack.enter_async_context(aeronio.connect()) for _ in range(2)]
        subs = [
            await driver.add_subscription(endpoint, 11)
            for driver, endpoint in zip(b, endpoints, strict=True)
        ]
        pub = await a.add_publication(
            f"aeron:udp?control={control}|control-mode=manual|term-length=64k", 11
        )
        dests = lambda: counter(a, MDC_DESTINATIONS_TYPE_ID, pub.registration_id)  # noqa: E731
        assert dests() == 0
        await asyncio.sleep(0.3)  # settle: SETUPs go nowhere, nothing connects
        assert not pub.is_connected and pub.try_offer(b"x") == aeronio.NOT_CONNECTED
        assert subs[0].images == () and subs[1].images == ()

        await pub.add_destination(endpoints[0])
        assert dests() == 1
        await await_until(lambda: pub.is_connected, 10, "the MDC publication to connect")
        assert (await image_of(subs[0])).join_position == 0
        first = Receiver(subs[0], "the first destination").start()
        producer = Producer(pub, expected, slow_at=(1000, 2000))

        await producer.at(1000)
        since = pub.position
        await pub.add_destination(endpoints[1])
        assert dests() == 2
        second = Receiver(subs[1], "the second destination").start()
        join = (await image_of(subs[1])).join_position
        producer.fast()

        await producer.at(2000)
        await pub.remove_destination(endpoints[0])
        assert dests() == 1
        # what the sender sent by now is all the removed destination can get
        sent_at_removal = counter(a, SENDER_POSITION_TYPE_ID, pub.registration_id)
        removed_at = pub.position
        producer.fast()
        await producer.done(30)
        await await_until(
            lambda: second.positions and second.positions[-1] == pub.position,
            30,
            "the second destination to get the last message",
        )
        await first.stop()
        await second.stop()

        assert_joined_live("the second destination", second, producer, join, since)
        got_before = len(first.received)
        assert first.received == expected[:got_before]  # a prefix, in order
        assert first.positions[-1] <= sent_at_removal, "the removed destination still received"
        assert 1000 <= got_before < len(expected)
        assert subs[0].images[0].position <= removed_at


# -- 3. multi-destination-cast, dynamic -----------------------------------------------------


@pytest.mark.slow
async def test_mdc_dynamic_receivers_add_themselves_and_a_silent_one_is_dropped():
    """Receivers whose channel names the publication's control address become its destinations
    (mdc-num-dests 2); one whose driver closes goes silent and is dropped after the 5 s
    destination timeout, while the other gets every message throughout."""
    control = f"{HOST}:{free_port()}"
    expected = messages(3000)
    async with contextlib.AsyncExitStack() as stack:
        a = await stack.enter_async_context(aeronio.connect())
        pub = await a.add_publication(
            f"aeron:udp?control={control}|control-mode=dynamic|term-length=64k", 12
        )
        dests = lambda: counter(a, MDC_DESTINATIONS_TYPE_ID, pub.registration_id)  # noqa: E731
        assert dests() == 0
        leaving = await aeronio.connect()
        stack.push_async_callback(leaving.close)
        staying = await stack.enter_async_context(aeronio.connect())
        channel = "aeron:udp?endpoint={}:{}|control=" + control
        leaving_sub = await leaving.add_subscription(channel.format(HOST, free_port()), 12)
        await await_until(lambda: dests() == 1, 10, "the first receiver to become a destination")
        staying_sub = await staying.add_subscription(channel.format(HOST, free_port()), 12)
        await await_until(lambda: dests() == 2, 10, "the second receiver to become a destination")
        await image_of(leaving_sub)
        await image_of(staying_sub)
        await await_until(lambda: pub.is_connected, 10, "the dynamic MDC publication to connect")
        stays = Receiver(staying_sub, "the staying receiver").start()
        leaves = Receiver(leaving_sub, "the leaving receiver").start()
        producer = Producer(pub, expected, slow_at=(500,))
        await producer.at(500)
        await leaves.stop()
        await leaving.close()
        closed = time.monotonic()
        timeout_s = DESTINATION_TIMEOUT_NS / 1e9
        await await_until(lambda: dests() == 1, timeout_s + 3, "the silent destination to go")
        dropped_after = time.monotonic() - closed
        producer.fast()
        await producer.done(30)
        await await_until(
            lambda: stays.positions and stays.positions[-1] == pub.position,
            30,
            "the staying receiver to get the last message",
        )
        await stays.stop()
        assert dropped_after >= timeout_s - 0.5, f"dropped {dropped_after:.2f} s after it went"
        assert stays.received == expected
        assert leaves.received == expected[: len(leaves.received)]


# -- 4. flow control ------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("goes", ["dies", "closes"])
async def test_min_flow_control_is_held_by_the_slowest_until_it_goes(procs, goes):
    """fc=min: a receiver that stops consuming holds the publisher within a window of its
    position. Once it goes the other receiver gets everything: a receiver that dies (its
    process killed) releases the publisher after the 2 s receiver timeout; one whose driver
    closes says farewell (an end-of-stream status message), which releases it at once."""
    channel = multicast("224.20.30.3", free_port(), "|fc=min")
    expected = messages(3000, (4, 300, 1377, 2000))
    async with contextlib.AsyncExitStack() as stack:
        a = await stack.enter_async_context(aeronio.connect())
        fast_driver = await stack.enter_async_context(aeronio.connect())
        fast_sub = await fast_driver.add_subscription(channel, 13)
        if goes == "dies":  # in a process of its own, on a driver of its own
            slow = procs.role(
                "stalled_subscriber", dir=procs.new_dir(), stream=13, channel=channel, embedded=True
            )
        else:
            slow_driver = await aeronio.connect()
            stack.push_async_callback(slow_driver.close)
            await slow_driver.add_subscription(channel, 13)
        pub = await a.add_publication(channel, 13)
        receivers = lambda: counter(a, FLOW_CONTROL_RECEIVERS_TYPE_ID, pub.registration_id)  # noqa: E731
        await await_until(lambda: pub.is_connected and receivers() == 2, 20, "two receivers")
        if goes == "dies":
            assert (await slow.aexpect_json("ready", timeout=20))["position"] == 0
        await image_of(fast_sub)
        fast = Receiver(fast_sub, "the consuming receiver").start()
        sender_limit = lambda: counter(a, SENDER_LIMIT_TYPE_ID, pub.registration_id)  # noqa: E731
        sender_position = lambda: counter(a, SENDER_POSITION_TYPE_ID, pub.registration_id)  # noqa: E731

        # The slow subscription is never polled: the publisher fills its window and stops.
        sent: list[int] = []
        result = 0
        async with asyncio.timeout(10):
            while True:
                result = pub.try_offer(expected[len(sent)])
                if result > 0:
                    sent.append(result)
                    continue
                assert result == aeronio.BACK_PRESSURED, result
                if sender_limit() - sender_position() < MTU:  # no frame fits any more
                    break
                await asyncio.sleep(0.01)
        held = pub.position
        await counted_more(a, SystemCounters.STATUS_MESSAGES_RECEIVED, "status messages, held")
        assert pub.try_offer(expected[len(sent)]) == aeronio.BACK_PRESSURED
        assert pub.position == held
        # The sender stops at the slow receiver's position (0: it never reads) plus its window
        # (half a term), the publisher at a term window (another half term) past the sender,
        # overshot by at most the message that crossed its limit.
        assert sender_limit() == TERM // 2
        assert pub.position_limit <= sender_position() + TERM // 2
        assert held < pub.position_limit + 2048
        # The consuming receiver gets what the sender sent, and no more is sent.
        sendable = sum(1 for position in sent if position <= sender_position())
        await fast.wait_for(sendable, 10)
        await counted_more(fast_driver, SystemCounters.HEARTBEATS_RECEIVED, "heartbeats, held")
        assert fast.received == expected[:sendable]

        if goes == "dies":
            slow.kill()
        else:
            await slow_driver.close()
        gone = time.monotonic()
        released = 0.0

        async def produce() -> None:
            nonlocal released
            for message in expected[len(sent) :]:
                sent.append(await pub.offer(message, timeout=20))
                released = released or time.monotonic() - gone

        async with asyncio.timeout(RECEIVER_TIMEOUT_NS / 1e9 + 20):
            await produce()
        await fast.wait_for(len(expected), 20)
        await fast.stop()
        if goes == "dies":
            assert released >= RECEIVER_TIMEOUT_NS / 1e9 - 0.5, f"released after {released:.2f} s"
        else:
            assert released < RECEIVER_TIMEOUT_NS / 1e9 - 0.5, f"released after {released:.2f} s"
        assert fast.received == expected
        assert fast.positions == sent
        assert receivers() == 1


async def test_min_flow_control_counts_two_endpoints_of_one_driver_as_two_receivers():
    """fc=min over a manual MDC publication whose two destinations are subscribed in one
    driver: each endpoint is a receiver of its own (its own receiver id, as Aeron gives each
    endpoint), so the one that never reads holds the publisher while the other reads on, and
    closing it (its farewell) releases the publisher without taking the other out."""
    endpoints = [f"aeron:udp?endpoint={HOST}:{free_port()}" for _ in range(2)]
    channel = f"aeron:udp?control={HOST}:{free_port()}|control-mode=manual|term-length=64k"
    expected = messages(1500, (4, 300, 1377, 2000))
    async with contextlib.AsyncExitStack() as stack:
        a = await stack.enter_async_context(aeronio.connect())
        b = await stack.enter_async_context(aeronio.connect())
        reading = await b.add_subscription(endpoints[0], 16)
        stalled = await b.add_subscription(endpoints[1], 16)
        pub = await a.add_publication(f"{channel}|fc=min", 16)
        for endpoint in endpoints:
            await pub.add_destination(endpoint)
        receivers = lambda: counter(a, FLOW_CONTROL_RECEIVERS_TYPE_ID, pub.registration_id)  # noqa: E731
        await await_until(lambda: pub.is_connected and receivers() == 2, 10, "two receivers")
        await image_of(stalled)
        await image_of(reading)
        fast = Receiver(reading, "the reading endpoint").start()
        sender_limit = lambda: counter(a, SENDER_LIMIT_TYPE_ID, pub.registration_id)  # noqa: E731
        sender_position = lambda: counter(a, SENDER_POSITION_TYPE_ID, pub.registration_id)  # noqa: E731

        sent: list[int] = []
        async with asyncio.timeout(10):
            while sender_limit() - sender_position() >= MTU:  # until no frame fits
                result = pub.try_offer(expected[len(sent)])
                if result > 0:
                    sent.append(result)
                else:
                    assert result == aeronio.BACK_PRESSURED, result
                    await asyncio.sleep(0.01)
        await counted_more(a, SystemCounters.STATUS_MESSAGES_RECEIVED, "status messages, held")
        sendable = sum(1 for position in sent if position <= sender_position())
        await fast.wait_for(sendable, 10)
        # The stalled endpoint (at 0) paces the sender, however far the other has read.
        assert sender_limit() == TERM // 2
        assert fast.received == expected[:sendable]

        await stalled.close()
        await await_until(
            lambda: sender_limit() > TERM // 2,
            RECEIVER_TIMEOUT_NS / 1e9 - 0.5,
            "the closed endpoint's farewell to release the sender",
        )
        async with asyncio.timeout(30):
            for message in expected[len(sent) :]:
                sent.append(await pub.offer(message, timeout=20))
        await fast.wait_for(len(expected), 20)
        await fast.stop()
        assert fast.received == expected
        assert fast.positions == sent
        assert receivers() == 1


async def stalled_under_max_flow_control(stack, group: str, stream: int, on_unavailable=None):
    """Two receivers of a multicast publication (fc=max, the default); one stops consuming
    while 2000 messages (~40 terms) go out: the publisher is not held back, the other receiver
    gets everything. The stalled receiver then resumes. Returns (the stalled receiver's client,
    the publication, the producer, the resumed receiver, its subscription)."""
    channel = multicast(group, free_port())
    expected = messages(2000, (4, 300, 1377, 2000))
    a = await stack.enter_async_context(aeronio.connect())
    drivers = [await stack.enter_async_context(aeronio.connect()) for _ in range(2)]
    fast_sub = await drivers[0].add_subscription(channel, stream)
    slow_sub = await drivers[1].add_subscription(channel, stream, unavailable_image=on_unavailable)
    pub = await a.add_publication(channel, stream)
    receivers = lambda: counter(a, FLOW_CONTROL_RECEIVERS_TYPE_ID, pub.registration_id)  # noqa: E731
    await await_until(lambda: pub.is_connected and receivers() == 2, 10, "two receivers")
    slow_image = await image_of(slow_sub)
    await image_of(fast_sub)
    fast = Receiver(fast_sub, "the consuming receiver").start()
    producer = Producer(pub, expected)
    await producer.done(30)
    await await_until(
        lambda: fast.positions and fast.positions[-1] == pub.position,
        30,
        "the consuming receiver to get the last message",
    )
    await fast.stop()
    assert fast.received == expected
    assert fast.positions == producer.positions
    assert slow_image.position == 0
    assert pub.position > 20 * TERM  # the publisher went on, far past the stalled receiver
    slow = Receiver(slow_sub, "the resumed receiver").start()
    return drivers[1], pub, producer, slow, slow_sub


async def test_max_flow_control_is_not_held_by_a_receiver_that_stops_consuming():
    """fc=max (the multicast default): a receiver that stops consuming does not hold the
    publisher back; the other gets everything while it falls ~40 terms behind. Resumed, it
    delivers whole messages only, in order, never one twice: those within a term of where it
    stopped (its image takes no packet further ahead: over-runs), then nothing, as the rest is
    gone from the sender's term of retransmits. It does not catch up; its image goes unavailable
    (the test below)."""
    async with contextlib.AsyncExitStack() as stack:
        slow_driver, pub, producer, slow, slow_sub = await stalled_under_max_flow_control(
            stack, "224.20.30.5", 14
        )
        await await_until(
            lambda: slow_sub.images and slow_sub.images[0].position >= TERM,
            10,
            "the resumed receiver to read the term it holds",
        )
        # nothing further arrives: what comes now is beyond its window (over-runs)
        await counted_more(slow_driver, SystemCounters.FLOW_CONTROL_OVER_RUNS, "over-runs")
        await slow.stop()
        got = len(slow.received)
        assert slow.received == producer.expected[:got], "out of order, duplicated or corrupt"
        assert slow.positions == producer.positions[:got]
        assert TERM - 2048 < slow.positions[-1] <= TERM, slow.positions[-1]
        assert slow_sub.images[0].position == TERM < pub.position


@pytest.mark.slow
async def test_a_receiver_left_more_than_a_term_behind_loses_its_image():
    """What Aeron does with a receiver that max flow control left behind for good: it cannot
    catch up (what it lacks is no longer retransmitted, and the heartbeats at the publisher's
    position are beyond its window: over-runs, not signs of life), so its image goes
    unavailable after the image liveness timeout (10 s), having delivered nothing past the
    term it held."""
    gone: list[int] = []  # the image's position when it went
    async with contextlib.AsyncExitStack() as stack:
        _, pub, producer, slow, slow_sub = await stalled_under_max_flow_control(
            stack, "224.20.30.11", 17, lambda image: gone.append(image.position)
        )
        liveness_s = IMAGE_LIVENESS_TIMEOUT_NS / 1e9
        await await_until(
            lambda: gone,
            liveness_s + 20,
            lambda: (
                f"the stalled receiver to lose its image (it is at "
                f"{slow_sub.images[0].position if slow_sub.images else '?'} of {pub.position})"
            ),
        )
        await slow.stop()
        assert gone == [TERM] and slow_sub.images == ()
        got = len(slow.received)
        assert slow.received == producer.expected[:got], "out of order, duplicated or corrupt"
        assert TERM - 2048 < slow.positions[-1] <= TERM < pub.position, slow.positions[-1]


@pytest.mark.slow
async def test_async_for_is_told_when_its_image_is_replaced():
    """The stalled receiver's image goes while the publication goes on, and a new image of the
    same session takes the stream up further on. Its `async for` raises ImageUnavailableError
    at the position just after the last message it delivered, before any message of the new
    image (never silently on at another position); iterating again goes on with the new one."""
    async with contextlib.AsyncExitStack() as stack:
        _, pub, producer, slow, slow_sub = await stalled_under_max_flow_control(
            stack, "224.20.30.13", 18
        )
        first = slow_sub.images[0]

        async def trickle() -> None:
            for i in itertools.count():
                await pub.offer(payload(i, 100), timeout=20)
                await asyncio.sleep(0.02)

        trickling = asyncio.create_task(trickle())
        try:
            liveness_s = IMAGE_LIVENESS_TIMEOUT_NS / 1e9
            await await_until(
                lambda: slow.lost and len(slow.received) > slow.lost[0][0],
                2 * liveness_s + 15,
                "the receiver to be told its image went, then to read a new one",
            )
        finally:
            trickling.cancel()
            await slow.stop()
        ((before, error),) = slow.lost
        assert first.is_closed and slow_sub.images[0] is not first
        assert slow_sub.images[0].session_id == first.session_id == error.session_id
        assert slow.received[:before] == producer.expected[:before]
        # the image's position: after the last message delivered (and the term's padding); it
        # had read the one term it held
        assert error.position == TERM and TERM - 2048 < slow.positions[before - 1] <= TERM
        assert f"position {error.position}" in str(error)
        assert slow.positions[before] > error.position + TERM, "the new image is further on"
        assert slow_sub.images[0].join_position > error.position


@pytest.mark.slow
async def test_tagged_flow_control_needs_its_group_of_tagged_receivers():
    """fc=tagged,g:7/2: the publication is connected only once two receivers with gtag=7 are
    heard; an untagged receiver does not count."""
    port = free_port()
    channel = multicast("224.20.30.7", port, "|fc=tagged,g:7/2")
    tagged = multicast("224.20.30.7", port, "|gtag=7")
    untagged = multicast("224.20.30.7", port)
    async with contextlib.AsyncExitStack() as stack:
        a = await stack.enter_async_context(aeronio.connect())
        b = [await stack.enter_async_context(aeronio.connect()) for _ in range(3)]
        pub = await a.add_publication(channel, 15)
        receivers = lambda: counter(a, FLOW_CONTROL_RECEIVERS_TYPE_ID, pub.registration_id)  # noqa: E731

        async def heard(driver, sub, what: str) -> None:
            """`sub` has an image and its driver sent 3 more status messages (>= 400 ms)."""
            await image_of(sub)
            sent = system_counter(driver, SystemCounters.STATUS_MESSAGES_SENT)
            await await_until(
                lambda: system_counter(driver, SystemCounters.STATUS_MESSAGES_SENT) >= sent + 3,
                5,
                f"the {what} receiver to send status messages",
            )

        first = await b[0].add_subscription(tagged, 15)
        await heard(b[0], first, "first tagged")
        assert receivers() == 1
        assert not pub.is_connected and pub.try_offer(b"x") == aeronio.NOT_CONNECTED

        other = await b[1].add_subscription(untagged, 15)
        await heard(b[1], other, "untagged")
        assert receivers() == 1
        assert not pub.is_connected and pub.try_offer(b"x") == aeronio.NOT_CONNECTED

        second = await b[2].add_subscription(tagged, 15)
        await await_until(lambda: pub.is_connected, 10, "the second tagged receiver to connect")
        assert receivers() == 2
        position = pub.try_offer(b"tagged")
        assert position > 0
        for sub in (first, other, second):
            async with asyncio.timeout(10):
                message = await sub.receive()
            assert message.data == b"tagged" and message.position == position


async def test_tagged_flow_control_without_a_group_size_takes_untagged_receivers_meanwhile():
    """fc=tagged,g:7 (no group size: none required), as Aeron 1.53's: an untagged receiver alone
    connects the publication and paces it (not counted in fc-receivers); a tagged one, once
    heard, is the one counted. It used to stay unconnected until a tagged receiver came."""
    port = free_port()
    channel = multicast("224.20.30.9", port, "|fc=tagged,g:7")
    async with contextlib.AsyncExitStack() as stack:
        a = await stack.enter_async_context(aeronio.connect())
        b = [await stack.enter_async_context(aeronio.connect()) for _ in range(2)]
        pub = await a.add_publication(channel, 16)
        receivers = lambda: counter(a, FLOW_CONTROL_RECEIVERS_TYPE_ID, pub.registration_id)  # noqa: E731
        untagged = await b[0].add_subscription(multicast("224.20.30.9", port), 16)
        await await_until(lambda: pub.is_connected, 10, "the untagged receiver to connect")
        assert receivers() == 0
        sent = [payload(i, 3000) for i in range(200)]  # 600 KB: past any one window
        reader = Receiver(untagged, "the untagged receiver").start()
        for data in sent:
            assert await pub.offer(data, timeout=10) > 0
        await reader.wait_for(len(sent), 20)
        await reader.stop()
        assert reader.received == sent and reader.lost == []
        tagged = await b[1].add_subscription(multicast("224.20.30.9", port, "|gtag=7"), 16)
        await image_of(tagged)
        await await_until(lambda: receivers() == 1, 10, "the tagged receiver to be counted")


# -- 5. spy ---------------------------------------------------------------------------------


async def test_spy_of_a_multicast_publication_gets_what_it_sends():
    port = free_port()
    channel = multicast("224.20.30.9", port)
    spy_channel = f"aeron-spy:aeron:udp?endpoint=224.20.30.9:{port}|interface={HOST}"
    expected = messages(1000)
    async with aeronio.connect() as a, aeronio.connect() as b:
        spy = await a.add_subscription(spy_channel, 16)
        sub = await b.add_subscription(channel, 16)
        pub = await a.add_publication(channel, 16)
        await await_until(lambda: pub.is_connected, 10, "the multicast publication to connect")
        assert (await image_of(spy)).session_id == pub.session_id
        spied = Receiver(spy, "the spy").start()
        received = Receiver(sub, "the receiver").start()
        producer = Producer(pub, expected)
        await producer.done(30)
        for receiver in (spied, received):
            await await_until(
                lambda r=receiver: r.positions and r.positions[-1] == pub.position,
                20,
                f"{receiver.name} to get the last message",
            )
            await receiver.stop()
            assert receiver.received == expected, receiver.name
            assert receiver.positions == producer.positions, receiver.name


async def test_a_group_keeps_16_resends_in_hand_and_counts_the_overflow():
    """A multi-destination-cast publication has group semantics (Aeron's max-resend, 16 ranges
    in hand): of 17 NAKs of distinct ranges at once, 16 are resent, each counted once in
    Retransmits Sent, and the 17th is dropped and counted in Retransmit Pool Overflow (never
    counted before). A raw socket plays the receiver: it answers the SETUP, reads the data and
    NAKs (one NAK per datagram, as Aeron's receivers send them)."""
    control = free_port()
    channel = f"aeron:udp?control={HOST}:{control}|control-mode=manual|term-length=64k"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as receiver:
        receiver.bind((HOST, 0))
        receiver.settimeout(10)
        async with aeronio.connect() as a:
            pub = await a.add_publication(channel, 7)
            await pub.add_destination(f"aeron:udp?endpoint={HOST}:{receiver.getsockname()[1]}")

            def frames_until(kind: int, end: int = 0) -> Frame:
                """The datagrams' frames until one of `kind` (DATA: one reaching `end`)."""
                while True:
                    datagram = receiver.recv(65536)
                    for ref in iter_frames(datagram):
                        frame = ref.decode(datagram)
                        if ref.type == kind and (
                            kind != HDR_TYPE_DATA or frame.term_offset + ref.frame_length >= end
                        ):
                            return frame

            setup = await asyncio.to_thread(frames_until, HDR_TYPE_SETUP)
            where = dict(session_id=pub.session_id, stream_id=7, term_id=setup.active_term_id)
            sm = status_message(
                session_id=pub.session_id, stream_id=7,
                consumption_term_id=setup.active_term_id, consumption_term_offset=0,
                receiver_window=32 * 1024, receiver_id=1234,
            )  # fmt: skip
            receiver.sendto(sm.encode(), (HOST, control))
            await await_until(lambda: pub.is_connected, 10, "the SM to connect the publication")
            for _ in range(17):
                assert await pub.offer(bytes(32)) > 0  # a 64-byte frame each
            await asyncio.to_thread(frames_until, HDR_TYPE_DATA, 17 * 64)
            sent = system_counter(a, SystemCounters.RETRANSMITS_SENT)
            for k in range(17):  # all queued before the driver, on this loop, reads them at once
                nak = nak_frame(**where, term_offset=k * 64, length=64)
                receiver.sendto(nak.encode(), (HOST, control))
            await await_until(
                lambda: system_counter(a, SystemCounters.RETRANSMIT_OVERFLOW) == 1,
                10,
                "the 17th NAK counted as an overflow",
            )
            await await_until(
                lambda: system_counter(a, SystemCounters.RETRANSMITS_SENT) == sent + 16,
                10,
                "16 retransmits",
            )
