"""aeronio against the reference Aeron (Java 1.15.1) over UDP unicast on loopback.

A Java media driver (one for the module) and the Java samples run as separate JVMs through
`../shared/aeron-java/aeron-java` (see tests/java_aeron.py); aeronio runs its own embedded
driver on the test's event loop. The two drivers only meet on the wire: SETUP, DATA and PAD
frames, heartbeats with END OF STREAM, status messages, NAKs.

- aeronio publication -> Java BasicSubscriber: every message arrives, byte-identical, as the
  same fragments (MTU-sized) at the same term offsets, across term rotations; closing the
  publication ends the Java image through END OF STREAM (the Java driver's own image liveness
  timeout is set far beyond the waits here).
- Java BasicPublisher -> aeronio subscription: exactly the messages Java says it sent, in order;
  the Java publication closing ends aeronio's image (END OF STREAM, well within aeronio's 10 s
  image liveness), and a new Java publisher gives a second image with a new session.
- Java StreamingPublisher (fragmented 3000 B and random-length up to 64 KiB messages) ->
  aeronio: every message reassembled in `async for`.
- A Java stream paced by aeronio's status messages must not be paced by the 100 ms fallback of
  aeronio's default idle strategy: a subscriber parked in `async for` has to be woken when the
  receiver rebuilds new data into its image.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time

import pytest

import aeronio
from tests.support.java_aeron import JavaDriver, JavaProcess, require_aeron_java
from tests.support.ports import free_port
from tests.support.procs import await_until

STREAM_ID = 10
HEADER = 32
MESSAGE_LINE = re.compile(
    r"Message to stream (\d+) from session (-?\d+) \((\d+)@(\d+)\) <<(.*)>>", re.S
)
JAVA_SYSTEM_CHECKS = ("Invalid packets", "Errors")


def align(value: int, alignment: int = HEADER) -> int:
    return (value + alignment - 1) & -alignment


@pytest.fixture(scope="module")
def java_driver():
    require_aeron_java()
    driver = JavaDriver()
    try:
        driver.wait_ready()
        yield driver
    finally:
        driver.close()


@pytest.fixture
def java(java_driver: JavaDriver):
    """The module's Java driver; every sample a test starts is killed when the test ends, and
    the driver's Invalid packets and Errors counters must not have moved during the test."""
    before = {label: java_driver.counter(label) for label in JAVA_SYSTEM_CHECKS}
    try:
        yield java_driver
    finally:
        java_driver.kill_samples()
    after = {label: java_driver.counter(label) for label in JAVA_SYSTEM_CHECKS}
    assert after == before, f"Java driver counters moved: {before} -> {after}"


def aeronio_counters(aeron: aeronio.Aeron, contains: str = "") -> dict[str, int]:
    return {c.label: c.value for c in aeron.counters.for_each() if contains in c.label}


def assert_aeronio_clean(aeron: aeronio.Aeron) -> None:
    system = aeronio_counters(aeron)
    assert system["Invalid packets"] == 0, system
    assert system["Errors"] == 0, system


def text(i: int, size: int) -> bytes:
    """`size` printable ASCII bytes (no newline), distinct per message."""
    head = f"[{i}]".encode()
    body = bytes(33 + (i * 7 + k) % 94 for k in range(max(0, size - len(head))))
    return (head + body)[:size]


def expected_fragments(
    message: bytes, end_position: int, term_length: int, max_payload: int
) -> list[tuple[int, int, bytes]]:
    """(length, offset of the payload in its term, payload) of each fragment of a message that
    ends at `end_position`: what a Java fragment handler is given for it."""
    chunks = [message[k : k + max_payload] for k in range(0, len(message), max_payload)] or [b""]
    position = end_position - sum(align(HEADER + len(chunk)) for chunk in chunks)
    fragments = []
    for chunk in chunks:
        fragments.append((len(chunk), position % term_length + HEADER, chunk))
        position += align(HEADER + len(chunk))
    return fragments


# -- aeronio publication -> Java subscriber ------------------------------------------------------


def small_and_fragmented(count: int) -> list[int]:
    sizes = [0, 1, 17, 100, 333, 1375, 1376, 1377, 2800, 8192]  # 8 KiB: max for 64 KiB terms
    return [sizes[(i * 7) % len(sizes)] for i in range(count)]


