"""A standalone driver (`aeronio driver`) with clients in real processes: sharing one log
between publisher processes, faults (SIGKILLed publishers, subscribers and drivers), two drivers
on one directory, protocol refusals and clean shutdown.

Every wait is bounded; every child is SIGKILLed and reaped at teardown (see procs.Procs).
"""

from __future__ import annotations

import asyncio
import io
import os
import signal
import struct
import time

import pytest

import aeronio
from aeronio import cli
from aeronio.counters import CountersReader, SystemCounters
from tests.support.ports import free_port
from tests.support.procs import (
    IPC,
    await_until,
    counter_labels,
    counters_path,
    payload_size,
    procs_fixture,
    system_counters,
)

TERM_64K = ("--ipc-term-length", "65536")
WINDOW_64K = 65536 // 2  # the default IPC term window: half a term
SHORT_TIMEOUTS = (
    "--publication-unblock-timeout-ns",
    "500000000",
    "--client-liveness-timeout-ns",
    "1000000000",
)
IPC_MAX_PAYLOAD = 1408 - 32  # default ipc mtu minus the data header

procs = pytest.fixture(procs_fixture, name="procs")


async def round_trip(dir: str, stream: int = 77) -> None:
    """A client attaches to the driver on `dir`, publishes and receives one message."""
    async with asyncio.timeout(20):
        async with aeronio.connect(dir, driver_timeout_s=5) as aeron:
            subscription = await aeron.add_subscription(IPC, stream)
            publication = await aeron.add_publication(IPC, stream)
            await publication.offer(b"round trip", timeout=10)
            message = await subscription.receive()
            assert message.data == b"round trip"
            assert message.header.session_id == publication.session_id


# -- 1. N publisher processes x M subscriber processes -----------------------------------------


def checking_subscribers(procs, processes: int, name: str, **kwargs) -> list:
    """`processes` checking subscriber processes (procs.role_checking_subscriber), each
    subscribed on return."""
    subscribers = [
        procs.role("checking_subscriber", f"{name}-{j}", timeout=100, **kwargs)
        for j in range(processes)
    ]
    for subscriber in subscribers:
        subscriber.expect("ready", 20)
    return subscribers


def publisher_processes(procs, processes: int, name: str, **kwargs) -> list:
    """`processes` publisher processes (procs.role_publisher) with pub ids 0.., waiting for
    "go"."""
    return [
        procs.role("publisher", f"{name}-{i}", stdin=True, pub_id=i, **kwargs)
        for i in range(processes)
    ]


PUBLISHERS = 3
SUBSCRIBERS = 2
MESSAGES = 20_000
EXCLUSIVE_ID = 99
EXCLUSIVE_MESSAGES = 5_000


