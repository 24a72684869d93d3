"""Multi-destination subscriptions (`aeron:udp?control-mode=manual`, destinations added and
removed) with real drivers and sockets on loopback: one image fed by several destinations, each
message once; Aeron's ReplayMerge (a replay destination, then a live one that is ahead, then the
replay removed); the errors; a subscription that goes on after its destinations are removed.

Publications of one session on several destinations are built as an archive's replay is: an
exclusive publication with the stream's session-id, init-term-id and term-length, at an explicit
term-id and term-offset, so that its frames are the stream's at the same positions. Each driver
is its own `aeronio.connect()`: two publications of one session cannot share a driver.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket

import pytest

import aeronio
from aeronio.counters import MDC_DESTINATIONS_TYPE_ID, SystemCounters
from tests.driver.test_one_to_many import (
    HOST,
    TERM,
    Producer,
    Receiver,
    counted_more,
    counter,
    free_port,
    messages,
)
from tests.support.driver_internals import udp_media
from tests.support.procs import await_until

MDS = "aeron:udp?control-mode=manual"
STREAM = 1001
SESSION = 0x5EED
INITIAL_TERM_ID = 2**31 - 8  # the term ids wrap past 2^31 - 1 at the stream's fourth term
START = 5 * TERM + 2048  # where the stream starts: not at a term's beginning


def unicast(port: int) -> str:
    return f"aeron:udp?endpoint={HOST}:{port}"


def multicast(port: int) -> str:
    """A multicast group kept on loopback."""
    return f"aeron:udp?endpoint=224.20.30.5:{port}|interface={HOST}"


def positioned(channel: str, position: int) -> str:
    """`channel` with the stream's log parameters, starting at `position` (a replay's)."""
    term_id = (INITIAL_TERM_ID + position // TERM + 2**31) % 2**32 - 2**31
    return (
        f"{channel}|session-id={SESSION}|init-term-id={INITIAL_TERM_ID}|term-id={term_id}"
        f"|term-offset={position % TERM}|term-length=64k"
    )


def assert_port_free(port: int) -> None:
    """Nothing is bound to `port` any more (its socket was closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((HOST, port))


async def stream_on_a(subscriber, sender_a, a_destination: str, first: list[bytes], unavailable):
    """An MDS subscription in `subscriber` with destination A, a publication of the session on
    A from START sending `first`, read into a Receiver: (sub, pub_a, receiver, positions of
    `first`, the image)."""
    sub = await subscriber.add_subscription(MDS, STREAM, unavailable_image=unavailable.append)
    await sub.add_destination(a_destination)
    pub_a = await sender_a.add_exclusive_publication(positioned(a_destination, START), STREAM)
    receiver = Receiver(sub, "the subscriber").start()
    positions = [await pub_a.offer(message, timeout=20) for message in first]
    await receiver.wait_for(len(first), 20)
    (image,) = sub.images
    return sub, pub_a, receiver, positions, image


# -- 1. one image across destinations ----------------------------------------------------------


@pytest.mark.parametrize("b_kind", ["unicast", "multicast"])
async def test_an_image_goes_on_across_destinations_with_every_message_once(b_kind):
    """Publication A on destination A (unicast), then publication B of the same session, from
    where A is, on destination B (unicast, or a multicast group): while both send the same
    messages the image takes each once; A ends its stream and its destination is removed, B
    goes on. The subscriber gets 3,000 messages (4 B to 8 KiB, across ~90 term rotations and a
    term id wrap) once, in order, byte for byte, at the publications' positions, on one image,
    which ends when B's stream ends too."""
    expected = messages(3000)
    ports = free_port(), free_port()
    a_destination = unicast(ports[0])
    b_destination = unicast(ports[1]) if b_kind == "unicast" else multicast(ports[1])
    unavailable: list[aeronio.Image] = []
    async with contextlib.AsyncExitStack() as stack:
        subscriber, sender_a, sender_b = [
            await stack.enter_async_context(aeronio.connect()) for _ in range(3)
        ]
        sub, pub_a, receiver, positions, image = await stream_on_a(
            subscriber, sender_a, a_destination, expected[:1000], unavailable
        )
        assert (image.session_id, image.join_position) == (SESSION, START)
        assert (image.initial_term_id, image.term_length) == (INITIAL_TERM_ID, TERM)

        pub_b = await sender_b.add_exclusive_publication(
            positioned(b_destination, pub_a.position), STREAM
        )
        await sub.add_destination(b_destination)
        await await_until(lambda: pub_b.is_connected, 10, "B to hear the subscriber on B")
        await await_until(lambda: image.active_transport_count == 2, 10, "A and B counted")
        for message in expected[1000:2000]:  # both send every message: each is taken once
            position = await pub_a.offer(message, timeout=20)
            assert await pub_b.offer(message, timeout=20) == position
            positions.append(position)
        await receiver.wait_for(2000, 20)

        await pub_a.close()  # A ends its stream (an EOS on A): the image goes on with B
        await asyncio.sleep(0.3)
        await sub.remove_destination(a_destination)
        positions += [await pub_b.offer(message, timeout=20) for message in expected[2000:]]
        await receiver.wait_for(len(expected), 20)
        await await_until(lambda: image.active_transport_count == 1, 10, "B alone counted")
        # a duplicate delivered late would come before a message sent after the last
        expected.append(b"after the last")
        positions.append(await pub_b.offer(expected[-1], timeout=20))
        await receiver.wait_for(len(expected), 20)
        await receiver.stop()
        assert receiver.received == expected
        assert receiver.positions == positions
        assert sub.images == (image,) and not unavailable
        assert positions[-1] > START + 80 * TERM
        await pub_b.close()  # the end of B's stream is the end of the image's: every sender ended
        await await_until(lambda: unavailable, 10, "the image to end with B's stream")
        assert unavailable == [image] and image.is_closed


async def test_an_end_on_one_destination_leaves_an_image_another_feeds_with_data_only():
    """A data packet routed to an image (taken, or dropped as a duplicate or outside the
    window) makes its sender a connection of it, as a SETUP or heartbeat does (a replay
    merging into a busy live stream: the live sender sends data only, its SETUP went to others
    long ago). A sends a message every 2 ms; B (connected to a listener elsewhere) sends
    the same ones 100 behind; B's destination is added; A ends its stream (an EOS on A, at the
    image's end, while B's data is behind it) and B goes on past it: the image goes on with B,
    every message once, in order."""
    expected = messages(600)
    ports = free_port(), free_port()
    a_destination, b_destination = unicast(ports[0]), multicast(ports[1])
    unavailable: list[aeronio.Image] = []
    async with contextlib.AsyncExitStack() as stack:
        # The subscriber's driver decides whether an image ended every 50 ms (its timer).
        subscriber = await stack.enter_async_context(aeronio.connect(timer_interval_ns=50_000_000))
        sender_a, sender_b, listener = [
            await stack.enter_async_context(aeronio.connect()) for _ in range(3)
        ]
        sub, pub_a, receiver, a_positions, image = await stream_on_a(
            subscriber, sender_a, a_destination, expected[:100], unavailable
        )
        heard = await listener.add_subscription(b_destination, STREAM)
        listening = Receiver(heard, "B's listener").start()
        pub_b = await sender_b.add_exclusive_publication(
            positioned(b_destination, pub_a.position), STREAM
        )
        await await_until(lambda: heard.is_connected and pub_b.is_connected, 10, "B's listener")
        a_at = asyncio.Event()  # A sent message 200
        b_at = asyncio.Event()  # B sent message 150

        async def send_a() -> None:
            for i, message in enumerate(expected[100:300], 100):
                a_positions.append(await pub_a.offer(message, timeout=20))
                if i == 200:
                    a_at.set()
                await asyncio.sleep(0.002)
            await pub_a.close()  # an EOS on A at the image's end

        async def send_b() -> list[int]:
            await a_at.wait()
            b_positions = []
            for i, message in enumerate(expected[100:], 100):
                b_positions.append(await pub_b.offer(message, timeout=20))
                if i == 150:
                    b_at.set()
                await asyncio.sleep(0.002)
            return b_positions

        async def add_b() -> None:
            await b_at.wait()
            await sub.add_destination(b_destination)

        _, b_positions, _ = await asyncio.gather(send_a(), send_b(), add_b())
        assert b_positions[:200] == a_positions[100:]
        await receiver.wait_for(len(expected), 20)
        await asyncio.sleep(0.3)  # B quiet, the image at its end: ended if A's EOS ended it
        await receiver.stop()
        await listening.stop()
        assert sub.images == (image,) and not unavailable, "the image ended with A's stream"
        assert receiver.received == expected
        assert receiver.positions == a_positions + b_positions[200:]


# -- 2. ReplayMerge ----------------------------------------------------------------------------


class Replayer:
    """An archive's replay: offers what `recording` received, in order from the stream's start,
    on `publication` (each message must land at its recorded position), following the recording
    as it grows; it pauses after `pause_at` messages until `resume()`."""

    def __init__(self, publication: aeronio.Publication, recording: Receiver, pause_at: int):
        self.publication = publication
        self.recording = recording
        self.pause_at = pause_at
        self.replayed = 0
        self._resumed = asyncio.Event()
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            if self.replayed == self.pause_at:
                await self._resumed.wait()
            i = self.replayed
            if i == len(self.recording.received):
                await asyncio.sleep(0.001)
                continue
            position = await self.publication.offer(self.recording.received[i], timeout=20)
            recorded = self.recording.positions[i]
            assert position == recorded, f"message {i} replayed at {position}, not {recorded}"
            self.replayed += 1

    def resume(self) -> None:
        self._resumed.set()

    async def stop(self) -> None:
        """Stop replaying (raising what the replay failed with, if it did)."""
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def test_replay_merge_joins_a_live_stream_that_is_ahead():
    """As Aeron's ReplayMerge. A live stream (dynamic multi-destination-cast, min flow control)
    is recorded by an archive. A late subscriber on aeron:udp?control-mode=manual adds a replay
    destination, to which the archive replays the recording from the stream's start, and once
    600 messages are in, the live destination (with the live control address: it makes itself a
    destination of the live publication), while live is more than a term ahead: nothing is
    delivered beyond the gap, which only the replay can fill (the live publication keeps one
    term to resend). The replay resumes and catches up; past the live position it is removed.
    The subscriber gets every message once, in order, at the live stream's positions, on one
    image that joined at the stream's start."""
    expected = messages(2400)
    control, recording_port, replay_port, live_port = (free_port() for _ in range(4))
    live_destination = f"{unicast(live_port)}|control={HOST}:{control}"
    unavailable: list[aeronio.Image] = []
    async with contextlib.AsyncExitStack() as stack:
        live_side, archive, subscriber = [
            await stack.enter_async_context(aeronio.connect()) for _ in range(3)
        ]
        live = await live_side.add_exclusive_publication(
            positioned(f"aeron:udp?control={HOST}:{control}|control-mode=dynamic|fc=min", START),
            STREAM,
        )
        recording_sub = await archive.add_subscription(
            f"{unicast(recording_port)}|control={HOST}:{control}", STREAM
        )
        recording = Receiver(recording_sub, "the recording").start()
        producer = Producer(live, expected, slow_at=(1200,))
        await producer.at(1200)

        sub = await subscriber.add_subscription(MDS, STREAM, unavailable_image=unavailable.append)
        await sub.add_destination(unicast(replay_port))
        replay = await archive.add_exclusive_publication(
            positioned(unicast(replay_port), START), STREAM
        )
        merged = Receiver(sub, "the merged subscription").start()
        replayer = Replayer(replay, recording, pause_at=600)
        await merged.wait_for(600, 20)
        live_join = live.position
        assert live_join - merged.positions[-1] > TERM  # beyond the live publication's resends
        await sub.add_destination(live_destination)
        await await_until(
            lambda: counter(live_side, MDC_DESTINATIONS_TYPE_ID, live.registration_id) == 2,
            10,
            "the live destination to make itself a destination of the live publication",
        )
        # live packets come, beyond the image's window: refused (over-runs), not delivered
        await counted_more(subscriber, SystemCounters.FLOW_CONTROL_OVER_RUNS, "live over-runs")
        assert len(merged.received) == 600, "delivered past the gap the replay has to fill"

        replayer.resume()
        await await_until(
            lambda: merged.positions[-1] >= live_join, 30, "the replay to catch up with live"
        )
        await sub.remove_destination(unicast(replay_port))
        await replayer.stop()
        await replay.close()
        producer.fast()
        await producer.done(30)
        # a duplicate delivered late would come before a message sent after the last
        expected.append(b"after the last")
        producer.positions.append(await live.offer(expected[-1], timeout=20))
        await merged.wait_for(len(expected), 30)
        await recording.wait_for(len(expected), 30)
        await merged.stop()
        await recording.stop()
        assert recording.received == expected
        assert recording.positions == producer.positions
        assert merged.received == expected
        assert merged.positions == producer.positions
        (image,) = sub.images
        assert (image.session_id, image.join_position) == (SESSION, START)
        assert not unavailable


# -- 3. errors ---------------------------------------------------------------------------------


async def test_destination_errors_name_what_is_wrong():
    """Each refused channel, command or destination says what is wrong; a refused destination
    leaves the subscription's others as they were."""
    async with aeronio.connect() as a:
        with pytest.raises(aeronio.ChannelUriError, match="takes no endpoint or control"):
            await a.add_subscription(f"{MDS}|endpoint={HOST}:{free_port()}", STREAM)
        with pytest.raises(aeronio.ChannelUriError, match="or control-mode=manual"):
            await a.add_subscription(f"aeron:udp?control={HOST}:{free_port()}", STREAM)
        for channel in (unicast(free_port()), "aeron:ipc"):
            plain = await a.add_subscription(channel, STREAM)
            for change in (plain.add_destination, plain.remove_destination):
                with pytest.raises(
                    aeronio.DriverError, match="only for subscriptions with control-"
                ):
                    await change(unicast(free_port()))

        sub = await a.add_subscription(MDS, STREAM)
        for destination in ("aeron:ipc", MDS, f"aeron-spy:{unicast(free_port())}"):
            with pytest.raises(aeronio.ChannelUriError, match="must be aeron:udp.endpoint"):
                await sub.add_destination(destination)
        with pytest.raises(aeronio.ChannelUriError, match="endpoint"):
            await sub.add_destination("aeron:udp?endpoint=no-port")
        with pytest.raises(aeronio.ChannelUriError, match="multicast subscription takes no"):
            await sub.add_destination(
                f"aeron:udp?endpoint=224.20.30.1:{free_port()}|control=1.2.3.4:5"
            )
        with pytest.raises(aeronio.DriverError, match="is not a destination"):
            await sub.remove_destination(unicast(free_port()))
        port = free_port()
        await sub.add_destination(unicast(port))
        with pytest.raises(aeronio.DriverError, match="already a destination"):
            await sub.add_destination(f"aeron:udp?endpoint=localhost:{port}")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
            taken.bind((HOST, 0))
            busy = taken.getsockname()[1]
            with pytest.raises(aeronio.DriverError, match=f"cannot bind {HOST}:{busy}"):
                await sub.add_destination(unicast(busy))
        await sub.remove_destination(unicast(port))
        with pytest.raises(aeronio.DriverError, match="is not a destination"):
            await sub.remove_destination(unicast(port))
        await sub.close()
        with pytest.raises(aeronio.AeronError, match="the subscription is closed"):
            await sub.add_destination(unicast(free_port()))


# -- 4. a subscription after its destinations are removed ----------------------------------


async def test_a_subscription_goes_on_after_its_destinations_are_removed():
    """Two publications (two sessions, two images), one on each destination. Removing a
    destination closes its socket (the port can be bound again) while the other image goes on;
    with no destination left the subscription is still open, and the destinations added again
    bring both images back where they were: every message arrives once, in order."""
    ports = free_port(), free_port()
    offered: dict[int, list[tuple[bytes, int]]] = {0: [], 1: []}
    batches = iter(messages(1502, sizes=(4, 100, 1377, 3000)))

    async def offer(k: int, count: int) -> None:
        for _ in range(count):
            message = bytes([k]) + next(batches)
            offered[k].append((message, await pubs[k].offer(message, timeout=20)))

    async with aeronio.connect() as subscriber, aeronio.connect() as sender:
        sub = await subscriber.add_subscription(MDS, STREAM)
        for port in ports:
            await sub.add_destination(unicast(port))
        pubs = [
            await sender.add_publication(f"{unicast(port)}|term-length=64k", STREAM)
            for port in ports
        ]
        receiver = Receiver(sub, "the subscriber").start()
        await offer(0, 300)
        await offer(1, 300)
        await receiver.wait_for(600, 20)
        assert len(sub.images) == 2

        await sub.remove_destination(unicast(ports[0]))
        assert_port_free(ports[0])
        await offer(1, 300)
        await receiver.wait_for(900, 20)
        await sub.remove_destination(unicast(ports[1]))
        assert_port_free(ports[1])
        assert not sub.is_closed and len(sub.images) == 2

        for port in ports:
            await sub.add_destination(unicast(port))
        await offer(0, 300)
        await offer(1, 300)
        await offer(0, 1)  # after the last: a duplicate delivered late would come before
        await offer(1, 1)
        await receiver.wait_for(1502, 20)
        await receiver.stop()
        for k in (0, 1):
            got = [
                (m, p)
                for m, p in zip(receiver.received, receiver.positions, strict=True)
                if m[0] == k
            ]
            assert got == offered[k], f"publication {k}"
        await sub.close()
        assert not udp_media(subscriber).receive_endpoints
        for port in ports:
            assert_port_free(port)
