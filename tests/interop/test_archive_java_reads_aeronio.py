"""The reference reads a directory aeronio's archive wrote: Java CatalogTool and the reference's
own Catalog class read it (a recording over several segment files, one starting mid-term), and
the reference archive, run on that directory, replays it to an aeronio client.

`CatalogTool <dir> describe` is not used: in 1.15.1 it cannot pass its mark file check for any
directory. It maps archive-mark.dat first (an aeronio directory has none: `Mark file not
created: archive-mark.dat`), and on the reference archive's own directory Agrona's MarkFile
waits for a non-zero version field, which the 1.15.1 archive never writes (it signals ready with
version 0, the only version ArchiveMarkFile's own check accepts), so it ends with
`IllegalStateException: Mark file is created but not initialised`.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

import aeronio
from aeronio import archive
from aeronio.archive import Catalog, SourceLocation
from tests.support.archive_interop import (
    CHANNEL,
    HDR_TYPE_DATA,
    MTU,
    SEGMENT_LENGTH,
    STREAM_ID,
    TERM_LENGTH,
    aeronio_archive,
    as_java,
    java_archiving_driver,
    java_catalog,
    java_dir,
    read_frames,
    replayed,
    run_java,
    running,
    stop,
    wait_for_file,
    without_session,
)
from tests.support.procs import await_until

pytestmark = pytest.mark.usefixtures("reference_ports")  # tests/interop/conftest.py


async def record_with_aeronio(archive_dir: Path) -> dict:
    """Into the aeronio archive on the default channels: recording 0 from position 0 over four
    segment files, recording 1 of the same publication from where recording 0 stopped (in the
    middle of a term). Returns what was sent."""
    async with aeronio.connect() as aeron:
        async with archive.connect(aeron, message_timeout_s=20) as client:
            await client.start_recording(CHANNEL, STREAM_ID, SourceLocation.REMOTE)
            publication = await aeron.add_exclusive_publication(
                f"{CHANNEL}|term-length=64k", STREAM_ID
            )
            await await_until(lambda: publication.is_connected, 20, "the publication to connect")
            sent = {
                "session_id": publication.session_id,
                "initial_term_id": publication.initial_term_id,
                "ends": [],
                "positions": [],
            }
            payloads = [bytes([i % 256]) * (1000 + i % 7) for i in range(480)]
            for recording_id, batch in ((0, payloads[:450]), (1, payloads[450:])):
                if recording_id == 1:
                    await client.start_recording(CHANNEL, STREAM_ID, SourceLocation.REMOTE)

                    async def started():
                        try:  # an error until recording 1 is in the catalog, as the reference
                            return 1 + await client.find_last_matching_recording(
                                1, "localhost:14123", STREAM_ID, publication.session_id
                            )
                        except archive.ArchiveError:
                            return False

                    await await_until(started, 20, "recording 1 to start")
                for payload in batch:
                    sent["positions"].append(await publication.offer(payload, timeout=10))
                end = publication.position

                async def caught_up(recording_id=recording_id, end=end):
                    return await client.get_recording_position(recording_id) == end

                await await_until(caught_up, 20, f"recording {recording_id} at {end}")
                await client.stop_recording(CHANNEL, STREAM_ID)
                assert await client.get_stop_position(recording_id) == end
                sent["ends"].append(end)
            sent["payloads"] = payloads
    return sent


async def test_java_catalog_tools_read_aeronio_archive(java_classes, tmp_path):
    archive_dir = tmp_path / "archive"
    with running(
        aeronio_archive(archive_dir, "--segment-file-length", str(SEGMENT_LENGTH))
    ) as server:
        sent = await record_with_aeronio(archive_dir)
        assert await asyncio.to_thread(stop, server) == 0, server.describe()

    end0, end1 = sent["ends"]
    assert end0 > 3 * SEGMENT_LENGTH and end0 % TERM_LENGTH != 0, end0
    # Recording 1 starts where recording 0 stopped, mid-term, and stays in its first segment.
    assert (end1 - (end0 - end0 % TERM_LENGTH)) < SEGMENT_LENGTH
    assert sorted(p.name for p in archive_dir.iterdir()) == [
        "0-0.rec", "0-1.rec", "0-2.rec", "0-3.rec", "1-0.rec", "archive.catalog",
    ]  # fmt: skip

    with Catalog(archive_dir, readonly=True) as catalog:
        ours = list(catalog)
        assert [(d.recording_id, d.start_position, d.stop_position) for d in ours] == [
            (0, 0, end0),
            (1, end0, end1),
        ]
        for d in ours:
            assert (d.session_id, d.initial_term_id, d.stream_id) == (
                sent["session_id"], sent["initial_term_id"], STREAM_ID,
            )  # fmt: skip
            assert (d.segment_file_length, d.term_buffer_length, d.mtu_length) == (
                SEGMENT_LENGTH, TERM_LENGTH, MTU,
            )  # fmt: skip
        payloads = [
            frame[-1]
            for recording_id in (0, 1)
            for frame in read_frames(archive_dir, catalog, recording_id)
            if frame[3] == HDR_TYPE_DATA
        ]
        assert payloads == sent["payloads"]

    # The reference's Catalog class reads every field as aeronio wrote it.
    assert java_catalog(archive_dir, java_classes) == ([as_java(d) for d in ours], 2)

    # CatalogTool: every recording's segment files check out; the count of entries.
    verify = run_java("io.aeron.archive.CatalogTool", (archive_dir, "verify"), java_classes)
    assert verify == ["(recordingId=0) OK", "(recordingId=1) OK"]
    count = run_java("io.aeron.archive.CatalogTool", (archive_dir, "count-entries"), java_classes)
    assert count == ["2"]
    # verify changed nothing (it rewrites the valid flag and, for a recording it had to
    # recover, the stop position).
    with Catalog(archive_dir, readonly=True) as catalog:
        assert list(catalog) == ours

    # The reference archive, run on the directory, lists both and replays every message at its
    # position: across the four segment files, and from the middle of a term.
    messages = list(zip(sent["payloads"], sent["positions"], strict=True))
    aeron_dir = java_dir()
    try:
        with running(java_archiving_driver(aeron_dir, archive_dir)) as java:
            wait_for_file(archive_dir / "archive-mark.dat", java)
            async with aeronio.connect() as aeron:
                async with archive.connect(aeron, message_timeout_s=20) as client:
                    listed = await client.list_recordings()
                    assert [without_session(d) for d in listed] == ours
                    assert await replayed(aeron, client, 0, 0, end0, 450) == messages[:450]
                    second = await replayed(aeron, client, 1, end0, end1 - end0, 30)
                    assert second == messages[450:]
                    middle = sent["positions"][99]
                    assert middle % TERM_LENGTH != 0
                    from_middle = await replayed(aeron, client, 0, middle, end0 - middle, 350)
                    assert from_middle == messages[100:450]
            assert await asyncio.to_thread(stop, java) == 0, java.describe()
    finally:
        shutil.rmtree(aeron_dir, ignore_errors=True)
    with Catalog(archive_dir, readonly=True) as catalog:
        assert list(catalog) == ours