@pytest.mark.slow
def test_publisher_and_subscriber_processes_share_one_log_and_get_every_message(procs):
    dir = procs.new_dir()
    procs.driver(dir, *TERM_64K)
    stream = 1001
    expected = {str(i): MESSAGES for i in range(PUBLISHERS)} | {
        str(EXCLUSIVE_ID): EXCLUSIVE_MESSAGES
    }
    subscribers = checking_subscribers(
        procs, SUBSCRIBERS, "subscriber", dir=dir, stream=stream, expected=expected
    )
    publishers = publisher_processes(
        procs, PUBLISHERS, "publisher", dir=dir, stream=stream, count=MESSAGES
    )
    publishers.append(
        procs.role(
            "publisher",
            "exclusive-publisher",
            stdin=True,
            dir=dir,
            stream=stream,
            pub_id=EXCLUSIVE_ID,
            count=EXCLUSIVE_MESSAGES,
            exclusive=True,
        )
    )
    # Every publication exists before anyone publishes (a log whose last publisher left would
    # drain and close, and a later publisher would get a new session).
    sessions = [publisher.expect_json("session", 20) for publisher in publishers]
    shared, exclusive = sessions[:PUBLISHERS], sessions[PUBLISHERS]
    assert len({s["session_id"] for s in shared}) == 1, shared
    assert len({s["original_registration_id"] for s in shared}) == 1, shared  # one log
    assert not any(s["exclusive"] for s in shared)
    assert exclusive["exclusive"]
    assert exclusive["session_id"] != shared[0]["session_id"]
    assert exclusive["original_registration_id"] != shared[0]["original_registration_id"]
    assert shared[0]["max_payload_length"] == IPC_MAX_PAYLOAD
    assert max(payload_size(0, seq) for seq in range(MESSAGES)) > IPC_MAX_PAYLOAD

    for publisher in publishers:
        publisher.send("go")
    for publisher in publishers:
        publisher.expect_json("done", 100)
    results = [subscriber.expect_json("result", 110) for subscriber in subscribers]

    shared_session, exclusive_session = shared[0]["session_id"], exclusive["session_id"]
    for subscriber, result in zip(subscribers, results, strict=True):
        where = f"{subscriber.name}: {result}"
        assert result["errors"] == [], where
        assert result["counts"] == expected, where
        assert result["received"] == PUBLISHERS * MESSAGES + EXCLUSIVE_MESSAGES, where
        for i in range(PUBLISHERS):
            assert result["sessions"][str(i)] == [shared_session], where
        assert result["sessions"][str(EXCLUSIVE_ID)] == [exclusive_session], where
        # One image per session: the shared log is one image, the exclusive publication another.
        assert sorted(result["image_sessions"]) == sorted([shared_session, exclusive_session])
        assert result["longest"] > IPC_MAX_PAYLOAD  # fragmented messages were reassembled
    for child in publishers + subscribers:
        assert child.wait(20) == 0, child.describe()


@pytest.mark.parametrize("form", ["copy", "views", "batches"])
def test_each_async_for_form_gets_every_message_across_processes(procs, form):
    """`async for` over the subscription, over messages(copy=False) (read in place, consumed at
    the next step) and over batches(): every message of two publisher processes, fragmented
    ones included, in order, byte for byte, through the back-pressure of a 64 KiB term."""
    dir = procs.new_dir()
    procs.driver(dir, *TERM_64K)
    stream, count = 1002, 3_000
    expected = {"0": count, str(EXCLUSIVE_ID): count}
    (subscriber,) = checking_subscribers(
        procs, 1, f"subscriber-{form}", dir=dir, stream=stream, expected=expected, form=form
    )
    publishers = [
        procs.role("publisher", "publisher", stdin=True, dir=dir, stream=stream, pub_id=0,
                   count=count),
        procs.role("publisher", "exclusive-publisher", stdin=True, dir=dir, stream=stream,
                   pub_id=EXCLUSIVE_ID, count=count, exclusive=True),
    ]  # fmt: skip
    for publisher in publishers:
        publisher.expect_json("session", 20)
    for publisher in publishers:
        publisher.send("go")
    for publisher in publishers:
        publisher.expect_json("done", 60)
    result = subscriber.expect_json("result", 70)
    assert result["errors"] == [], result
    assert result["counts"] == expected
    assert result["received"] == 2 * count
    assert result["longest"] > IPC_MAX_PAYLOAD  # fragmented messages were reassembled
    for child in [*publishers, subscriber]:
        assert child.wait(20) == 0, child.describe()


@pytest.mark.slow
def test_udp_between_two_standalone_drivers_with_clients_in_other_processes(procs):
    """Two publisher processes on one driver share a network publication (one session); two
    subscriber processes on another driver read its one image over UDP loopback."""
    sender_dir, receiver_dir = procs.new_dir(), procs.new_dir()
    procs.driver(sender_dir, name="sender-driver")
    procs.driver(receiver_dir, name="receiver-driver")
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=64k"
    stream, count = 1002, 5_000
    expected = {"0": count, "1": count}
    subscribers = checking_subscribers(
        procs,
        2,
        "udp-subscriber",
        dir=receiver_dir,
        stream=stream,
        expected=expected,
        channel=channel,
    )
    publishers = publisher_processes(
        procs, 2, "udp-publisher", dir=sender_dir, stream=stream, count=count, channel=channel
    )
    sessions = [publisher.expect_json("session", 20) for publisher in publishers]
    assert len({s["session_id"] for s in sessions}) == 1, sessions
    for publisher in publishers:
        publisher.send("go")
    for publisher in publishers:
        publisher.expect_json("done", 100)
    for subscriber in subscribers:
        result = subscriber.expect_json("result", 110)
        assert result["errors"] == [], result
        assert result["counts"] == expected, result
        assert result["image_sessions"] == [sessions[0]["session_id"]], result
        assert result["longest"] > 1408 - 32  # fragmented over UDP and reassembled
    assert system_counters(receiver_dir)[SystemCounters.STATUS_MESSAGES_SENT] > 0
    assert system_counters(sender_dir)[SystemCounters.STATUS_MESSAGES_RECEIVED] > 0
    for child in publishers + subscribers:
        assert child.wait(20) == 0, child.describe()


