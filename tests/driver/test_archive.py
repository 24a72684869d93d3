"""The archive on an embedded driver: recording, catalog, replay, extension, truncation and
errors, with real files and real publications (IPC, and UDP on loopback)."""

import asyncio
import contextlib
import errno
import os
import random
from pathlib import Path

import anyio
import pytest

import aeronio
from aeronio import archive
from aeronio.archive import codecs, segments
from aeronio.archive.codecs import ErrorCode
from aeronio.archive.recording_pos import RECORDING_POSITION_TYPE_ID, RecordingPos
from aeronio.archive.recording_writer import RecordingWriter
from aeronio.counters import MDC_DESTINATIONS_TYPE_ID
from aeronio.errors import AeronError
from tests.support.cancelling import cancel_at_each_step
from tests.support.ports import free_port
from tests.support.procs import await_until, wait_recorded

TERM = 64 * 1024
SEGMENT = 128 * 1024
STREAM = 1001
IPC = f"aeron:ipc?term-length={TERM}"
WAITS = (aeronio.BACK_PRESSURED, aeronio.NOT_CONNECTED, aeronio.ADMIN_ACTION)


@pytest.fixture
async def aeron():
    async with aeronio.connect(publication_linger_ns=10_000_000) as client:
        yield client


@pytest.fixture
async def arch(aeron, tmp_path):
    async with archive.Archive.launch(
        aeron,
        archive_dir=tmp_path / "archive",
        segment_file_length=SEGMENT,
        **archive.LOCAL_ARCHIVE,
    ) as service:
        yield service


@pytest.fixture
async def client(aeron, arch):
    async with archive.connect(aeron, **archive.LOCAL) as archive_client:
        yield archive_client


def messages(count: int, seed: int = 1) -> list[bytes]:
    """Varied sizes: small ones, and some over the MTU (fragmented) so terms end in PADs."""
    rng = random.Random(seed)
    return [
        i.to_bytes(4, "little") + rng.randbytes(rng.choice([28, 100, 500, 3000]))
        for i in range(count)
    ]


class Terms:
    """What a stream's terms hold, block by block as a subscriber sees them (PADs included)."""

    def __init__(self, subscription):
        self.subscription = subscription
        self.data = bytearray()
        self.start: int | None = None

    def poll(self) -> int:
        def on_block(block, session_id, term_id):
            if self.start is None:
                self.start = self.subscription.images[0].position
            self.data += block

        return self.subscription.block_poll(on_block, 1 << 20)


async def publish(publication, payloads, terms: Terms | None = None) -> int:
    """Offer every payload; `terms` reads the stream meanwhile, also while the publication is
    back-pressured (over UDP it is a subscriber flow control waits for)."""
    async with asyncio.timeout(20):
        for payload in payloads:
            while (result := publication.try_offer(payload)) < 0:
                assert result in WAITS, f"try_offer returned {result}"
                if terms is not None:
                    terms.poll()
                await asyncio.sleep(0)
            if terms is not None:
                terms.poll()
        while terms is not None and (
            terms.start is None or terms.start + len(terms.data) < publication.position
        ):
            terms.poll()
            await asyncio.sleep(0)
    return publication.position


def segment_bytes(archive_dir: Path, layout: segments.RecordingLayout, start: int, stop: int):
    """The recording's bytes [start, stop) read straight from its segment files."""
    out = bytearray()
    position = start
    while position < stop:
        index = layout.segment_index(position)
        offset = layout.segment_offset(position)
        length = min(stop - position, layout.segment_length - offset)
        with open(Path(archive_dir) / layout.file_name(index), "rb") as f:
            f.seek(offset)
            out += f.read(length)
        position += length
    return bytes(out)


async def replay_all(client, recording_id, position, length, count, stream_id=2002):
    subscription = await client.replay(recording_id, position, length, "aeron:ipc", stream_id)
    got = []
    try:
        async with asyncio.timeout(10):
            async for message in subscription:
                got.append((message.data, message.position))
                if len(got) == count:
                    break
    finally:
        await subscription.close()
    return got


def expected_positions(payloads, terms: Terms) -> list[tuple[bytes, int]]:
    """(payload, position after it) of every message in the recorded terms."""
    out, i, offset, data = [], 0, 0, terms.data
    while offset < len(data):
        length = int.from_bytes(data[offset : offset + 4], "little")
        flags, kind = data[offset + 5], int.from_bytes(data[offset + 6 : offset + 8], "little")
        aligned = (length + 31) & ~31
        if kind == 1 and flags & 0x40:  # the end of a message
            out.append((payloads[i], terms.start + offset + aligned))
            i += 1
        offset += aligned
    return out


# -- recording ------------------------------------------------------------------------------