@pytest.mark.parametrize(
    "term_length,sizes",
    [
        # 1376 = MTU - 32, one frame; 1377 the smallest fragmented message; 64 KiB in 48 frames
        ("1m", [0, 1, 1376, 1377, 65536, 5]),
        # thousands of messages over 64 KiB terms: about 75 term rotations, PAD at term ends
        ("64k", small_and_fragmented(3000)),
        # 1 MiB messages (763 frames each) need terms of at least 8 MiB
        ("16m", [1024 * 1024, 3, 1024 * 1024]),
    ],
    ids=["edge-sizes-1m-term", "term-rotations-64k-term", "1MiB-16m-term"],
)
async def test_aeronio_publication_to_java_subscriber(java: JavaDriver, term_length, sizes):
    endpoint = f"aeron:udp?endpoint=127.0.0.1:{free_port()}"
    subscriber = java.sample(
        "BasicSubscriber",
        {"aeron.sample.channel": endpoint, "aeron.sample.streamId": STREAM_ID},
    )
    async with aeronio.connect() as aeron:
        publication = await aeron.add_publication(
            f"{endpoint}|term-length={term_length}", STREAM_ID
        )
        await publication.wait_connected(20)
        session = publication.session_id
        available = await subscriber.wait_for(
            rf"Available image on {re.escape(endpoint)} streamId={STREAM_ID} "
            rf"sessionId={session} from 127\.0\.0\.1:\d+",
            timeout=10,
        )
        assert len(available) == 1

        messages = [text(i, size) for i, size in enumerate(sizes)]
        expected = []
        for message in messages:
            end = await publication.offer(message, timeout=20)
            expected += expected_fragments(
                message, end, publication.term_length, publication.max_payload_length
            )
        if term_length == "64k":
            assert publication.position > 50 * publication.term_length

        lines = await subscriber.wait_for(MESSAGE_LINE, timeout=30, count=len(expected))
        got = [
            (int(m[3]), int(m[4]), m[5].encode("ascii"))
            for m in lines
            if int(m[1]) == STREAM_ID and int(m[2]) == session
        ]
        assert len(got) == len(lines) == len(expected)
        for k, (fragment, want) in enumerate(zip(got, expected, strict=True)):
            assert fragment == want, f"fragment {k}: Java got {fragment[:2]}, sent {want[:2]}"
        # and so the messages: the fragments of each, joined, are the bytes sent
        assert b"".join(f[2] for f in got) == b"".join(messages)

        # END OF STREAM: the Java image goes long before its 60 s liveness timeout would
        await publication.close()
        await subscriber.wait_for(
            rf"Unavailable image on {re.escape(endpoint)} streamId={STREAM_ID} "
            rf"sessionId={session}",
            timeout=12,
        )
        assert_aeronio_clean(aeron)
        assert len(subscriber.matches(MESSAGE_LINE)) == len(expected)  # nothing after EOS


async def test_aeronio_publication_to_java_rate_subscriber(java: JavaDriver):
    """Java's RateSubscriber counts every message aeronio sends (its totals line), and the Java
    driver's receiver position reaches aeronio's publication position."""
    endpoint = f"aeron:udp?endpoint=127.0.0.1:{free_port()}"
    subscriber = java.sample(
        "RateSubscriber",
        {"aeron.sample.channel": endpoint, "aeron.sample.streamId": STREAM_ID},
    )
    count = 200_000
    async with aeronio.connect() as aeron:
        publication = await aeron.add_publication(endpoint, STREAM_ID)
        await publication.wait_connected(20)
        payload = bytes(range(32))
        for _ in range(count):
            await publication.offer(payload, timeout=20)
        assert await subscriber.wait_for(rf".*totals {count} messages .*", timeout=30)
        await await_until(
            lambda: any(
                label.startswith("rcv-pos:") and value == publication.position
                for _id, _type, label, value in java.counters()
            ),
            10,
            lambda: f"Java: {java.counters_text('rcv-pos')}; aeronio at {publication.position}",
        )
        assert_aeronio_clean(aeron)


# -- Java publication -> aeronio subscription ----------------------------------------------------


class Received:
    """Drains an aeronio subscription with `async for` in a task; records images coming and
    going."""

    def __init__(self) -> None:
        self.messages: list[aeronio.Message] = []
        self.available: list[int] = []
        self.unavailable: list[int] = []
        self.task: asyncio.Task | None = None

    def on_available(self, image: aeronio.Image) -> None:
        self.available.append(image.session_id)

    def on_unavailable(self, image: aeronio.Image) -> None:
        self.unavailable.append(image.session_id)

    def start(self, subscription: aeronio.Subscription) -> None:
        async def drain() -> None:
            async for message in subscription:
                self.messages.append(message)

        self.task = asyncio.create_task(drain())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task

    def of_session(self, session: int) -> list[bytes]:
        return [m.data for m in self.messages if m.header.session_id == session]