# -- 2. a publisher SIGKILLed mid-claim --------------------------------------------------------


@pytest.mark.slow
async def test_publisher_killed_mid_claim_is_unblocked_and_others_go_on(procs):
    dir = procs.new_dir()
    procs.driver(dir, *TERM_64K, *SHORT_TIMEOUTS)
    stream, before, after = 7, 10, 1000  # `after` messages are more than a window
    async with aeronio.connect(dir, driver_timeout_s=5) as aeron:
        subscription = await aeron.add_subscription(IPC, stream)
        received: list[bytes] = []

        async def consume() -> None:
            async for message in subscription:
                received.append(message.data)

        consumer = asyncio.create_task(consume())
        try:
            claimer = procs.role("claimer", dir=dir, stream=stream, before=before)
            claimer_session = await claimer.aexpect_json("session")
            await claimer.aexpect_json("claimed")
            await await_until(lambda: len(received) >= before, 10, "the messages before the claim")
            steady = procs.role(
                "text_publisher", "steady", dir=dir, stream=stream, prefix="after", count=after
            )
            steady_session = await steady.aexpect_json("session")
            assert steady_session["session_id"] == claimer_session["session_id"]
            assert (
                steady_session["original_registration_id"]
                == claimer_session["original_registration_id"]
            )
            claimer.kill()  # with its claim open: the frame's length stays negative

            await steady.aexpect_json("done", 30)
            assert await steady.await_exit() == 0, steady.describe()
            await await_until(
                lambda: len(received) >= before + after, 15, "the messages after the claim"
            )
            # The abandoned frame became padding: skipped, never delivered.
            assert received == [b"before-%d" % i for i in range(before)] + [
                b"after-%d" % i for i in range(after)
            ]
            counters = await await_until(
                lambda: (c := system_counters(dir))[SystemCounters.CLIENT_TIMEOUTS] >= 1 and c,
                10,
                "the killed claimer's client timeout",
            )
            assert counters[SystemCounters.UNBLOCKED_PUBLICATIONS] >= 1, counters
        finally:
            consumer.cancel()


@pytest.mark.slow
async def test_a_publisher_killed_inside_a_block_copy_leaves_no_torn_frame(procs, tmp_path):
    """An exclusive publisher killed while `offer_block` copies (SIGBUS, its source's file cut
    under the mapping) leaves its log where the last whole append left it: the block's bytes
    copied so far are past its tail, so nothing is unblocked or read of them, and the stream
    ends there once the publisher is timed out. Before, the tail moved first: the driver padded
    over the block's first header and the subscriber read its payload as frames."""
    dir = procs.new_dir()
    procs.driver(dir, *TERM_64K, *SHORT_TIMEOUTS)
    stream, before = 13, 3
    async with aeronio.connect(dir, driver_timeout_s=5) as aeron:
        gone = asyncio.get_running_loop().create_future()
        subscription = await aeron.add_subscription(
            IPC,
            stream,
            unavailable_image=lambda image: gone.set_result(
                (image.position, image.is_end_of_stream)
            ),
        )
        publisher = procs.role(
            "block_cut_short", dir=dir, stream=stream, before=before, path=str(tmp_path / "block")
        )
        cut_at = (await publisher.aexpect_json("cutting", 20))["position"]
        assert await publisher.await_exit() == -signal.SIGBUS, publisher.describe()
        async with asyncio.timeout(20):
            received = [(await subscription.receive()).data for _ in range(before)]
            assert received == [b"before-%d" % i for i in range(before)]
            assert await gone == (cut_at, True)
        assert subscription.poll(lambda buffer, header: None, 10) == 0  # and nothing raised
        counters = system_counters(dir)
        assert counters[SystemCounters.CLIENT_TIMEOUTS] == 1, counters
        assert counters[SystemCounters.UNBLOCKED_PUBLICATIONS] == 0, counters


