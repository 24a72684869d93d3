"""One-to-many interop with the reference Aeron (Java 1.15.1, issue 5): multicast and
multi-destination-cast (MDC) between aeronio and Java drivers on loopback.

Every Java peer is one JVM with an embedded media driver on a directory of its own
(tests/java/McastSubscriber.java, McastPublisher.java, compiled here against the reference jar);
every aeronio peer an embedded driver on the test's event loop. So "two subscribers" are two
drivers, each with its own socket joined to the group (or its own MDC destination), as on two
hosts. The messages (McastMessages.java, `payload` here) are 1,200 of 0..8192 bytes, the larger
ones fragmented (MTU 1408: 1376-byte payloads), over 64 KiB terms: about 35 term rotations with
PAD frames at the term ends. Each receiver must get every message once, in order,
byte-identical (Java reports length, end position and SHA-256 of each; aeronio's are compared
as bytes), each ending at the position Aeron's term appender puts it (PAD included), from the
session of the publication; then END OF STREAM when it closes, and, 1.5 s on (the publication
lingers), still no other image; and no driver, either side, may count errors, invalid packets
or loss gap fills.

- aeronio multicast publication (fc=min) -> two Java subscribers; aeronio's min flow control
  tracks both (fc-receivers = 2) from their status messages.
- Java multicast publication (MinMulticastFlowControl) -> two aeronio subscriptions.
- aeronio MDC publication (control-mode=manual, add_destination) -> one aeronio and one Java
  destination (unicast subscriptions); and the mirror: Java MDC (Publication.addDestination) ->
  one aeronio and one Java destination.
- Dynamic MDC: an aeronio publication (control-mode=dynamic) -> a Java and an aeronio
  subscription that name its control address, and the mirror with a Java publication.

Where the traffic goes: multicast on the root namespace's `lo` with `interface=127.0.0.1`, not
a network namespace. aeronio sets IP_MULTICAST_IF to that address (and loop); Java 1.15.1's
UdpChannel.findInterface takes the interface whose subnet matches if it `supportsMulticast() ||
isLoopback()`, so `lo` (no MULTICAST flag) qualifies, and JDK 17 joins and sends on it. Nothing
leaves the host, no privilege is needed, nothing is changed. The group (224.20.x.y, y odd: the
control group is the next address) and ports are random, so parallel runs do not meet.

Skipped (reason printed) without Java / javac (see tests/java_aeron.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import time
from collections import defaultdict

import pytest

import aeronio
from aeronio.counters import SYSTEM_COUNTER_TYPE_ID
from tests.support.java_aeron import compile_java_sources, require_aeron_java
from tests.support.ports import free_port
from tests.support.procs import Child, Procs, await_until, procs_fixture
from tests.support.reference_aeron import java_args

STREAM_ID = 1010
TERM = "64k"
TERM_LENGTH = 64 * 1024
SIZES = (0, 1, 17, 100, 333, 1375, 1376, 1377, 2800, 4000, 8192)  # 8192: the most 64k allows
COUNT = 1200
# After END OF STREAM the publication lingers (5 s); receivers that ask for SETUPs (dynamic MDC:
# Java 1.15.1 sends a setup-eliciting status message about every second) must not be answered.
QUIET_S = 1.5
CHECKED = ("Errors", "Invalid packets", "Loss gap fills")
LOOPBACK = "127.0.0.1"
# Java's MinMulticastFlowControl for its multicast and MDC publications (1.15.1 has no fc=).
JAVA_MIN_FC = {"aeron.multicast.flow.control.strategy": "io.aeron.driver.MinMulticastFlowControl"}


# -- the messages -----------------------------------------------------------------------------


def payload(i: int, length: int) -> bytes:
    """Message `i` (McastMessages.write): byte k = (i * 131 + k * 7 + (k >> 8) * 3) & 0xFF, the
    first four bytes (when there are four) `i` as a little-endian u32."""
    body = bytearray((i * 131 + k * 7 + (k >> 8) * 3) & 0xFF for k in range(length))
    if length >= 4:
        body[:4] = i.to_bytes(4, "little")
    return bytes(body)


MESSAGES = [payload(i, SIZES[i % len(SIZES)]) for i in range(COUNT)]


def framed(length: int) -> int:
    """The log space a message of `length` takes: its fragments, headers included, aligned."""
    max_payload = 1408 - 32
    full, rest = divmod(length, max_payload)
    frames = [max_payload] * full + ([rest] if rest or not full else [])
    return sum((32 + f + 31) & -32 for f in frames)


def end_positions() -> list[int]:
    """The position after each message of a stream starting at 0: a message goes whole into
    one term, so one that does not fit in what is left of the term starts the next one (the
    rest is PAD)."""
    positions, position = [], 0
    for message in MESSAGES:
        length = framed(len(message))
        left = TERM_LENGTH - position % TERM_LENGTH
        if length > left:
            position += left
        position += length
        positions.append(position)
    return positions


POSITIONS = end_positions()


# -- places on loopback -----------------------------------------------------------------------


def multicast_channel() -> str:
    """A multicast channel on lo: a random odd data group (the control group is the next
    address) and a port free on loopback."""
    group = f"224.20.{random.randrange(1, 255)}.{random.randrange(1, 254, 2)}"
    return f"aeron:udp?endpoint={group}:{free_port()}|interface={LOOPBACK}"


def unicast(port: int) -> str:
    return f"aeron:udp?endpoint={LOOPBACK}:{port}"


# -- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def java_classpath(tmp_path_factory) -> str:
    return compile_java_sources(require_aeron_java(), tmp_path_factory.mktemp("java-classes"))


procs = pytest.fixture(procs_fixture, name="procs")


# -- Java peers -------------------------------------------------------------------------------


class JavaPeer:
    """A Java program of tests/java as a child: its stdout lines (`tag json`) sorted by tag."""

    def __init__(self, child: Child):
        self.child = child
        self.events: dict[str, list] = defaultdict(list)
        self.taken: dict[str, int] = defaultdict(int)  # lines of each tag handed out by wait_one

    def _pump(self, tag: str, count: int, timeout: float) -> list:
        deadline = time.monotonic() + timeout
        while len(self.events[tag]) < count:
            remaining = deadline - time.monotonic()
            try:
                if remaining <= 0:
                    raise AssertionError("timed out")
                line = self.child.expect("", remaining)
            except AssertionError as e:
                raise AssertionError(
                    f"{len(self.events[tag])}/{count} {tag!r} lines within {timeout} s "
                    f"({str(e)[:200]}); {self.child.describe()}"
                ) from None
            name, _, rest = line.partition(" ")
            self.events[name].append(json.loads(rest) if rest else None)
            if name == "error":
                raise AssertionError(f"{self.child.name} said: {rest}; {self.child.describe()}")
        return self.events[tag][:count]

    async def wait_for(self, tag: str, count: int = 1, timeout: float = 20.0) -> list:
        """The first `count` lines tagged `tag` (as JSON), waiting up to `timeout` s for them."""
        return await asyncio.to_thread(self._pump, tag, count, timeout)

    async def wait_one(self, tag: str, timeout: float = 20.0):
        """The next line tagged `tag` not handed out by wait_one before."""
        self.taken[tag] += 1
        return (await self.wait_for(tag, self.taken[tag], timeout))[-1]

    def send(self, line: str = "") -> None:
        self.child.send(line)


def java_peer(procs: Procs, classpath: str, cls: str, *args, props=None) -> JavaPeer:
    props = {"aeron.dir": procs.new_dir(), **(props or {})}
    child = procs.spawn(java_args(cls, props, args, classpath), f"Java {cls}", stdin=True)
    return JavaPeer(child)


def assert_clean(who: str, counters: dict[str, int]) -> None:
    moved = {label: counters[label] for label in CHECKED if counters[label]}
    assert not moved, f"{who}: {moved}; all: {counters}"


def assert_one_image(name: str, session: int, images: list[int]) -> None:
    assert images == [session], (
        f"{name}: images of sessions {images}, expected one of session {session}: the closed "
        f"publication, lingering after END OF STREAM, made the receiver's driver a new image"
    )


async def ended(receivers: list, session: int) -> None:
    """Every receiver's image ended with END OF STREAM; QUIET_S later, nothing came back."""
    for receiver in receivers:
        await receiver.wait_end(session)
    await asyncio.sleep(QUIET_S)
    for receiver in receivers:
        await receiver.finish(session)


