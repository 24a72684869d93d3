"""The reference's client against aeronio's archive (Java 1.15.1, real processes on loopback).

tests/interop/java/ArchiveCapture.java drives the reference AeronArchive client against
`aeronio archive serve` and prints every request, response and event it saw, and what each call
returned; all of it must be what the same program printed against the reference archive
(tests/data/archive/java-exchange.txt), but for the values that differ from run to run (control
session id, subscription ids, replay session ids, correlation ids, publication session and
initial term id, timestamps, the source's port). Those are checked for consistency within the
run instead.
"""

from __future__ import annotations

import struct

import pytest

from aeronio.archive import Catalog, codecs
from tests.support.archive_interop import (
    CATALOG_FILE_LENGTH,
    CHANNEL,
    DEFAULT_SEGMENT_LENGTH,
    HDR_TYPE_DATA,
    MTU,
    STREAM_ID,
    TERM_LENGTH,
    UNFRAGMENTED,
    aeronio_archive,
    archive_capture,
    calls,
    check_run,
    events,
    exchange,
    group,
    normalised_call,
    now_ms,
    parse_capture,
    read_frames,
    reference_capture,
    running,
    stop,
)

pytestmark = pytest.mark.usefixtures("reference_ports")  # tests/interop/conftest.py


def test_java_client_against_aeronio_archive(java_classes, tmp_path):
    reference = reference_capture()
    reference_run = check_run(reference)
    archive_dir = tmp_path / "archive"
    started = now_ms()
    with running(aeronio_archive(archive_dir)) as server:
        lines = archive_capture(java_classes, "-")
        assert server.proc.poll() is None, server.describe()
        assert stop(server) == 0, server.describe()
    ended = now_ms()
    assert "aeronio archive stopped" in server.stderr, server.describe()

    ours = parse_capture(lines)
    # What the calls returned: the reference's, to the value, but for the per-run ids.
    assert calls(ours) == [
        "connect " + str(ours[0].responses[0].control_session_id),
        "startRecording " + str(ours[1].responses[0].relevant_id),
        "findLastMatchingRecording 0",
        "getRecordingPosition 480",
        f"listRecordings 1 [0 0 -1 {CHANNEL} {CHANNEL}]",
        f"listRecordingsForUri 1 [0 0 -1 {CHANNEL} {CHANNEL}]",
        f"listRecording 1 [0 0 -1 {CHANNEL} {CHANNEL}]",
        "listRecording(999) 0",
        "replay 3",
        "stopRecording",
        "getStopPosition 480",
        "stopRecording again: response for correlationId="
        f"{group(ours, 'stopRecording again').requests[0].correlation_id}, error: "
        f"no recording found for streamId=1001 channel={CHANNEL}",
        "getStopPosition(999): response for correlationId="
        f"{group(ours, 'getStopPosition(999)').requests[0].correlation_id}, error: "
        "unknown recording 999",
        f"startReplay {group(ours, 'startReplay').responses[0].relevant_id}",
        "stopReplay",
        f"extendRecording {group(ours, 'extendRecording').responses[0].relevant_id}",
        "stopRecording(subscriptionId)",
        "truncateRecording 320",
        "close",
    ]
    run = check_run(ours)
    assert [normalised_call(g, run) for g in ours if g.call] == [
        normalised_call(g, reference_run) for g in reference if g.call
    ]
    # Every request, response and event, decoded: the reference's, in the same order.
    assert exchange(ours, run) == exchange(reference, reference_run)
    assert events(ours, run) == events(reference, reference_run)
    assert [name for name, _ in events(ours, run)] == [
        "RecordingStarted", "RecordingProgress", "RecordingStopped",
        "RecordingStarted", "RecordingStopped",
    ]  # fmt: skip
    assert started <= run.start_timestamp <= ended
    assert run.replay_session_ids["replay"] >> 32 == 1
    assert run.replay_session_ids["startReplay"] >> 32 == 2

    # The directory it left: one recording, truncated to its first two messages.
    with Catalog(archive_dir, readonly=True) as catalog:
        (descriptor,) = list(catalog)
        assert len(catalog) == 1
        assert started <= descriptor.stop_timestamp <= ended
        assert descriptor.stop_timestamp >= descriptor.start_timestamp
        # the extension's request is noted in the catalog, as the reference does
        (extend,) = group(ours, "extendRecording").requests
        assert descriptor == codecs.RecordingDescriptor(
            control_session_id=run.control_session_id,
            correlation_id=extend.correlation_id,
            recording_id=0,
            start_timestamp=run.start_timestamp,
            stop_timestamp=descriptor.stop_timestamp,
            start_position=0,
            stop_position=320,
            initial_term_id=run.initial_term_id,
            segment_file_length=DEFAULT_SEGMENT_LENGTH,
            term_buffer_length=TERM_LENGTH,
            mtu_length=MTU,
            session_id=run.session_id,
            stream_id=STREAM_ID,
            stripped_channel=CHANNEL,
            original_channel=CHANNEL,
            source_identity=run.source_identity,
        )
        frames = read_frames(archive_dir, catalog, 0)
    assert frames == [
        (position, 132, UNFRAGMENTED, HDR_TYPE_DATA, position, run.session_id, STREAM_ID,
         run.initial_term_id, struct.pack("<i", i) + bytes(96))
        for i, position in enumerate((0, 160))
    ]  # fmt: skip
    assert sorted(p.name for p in archive_dir.iterdir()) == ["0-0.rec", "archive.catalog"]
    assert (archive_dir / "archive.catalog").stat().st_size == CATALOG_FILE_LENGTH