@pytest.mark.slow
async def test_killed_publishers_publication_is_released_after_the_liveness_timeout(procs):
    """Its image goes unavailable once drained and lingered, its log file and counters go."""
    dir = procs.new_dir()
    procs.driver(dir, *TERM_64K, *SHORT_TIMEOUTS, "--publication-linger-ns", "200000000")
    stream = 9
    async with aeronio.connect(dir, driver_timeout_s=5) as aeron:
        gone = asyncio.get_running_loop().create_future()
        subscription = await aeron.add_subscription(
            IPC, stream, unavailable_image=lambda image: gone.set_result(image.session_id)
        )
        publisher = procs.role(
            "text_publisher", dir=dir, stream=stream, prefix="m", count=5, exclusive=True, stay=True
        )
        session = await publisher.aexpect_json("session")
        await publisher.aexpect_json("done")
        async with asyncio.timeout(10):
            received = [(await subscription.receive()).data for _ in range(5)]
        assert received == [b"m-%d" % i for i in range(5)]
        registration = f"pub-lmt: {session['original_registration_id']} "
        assert any(x.startswith(registration) for x in counter_labels(dir))
        assert os.path.exists(session["log_file"])

        publisher.kill()
        assert await asyncio.wait_for(gone, 10) == session["session_id"]
        assert subscription.images == ()
        await await_until(lambda: not os.path.exists(session["log_file"]), 10, "the log file to go")
        assert not any(x.startswith(registration) for x in counter_labels(dir))
        assert system_counters(dir)[SystemCounters.CLIENT_TIMEOUTS] >= 1

        def errors_shown() -> str:  # what `aeronio errors` prints
            out = io.StringIO()
            cli.run_errors(dir, out)
            return out.getvalue()

        await await_until(lambda: "client liveness timeout" in errors_shown(), 10, "the error")
        assert "ClientTimeoutError: client liveness timeout: no keepalive within 1000 ms" in (
            errors_shown()
        )


@pytest.mark.slow
async def test_a_publisher_timed_out_while_its_loop_stalled_is_refused_not_lost(procs):
    """A publisher whose loop stalls past the liveness timeout is timed out: its stream ends
    where it stopped. Its offers when the loop resumes are back-pressured (the limit was frozen
    at the end of stream), not given positions for messages no subscriber reads, and its next
    wait raises ClientTimeoutError; the subscriber gets the stream to its end, nothing lost."""
    dir = procs.new_dir()
    procs.driver(dir, *TERM_64K, *SHORT_TIMEOUTS)
    stream = 12
    async with aeronio.connect(dir, driver_timeout_s=5) as aeron:
        gone = asyncio.get_running_loop().create_future()
        subscription = await aeron.add_subscription(
            IPC, stream, unavailable_image=lambda image: gone.set_result(image.position)
        )
        publisher = procs.role("stalling_publisher", dir=dir, stream=stream, stdin=True)
        end = 64  # "before stall": a 32-byte header and 12 bytes, aligned to 32
        assert await publisher.aexpect_json("ready", 20) == {"position": end}
        message = await asyncio.wait_for(subscription.receive(), 10)
        assert message.data == b"before stall"
        image = subscription.images[0]
        await await_until(lambda: image.is_end_of_stream, 15, "the driver to end the stream")

        publisher.send("go")  # the loop resumes
        offers = await publisher.aexpect_json("offers", 15)
        assert offers == {"results": [aeronio.BACK_PRESSURED] * 3, "position": end}
        assert await publisher.aexpect("then", 15) == "ClientTimeoutError"
        assert await asyncio.wait_for(gone, 15) == end
        assert image.is_end_of_stream
        assert subscription.poll(lambda *args: pytest.fail(f"delivered {args}"), 10) == 0


