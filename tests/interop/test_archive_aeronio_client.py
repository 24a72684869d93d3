"""aeronio's client against the reference ArchivingMediaDriver (Java 1.15.1, real processes on
loopback): record, list, replay (every message at its position), stop, and the reference's
errors as ArchiveError.
"""

from __future__ import annotations

import asyncio
import shutil

import msgspec
import pytest

import aeronio
from aeronio import archive
from aeronio.archive import ArchiveError, SourceLocation, codecs
from tests.support.archive_interop import (
    CHANNEL,
    DEFAULT_SEGMENT_LENGTH,
    EVENTS_CHANNEL,
    EVENTS_STREAM_ID,
    MTU,
    SOURCE_IDENTITY,
    STREAM_ID,
    TERM_LENGTH,
    java_archiving_driver,
    java_dir,
    message,
    now_ms,
    replayed,
    running,
    wait_for_file,
    without_correlation,
)
from tests.support.java_aeron import require_aeron_java
from tests.support.procs import await_until

pytestmark = pytest.mark.usefixtures("reference_ports")  # tests/interop/conftest.py


async def test_aeronio_client_against_java_archive(tmp_path):
    require_aeron_java()
    aeron_dir, archive_dir = java_dir(), tmp_path / "java-archive"
    count = 200
    try:
        with running(java_archiving_driver(aeron_dir, archive_dir)) as java:
            wait_for_file(archive_dir / "archive.catalog", java)
            async with aeronio.connect() as aeron:
                await against_java_archive(aeron, count)
            assert java.proc.poll() is None, java.describe()
    finally:
        shutil.rmtree(aeron_dir, ignore_errors=True)


async def against_java_archive(aeron, count: int) -> None:
    events_subscription = await aeron.add_subscription(EVENTS_CHANNEL, EVENTS_STREAM_ID)
    async with archive.connect(aeron, message_timeout_s=20) as client:
        assert client.control_session_id != -1
        await await_until(lambda: events_subscription.is_connected, 20, "the events image")
        started = now_ms()
        subscription_id = await client.start_recording(CHANNEL, STREAM_ID, SourceLocation.REMOTE)
        assert subscription_id >= 0
        publication = await aeron.add_exclusive_publication(f"{CHANNEL}|term-length=64k", STREAM_ID)
        await await_until(lambda: publication.is_connected, 20, "the publication to connect")
        positions = [await publication.offer(message(i), timeout=10) for i in range(count)]
        end = publication.position
        assert end == positions[-1] > 5 * TERM_LENGTH  # several terms: PAD frames recorded too

        async def found():
            recording_id = await client.find_last_matching_recording(
                0, "endpoint=localhost:14123", STREAM_ID, publication.session_id
            )
            return recording_id + 1  # -1 until the recording started

        assert await await_until(found, 20, "a recording") - 1 == 0

        async def caught_up():
            return await client.get_recording_position(0) == end

        await await_until(caught_up, 20, f"the recording position {end}")
        assert await client.get_recording_position(0) == end

        descriptor = codecs.RecordingDescriptor(
            control_session_id=client.control_session_id,
            correlation_id=0,
            recording_id=0,
            start_timestamp=0,
            stop_timestamp=-1,
            start_position=0,
            stop_position=-1,
            initial_term_id=publication.initial_term_id,
            segment_file_length=DEFAULT_SEGMENT_LENGTH,
            term_buffer_length=TERM_LENGTH,
            mtu_length=MTU,
            session_id=publication.session_id,
            stream_id=STREAM_ID,
            stripped_channel=CHANNEL,
            original_channel=CHANNEL,
            source_identity="",
        )
        (got,) = await client.list_recordings()
        assert started <= got.start_timestamp <= now_ms()
        assert SOURCE_IDENTITY.fullmatch(got.source_identity), got
        descriptor = msgspec.structs.replace(
            descriptor,
            start_timestamp=got.start_timestamp,
            source_identity=got.source_identity,
        )
        assert without_correlation(got) == descriptor
        for also in (
            await client.list_recordings_for_uri("localhost:14123", STREAM_ID),
            [await client.list_recording(0)],
            await client.list_recordings(0, 1),
        ):
            assert [without_correlation(d) for d in also] == [descriptor]
        assert await client.list_recordings_for_uri("localhost:14123", STREAM_ID + 1) == []
        assert await client.list_recordings(1) == []
        assert await client.list_recording(999) is None

        # A replay of everything, then one from a message in the middle of a term.
        messages = [(message(i), positions[i]) for i in range(count)]
        assert await replayed(aeron, client, 0, 0, end, count) == messages
        first = count // 2 + 1
        start = positions[first - 1]
        assert start % TERM_LENGTH != 0
        from_middle = await replayed(aeron, client, 0, start, end - start, count - first)
        assert from_middle == messages[first:]

        await client.stop_recording(CHANNEL, STREAM_ID)
        assert await client.get_stop_position(0) == end
        (stopped,) = await client.list_recordings()
        assert started <= stopped.stop_timestamp <= now_ms()
        assert without_correlation(stopped) == msgspec.structs.replace(
            descriptor, stop_position=end, stop_timestamp=stopped.stop_timestamp
        )

        with pytest.raises(ArchiveError) as unknown:
            await client.get_stop_position(999)
        assert (unknown.value.error_code, str(unknown.value)) == (5, "unknown recording 999")
        with pytest.raises(ArchiveError) as again:
            await client.stop_recording(CHANNEL, STREAM_ID)
        assert (again.value.error_code, str(again.value)) == (
            4,
            f"no recording found for streamId={STREAM_ID} channel={CHANNEL}",
        )
        with pytest.raises(ArchiveError) as no_replay:
            await client.stop_replay(12345)
        assert (no_replay.value.error_code, str(no_replay.value)) == (
            6,
            "replay session not known for 12345",
        )

    # What the events channel said: started, progress up to the end, stopped.
    received = []
    async with asyncio.timeout(20):
        while not any(isinstance(e, codecs.RecordingStopped) for e in received):
            received.append(codecs.decode((await events_subscription.receive()).data))
    await events_subscription.close()
    progress = [e for e in received if isinstance(e, codecs.RecordingProgress)]
    assert progress and progress[-1] == codecs.RecordingProgress(0, 0, end)
    assert [e for e in received if not isinstance(e, codecs.RecordingProgress)] == [
        codecs.RecordingStarted(
            0, 0, publication.session_id, STREAM_ID, CHANNEL, descriptor.source_identity
        ),
        codecs.RecordingStopped(0, 0, end),
    ]