# -- receivers --------------------------------------------------------------------------------


class JavaReceiver:
    """A McastSubscriber: a Java driver and subscription of its own."""

    def __init__(self, procs: Procs, classpath: str, channel: str):
        self.name = f"Java subscriber on {channel}"
        self.peer = java_peer(procs, classpath, "McastSubscriber", channel, STREAM_ID, 120)

    async def start(self) -> None:
        await self.peer.wait_for("ready", timeout=30)

    async def wait_image(self, session: int) -> None:
        image = await self.peer.wait_one("image", timeout=20)
        assert image["session"] == session, f"{self.name}: {image}, publication {session}"
        assert image["source"].startswith(f"{LOOPBACK}:"), image

    async def check_messages(self, session: int) -> None:
        """MESSAGES from `session`, in order, byte-identical, each ending at its position."""
        got = await self.peer.wait_for("msg", COUNT, timeout=30)
        for i, (msg, message) in enumerate(zip(got, MESSAGES, strict=True)):
            want = {
                "session": session,
                "length": len(message),
                "position": POSITIONS[i],
                "sha256": hashlib.sha256(message).hexdigest(),
            }
            assert msg == want, f"{self.name}: message {i}: got {msg}, sent {want}"

    async def wait_end(self, session: int) -> None:
        """END OF STREAM at the last position."""
        gone = await self.peer.wait_one("unavailable", timeout=15)
        assert gone == {"session": session, "position": POSITIONS[-1], "end_of_stream": True}

    async def finish(self, session: int) -> None:
        """Nothing more since: no message, no image again; a clean driver."""
        self.peer.send("done")
        result = await self.peer.wait_one("result", timeout=15)
        assert result["messages"] == COUNT and not result["timed_out"], result
        assert_one_image(self.name, session, [i["session"] for i in self.peer.events["image"]])
        assert_clean(self.name, result["counters"])

    async def close(self) -> None:
        pass  # procs kills the JVM