# -- 3. a subscriber SIGKILLed while it holds a publisher back ---------------------------------


@pytest.mark.slow
async def test_killed_subscriber_stops_holding_the_publisher_back(procs):
    dir = procs.new_dir()
    procs.driver(dir, *TERM_64K, *SHORT_TIMEOUTS)
    stream = 8
    async with aeronio.connect(dir, driver_timeout_s=5) as aeron:
        live = await aeron.add_subscription(IPC, stream)
        publication = await aeron.add_publication(IPC, stream)
        await await_until(lambda: publication.is_connected and live.images, 10, "the live image")
        received: list[bytes] = []

        async def consume() -> None:
            async for message in live:
                received.append(message.data)

        consumer = asyncio.create_task(consume())
        try:
            stalled = procs.role("stalled_subscriber", dir=dir, stream=stream)
            ready = await stalled.aexpect_json("ready", 20)
            label = f"sub-pos: {ready['registration_id']} "
            assert any(x.startswith(label) for x in counter_labels(dir))

            # Publish until the stalled subscriber's window is full (the live one keeps up):
            # an append is refused once the position reaches the limit.
            full_at = ready["position"] + WINDOW_64K
            sent = 0
            deadline = asyncio.get_running_loop().time() + 15
            while publication.position < full_at:
                message = b"%06d" % sent + bytes(994)
                if publication.try_offer(message) > 0:
                    sent += 1
                else:
                    assert asyncio.get_running_loop().time() < deadline, (
                        f"stuck at {publication.position}, limit {publication.position_limit}"
                    )
                    await asyncio.sleep(0.002)
            await await_until(lambda: len(received) == sent, 10, "the live subscriber")
            assert publication.position_limit <= full_at
            assert publication.try_offer(bytes(1000)) == aeronio.BACK_PRESSURED

            stalled.kill()
            more = 300  # ~4.8 terms of 64 KiB: far more than the window
            async with asyncio.timeout(40):
                for i in range(sent, sent + more):
                    await publication.offer(b"%06d" % i + bytes(994), timeout=10)
                await await_until(lambda: len(received) == sent + more, 10, "the live subscriber")
            assert received == [b"%06d" % i + bytes(994) for i in range(sent + more)]
            assert system_counters(dir)[SystemCounters.CLIENT_TIMEOUTS] >= 1
            assert not any(x.startswith(label) for x in counter_labels(dir))
        finally:
            consumer.cancel()