SENT_LINE = re.compile(r"Offering (\d+)/\d+ - yay!")


async def run_basic_publisher(java: JavaDriver, channel: str, count: int) -> JavaProcess:
    publisher = java.sample(
        "BasicPublisher",
        {
            "aeron.sample.channel": channel,
            "aeron.sample.streamId": STREAM_ID,
            "aeron.sample.messages": count,
        },
    )
    await publisher.wait_for("Done sending.", timeout=count + 20)
    assert await publisher.wait_exit(timeout=15) == 0, publisher.describe()
    return publisher


async def publish_and_check_one_session(
    java: JavaDriver,
    aeron: aeronio.Aeron,
    subscription: aeronio.Subscription,
    received: Received,
    endpoint: str,
    count: int,
) -> int:
    """One Java BasicPublisher run: its messages reach aeronio as a new image, exactly what
    Java says it sent, and its image goes when the Java publication closes. The session id."""
    images_before = len(received.available)
    started = time.monotonic()
    publisher = await run_basic_publisher(java, f"{endpoint}|term-length=64k", count)
    exited = time.monotonic()
    # What Java says it sent ("Offering i/N - yay!" for "Hello World! i"); an offer made before
    # the SETUP / status message handshake completes fails with NOT_CONNECTED and is not sent.
    sent = [f"Hello World! {m[1]}".encode() for m in publisher.matches(SENT_LINE)]
    assert len(sent) >= count - 1, publisher.describe()

    await await_until(
        lambda: len(received.available) == images_before + 1,
        5,
        lambda: f"aeronio images came {received.available}; {publisher.describe()}",
    )
    session = received.available[-1]
    await await_until(
        lambda: len(received.of_session(session)) >= len(sent),
        10,
        lambda: f"aeronio got {received.of_session(session)}, Java sent {sent}",
    )
    assert received.of_session(session) == sent

    # The Java publication is closed (the sample exited); the Java driver lingers it and sends
    # END OF STREAM. aeronio's image goes well within its 10 s image liveness timeout.
    await await_until(
        lambda: len(received.unavailable) == images_before + 1,
        8,
        lambda: (
            f"aeronio image of session {session} still there "
            f"{time.monotonic() - exited:.1f} s after the Java publisher exited "
            f"(images {subscription.images}); aeronio counters: {aeronio_counters(aeron)}"
        ),
    )
    assert received.unavailable[-1] == session
    assert time.monotonic() - started < 30
    return session


async def subscribe(aeron, endpoint: str, received: Received):
    """An aeronio subscription whose images and messages `received` records."""
    subscription = await aeron.add_subscription(
        endpoint,
        STREAM_ID,
        available_image=received.on_available,
        unavailable_image=received.on_unavailable,
    )
    received.start(subscription)
    return subscription


async def test_java_basic_publisher_to_aeronio_subscription(java: JavaDriver):
    endpoint = f"aeron:udp?endpoint=127.0.0.1:{free_port()}"
    received = Received()
    async with aeronio.connect() as aeron:
        subscription = await subscribe(aeron, endpoint, received)
        try:
            first = await publish_and_check_one_session(
                java, aeron, subscription, received, endpoint, 4
            )
            # the publisher restarted: a new publication, a new session, a second image
            second = await publish_and_check_one_session(
                java, aeron, subscription, received, endpoint, 3
            )
            assert first != second
            assert received.available == received.unavailable == [first, second]
            assert subscription.images == ()
            assert [m.data for m in received.messages] == (
                received.of_session(first) + received.of_session(second)
            )
            assert_aeronio_clean(aeron)
        finally:
            await received.stop()


# -- fragmented messages from Java ---------------------------------------------------------------