def system_counters(aeron: aeronio.Aeron) -> dict[str, int]:
    return {
        c.label: c.value for c in aeron.counters.for_each() if c.type_id == SYSTEM_COUNTER_TYPE_ID
    }


def counter(aeron: aeronio.Aeron, prefix: str) -> int | None:
    """The value of the (one) counter whose label starts with `prefix`."""
    found = [c.value for c in aeron.counters.for_each() if c.label.startswith(prefix)]
    assert len(found) <= 1, found
    return found[0] if found else None


class AeronioReceiver:
    """An aeronio subscription on a driver of its own, drained with `async for` in a task."""

    def __init__(self, channel: str):
        self.name = f"aeronio subscriber on {channel}"
        self.channel = channel
        self.aeron: aeronio.Aeron | None = None
        self.messages: list[aeronio.Message] = []
        self.available: list[int] = []
        self.unavailable: list[tuple[int, bool]] = []  # (session, end of stream)
        self.task: asyncio.Task | None = None

    async def start(self) -> None:
        self.aeron = await aeronio.connect()  # an embedded driver of its own
        subscription = await self.aeron.add_subscription(
            self.channel,
            STREAM_ID,
            available_image=lambda image: self.available.append(image.session_id),
            unavailable_image=lambda image: self.unavailable.append(
                (image.session_id, image.is_end_of_stream)
            ),
        )

        async def drain() -> None:
            async for message in subscription:
                self.messages.append(message)

        self.task = asyncio.create_task(drain())

    async def wait_image(self, session: int) -> None:
        await await_until(lambda: self.available, 20, f"{self.name}: no image")
        assert self.available == [session], f"{self.name}: images {self.available}"

    async def check_messages(self, session: int) -> None:
        await await_until(
            lambda: len(self.messages) >= COUNT,
            30,
            lambda: f"{self.name}: {len(self.messages)}/{COUNT}: {system_counters(self.aeron)}",
        )
        for i, (message, sent) in enumerate(zip(self.messages, MESSAGES, strict=True)):
            where = f"{self.name}: message {i}"
            assert message.header.session_id == session, where
            assert message.data == sent, f"{where}: {len(message.data)} B, sent {len(sent)}"
            assert message.position == POSITIONS[i], where

    async def wait_end(self, session: int) -> None:
        await await_until(
            lambda: self.unavailable,
            12,
            lambda: f"{self.name}: image of {session} still there: {system_counters(self.aeron)}",
        )
        assert self.unavailable == [(session, True)]

    async def finish(self, session: int) -> None:
        assert_one_image(self.name, session, self.available)
        assert self.unavailable == [(session, True)]
        assert len(self.messages) == COUNT
        assert_clean(self.name, system_counters(self.aeron))

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        if self.aeron is not None:
            await self.aeron.close()


# -- publishers -------------------------------------------------------------------------------