# -- 4. the driver dies under a client ---------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("death", ["SIGKILL", "SIGSTOP"])
@pytest.mark.loops
async def test_driver_death_fails_pending_awaits_with_driver_timeout(procs, death):
    """SIGKILL ends the driver; SIGSTOP leaves it there but stops its heartbeat. Either way
    every pending await and every later call raises DriverTimeoutError."""
    dir = procs.new_dir()
    driver = procs.driver(dir, *TERM_64K)
    aeron = await asyncio.wait_for(aeronio.connect(dir, driver_timeout_s=2), 10)
    try:
        lonely = await aeron.add_publication(IPC, 41)  # no subscriber: NOT_CONNECTED
        unread = await aeron.add_subscription(IPC, 42)  # never polled: back-pressure
        blocked = await aeron.add_publication(IPC, 42)
        idle = await aeron.add_subscription(IPC, 43)  # nothing publishes: parks
        await await_until(lambda: blocked.is_connected and unread.images, 10, "the image")
        while (result := blocked.try_offer(bytes(1000))) > 0:
            pass
        assert result == aeronio.BACK_PRESSURED
        assert lonely.try_offer(b"x") == aeronio.NOT_CONNECTED

        pending = {
            "not-connected offer": asyncio.create_task(lonely.offer(b"x")),
            "back-pressured offer": asyncio.create_task(blocked.offer(bytes(1000))),
            "parked async for": asyncio.create_task(idle.__anext__()),
        }
        await asyncio.sleep(0.3)
        assert not any(task.done() for task in pending.values())

        if death == "SIGKILL":
            driver.kill()
        else:
            driver.send_signal(signal.SIGSTOP)
        # A command sent to the dead (or frozen) driver is never answered.
        pending["add_publication"] = asyncio.create_task(aeron.add_publication(IPC, 45))
        for name, task in pending.items():
            try:
                result = await asyncio.wait_for(task, 10)
            except aeronio.DriverTimeoutError:
                continue
            except BaseException as e:  # wait_for's own TimeoutError included
                pytest.fail(f"{name} raised {e!r}, not DriverTimeoutError")
            pytest.fail(f"{name} returned {result!r} instead of raising DriverTimeoutError")
        with pytest.raises(aeronio.DriverTimeoutError):
            await asyncio.wait_for(aeron.add_publication(IPC, 44), 10)
        with pytest.raises(aeronio.DriverTimeoutError):
            await asyncio.wait_for(aeron.add_subscription(IPC, 44), 10)
    finally:
        driver.kill()  # SIGKILL ends a stopped process too
        await asyncio.wait_for(aeron.close(), 10)


@pytest.mark.slow
@pytest.mark.loops
async def test_connect_to_a_frozen_driver_raises_driver_timeout_within_the_driver_timeout(procs):
    """A driver that accepts the connection (the kernel does, for a stopped process) but never
    answers the handshake: connect gives up after the client's driver timeout (1 s here; 6 s
    allowed) with DriverTimeoutError."""
    dir = procs.new_dir()
    driver = procs.driver(dir)
    driver.send_signal(signal.SIGSTOP)

    async def attach():
        return await aeronio.connect(dir, driver_timeout_s=1)

    connecting = asyncio.create_task(attach())
    try:
        done, _ = await asyncio.wait({connecting}, timeout=6)
        assert done, "connect to a frozen driver still waits after 6 s with driver_timeout_s=1"
        with pytest.raises(aeronio.DriverTimeoutError):
            connecting.result()
    finally:
        connecting.cancel()
        driver.kill()


# -- 4b. a client whose streams never make it wait -------------------------------------------


def busy(seconds: float) -> None:
    """Work that holds the thread (and the event loop) for `seconds`."""
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


@pytest.mark.parametrize("form", ["copy", "views", "batches"])
async def test_a_client_whose_streams_never_wait_is_not_timed_out(procs, form):
    """`await offer` with space and `async for` with data never suspend the task, yet they
    give the event loop its turns (cython_core/awaitables.pxi), so the client's keepalive
    runs: a publisher offering, then a subscriber reading, each busy for twice the driver's
    client liveness timeout (1 s, checked every 100 ms) between messages, are not timed out."""
    dir = procs.new_dir()
    procs.driver(dir, *SHORT_TIMEOUTS, "--timer-interval-ns", "100000000")
    count, each_s = 10_000, 2.0 / 10_000  # 2 s of each, 640 KB: within the window
    async with aeronio.connect(dir, driver_timeout_s=5) as aeron:
        subscription = await aeron.add_subscription(IPC, 31)
        publication = await aeron.add_publication(IPC, 31)
        await publication.wait_connected(5)
        for i in range(count):
            await publication.offer(struct.pack("<I", i))
            busy(each_s)
        got = []
        if form == "batches":
            async for batch in subscription.batches(fragment_limit=1):
                got.extend(struct.unpack("<I", m.data)[0] for m in batch)
                busy(each_s * len(batch))
                if len(got) == count:
                    break
        else:
            async for message in subscription.messages(copy=form == "copy"):
                got.append(struct.unpack("<I", message.data)[0])
                busy(each_s)
                if len(got) == count:
                    break
        assert got == list(range(count))
        assert system_counters(dir)[SystemCounters.CLIENT_TIMEOUTS] == 0
        await publication.offer(b"still here", timeout=5)
        assert (await asyncio.wait_for(subscription.receive(), 5)).data == b"still here"