@pytest.mark.parametrize(
    "term_length,message_length,count,random_length",
    [
        ("64k", 3000, 1200, False),  # 3 frames each, about 57 term rotations
        ("1m", 65536, 120, True),  # random lengths in [8, 64 KiB)
        ("16m", 1024 * 1024, 12, False),  # 1 MiB messages, 763 frames each
    ],
    ids=["3000B-64k-term", "random-to-64KiB-1m-term", "1MiB-16m-term"],
)
async def test_java_streaming_publisher_fragments_reassemble(
    java: JavaDriver, term_length, message_length, count, random_length
):
    endpoint = f"aeron:udp?endpoint=127.0.0.1:{free_port()}"
    received = Received()
    async with aeronio.connect() as aeron:
        subscription = await subscribe(aeron, endpoint, received)
        try:
            publisher = java.sample(
                "StreamingPublisher",
                {
                    "aeron.sample.channel": f"{endpoint}|term-length={term_length}",
                    "aeron.sample.streamId": STREAM_ID,
                    "aeron.sample.messages": count,
                    "aeron.sample.messageLength": message_length,
                    "aeron.sample.randomMessageLength": str(random_length).lower(),
                },
                stdin="n\n",  # "Execute again? (y/n)"
            )
            await publisher.wait_for(r"Done streaming\..*", timeout=30)
            assert await publisher.wait_exit(timeout=15) == 0, publisher.describe()
            await await_until(
                lambda: len(received.messages) >= count,
                10,
                lambda: f"aeronio got {len(received.messages)}/{count}: {publisher.describe()}",
            )
            assert len(received.available) == 1
            session = received.available[0]
            # StreamingPublisher: message i is i (little-endian int64) then zeros
            for i, message in enumerate(received.messages):
                data = message.data
                assert message.header.session_id == session
                assert int.from_bytes(data[:8], "little") == i, f"message {i}"
                if random_length:
                    assert 8 <= len(data) <= message_length, f"message {i}: {len(data)} B"
                else:
                    assert len(data) == message_length, f"message {i}: {len(data)} B"
                assert data[8:] == bytes(len(data) - 8), f"message {i}"
            assert len(received.messages) == count
            image_position = received.messages[-1].position
            assert image_position >= sum(len(m.data) for m in received.messages)
            await await_until(
                lambda: received.unavailable == [session],
                8,
                lambda: f"aeronio image still there: {subscription.images}",
            )
            assert_aeronio_clean(aeron)
        finally:
            await received.stop()


# -- a parked subscriber wakes for data from the network ----------------------------------------


async def test_parked_subscriber_wakes_when_network_data_arrives(java: JavaDriver):
    """With 64 KiB terms the receiver window is 32 KiB: Java sends 32 KiB, then waits for a
    status message, which aeronio sends once its subscriber has consumed. If the subscriber,
    parked in `async for` (NotifyingIdleStrategy), is not woken when the driver rebuilds data
    into the image, every window waits for the idle strategy's fallback: here 60 s, so a missed
    wake fails the 30 s the stream is given, however busy the machine. rcv-pos (data rebuilt
    by the driver) and sub-pos (data consumed) are sampled to show where the time went."""
    endpoint = f"aeron:udp?endpoint=127.0.0.1:{free_port()}"
    count, length = 300, 3000
    idle = aeronio.NotifyingIdleStrategy(fallback_s=60)
    async with aeronio.connect(idle_strategy=idle) as aeron:
        subscription = await aeron.add_subscription(endpoint, STREAM_ID)
        java.sample(
            "StreamingPublisher",
            {
                "aeron.sample.channel": f"{endpoint}|term-length=64k",
                "aeron.sample.streamId": STREAM_ID,
                "aeron.sample.messages": count,
                "aeron.sample.messageLength": length,
            },
            stdin="n\n",
        )
        stalls: list[tuple[float, int, int]] = []  # (seconds, rcv-pos, sub-pos)
        done = asyncio.Event()

        async def watch_positions() -> None:
            behind = None
            while not done.is_set():
                positions = {
                    c.label.split(":")[0]: c.value
                    for c in aeron.counters.for_each()
                    if c.label.startswith(("rcv-pos:", "sub-pos:"))
                }
                rcv, sub = positions.get("rcv-pos"), positions.get("sub-pos")
                now = time.monotonic()
                if rcv is not None and sub is not None:
                    if rcv > sub and behind is None:
                        behind = (now, rcv, sub)
                    elif rcv == sub and behind is not None:
                        stalls.append((now - behind[0], behind[1], behind[2]))
                        behind = None
                await asyncio.sleep(0.001)

        watcher = asyncio.create_task(watch_positions())
        received = 0
        try:
            async with asyncio.timeout(30):
                async for message in subscription:
                    assert len(message.data) == length
                    received += 1
                    if received == count:
                        break
        except TimeoutError:
            long_stalls = [s for s in stalls if s[0] >= 0.05]
            raise AssertionError(
                f"{received} of {count} x {length} B in 30 s; {len(long_stalls)} times the "
                "driver had rebuilt data (rcv-pos) that the parked subscriber (sub-pos) did not "
                f"take for >= 50 ms, first (seconds, rcv-pos, sub-pos): "
                f"{[(round(s[0], 3), s[1], s[2]) for s in long_stalls[:8]]}"
            ) from None
        finally:
            done.set()
            await watcher
