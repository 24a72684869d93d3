"""aeronio reads a directory the reference archive (Java 1.15.1) wrote: its Catalog,
RecordingReader and `aeronio archive list|verify`; and the aeronio archive, run on it, replays it.
"""

from __future__ import annotations

import asyncio
import struct
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

import aeronio
from aeronio import archive
from aeronio.archive import Catalog
from tests.support.archive_interop import (
    CHANNEL,
    HDR_TYPE_DATA,
    HDR_TYPE_PAD,
    MTU,
    SEGMENT_LENGTH,
    STREAM_ID,
    TERM_LENGTH,
    UNFRAGMENTED,
    aeronio_archive,
    archive_capture,
    as_java,
    check_run,
    group,
    java_catalog,
    now_ms,
    parse_capture,
    read_frames,
    replayed,
    running,
    stop,
    without_session,
)

pytestmark = pytest.mark.usefixtures("reference_ports")  # tests/interop/conftest.py


async def test_aeronio_reads_java_archive_directory(java_classes, tmp_path):
    archive_dir = tmp_path / "java-archive"
    count = 2000
    started = now_ms()
    lines = archive_capture(
        java_classes,
        str(archive_dir),
        count,
        {"aeron.archive.segment.file.length": SEGMENT_LENGTH},
    )
    ended = now_ms()
    groups = parse_capture(lines)
    run = check_run(groups)

    # 100-byte messages in 160-byte frames, 409 to a 64 KiB term and a 96-byte PAD at its end.
    positions, frames, position = [], [], 0
    for i in range(count):
        if position % TERM_LENGTH + 160 > TERM_LENGTH:
            frames.append((position, TERM_LENGTH - position % TERM_LENGTH, None))
            position += TERM_LENGTH - position % TERM_LENGTH
        frames.append((position, 132, i))
        position += 160
        positions.append(position)
    end = position
    stop_position = end - 160  # ArchiveCapture truncates the last message
    assert [g.call for g in groups if g.name in ("getRecordingPosition", "replay")] == [
        f"getRecordingPosition {end}",
        f"replay {count}",
    ]
    assert group(groups, "getStopPosition").call == f"getStopPosition {end}"
    assert group(groups, "truncateRecording").call == f"truncateRecording {stop_position}"
    (listed, _unknown) = group(groups, "listRecordings").responses
    (extend,) = group(groups, "extendRecording").requests

    assert sorted(p.name for p in archive_dir.iterdir()) == [
        "0-0.rec", "0-1.rec", "0-2.rec", "archive-mark.dat", "archive.catalog",
    ]  # fmt: skip
    with Catalog(archive_dir, readonly=True) as catalog:
        (descriptor,) = list(catalog)
        assert started <= descriptor.stop_timestamp <= ended
        # As listed while it recorded, now stopped; the reference's catalog keeps the ids of
        # the request that last extended the recording.
        assert descriptor == msgspec.structs.replace(
            listed,
            control_session_id=extend.control_session_id,
            correlation_id=extend.correlation_id,
            stop_position=stop_position,
            stop_timestamp=descriptor.stop_timestamp,
        )
        assert (descriptor.segment_file_length, descriptor.session_id) == (
            SEGMENT_LENGTH,
            run.session_id,
        )
        got = read_frames(archive_dir, catalog, 0)
    initial = run.initial_term_id
    assert got == [
        (p, length, UNFRAGMENTED, HDR_TYPE_PAD if i is None else HDR_TYPE_DATA,
         p % TERM_LENGTH, run.session_id,
         STREAM_ID, initial + p // TERM_LENGTH,
         b"" if i is None else struct.pack("<i", i) + bytes(96))
        for p, length, i in frames
        if p < stop_position
    ]  # fmt: skip
    assert sum(1 for f in got if f[3] == HDR_TYPE_DATA) == count - 1

    # The reference's Catalog class reads the same descriptor.
    assert java_catalog(archive_dir, java_classes) == ([as_java(descriptor)], 1)

    listing = aeronio_cli("list", archive_dir)
    assert listing.stdout.splitlines() == [
        f"recordingId=0 startPosition=0 stopPosition={stop_position} "
        f"startTimestamp={listed.start_timestamp} stopTimestamp={descriptor.stop_timestamp} "
        f"initialTermId={initial} segmentFileLength={SEGMENT_LENGTH} "
        f"termBufferLength={TERM_LENGTH} mtuLength={MTU} sessionId={run.session_id} "
        f"streamId={STREAM_ID} strippedChannel={CHANNEL} originalChannel={CHANNEL} "
        f"sourceIdentity={run.source_identity}"
    ]
    verify = aeronio_cli("verify", archive_dir)
    assert verify.stdout.splitlines() == ["recordingId=0 OK"]
    with Catalog(archive_dir, readonly=True) as catalog:
        assert list(catalog) == [descriptor]

    # The aeronio archive, run on the directory, lists it and replays every message at its
    # position: across the three segment files, and from the middle of a term.
    messages = [(struct.pack("<i", i) + bytes(96), positions[i]) for i in range(count - 1)]
    with running(aeronio_archive(archive_dir)) as server:
        async with aeronio.connect() as aeron:
            async with archive.connect(aeron, message_timeout_s=20) as client:
                (listed_now,) = await client.list_recordings()
                assert without_session(listed_now) == msgspec.structs.replace(
                    descriptor, control_session_id=0, correlation_id=0
                )
                assert await client.get_stop_position(0) == stop_position
                assert await replayed(aeron, client, 0, 0, stop_position, count - 1) == messages
                middle = positions[999]
                assert middle % TERM_LENGTH != 0 and middle > SEGMENT_LENGTH
                from_middle = await replayed(
                    aeron, client, 0, middle, stop_position - middle, count - 1001
                )
                assert from_middle == messages[1000:]
        assert await asyncio.to_thread(stop, server) == 0, server.describe()
    with Catalog(archive_dir, readonly=True) as catalog:
        assert list(catalog) == [descriptor]


def aeronio_cli(action: str, archive_dir: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "aeronio.cli", "archive", action, "--dir", str(archive_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, ""), done
    return done
