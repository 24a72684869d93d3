"""Hostile control requests to an archive on an embedded driver (issue 30): a ConnectRequest
whose answers would come back to the archive as requests, responses sent to the archive, a
client that never reads its answers. The archive stays idle and bounded, and serves the others.
"""

# ruff: noqa: F811 (the fixtures of test_archive.py, imported, are the tests' arguments)
import asyncio

import pytest

from aeronio import archive
from aeronio.archive import codecs
from aeronio.archive.codecs import ErrorCode
from aeronio.archive.context import MAX_PENDING_RESPONSE_BYTES
from aeronio.protocol.channel import MAX_URI_LENGTH
from tests.driver.test_archive import IPC, STREAM, aeron, arch, client  # noqa: F401
from tests.support.ports import free_port
from tests.support.procs import await_until


class Watcher:
    """Counts the archive messages seen on a channel and stream (another subscriber of it)."""

    def __init__(self, subscription):
        self.subscription = subscription
        self.seen: list[codecs.Message] = []

    def drain(self) -> list[codecs.Message]:
        self.subscription.poll(lambda buffer, header: self.seen.append(codecs.decode(buffer)), 1000)
        return self.seen

    def responses(self) -> list[codecs.Message]:
        return [m for m in self.drain() if isinstance(m, codecs.ControlResponse)]


class WorkCount:
    """The work an archive's duty cycles report, summed."""

    def __init__(self, conductor):
        self.total = 0
        do_work = conductor.do_work

        async def counted() -> int:
            work = await do_work()
            self.total += work
            return work

        conductor.do_work = counted


async def control_publication(aeron, channel: str, stream_id: int):
    publication = await aeron.add_exclusive_publication(channel, stream_id)
    await publication.wait_connected(10)
    return publication


@pytest.mark.parametrize(
    "response",
    [
        ("aeron:ipc?term-length=65536", 11),  # the local control stream, with other params
        ("aeron:udp?endpoint=127.0.0.1:{port}", 10),  # the UDP control stream, by its address
        ("aeron:udp?endpoint=localhost:{port}|mtu=1408", 10),
        ("aeron:ipc", 30),  # the recording events stream
    ],
    ids=["ipc-control", "udp-control-by-address", "udp-control-by-name", "ipc-events"],
)
async def test_a_connect_request_answering_on_the_archive_own_stream_is_dropped(
    aeron, tmp_path, response
):
    port = free_port()
    channel, stream_id = response[0].format(port=port), response[1]
    control_channel = f"aeron:udp?endpoint=localhost:{port}"
    async with archive.Archive.launch(
        aeron,
        archive_dir=tmp_path / "archive",
        control_channel=control_channel,
        recording_events_channel="aeron:ipc",
    ) as arch:
        work = WorkCount(arch.conductor)
        async with archive.connect(aeron, **archive.LOCAL) as client:
            # another subscriber of the stream (a UDP one on the archive's own channel string)
            watched = control_channel if channel.startswith("aeron:udp") else channel
            watcher = Watcher(await aeron.add_subscription(watched, stream_id))
            sessions = set(arch.conductor.control_sessions)
            control = await control_publication(aeron, "aeron:ipc", 11)
            await control.offer(codecs.ConnectRequest(5, stream_id, channel).encode())
            await await_until(lambda: arch.conductor.errors.get(), 10, "the request refused")
            for _ in range(3):  # other clients are served meanwhile
                assert await client.list_recordings() == []
            assert arch.conductor.errors.get() == 1
            assert watcher.responses() == []  # the archive never answered itself
            assert set(arch.conductor.control_sessions) == sessions
            assert not arch.conductor.busy
            assert work.total < 50  # a few requests' work, not a loop's


async def test_a_response_or_replay_to_the_archive_own_stream_is_refused(aeron, arch, client):
    """Where the archive can answer (on the asking session), it answers ERROR."""
    with pytest.raises(archive.ArchiveError) as e:
        await client.start_recording("aeron:ipc?term-length=65536", 30)
    assert str(e.value) == (
        "streamId=30 channel=aeron:ipc?term-length=65536 is this archive's own recording "
        "events stream"
    )
    await client.start_recording(IPC, STREAM)
    publication = await aeron.add_exclusive_publication(IPC, STREAM)
    await publication.offer(b"x" * 100)
    await await_until(lambda: arch.catalog.descriptor(0) is not None, 10, "a recording")
    with pytest.raises(archive.ArchiveError) as e:
        await client.start_replay(0, 0, -1, "aeron:ipc", 10)
    assert str(e.value) == (
        "streamId=10 channel=aeron:ipc is this archive's own control stream: no replay there"
    )
    assert e.value.error_code == ErrorCode.GENERIC