# -- 5. two drivers on one directory -----------------------------------------------------------


@pytest.mark.slow
async def test_second_driver_refused_while_first_lives_and_takes_over_a_dead_ones_dir(procs):
    dir = procs.new_dir()
    first = procs.driver(dir, name="first driver")
    second = procs.driver_process(dir, name="second driver")
    assert await second.await_exit(20) != 0, second.describe()
    assert f"pid {first.pid}" in second.stderr, second.describe()
    await round_trip(dir)  # the refused driver left the first one alone

    first.kill()
    # The dead driver's cnc.dat: its heartbeat is too old already (no driver found), or turns
    # too old while the client attaches (the driver is lost), as with Aeron's clients.
    with pytest.raises(
        (aeronio.DriverNotFoundError, aeronio.DriverTimeoutError), match="driver heartbeat"
    ):
        await asyncio.wait_for(aeronio.connect(dir, driver_timeout_s=1), 10)

    third = procs.driver(dir, name="third driver")  # takes over the dead driver's directory
    with CountersReader.open(counters_path(dir)) as reader:
        assert reader.driver_pid == third.pid
    await round_trip(dir)


def test_second_driver_refusal_is_a_one_line_error_not_a_traceback(procs):
    dir = procs.new_dir()
    first = procs.driver(dir, name="first driver")
    second = procs.driver_process(dir, name="second driver")
    assert second.wait(20) != 0, second.describe()
    assert "Traceback" not in second.stderr, second.stderr
    assert any(
        line.startswith("aeronio driver:") and f"pid {first.pid}" in line
        for line in second.stderr.splitlines()
    ), second.stderr


# -- 6. no driver -----------------------------------------------------------


async def test_connect_without_a_driver_raises_driver_not_found(tmp_path):
    for dir in (tmp_path / "never-created", tmp_path):
        with pytest.raises(aeronio.DriverNotFoundError, match="no media driver.*no cnc.dat"):
            await asyncio.wait_for(aeronio.connect(dir, driver_timeout_s=0.5), 5)


# -- 7. clean shutdown -------------------------------------------------------------------------


async def test_a_driver_that_closes_tells_other_processes_clients_it_closed(procs):
    """An embedded driver that closes cleanly frees every client's heartbeat counter: a client
    in another process is told the driver closed (DriverTimeoutError, well within its 30 s
    driver timeout), not that the driver timed it out (ClientTimeoutError)."""
    dir = procs.new_dir()
    stream = 13
    aeron = await asyncio.wait_for(aeronio.connect(dir, dir_delete_on_shutdown=True), 20)
    try:
        await aeron.add_publication(IPC, stream)
        subscriber = procs.role("polling_subscriber", dir=dir, stream=stream, how="async_for")
        await subscriber.aexpect("ready", 20)
    finally:
        await asyncio.wait_for(aeron.close(), 20)
    raised = await subscriber.aexpect_json("raised", 15)
    assert raised["type"] == "DriverTimeoutError", raised


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_signal_stops_the_driver_cleanly_and_removes_its_dir(procs, signum):
    dir = procs.new_dir()
    driver = procs.driver(dir, *TERM_64K)
    async with aeronio.connect(dir, driver_timeout_s=5) as aeron:
        subscription = await aeron.add_subscription(IPC, 3)
        publication = await aeron.add_publication(IPC, 3)
        await publication.offer(b"before shutdown", timeout=10)
        assert (await asyncio.wait_for(subscription.receive(), 10)).data == b"before shutdown"
        assert os.path.exists(publication.log_file)

        driver.send_signal(signum)
        assert await driver.await_exit(10) == 0, driver.describe()
        assert not os.path.exists(dir)
        assert "aeronio driver stopped" in driver.stderr
        assert "Traceback" not in driver.stderr, driver.stderr
        # The client learns its driver is gone.
        with pytest.raises(aeronio.DriverTimeoutError):
            await asyncio.wait_for(aeron.add_publication(IPC, 4), 10)