@pytest.mark.parametrize("media", ["ipc", "udp"])
async def test_segments_are_the_terms_byte_for_byte(aeron, arch, client, media):
    if media == "ipc":
        channel, source = IPC, archive.SourceLocation.LOCAL
    else:
        channel = f"aeron:udp?endpoint=localhost:{free_port()}|term-length={TERM}"
        source = archive.SourceLocation.REMOTE
    await client.start_recording(channel, STREAM, source)
    terms = Terms(await aeron.add_subscription(channel, STREAM))
    publication = await aeron.add_exclusive_publication(channel, STREAM)
    payloads = messages(1500)
    end = await publish(publication, payloads, terms)
    assert end > 4 * SEGMENT  # several terms and segments
    recording_id = await client.find_last_matching_recording(
        0, channel.split("?")[0], STREAM, publication.session_id
    )
    assert recording_id == 0
    await wait_recorded(client, recording_id, end)
    await client.stop_recording(channel, STREAM)
    assert await client.get_stop_position(recording_id) == end
    descriptor = arch.catalog.descriptor(recording_id)
    assert (descriptor.start_position, descriptor.stop_position) == (0, end)
    assert descriptor.term_buffer_length == TERM and descriptor.segment_file_length == SEGMENT
    assert descriptor.initial_term_id == publication.initial_term_id
    assert descriptor.session_id == publication.session_id
    recorded = segment_bytes(arch.ctx.archive_dir, arch.catalog.layout(0), 0, end)
    assert terms.start == 0 and len(terms.data) == end
    assert recorded == bytes(terms.data)  # PADs and all
    files = {p.name for p in Path(arch.ctx.archive_dir).glob("0-*.rec")}
    assert files == {f"0-{i}.rec" for i in range((end + SEGMENT - 1) // SEGMENT)}
    assert all((Path(arch.ctx.archive_dir) / name).stat().st_size == SEGMENT for name in files)


async def test_a_recording_that_starts_mid_log(aeron, arch, client):
    publication = await aeron.add_exclusive_publication(IPC, STREAM)
    early = Terms(await aeron.add_subscription(IPC, STREAM))
    await publish(publication, messages(300, seed=2), early)  # some terms before the recording
    await early.subscription.close()
    await client.start_recording(IPC, STREAM)
    terms = Terms(await aeron.add_subscription(IPC, STREAM))
    async with asyncio.timeout(10):
        while not arch.conductor.recordings:
            await asyncio.sleep(0.005)
    start = arch.catalog.descriptor(0).start_position
    assert start == publication.position and start % TERM != 0
    payloads = messages(400, seed=3)
    end = await publish(publication, payloads, terms)
    await wait_recorded(client, 0, end)
    await client.stop_recording(IPC, STREAM)
    layout = arch.catalog.layout(0)
    assert layout.base_position == start - start % TERM
    with open(Path(arch.ctx.archive_dir) / "0-0.rec", "rb") as f:
        head = f.read(layout.segment_offset(start))
    assert head == bytes(len(head))  # nothing before the start position
    assert segment_bytes(arch.ctx.archive_dir, layout, start, end) == bytes(
        terms.data[start - terms.start :]
    )
    got = await replay_all(client, 0, start, end - start, len(payloads))
    assert [data for data, _ in got] == payloads
    assert got[-1][1] == end
    second = got[0][1]  # a frame boundary in the first term, which the recording starts in
    assert start < second < start - start % TERM + TERM
    assert await replay_all(client, 0, second, -1, 5, stream_id=2003) == got[1:6]


async def test_rec_pos_and_recorder_counters(aeron, arch, client):
    await client.start_recording(IPC, STREAM)
    publication = await aeron.add_exclusive_publication(IPC, STREAM)
    end = await publish(publication, messages(200))
    await wait_recorded(client, 0, end)
    labels = {info.label: info for info in aeron.counters.for_each()}
    rec_pos = [info for label, info in labels.items() if label.startswith("rec-pos: 0 ")]
    assert len(rec_pos) == 1
    assert rec_pos[0].type_id == RECORDING_POSITION_TYPE_ID
    assert rec_pos[0].label == f"rec-pos: 0 {publication.session_id} {STREAM} aeron:ipc"
    assert aeron.counters.get_counter_value(rec_pos[0].id) == end
    archive_id = aeron.client_id
    total = labels[f"archive-recorder total write bytes - archiveId={archive_id}"]
    assert aeron.counters.get_counter_value(total.id) == end
    for name in ("max write time in ns", "total write time in ns"):
        info = labels[f"archive-recorder {name} - archiveId={archive_id}"]
        assert aeron.counters.get_counter_value(info.id) > 0
    await client.stop_recording(IPC, STREAM)
    async with asyncio.timeout(5):
        while any(i.label.startswith("rec-pos: 0 ") for i in aeron.counters.for_each()):
            await asyncio.sleep(0.005)


async def test_a_corrupt_frame_in_the_image_stops_its_recording_and_the_archive_goes_on(
    aeron, arch, client
):
    """A frame length no writer could have written (here past the term's end) makes the image
    unreadable there: the recording stops at the last whole block before it, the error is
    counted, and the archive records the next stream as before."""
    await client.start_recording(IPC, STREAM)
    publication = await aeron.add_exclusive_publication(IPC, STREAM)
    end = await publish(publication, messages(20))
    await wait_recorded(client, 0, end)
    index = (end // TERM) % 3  # the term the next frame goes in, and where in the log file
    with open(publication.log_file, "r+b") as log:
        log.seek(index * TERM + end % TERM)
        log.write((0x7FFFFFF0).to_bytes(4, "little") + bytes([0, 0xC0, 1, 0]))
    async with asyncio.timeout(10):
        while arch.conductor.errors.get() == 0 or 0 in arch.conductor.recordings:
            await asyncio.sleep(0.005)
    assert (await client.list_recording(0)).stop_position == end
    await publication.close()

    other = await aeron.add_exclusive_publication(IPC, STREAM + 1)
    await client.start_recording(IPC, STREAM + 1)
    async with asyncio.timeout(10):
        while await client.list_recording(1) is None:
            await asyncio.sleep(0.005)
    other_end = await publish(other, messages(5))
    await wait_recorded(client, 1, other_end)


async def test_recording_events(aeron, arch, client):
    events = client.recording_events()
    first = asyncio.ensure_future(events.__anext__())
    joined = f" {client.recording_events_stream_id} {client.recording_events_channel} @"
    await await_until(  # the events subscription's image of the archive's events publication
        lambda: any(
            info.label.startswith("sub-pos: ") and joined in info.label
            for info in aeron.counters.for_each()
        ),
        10,
        "the events subscription to join the archive's events",
    )
    await client.start_recording(IPC, STREAM)
    publication = await aeron.add_exclusive_publication(IPC, STREAM)
    end = await publish(publication, messages(50))
    await wait_recorded(client, 0, end)
    await client.stop_recording(IPC, STREAM)
    seen = [await asyncio.wait_for(first, 5)]
    async with asyncio.timeout(5):
        while not isinstance(seen[-1], archive.RecordingStopped):
            seen.append(await events.__anext__())
    await events.aclose()
    assert seen[0] == archive.RecordingStarted(
        0, 0, publication.session_id, STREAM, IPC, "aeron:ipc"
    )
    progress = [e for e in seen if isinstance(e, archive.RecordingProgress)]
    assert progress and progress[-1] == archive.RecordingProgress(0, 0, end)
    assert [p.position for p in progress] == sorted(p.position for p in progress)
    assert seen[-1] == archive.RecordingStopped(0, 0, end)


# -- catalog --------------------------------------------------------------------------------


async def test_listings(aeron, arch, client):
    channels = [f"aeron:ipc?term-length={TERM}|tags={i}" for i in range(3)]
    publications = []
    for i, channel in enumerate(channels):
        await client.start_recording(channel, STREAM + i)
        publications.append(await aeron.add_exclusive_publication(channel, STREAM + i))
        await publish(publications[-1], messages(10))
        await wait_recorded(client, i, publications[-1].position)
    listed = await client.list_recordings()
    assert [d.recording_id for d in listed] == [0, 1, 2]
    assert [d.original_channel for d in listed] == channels
    assert [d.stop_position for d in listed] == [-1, -1, -1]  # still recording
    assert all(d.control_session_id == client.control_session_id for d in listed)
    assert [d.recording_id for d in await client.list_recordings(1, 1)] == [1]
    assert await client.list_recordings(5) == []
    for_uri = await client.list_recordings_for_uri("tags=2", STREAM + 2)
    assert [d.recording_id for d in for_uri] == [2]
    assert await client.list_recordings_for_uri("tags=2", STREAM) == []
    one = await client.list_recording(1)
    assert one.recording_id == 1 and one.stream_id == STREAM + 1
    assert await client.list_recording(999) is None
    assert await client.find_last_matching_recording(0, "tags=1", STREAM + 1, 0) == -1
    assert (
        await client.find_last_matching_recording(
            0, "tags=1", STREAM + 1, publications[1].session_id
        )
        == 1
    )
    for i, channel in enumerate(channels):
        await client.stop_recording(channel, STREAM + i)
    stops = [d.stop_position for d in await client.list_recordings()]
    assert stops == [p.position for p in publications]


# -- replay ---------------------------------------------------------------------------------


async def test_replay_from_any_frame_yields_the_recorded_suffix(aeron, arch, client):
    await client.start_recording(IPC, STREAM)
    terms = Terms(await aeron.add_subscription(IPC, STREAM))
    publication = await aeron.add_exclusive_publication(IPC, STREAM)
    payloads = messages(800, seed=5)
    end = await publish(publication, payloads, terms)
    await wait_recorded(client, 0, end)
    await client.stop_recording(IPC, STREAM)
    expected = expected_positions(payloads, terms)
    # message starts are frame aligned positions: replay from a few of them, to the end and
    # bounded, and check every message and its position
    rng = random.Random(7)
    starts = [0] + [expected[i][1] for i in sorted(rng.sample(range(len(expected) - 1), 4))]
    for n, start in enumerate(starts):
        suffix = [e for e in expected if e[1] > start]
        got = await replay_all(client, 0, start, -1, len(suffix), stream_id=3000 + n)
        assert got == suffix
    start, stop = expected[10][1], expected[20][1]
    got = await replay_all(client, 0, start, stop - start, 10, stream_id=3100)
    assert got == expected[11:21]


async def test_a_replay_from_inside_a_frame_is_refused(aeron, arch, client):
    await client.start_recording(IPC, STREAM)
    publication = await aeron.add_exclusive_publication(IPC, STREAM)
    # message 0, a 320 byte frame at position 0, carries at position 64 a DATA header for
    # position 64 that ends where message 1 begins: a replay from 64 would deliver it
    forged = segments.FRAME_HEADER.pack(
        256, 0, 0xC0, segments.HDR_TYPE_DATA, 64, publication.session_id, STREAM,
        publication.initial_term_id, 0,
    ) + b"FORGED"  # fmt: skip
    first = (b"A" * 32 + forged).ljust(288, b"A")
    end = await publish(publication, [first, *messages(5)])  # message 1: [320, 480)
    await wait_recorded(client, 0, end)
    await client.stop_recording(IPC, STREAM)
    for position, frame in ((64, (0, 320)), (352, (320, 480))):
        with pytest.raises(archive.ArchiveError) as caught:
            await client.start_replay(0, position, -1, "aeron:ipc", 2002)
        assert str(caught.value) == (
            f"requested replay start position {position} is not a frame boundary for "
            f"recording 0: it is inside the frame at [{frame[0]}, {frame[1]})"
        )
    assert not arch.conductor.replays
    got = await replay_all(client, 0, 320, -1, 5)  # from a boundary, as recorded
    assert [data for data, _ in got] == messages(5)


async def test_a_replay_of_a_live_recording_follows_it(aeron, arch, client):
    await client.start_recording(IPC, STREAM)
    publication = await aeron.add_exclusive_publication(IPC, STREAM)
    payloads = messages(600, seed=9)
    await publish(publication, payloads[:200])
    await wait_recorded(client, 0, publication.position)
    subscription = await client.replay(0, 0, archive.NULL_LENGTH, "aeron:ipc", 2002)
    got = []
    async with asyncio.timeout(10):
        async for message in subscription:
            got.append(message.data)
            if len(got) == 200:
                break
        await publish(publication, payloads[200:])  # the recording goes on, the replay follows
        async for message in subscription:
            got.append(message.data)
            if len(got) == len(payloads):
                break
    assert got == payloads
    await client.stop_recording(IPC, STREAM)
    async with asyncio.timeout(10):  # the recording stopped: the replay ends
        while arch.conductor.replays:
            await asyncio.sleep(0.01)
    await subscription.close()


async def test_stop_replay_and_a_replay_whose_subscriber_goes(aeron, arch, client):
    await client.start_recording(IPC, STREAM)
    publication = await aeron.add_exclusive_publication(IPC, STREAM)
    await publish(publication, messages(100))
    await wait_recorded(client, 0, publication.position)
    replay_id = await client.start_replay(0, 0, archive.NULL_LENGTH, "aeron:ipc", 2002)
    assert replay_id in arch.conductor.replays
    await client.stop_replay(replay_id)
    async with asyncio.timeout(5):
        while arch.conductor.replays:
            await asyncio.sleep(0.005)
    assert client.poll_for_error_response() is None  # stopped as asked: no ERROR
    errors = arch.conductor.errors.get()
    subscription = await client.replay(0, 0, archive.NULL_LENGTH, "aeron:ipc", 2003)
    async with asyncio.timeout(5):
        await subscription.receive()
    await subscription.close()
    async with asyncio.timeout(10):
        while arch.conductor.replays:
            await asyncio.sleep(0.01)
    # the reference's ERROR for a replay whose subscriber went before it was complete (it
    # followed the recording): the client's, not counted among the archive's errors
    error = await await_until(client.poll_for_error_response, 10, "the replay's ERROR")
    assert str(error) == "stream closed before replay is complete"
    assert arch.conductor.errors.get() == errors
    with pytest.raises(archive.ArchiveError, match=f"replay session not known for {replay_id}"):
        await client.stop_replay(replay_id)


async def test_a_replay_the_archive_closes_under_gets_an_error(aeron, arch, client):
    """The archive closing (as on SIGTERM) while a replay is under way: the replay's client
    gets an ERROR for it, and its image ends. Before, the image ended and nothing was said, as
    when a replay is complete."""
    await client.start_recording(IPC, STREAM)
    publication = await aeron.add_exclusive_publication(IPC, STREAM)
    sent = messages(100)
    await publish(publication, sent)
    await wait_recorded(client, 0, publication.position)
    # following the live recording: never all sent while it records
    subscription = await client.replay(0, 0, archive.NULL_LENGTH, "aeron:ipc", 2002)
    async with asyncio.timeout(10):
        assert (await subscription.receive()).data == sent[0]
    await arch.close()  # closed again, at once, by the fixture
    error = await await_until(client.poll_for_error_response, 10, "the replay's ERROR")
    assert str(error) == "archive closed before replay is complete"
    got = [sent[0]]

    def read_to_its_end() -> bool:
        taken = subscription.poll(lambda buffer, header: got.append(bytes(buffer)), 100)
        return not taken and not subscription.images

    await await_until(read_to_its_end, 10, "the replay's image to end")
    # what was sent, in order (fragments, each message's in turn), then the end
    assert b"".join(sent).startswith(b"".join(got))


async def test_a_request_names_what_does_not_fit_it_and_an_absent_archive(aeron, arch):
    """A value a request's field cannot carry is refused naming the field (before, a channel
    that was not ASCII was sent with "?" for its letters, an int out of range failed inside
    struct.pack); a request no archive takes is an ArchiveTimeoutError (an ArchiveError and a
    TimeoutError) saying so, not the control publication's bare TimeoutError."""
    async with archive.connect(aeron, **archive.LOCAL, message_timeout_s=0.5) as client:
        with pytest.raises(ValueError, match="channel must be ASCII text, not 'aeron:ipc"):
            await client.start_recording("aeron:ipc?alias=café", STREAM)
        with pytest.raises(ValueError, match="stream_id 2147483648 is outside"):
            await client.start_recording(IPC, 2**31)
        with pytest.raises(ValueError, match="recording_id must be an int, not str"):
            await client.get_stop_position("7")
        assert await client.list_recordings() == []  # nothing was started
    nobody = archive.LOCAL | {"control_stream_id": 99}  # a stream no archive reads
    with pytest.raises(archive.ArchiveTimeoutError, match="did not take a ConnectRequest"):
        async with archive.connect(aeron, **nobody, message_timeout_s=0.5):
            pass


async def test_a_start_given_up_once_sent_is_undone_when_its_answer_comes(aeron, arch, client):
    """A start_recording (or start_replay) cancelled after it was sent is carried out by the
    archive all the same: its late OK, read with the client's next exchange, is undone (the
    recording's subscription stopped). Before, the recording went on, its id never told."""
    sent_before = client.publication.position
    starting = asyncio.create_task(client.start_recording(IPC, STREAM))
    while client.publication.position == sent_before:  # until the request is out: the client
        await asyncio.sleep(0)  # then waits for the answer, which its next step would read
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    await await_until(lambda: arch.conductor.recording_subscriptions, 10, "the recording")
    assert await client.list_recordings() == []  # reads the late OK: the undo goes out
    await await_until(lambda: not arch.conductor.recording_subscriptions, 10, "its stop")
    assert client.poll_for_error_response() is None  # the undo's answer is dropped too
    assert await client.start_recording(IPC, STREAM) >= 0  # the client goes on


# -- extension and truncation ---------------------------------------------------------------


async def test_extend_then_truncate(aeron, arch, client):
    await client.start_recording(IPC, STREAM)
    first = await aeron.add_exclusive_publication(IPC, STREAM)
    payloads = messages(300, seed=11)
    await publish(first, payloads[:150])
    await wait_recorded(client, 0, first.position)
    await client.stop_recording(IPC, STREAM)
    await first.close()
    d = arch.catalog.descriptor(0)
    stop = d.stop_position
    channel = (
        f"{IPC}|init-term-id={d.initial_term_id}|term-id={d.initial_term_id + stop // TERM}"
        f"|term-offset={stop % TERM}|mtu={d.mtu_length}"
    )
    await client.extend_recording(0, channel, STREAM)
    second = await aeron.add_exclusive_publication(channel, STREAM)
    assert second.position == stop
    end = await publish(second, payloads[150:])
    await wait_recorded(client, 0, end)
    await client.stop_recording(channel, STREAM)
    assert await client.get_stop_position(0) == end
    got = await replay_all(client, 0, 0, -1, len(payloads))
    assert [data for data, _ in got] == payloads
    # truncate at the 100th message's end: the first 100 messages remain
    cut = got[99][1]
    await client.truncate_recording(0, cut)
    assert await client.get_stop_position(0) == cut
    again = await replay_all(client, 0, 0, -1, 100, stream_id=2003)
    assert again == got[:100]
    layout = arch.catalog.layout(0)
    assert segments.recover_stop_position(arch.ctx.archive_dir, layout) == cut
    assert sorted(segments.segment_indices(arch.ctx.archive_dir, 0)) == list(
        range(layout.segment_index(cut) + 1)
    )


async def test_a_replay_goes_to_its_end_while_its_recording_is_extended(
    aeron, arch, client, monkeypatch
):
    """An extension starting (its rec-pos counter asked of the driver) while a replay of the
    stopped recording is under way: the replay goes on to the stop it was asked for. Before, the
    entry was made active before the extension's session was there, and a replayer looking in
    between took the stop unset for a recording ended at -1: the replay ended where it was, with
    no word."""
    await client.start_recording(IPC, STREAM)
    first = await aeron.add_exclusive_publication(IPC, STREAM)
    payloads = messages(300, seed=12)  # about 5 terms: more than the replay's window
    stop = await publish(first, payloads[:200])
    await wait_recorded(client, 0, stop)
    await client.stop_recording(IPC, STREAM)
    await first.close()
    replay = await client.replay(0, 0, archive.NULL_LENGTH, "aeron:ipc", 2002)
    got = []
    async with asyncio.timeout(10):
        async for message in replay:
            got.append(message.data)
            break  # the replayer fills the window and waits for this reader
    allocating, allocated = asyncio.Event(), asyncio.Event()
    allocate = RecordingPos.allocate

    async def held(cls, *args):
        allocating.set()
        await allocated.wait()
        return await allocate(*args)

    monkeypatch.setattr(RecordingPos, "allocate", classmethod(held))
    d = arch.catalog.descriptor(0)
    channel = (
        f"{IPC}|init-term-id={d.initial_term_id}|term-id={d.initial_term_id + stop // TERM}"
        f"|term-offset={stop % TERM}|mtu={d.mtu_length}"
    )
    await client.extend_recording(0, channel, STREAM)
    second = await aeron.add_exclusive_publication(channel, STREAM)
    await asyncio.wait_for(allocating.wait(), 10)  # the extension is starting
    async with asyncio.timeout(10):  # the replayer goes on meanwhile: to the replay's end
        async for message in replay:
            got.append(message.data)
            if len(got) == 200:
                break
    assert got == payloads[:200]
    allocated.set()
    await await_until(lambda: not arch.conductor.replays, 10, "the replay to end")
    assert client.poll_for_error_response() is None
    end = await publish(second, payloads[200:])
    await wait_recorded(client, 0, end)
    await replay.close()
    assert [data for data, _ in await replay_all(client, 0, 0, -1, 300, 2003)] == payloads


async def test_a_truncation_inside_a_frame_is_refused_and_changes_nothing(aeron, arch, client):
    await client.start_recording(IPC, STREAM)
    publication = await aeron.add_exclusive_publication(IPC, STREAM)
    end = await publish(publication, [bytes(128)] * 50)  # frames of 160 bytes
    await wait_recorded(client, 0, end)
    await client.stop_recording(IPC, STREAM)
    archive_dir = Path(arch.ctx.archive_dir)
    before = {path.name: path.read_bytes() for path in archive_dir.iterdir()}
    cut = 160 * 10 + 64
    with pytest.raises(archive.ArchiveError) as caught:
        await client.truncate_recording(0, cut)
    assert str(caught.value) == (
        f"invalid position {cut}: not a frame boundary of recording 0: "
        "it is inside the frame at [1600, 1760)"
    )
    assert {path.name: path.read_bytes() for path in archive_dir.iterdir()} == before
    assert await client.get_stop_position(0) == end == 160 * 50
    await client.truncate_recording(0, 1600)  # a boundary: ten whole messages remain
    assert await client.get_stop_position(0) == 1600
    assert segments.check_segments(archive_dir, arch.catalog.layout(0), 1600)[0].problem is None
    got = await replay_all(client, 0, 0, -1, 10)
    assert [data for data, _ in got] == [bytes(128)] * 10


async def test_an_extension_that_does_not_continue_the_recording_is_refused(aeron, arch, client):
    await client.start_recording(IPC, STREAM)
    first = await aeron.add_exclusive_publication(IPC, STREAM)
    await publish(first, messages(10))
    await wait_recorded(client, 0, first.position)
    await client.stop_recording(IPC, STREAM)
    await first.close()
    stop = await client.get_stop_position(0)
    subscription_id = await client.extend_recording(0, IPC, STREAM)
    requested = arch.conductor.recording_subscriptions[subscription_id].correlation_id
    second = await aeron.add_exclusive_publication(IPC, STREAM)  # a new stream: position 0
    # answered OK, then refused when its image came: the requester is told why
    error = await await_until(client.poll_for_error_response, 10, "the extension's ERROR")
    assert (error.error_code, error.correlation_id) == (ErrorCode.INVALID_EXTENSION, requested)
    assert str(error).startswith(f"cannot extend recording 0: join position 0 != {stop}")
    assert arch.conductor.errors.get() == 1 and not arch.conductor.recording_subscriptions
    assert 0 not in arch.conductor.recordings
    assert arch.catalog.descriptor(0).stop_position == stop  # untouched
    async with asyncio.timeout(5):  # the refused recording's subscription is gone
        while second.is_connected:
            await asyncio.sleep(0.005)


@pytest.mark.parametrize("refusal", ["catalog full", "channel too long"])
async def test_a_recording_refused_after_its_ok_is_an_error_to_its_requester(
    aeron, tmp_path, refusal
):
    async with (
        archive.Archive.launch(
            aeron, archive_dir=tmp_path / "archive", max_catalog_entries=1,
            **archive.LOCAL_ARCHIVE,
        ) as arch,
        archive.connect(aeron, **archive.LOCAL) as client,
    ):  # fmt: skip
        if refusal == "catalog full":  # its one entry taken
            channel, message = IPC, "the catalog is full (1 entries)"
            await client.start_recording(IPC, STREAM)
            first = await aeron.add_exclusive_publication(IPC, STREAM)
            await publish(first, messages(1))
            await wait_recorded(client, 0, first.position)
            await client.stop_recording(IPC, STREAM)
        else:  # stripped and original channel together over a record's room for strings
            channel = f"{IPC}|alias={'a' * 900}"
            message = "channel and source identity are longer than 900 bytes in all"
        subscription_id = await client.start_recording(channel, STREAM + 1)
        requested = arch.conductor.recording_subscriptions[subscription_id].correlation_id
        second = await aeron.add_exclusive_publication(channel, STREAM + 1)
        error = await await_until(client.poll_for_error_response, 10, "the refusal's ERROR")
        assert (str(error), error.error_code) == (message, ErrorCode.GENERIC)
        assert error.correlation_id == requested
        assert not arch.conductor.recording_subscriptions and not arch.conductor.recordings
        await await_until(lambda: not second.is_connected, 10, "the subscription to go")
        assert len(await client.list_recordings()) == (refusal == "catalog full")


@pytest.mark.parametrize("failure", ["no rec-pos counter", "a full disk", "a bug"])
async def test_a_recording_that_cannot_start_or_go_on_is_an_error_to_its_requester(
    aeron, arch, client, monkeypatch, failure
):
    """The driver refusing the recording's counter (its counters full), a write that fails
    (a full disk) and a bug in the recorder's duty cycle stop the recording where it got to,
    counted once, with an ERROR for its request; its subscription goes and the archive serves
    on. The first left the image unread (its publisher held back for good), the entry active
    and the requester unanswered; the second ended the recording without a word; the third
    ended the recorder's thread, and with it every recording."""
    errors = arch.conductor.errors.get()
    subscription_id = await client.start_recording(IPC, STREAM)
    requested = arch.conductor.recording_subscriptions[subscription_id].correlation_id
    if failure == "no rec-pos counter":

        async def refused(cls, aeron, *args):
            raise AeronError("no more counters")

        monkeypatch.setattr(RecordingPos, "allocate", classmethod(refused))
        publication = await aeron.add_exclusive_publication(IPC, STREAM)  # its image: refused
        stop = 0
        expected = "recording 0 not started: AeronError: no more counters"
    else:
        publication = await aeron.add_exclusive_publication(IPC, STREAM)
        stop = await publish(publication, messages(5))
        await wait_recorded(client, 0, stop)

        def full(self, image, position, max_length):
            raise OSError(errno.ENOSPC, "No space left on device")

        def bug(self, image, position, max_length):
            raise ZeroDivisionError("a bug")

        monkeypatch.setattr(RecordingWriter, "record", full if failure == "a full disk" else bug)
        await publish(publication, messages(5))  # within the window: no wait for a reader
        expected = f"recording 0 stopped at {stop}: " + (
            "OSError: [Errno 28] No space left on device"
            if failure == "a full disk"
            else "ZeroDivisionError: a bug"
        )
    error = await await_until(client.poll_for_error_response, 10, "the recording's ERROR")
    assert (str(error), error.error_code, error.correlation_id) == (
        expected, ErrorCode.GENERIC, requested
    )  # fmt: skip
    (listed,) = await client.list_recordings()
    assert (listed.start_position, listed.stop_position) == (0, stop)
    assert arch.conductor.errors.get() == errors + 1
    assert not arch.conductor.recording_subscriptions and not arch.conductor.recordings
    await await_until(lambda: not publication.is_connected, 10, "the subscription to go")
    assert client.poll_for_error_response() is None
    monkeypatch.undo()
    await client.start_recording(IPC, STREAM + 1)  # the archive goes on
    again = await aeron.add_exclusive_publication(IPC, STREAM + 1)
    await publish(again, messages(3))
    await wait_recorded(client, 1, again.position)


# -- errors ---------------------------------------------------------------------------------


async def test_errors_are_the_references(aeron, arch, client):
    async def error_of(call) -> archive.ArchiveError:
        with pytest.raises(archive.ArchiveError) as caught:
            await call
        return caught.value

    e = await error_of(client.get_stop_position(999))
    assert (str(e), e.error_code) == ("unknown recording 999", ErrorCode.UNKNOWN_RECORDING)
    e = await error_of(client.start_replay(999, 0, 100, "aeron:ipc", 2002))
    assert (str(e), e.error_code) == ("unknown recording id 999", ErrorCode.UNKNOWN_RECORDING)
    e = await error_of(client.stop_recording(IPC, STREAM))
    assert str(e) == f"no recording found for streamId={STREAM} channel={IPC}"
    assert e.error_code == ErrorCode.UNKNOWN_SUBSCRIPTION
    subscription_id = await client.start_recording(IPC, STREAM)
    e = await error_of(client.start_recording(IPC, STREAM))
    assert e.error_code == ErrorCode.ACTIVE_SUBSCRIPTION
    publication = await aeron.add_exclusive_publication(IPC, STREAM)
    end = await publish(publication, messages(20))
    await wait_recorded(client, 0, end)
    e = await error_of(client.truncate_recording(0, 0))
    assert (str(e), e.error_code) == (
        "cannot truncate active recording",
        ErrorCode.ACTIVE_RECORDING,
    )
    e = await error_of(client.extend_recording(0, IPC, STREAM + 1))
    assert e.error_code == ErrorCode.ACTIVE_RECORDING
    await client.stop_recording_subscription(subscription_id)
    e = await error_of(client.stop_recording_subscription(subscription_id))
    assert e.error_code == ErrorCode.UNKNOWN_SUBSCRIPTION
    e = await error_of(client.start_replay(0, end + 32, 100, "aeron:ipc", 2002))
    assert str(e) == (
        f"requested replay start position {end + 32} must be less than highest recorded "
        f"position {end} for recording 0"
    )
    assert e.error_code == ErrorCode.GENERIC
    e = await error_of(client.start_replay(0, 16, 100, "aeron:ipc", 2002))
    assert str(e) == (
        "requested replay start position 16 is not a multiple of FRAME_ALIGNMENT (32) "
        "for recording 0"
    )
    e = await error_of(client.truncate_recording(0, end + 32))
    assert str(e) == f"invalid position {end + 32}"
    e = await error_of(client.start_recording("aeron:ipc", 11))
    assert str(e) == "streamId=11 channel=aeron:ipc is this archive's own control stream"
    e = await error_of(client.start_recording("aeron:bogus", STREAM))
    assert e.error_code == ErrorCode.GENERIC and "aeron:bogus" in str(e)
    assert await client.get_recording_position(0) == -1  # not active
    assert arch.catalog.descriptor(0).stop_position == end  # nothing above changed it


async def test_malformed_control_messages_are_counted_and_dropped(aeron, arch, client):
    control = await aeron.add_exclusive_publication("aeron:ipc", 11)
    async with asyncio.timeout(5):
        while not control.is_connected:
            await asyncio.sleep(0.005)
    session = client.control_session_id
    bad = [
        b"",
        b"\x01\x02\x03",
        b"\x08\x00\x63\x00\x65\x00\x00\x00" + bytes(8),  # unknown template id
        b"\x08\x00\x03\x00\x66\x00\x00\x00" + bytes(8),  # another schema
        codecs.ConnectRequest(1, 2, "aeron:ipc").encode()[:-3],  # var data cut short
        codecs.StartRecordingRequest(session, 5, 1, 0, "").encode()[:-4]
        + (2**31).to_bytes(4, "little"),  # absurd length
        codecs.StopPositionRequest(session + 1000, 6, 0).encode(),  # no such session
        codecs.RecordingProgress(0, 0, 0).encode(),  # not a request
        os.urandom(200),
    ]
    for data in bad:
        if data:
            await control.offer(data)
    catalog_before = (Path(arch.ctx.archive_dir) / "archive.catalog").read_bytes()
    async with asyncio.timeout(5):
        while arch.conductor.errors.get() < len(bad) - 1:
            await asyncio.sleep(0.005)
    assert arch.conductor.errors.get() == len(bad) - 1
    assert await client.list_recordings() == []  # still answering
    assert (Path(arch.ctx.archive_dir) / "archive.catalog").read_bytes() == catalog_before
    await client.start_recording(IPC, STREAM)  # and still recording
    publication = await aeron.add_exclusive_publication(IPC, STREAM)
    await publish(publication, messages(5))
    await wait_recorded(client, 0, publication.position)


async def test_the_archive_recovers_what_a_dead_archive_left(aeron, tmp_path):
    """A recording the catalog still shows as active (its archive died) gets the stop position
    of its last whole frame when the archive starts again; a torn block is not exposed."""
    options = dict(archive_dir=tmp_path / "a", segment_file_length=SEGMENT, **archive.LOCAL_ARCHIVE)
    async with archive.Archive.launch(aeron, **options) as arch:
        async with archive.connect(aeron, **archive.LOCAL) as client:
            await client.start_recording(IPC, STREAM)
            publication = await aeron.add_exclusive_publication(IPC, STREAM)
            end = await publish(publication, messages(200))
            await wait_recorded(client, 0, end)
            await client.stop_recording(IPC, STREAM)
        layout = arch.catalog.layout(0)
        arch.catalog.extend_recording(0)  # as if the archive had died while recording
    # a torn block: its frames' bodies written, its first length word not (written last)
    with open(tmp_path / "a" / layout.file_name(layout.segment_index(end)), "r+b") as f:
        f.seek(layout.segment_offset(end) + 4)
        f.write(b"\x01" * 60)
    async with archive.Archive.launch(aeron, **options) as arch:
        assert arch.conductor.recovered == [0]
        assert arch.catalog.descriptor(0).stop_position == end


async def test_an_archive_closed_under_a_cancelled_scope_stops_its_recordings(aeron, tmp_path):
    """A cancel scope around the archive's `async with` cancels its close too: its recording is
    stopped all the same where its segments end, and its catalog is let go."""
    options = dict(archive_dir=tmp_path / "a", segment_file_length=SEGMENT, **archive.LOCAL_ARCHIVE)
    payloads = messages(200)
    with anyio.CancelScope() as scope:
        async with archive.Archive.launch(aeron, **options):
            async with archive.connect(aeron, **archive.LOCAL) as client:
                await client.start_recording(IPC, STREAM)
                publication = await aeron.add_exclusive_publication(IPC, STREAM)
                end = await publish(publication, payloads)
                await wait_recorded(client, 0, end)
                scope.cancel()  # every await of the closes below is cancelled too
                await anyio.sleep_forever()
    assert scope.cancelled_caught
    await publication.close()
    async with archive.Archive.launch(aeron, **options) as arch:
        assert arch.conductor.recovered == []  # stopped when it closed
        assert arch.catalog.descriptor(0).stop_position == end
        async with archive.connect(aeron, **archive.LOCAL) as client:
            got = await replay_all(client, 0, 0, end, len(payloads))
    assert [data for data, _ in got] == payloads


async def test_a_client_closed_under_a_cancelled_scope_closes_its_streams(aeron, arch):
    with anyio.CancelScope() as scope:
        async with archive.connect(aeron, **archive.LOCAL) as client:
            scope.cancel()  # its close's awaits are cancelled too
            await anyio.sleep_forever()
    assert scope.cancelled_caught
    assert client.is_closed and client.publication.is_closed and client.subscription.is_closed


async def test_an_archive_whose_driver_goes_ends_saying_so(tmp_path, caplog):
    """Its client lost its driver, an archive can neither record nor answer: its duty cycle ends
    with the loss (`wait_ended` raises it, logged as an error) and it closes without it."""
    async with aeronio.MediaDriver.launch(tmp_path / "driver") as driver:
        aeron = await aeronio.connect(driver.dir)
        arch = archive.Archive.launch(aeron, archive_dir=tmp_path / "a", **archive.LOCAL_ARCHIVE)
        await arch.start()
        async with archive.connect(aeron, **archive.LOCAL) as client:
            await client.start_recording(IPC, STREAM)
            publication = await aeron.add_exclusive_publication(IPC, STREAM)
            end = await publish(publication, messages(100))
            await wait_recorded(client, 0, end)
    with pytest.raises(aeronio.DriverTimeoutError, match="lost: it closed"):
        async with asyncio.timeout(10):
            await arch.wait_ended()
    assert "archive on " in caplog.text and "lost: it closed" in caplog.text
    await arch.close()
    await aeron.close()
    with archive.Catalog(tmp_path / "a", readonly=True) as catalog:
        assert catalog.descriptor(0).stop_position == end


# -- replay-merge ---------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def archive_over_udp(tmp_path):
    """Three drivers: a live side, an archive (control over UDP) and a joiner, whose archive
    client this is; (live side, archive, client)."""
    host = "127.0.0.1"
    async with (
        aeronio.connect() as live_side,
        aeronio.connect() as archive_side,
        aeronio.connect() as joiner,
    ):
        async with archive.Archive.launch(
            archive_side, archive_dir=tmp_path / "a", segment_file_length=SEGMENT,
            control_channel=f"aeron:udp?endpoint={host}:{free_port()}",
            recording_events_channel="aeron:ipc",
        ) as arch:  # fmt: skip
            async with archive.connect(
                joiner, control_channel=arch.ctx.control_channel,
                response_channel=f"aeron:udp?endpoint={host}:{free_port()}",
            ) as client:  # fmt: skip
                yield live_side, arch, client


@contextlib.asynccontextmanager
async def recorded_live_stream(tmp_path):
    """archive_over_udp with a live stream (dynamic multi-destination-cast) the archive records
    from the start: (live side, archive, client, the live publication, a merge's arguments:
    its replay destination and its live destination)."""
    host = "127.0.0.1"
    control, recording_port, replay_port, live_port = (free_port() for _ in range(4))
    live_channel = f"aeron:udp?control={host}:{control}|control-mode=dynamic|term-length={TERM}"
    async with archive_over_udp(tmp_path) as (live_side, arch, client):
        recording_channel = f"aeron:udp?endpoint={host}:{recording_port}|control={host}:{control}"
        await client.start_recording(recording_channel, STREAM, archive.SourceLocation.REMOTE)
        live = await live_side.add_exclusive_publication(live_channel, STREAM)
        destinations = (
            f"aeron:udp?endpoint={host}:{replay_port}",
            f"aeron:udp?endpoint={host}:{live_port}|control={host}:{control}",
        )
        yield live_side, arch, client, live, destinations


async def test_replay_merge_joins_the_live_stream_without_gap_or_duplicate(tmp_path):
    """A live stream (dynamic multi-destination-cast) recorded by an archive on another driver;
    a late joiner on a third driver replays it from the start and merges into the live stream
    while it goes on: every message once, in order, at the live positions, on one image."""
    payloads = messages(3000, seed=21)
    async with recorded_live_stream(tmp_path) as (live_side, arch, client, live, destinations):
        positions = []

        async def produce():
            for i, payload in enumerate(payloads):
                positions.append(await live.offer(payload))
                if i % 5 == 0:
                    await asyncio.sleep(0.001)  # a steady stream, not a burst

        producer = asyncio.create_task(produce())
        async with asyncio.timeout(30):
            while len(positions) < 1000:
                await asyncio.sleep(0.01)
        got = []
        merge = client.replay_merge(0, STREAM, *destinations)
        async with asyncio.timeout(60):
            async for message in merge:
                got.append((message.data, message.position))
                if len(got) == len(payloads) - 500:
                    break
            assert not arch.conductor.replays  # merged while the stream goes on
            assert not producer.done()
            async for message in merge:
                got.append((message.data, message.position))
                if len(got) == len(payloads):
                    break
        # the live publication sends to two destinations, the archive's and the joiner's
        destinations = [
            live_side.counters.get_counter_value(info.id)
            for info in live_side.counters.for_each()
            if info.type_id == MDC_DESTINATIONS_TYPE_ID
        ]
        assert destinations == [2]
        await merge.aclose()
        await producer
        assert [data for data, _ in got] == payloads
        assert [p for _, p in got] == positions


async def test_a_merge_leaves_another_requests_error_to_its_caller(tmp_path):
    """An ERROR the client holds for an earlier replay (its subscriber left before it was
    complete) is not the merge's: the merge goes on, and the ERROR stays for
    poll_for_error_response. Before, the merge raised it at once and it was gone."""
    payloads = messages(300, seed=22)
    async with recorded_live_stream(tmp_path) as (_, arch, client, live, destinations):
        await publish(live, payloads[:200])
        await wait_recorded(client, 0, live.position)
        early = f"aeron:udp?endpoint=127.0.0.1:{free_port()}"
        left = await client.replay(0, 0, archive.NULL_LENGTH, early, 5)
        async with asyncio.timeout(10):
            await left.receive()
        await left.close()  # before it is complete: the archive ends it with an ERROR
        await await_until(lambda: not arch.conductor.replays, 30, "the early replay to end")
        await client.get_stop_position(0)  # answered after that ERROR: the client holds it

        async def produce():
            for payload in payloads[200:]:
                await live.offer(payload, timeout=20)
                await asyncio.sleep(0.002)  # the stream goes on while the merge catches up

        producer = asyncio.create_task(produce())
        merge = client.replay_merge(0, STREAM, *destinations)
        async with asyncio.timeout(60):
            got = [(await anext(merge)).data for _ in payloads]
        await merge.aclose()
        await producer
        assert got == payloads
        early_error = client.poll_for_error_response()
        assert str(early_error) == "stream closed before replay is complete"
        assert client.poll_for_error_response() is None


@pytest.mark.slow
@pytest.mark.parametrize("remerge", [True, False])
async def test_a_merged_image_that_goes_is_merged_again_or_an_error_never_a_gap(tmp_path, remerge):
    """A merged subscriber stops reading while the live stream (multicast, fc=max: the
    archive's receiver paces it) runs ~40 terms ahead; it cannot catch up live, and its image
    goes (the image liveness timeout) while the stream goes on. With remerge=True the iterator
    merges again from the recording where it left off: every message once, in order, at its
    live position. Without: ImageUnavailableError naming the position just after the last
    message delivered, and what came before is the stream's start, whole. Never a silent gap."""
    host = "127.0.0.1"
    group = f"224.20.31.{3 if remerge else 5}"
    port, replay_port = free_port(), free_port()
    live_channel = f"aeron:udp?endpoint={group}:{port}|interface={host}|term-length={TERM}"
    payloads = [i.to_bytes(4, "little") + bytes(1000) for i in range(4000)]
    async with archive_over_udp(tmp_path) as (live_side, arch, client):
        await client.start_recording(live_channel, STREAM, archive.SourceLocation.REMOTE)
        live = await live_side.add_exclusive_publication(live_channel, STREAM)
        positions: list[int] = []
        burst = asyncio.Event()

        async def produce():
            for i, payload in enumerate(payloads):
                positions.append(await live.offer(payload, timeout=20))
                if i == 500:
                    await burst.wait()
                if i < 500 or i >= 2500:  # a steady stream, then a burst, then steady
                    await asyncio.sleep(0.015)

        producer = asyncio.create_task(produce())
        await wait_recorded_some(client, live)
        got: list[tuple[bytes, int]] = []
        merge = client.replay_merge(
            0, STREAM, f"aeron:udp?endpoint={host}:{replay_port}",
            f"aeron:udp?endpoint={group}:{port}|interface={host}", remerge=remerge,
        )  # fmt: skip
        try:
            async with asyncio.timeout(60):
                async for message in merge:
                    got.append((message.data, message.position))
                    if not arch.conductor.replays and len(got) > 100:
                        break  # merged: stop reading while the burst goes out
                burst.set()
                while len(positions) < 2500:
                    await asyncio.sleep(0.05)
                assert positions[-1] - got[-1][1] > 20 * TERM  # far behind, live
                if remerge:
                    async for message in merge:
                        got.append((message.data, message.position))
                        if len(got) == len(payloads):
                            break
                else:
                    with pytest.raises(aeronio.ImageUnavailableError) as lost:
                        async for message in merge:
                            got.append((message.data, message.position))
        finally:
            await merge.aclose()
            producer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await producer
        assert [data for data, _ in got] == payloads[: len(got)], "once each, in order"
        assert [p for _, p in got] == positions[: len(got)]
        if remerge:
            assert len(got) == len(payloads)
        else:
            assert lost.value.position == got[-1][1]
            assert lost.value.session_id == live.session_id
            assert str(got[-1][1]) in str(lost.value)


async def wait_recorded_some(client, publication) -> None:
    """Until the recording of `publication`'s stream holds a few messages."""
    async with asyncio.timeout(20):
        while not (recordings := await client.list_recordings()) or (
            await client.get_recording_position(recordings[0].recording_id) < 10_000
        ):
            await asyncio.sleep(0.05)


def test_replay_merge_takes_no_image_but_the_first_of_its_session_from_its_position():
    """The image replay-merge reads: none until the replay's comes (its join position is the
    replay's start), then that one only; another of the session, or the first gone, is an
    ImageUnavailableError at the position after the last message delivered."""
    from aeronio.archive.client import _same_image

    class Image:
        def __init__(self, join_position: int):
            self.join_position = join_position
            self.is_closed = False

    class Subscription:
        stream_id = STREAM
        image = None

        def image_by_session_id(self, session_id: int):
            return self.image if session_id == 7 else None

    subscription = Subscription()
    assert _same_image(subscription, 7, None, 4096) is None
    replay = subscription.image = Image(4096)
    assert _same_image(subscription, 7, None, 4096) is replay
    assert _same_image(subscription, 7, replay, 8192) is replay
    subscription.image = Image(65536)  # the first went, another took the stream up further on
    for image, position in ((None, 4096), (replay, 8192)):
        with pytest.raises(aeronio.ImageUnavailableError) as lost:
            _same_image(subscription, 7, image, position)
        assert (lost.value.session_id, lost.value.position) == (7, position)
    subscription.image = replay
    replay.is_closed = True
    with pytest.raises(aeronio.ImageUnavailableError):
        _same_image(subscription, 7, replay, 8192)


# -- cancellation -----------------------------------------------------------------------------


@pytest.mark.loops
async def test_a_request_cancelled_as_its_answer_arrives_is_cancelled(client):
    """Cancelled at every step of a request's life (before it is sent, while it waits, as the
    answer arrives), the request raises CancelledError: never goes on as if not cancelled
    (asyncio.wait_for on Python 3.11 loses a cancel that meets the answer)."""

    async def ask_forever():
        while True:
            await client.list_recordings()

    await cancel_at_each_step(ask_forever, 60)
    assert await client.list_recordings() == []  # the session still answers in order