async def test_an_error_quoting_a_long_request_is_cut_to_fit_its_response_channel(aeron, arch):
    """An ERROR quotes the client's channel, here twice (a parameter with no '=', then the
    channel it is in); with a 64 KiB term (8 KiB messages) a channel of Aeron's greatest length
    made it too long to send: the archive raised in every duty cycle from then on, and no client
    could connect. It is cut to fit, and the archive serves on."""
    small = {**archive.LOCAL, "response_channel": "aeron:ipc?term-length=65536"}
    channel = "aeron:udp?endpoint=localhost:1|" + "x" * (MAX_URI_LENGTH - 31)
    assert len(channel) == MAX_URI_LENGTH
    async with archive.connect(aeron, **small) as client:
        with pytest.raises(archive.ArchiveError) as e:
            await client.start_recording(channel, STREAM)
        text = str(e.value)
        assert text.startswith("ChannelUriError: channel parameter 'xxx") and text.endswith("x...")
        assert len(codecs.ControlResponse(0, 0, 0, 0, text).encode()) == 8192
        assert await client.list_recordings() == []  # the same session goes on
    async with archive.connect(aeron, **archive.LOCAL) as other:
        assert await other.list_recordings() == []


async def test_a_control_response_on_the_control_stream_is_dropped_unanswered(aeron, arch, client):
    watcher = Watcher(await aeron.add_subscription("aeron:ipc", 21))  # the client's responses
    control = await control_publication(aeron, "aeron:ipc", 11)
    session = client.control_session_id
    descriptor = codecs.RecordingDescriptor(session, 98, *[0] * 11, "aeron:ipc", "a", "b")
    await control.offer(codecs.ControlResponse(session, 99, 0, 0).encode())
    await control.offer(descriptor.encode())
    await await_until(lambda: arch.conductor.errors.get() == 2, 10, "both counted")
    assert await client.list_recordings() == []
    await await_until(lambda: watcher.drain(), 10, "the listing's answer")
    assert [(type(m), m.code, m.correlation_id in (98, 99)) for m in watcher.seen] == [
        (codecs.ControlResponse, codecs.ControlResponseCode.RECORDING_UNKNOWN, False)
    ]  # only the listing's answer: nothing answered the response nor the descriptor


async def test_a_client_that_never_reads_is_closed_at_the_backlog_bound(aeron, arch, client):
    bound = MAX_PENDING_RESPONSE_BYTES  # the default
    response = "aeron:ipc?term-length=65536"  # a 32 KiB window, filled at once
    reader = Watcher(await aeron.add_subscription(response, 99))
    control = await control_publication(aeron, "aeron:ipc", 11)
    await control.offer(codecs.ConnectRequest(1, 99, response).encode())
    await await_until(lambda: reader.drain(), 10, "the connect answer")
    session_id = reader.seen[0].control_session_id  # and it reads no more
    session = arch.conductor.control_sessions[session_id]
    errors = arch.conductor.errors.get()
    most = 0
    for i in range(2 * bound // 60):  # answers of 63 bytes: twice the bound
        await control.offer(codecs.StopPositionRequest(session_id, i, 12345).encode())
        most = max(most, session.proxy.pending_bytes)
        if i % 64 == 0:
            await asyncio.sleep(0)  # the archive's turn (it runs on this loop)
    await await_until(
        lambda: session_id not in arch.conductor.control_sessions, 20, "the session closed"
    )
    assert session.abort_reason.endswith(f"over the {bound} allowed (max_pending_response_bytes)")
    assert 0 < most <= bound and session.proxy.pending_bytes == 0
    assert session.proxy.publication.is_closed
    # its later requests are counted and dropped; the other client is served
    assert await client.list_recordings() == []
    assert arch.conductor.errors.get() > errors
    assert await client.get_recording_position(0) == -1


@pytest.mark.loops
async def test_a_flood_of_requests_leaves_the_event_loop_to_the_others(aeron, arch, client):
    """The archive yields after each duty cycle: a driver or client on its loop keeps running
    while it works through a flood (it would be timed out otherwise)."""
    control = await control_publication(aeron, "aeron:ipc", 11)
    flood = 20_000
    for i in range(flood):  # queued at once: the archive runs only when this task awaits
        assert control.try_offer(b"\x01\x02\x03" + i.to_bytes(4, "little")) > 0
    seen: list[int] = []

    async def tick() -> None:
        while True:
            seen.append(arch.conductor.errors.get())
            await asyncio.sleep(0)

    ticker = asyncio.create_task(tick())
    try:
        await await_until(lambda: arch.conductor.errors.get() == flood, 30, "the flood dropped")
    finally:
        ticker.cancel()
    assert len({count for count in seen if 0 < count < flood}) > flood // 64 // 4