async def aeronio_publishes(channel: str, destinations: list[str], receivers: list) -> None:
    """An aeronio publication of MESSAGES on `channel` (64 KiB terms, min flow control) with
    `destinations` added, once its flow control tracks every receiver; each receiver checked."""
    async with aeronio.connect() as aeron:
        publication = await aeron.add_publication(f"{channel}|term-length={TERM}|fc=min", STREAM_ID)
        for destination in destinations:
            await publication.add_destination(destination)

        def receivers_now() -> int | None:
            return counter(aeron, "fc-receivers:")

        await await_until(
            lambda: publication.is_connected and receivers_now() == len(receivers),
            20,
            lambda: f"connected {publication.is_connected}, fc-receivers {receivers_now()}",
        )
        if "control=" in channel:
            assert counter(aeron, "mdc-num-dests:") == len(receivers)
        session = publication.session_id
        for receiver in receivers:
            await receiver.wait_image(session)

        positions = [await publication.offer(message, timeout=20) for message in MESSAGES]
        assert positions == POSITIONS
        for receiver in receivers:
            await receiver.check_messages(session)
        # Every receiver acknowledged the end (min flow control: the limit is the slowest's
        # status message plus its window, half a term for both) before the close: Aeron
        # 1.15.1's receivers send none once their image ended (aeronio's send a farewell), and
        # an end never acknowledged is reported, an error (in CI once, the last 4 KiB were
        # acknowledged by no status message yet).
        await await_until(
            lambda: (counter(aeron, "snd-lmt:") or 0) >= POSITIONS[-1] + TERM_LENGTH // 2,
            10,
            lambda: f"acknowledged: snd-lmt {counter(aeron, 'snd-lmt:')}",
        )
        await publication.close()
        await ended(receivers, session)
        assert_clean("aeronio publisher", system_counters(aeron))


async def java_publishes(
    procs: Procs, classpath: str, channel: str, destinations: list[str], receivers: list
) -> None:
    """A Java McastPublisher of MESSAGES on `channel` (64 KiB terms, min flow control) with
    `destinations` added, sending once every receiver has its image; each receiver checked."""
    sizes = ",".join(str(s) for s in SIZES)
    java = java_peer(
        procs, classpath, "McastPublisher", f"{channel}|term-length={TERM}", STREAM_ID, COUNT,
        sizes, *destinations, props=JAVA_MIN_FC,
    )  # fmt: skip
    session = (await java.wait_one("publication", timeout=30))["session"]
    await java.wait_one("connected", timeout=30)
    for receiver in receivers:
        await receiver.wait_image(session)
    # Each receiver sends a status message as its image is made; let Java's min flow control
    # have them all before the first message (one it has not heard of yet would not pace it).
    await asyncio.sleep(0.3)
    java.send("go")
    published = await java.wait_one("published", timeout=30)
    assert published == {"position": POSITIONS[-1]}
    for receiver in receivers:
        await receiver.check_messages(session)
    java.send("close")
    await java.wait_one("closed")
    await ended(receivers, session)
    java.send("counters")
    assert_clean("Java publisher", await java.wait_one("counters"))


async def run(procs: Procs, classpath: str, publisher: str, channel: str, destinations, receivers):
    """Start `receivers` (all at once), then the `publisher` ("aeronio" or "java")."""
    try:
        await asyncio.gather(*(receiver.start() for receiver in receivers))
        if publisher == "aeronio":
            await aeronio_publishes(channel, destinations, receivers)
        else:
            await java_publishes(procs, classpath, channel, destinations, receivers)
    finally:
        for receiver in receivers:
            await receiver.close()


# -- the tests --------------------------------------------------------------------------------


async def test_aeronio_multicast_publication_to_two_java_subscribers(procs, java_classpath):
    channel = multicast_channel()
    receivers = [JavaReceiver(procs, java_classpath, channel) for _ in range(2)]
    await run(procs, java_classpath, "aeronio", channel, [], receivers)


async def test_java_multicast_publication_to_two_aeronio_subscriptions(procs, java_classpath):
    channel = multicast_channel()
    receivers = [AeronioReceiver(channel) for _ in range(2)]
    await run(procs, java_classpath, "java", channel, [], receivers)


@pytest.mark.parametrize("publisher", ["aeronio", "java"])
async def test_mdc_manual_to_one_aeronio_and_one_java_destination(procs, java_classpath, publisher):
    control = f"aeron:udp?control={LOOPBACK}:{free_port()}|control-mode=manual"
    destinations = [unicast(free_port()), unicast(free_port())]
    receivers = [
        AeronioReceiver(destinations[0]),
        JavaReceiver(procs, java_classpath, destinations[1]),
    ]
    await run(procs, java_classpath, publisher, control, destinations, receivers)


@pytest.mark.parametrize("publisher", ["aeronio", "java"])
async def test_mdc_dynamic_to_one_aeronio_and_one_java_subscriber(procs, java_classpath, publisher):
    control = f"{LOOPBACK}:{free_port()}"
    channels = [f"{unicast(free_port())}|control={control}" for _ in range(2)]
    receivers = [AeronioReceiver(channels[0]), JavaReceiver(procs, java_classpath, channels[1])]
    publication = f"aeron:udp?control={control}|control-mode=dynamic"
    await run(procs, java_classpath, publisher, publication, [], receivers)
