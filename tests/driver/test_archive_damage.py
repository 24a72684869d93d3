"""Damaged recordings and catalogs, against the archive service and a real client: a replay over
damaged or missing bytes ends with an error the client sees (never a stall, never a cut message),
and a corrupt catalog entry is answered with an error naming it, hiding no other recording."""

import asyncio
import contextlib
import logging
import os
import random
import re
import struct
from pathlib import Path

import pytest

from aeronio import archive
from aeronio.archive.catalog import Catalog, CatalogError
from aeronio.archive.codecs import CatalogHeader
from aeronio.archive.segments import SegmentError
from tests.driver import test_archive
from tests.driver.test_archive import (
    IPC,
    SEGMENT,
    STREAM,
    Terms,
    expected_positions,
    messages,
    publish,
    wait_recorded,
)
from tests.support.ports import free_port

aeron, arch, client = test_archive.aeron, test_archive.arch, test_archive.client  # its fixtures
RECORD = 1024  # a catalog record; recording n is record n + 1, its descriptor body at +32
TERM_LENGTH_FIELD = 32 + 64  # the descriptor's term_buffer_length, in its record


class Recorded:
    """A stopped recording 0 of varied messages over several segments: its frames (position,
    length, type) and its messages (payload, position after it)."""

    def __init__(self, archive_dir: Path, layout, terms: Terms, payloads: list[bytes]):
        self.archive_dir = archive_dir
        self.layout = layout
        self.expected = expected_positions(payloads, terms)
        self.frames = []
        offset, data = 0, terms.data
        while offset < len(data):
            length, _, _, kind = struct.unpack_from("<iBBH", data, offset)
            self.frames.append((terms.start + offset, length, kind))
            offset += (length + 31) & ~31
        self.stop = terms.start + len(data)

    def path(self, position: int) -> Path:
        return self.archive_dir / self.layout.file_name(self.layout.segment_index(position))

    def frame_at_or_after(self, position: int, min_length: int = 32):
        return next(f for f in self.frames if f[0] >= position and f[1] >= min_length)

    def write(self, position: int, data: bytes) -> None:
        with open(self.path(position), "r+b") as f:
            f.seek(self.layout.segment_offset(position))
            f.write(data)

    def delivered(self, read_up_to: int) -> list[tuple[bytes, int]]:
        return [e for e in self.expected if e[1] <= read_up_to]


async def record(aeron, arch, client, count: int = 700, seed: int = 3) -> Recorded:
    await client.start_recording(IPC, STREAM)
    terms = Terms(await aeron.add_subscription(IPC, STREAM))
    publication = await aeron.add_exclusive_publication(IPC, STREAM)
    payloads = messages(count, seed=seed)
    end = await publish(publication, payloads, terms)
    await wait_recorded(client, 0, end)
    await client.stop_recording(IPC, STREAM)
    await publication.close()
    await terms.subscription.close()
    recorded = Recorded(Path(arch.ctx.archive_dir), arch.catalog.layout(0), terms, payloads)
    assert recorded.layout.segment_index(recorded.stop - 1) >= 3, "needs four segments"
    return recorded


async def replay_to_its_end(client, stream_id: int = 2002):
    """Replay recording 0 from its start; the messages received until its image ends, and the
    error the archive sent for it."""
    subscription = await client.replay(0, 0, archive.NULL_LENGTH, "aeron:ipc", stream_id)
    got: list[tuple[bytes, int]] = []
    try:
        error = await read_until_ended(client, subscription, got)
    finally:
        await subscription.close()
    return got, error


async def read_until_ended(client, subscription, got: list) -> archive.ArchiveError | None:
    """(data, position) of the replay's messages into `got` until its image ended and the
    archive's error for it came (within 30 s); that error."""
    error = None
    async with asyncio.timeout(30):
        while error is None or subscription.images:
            messages = []
            for image in subscription.images:
                image.poll_messages(messages, 256)
            got += [(m.data, m.position) for m in messages]
            if error is None:
                error = client.poll_for_error_response()
            if not messages:
                await asyncio.sleep(0.001)
    return error


def damage_of(error: archive.ArchiveError, recorded: Recorded) -> tuple[int, Path, int]:
    """(damaged position, file, position read up to) that the error names."""
    found = re.fullmatch(
        r"recording 0 is damaged at position (\d+) in (\S+): .+ \(read up to position (\d+)\)",
        str(error),
    )
    assert found, str(error)
    return int(found.group(1)), Path(found.group(2)), int(found.group(3))


@pytest.fixture
def caplog_archive(caplog):
    caplog.set_level(logging.WARNING, logger="aeronio.archive")
    return caplog


def missing_segment(recorded: Recorded) -> int:
    missing = recorded.layout.segment_base_position(2)
    recorded.path(missing).unlink()
    return missing


def segment_cut_mid_frame(recorded: Recorded) -> int:
    position, _, _ = recorded.frame_at_or_after(
        recorded.layout.segment_base_position(1) + 5000, 100
    )
    os.truncate(recorded.path(position), recorded.layout.segment_offset(position) + 64)
    return position


def random_block(recorded: Recorded) -> int:
    block = recorded.layout.segment_base_position(1) + 8192
    recorded.write(block, random.Random(11).randbytes(4096))
    return recorded.frame_at_or_after(block)[0]  # the first header in it


def frame_length(length: int):
    def damage(recorded: Recorded) -> int:
        position, _, _ = recorded.frame_at_or_after(recorded.layout.segment_base_position(1) + 3000)
        recorded.write(position, struct.pack("<i", length))
        return position

    return damage


DAMAGE = {
    "missing segment": missing_segment,
    "segment cut mid-frame": segment_cut_mid_frame,
    "random 4 KiB block": random_block,
    "negative frame length": frame_length(-100),
    "huge frame length": frame_length(0x10000000),
}


@pytest.mark.parametrize("kind", DAMAGE)
async def test_a_replay_over_damage_ends_with_an_error(aeron, arch, client, caplog_archive, kind):
    """The damaged position, file and what was read are named; the messages before are
    delivered whole; the replay's image ends; nothing fails in the archive's duty cycle."""
    recorded = await record(aeron, arch, client)
    damaged_at = DAMAGE[kind](recorded)
    got, error = await replay_to_its_end(client)
    damaged, path, read_up_to = damage_of(error, recorded)
    assert (damaged, path) == (damaged_at, recorded.path(damaged_at))
    assert read_up_to <= damaged_at
    delivered = recorded.delivered(read_up_to)
    assert got == delivered  # whole messages only, byte for byte, at their positions
    assert len(delivered) > len(recorded.delivered(damaged_at)) - 3  # all the damage may hide
    assert not arch.conductor.replays
    assert not [r for r in caplog_archive.records if "duty cycle failed" in r.getMessage()]


async def test_a_segment_cut_under_a_replay_ends_it_with_an_error(
    aeron, arch, client, caplog_archive
):
    """A segment file cut short (by something else) while a replay has it mapped: the replay
    ends with the damage named at its next read. Before, reading the pages past the file's new
    end was a SIGBUS: the archive's process, its driver and clients gone. (A cut in the middle
    of a read still is one; the test cuts between reads, under the replay's lock.)"""
    recorded = await record(aeron, arch, client)
    subscription = await client.replay(0, 0, archive.NULL_LENGTH, "aeron:ipc", 2002)
    got = []
    try:
        async with asyncio.timeout(30):
            while not got:  # one message read: the replayer fills the window, then waits
                messages = []
                for image in subscription.images:
                    image.poll_messages(messages, 1)
                got += [(m.data, m.position) for m in messages]
                await asyncio.sleep(0.001)
            (replay,) = arch.conductor.replays.values()
            assert replay.lock.acquire(timeout=10)  # no duty cycle of it under way
            try:
                position = replay.reader.position
                os.truncate(recorded.path(position), 0)
            finally:
                replay.lock.release()
        error = await read_until_ended(client, subscription, got)
    finally:
        await subscription.close()
    assert damage_of(error, recorded) == (position, recorded.path(position), position)
    assert f"cut to 0 bytes under the read ({SEGMENT} mapped)" in str(error)
    assert got == recorded.delivered(position)
    assert not [r for r in caplog_archive.records if "duty cycle failed" in r.getMessage()]


@pytest.mark.slow  # about 11 s each, the merge's live image waited for
@pytest.mark.parametrize("remerge", [False, True])
async def test_a_replay_merge_over_damage_raises_the_archive_error(aeron, arch, client, remerge):
    """The merge's replay ends at the damage: the archive's error is raised (merging again would
    meet it again), after whole messages only, in order, never past the damage."""
    recorded = await record(aeron, arch, client)
    damaged_at = frame_length(-100)(recorded)
    host, got = "127.0.0.1", []
    merge = client.replay_merge(
        0,
        STREAM,
        f"aeron:udp?endpoint={host}:{free_port()}",
        f"aeron:udp?endpoint={host}:{free_port()}",
        remerge=remerge,
    )
    with pytest.raises(archive.ArchiveError) as raised:
        async with asyncio.timeout(30), contextlib.aclosing(merge):
            async for message in merge:
                got.append((message.data, message.position))
    damaged, path, read_up_to = damage_of(raised.value, recorded)
    assert (damaged, path) == (damaged_at, recorded.path(damaged_at))
    delivered = recorded.delivered(read_up_to)
    assert got == delivered[: len(got)] and got, "whole messages, in order, from the start"
    assert not arch.conductor.replays


async def test_a_replay_never_delivers_a_frame_cut_short_by_its_length(
    aeron, arch, client, caplog_archive
):
    recorded = await record(aeron, arch, client)
    position, length, kind = recorded.frame_at_or_after(
        recorded.layout.segment_base_position(1) + 3000, 500
    )
    assert kind == 1
    recorded.write(position, struct.pack("<i", length - 100))
    # the shortened length leads into the frame's payload: the damage shows there
    got, error = await replay_to_its_end(client)
    damaged, path, read_up_to = damage_of(error, recorded)
    assert damaged == position + ((length - 100 + 31) & ~31)
    assert read_up_to == position
    assert got == recorded.delivered(position)
    assert not arch.conductor.replays


async def test_replays_before_the_damage_are_untouched(aeron, arch, client):
    """A replay that ends before the damage replays every message, as ever."""
    recorded = await record(aeron, arch, client)
    recorded.path(recorded.layout.segment_base_position(3)).unlink()
    end = recorded.layout.segment_base_position(3)
    expected = recorded.delivered(end)
    last_end = expected[-1][1]
    subscription = await client.replay(0, 0, last_end, "aeron:ipc", 2004)
    got = []
    async with asyncio.timeout(20):
        async for message in subscription:
            got.append((message.data, message.position))
            if len(got) == len(expected):
                break
    await subscription.close()
    assert got == expected
    assert client.poll_for_error_response() is None


# -- a failing duty cycle ------------------------------------------------------------------


class FailingReplay:
    """A replay session whose every step raises (what a bug in one would do)."""

    replay_session_id = recording_id = -1

    def do_work(self, now_ns: int) -> int:
        raise RuntimeError("a bug")


async def test_a_failing_duty_cycle_is_logged_once_and_backs_off(arch, client, caplog):
    caplog.set_level(logging.WARNING, logger="aeronio.archive")
    before = arch.conductor.errors.get()
    started = asyncio.get_running_loop().time()
    arch.conductor.replays[-1] = FailingReplay()
    try:
        async with asyncio.timeout(20):
            while arch.conductor.errors.get() < before + 6:
                await asyncio.sleep(0.001)
    finally:
        del arch.conductor.replays[-1]
    elapsed = asyncio.get_running_loop().time() - started
    failed = [r for r in caplog.records if "duty cycle failed" in r.getMessage()]
    assert len(failed) == 1 and failed[0].exc_info[1].args == ("a bug",)
    assert elapsed >= 0.001 * (1 + 2 + 4 + 8 + 16)  # waits doubling from 1 ms
    async with asyncio.timeout(20):  # it recovers, and says how many cycles failed
        while not [r for r in caplog.records if "recovered after" in r.getMessage()]:
            await asyncio.sleep(0.01)
    assert await client.list_recordings() == []


# -- corrupt catalog entries ---------------------------------------------------------------


def corrupt(archive_dir: Path, recording_id: int, offset: int, data: bytes) -> None:
    with open(archive_dir / "archive.catalog", "r+b") as f:
        f.seek((recording_id + 1) * RECORD + offset)
        f.write(data)


CORRUPTIONS = {
    "zeroed": (0, bytes(RECORD)),
    "huge length": (0, struct.pack("<i", 1 << 30)),
    "term length 0": (TERM_LENGTH_FIELD, struct.pack("<i", 0)),
    "valid flag 7": (4, bytes([7])),  # before: taken for invalidated, hidden without a word
    "another id": (32 + 16, struct.pack("<q", 1)),  # before: listed as a second recording 1
}
PROBLEMS = {
    "huge length": "descriptor length 1073741824",
    "term length 0": "term length 0",
    "valid flag 7": "valid flag 7",
    "another id": "its descriptor is recording 1's",
}


@pytest.mark.parametrize("kind", CORRUPTIONS)
async def test_a_corrupt_catalog_entry_is_answered_and_hides_no_other(
    aeron, tmp_path, kind, caplog_archive
):
    options = dict(archive_dir=tmp_path / "a", segment_file_length=SEGMENT, **archive.LOCAL_ARCHIVE)
    async with archive.Archive.launch(aeron, **options):
        async with archive.connect(aeron, **archive.LOCAL) as client:
            for stream_id in (STREAM, STREAM + 1):
                channel = IPC
                await client.start_recording(channel, stream_id)
                publication = await aeron.add_exclusive_publication(channel, stream_id)
                await publish(publication, messages(50))
                await wait_recorded(client, stream_id - STREAM, publication.position)
                await client.stop_recording(channel, stream_id)
                await publication.close()
            intact = await client.list_recording(1)
    corrupt(tmp_path / "a", 0, *CORRUPTIONS[kind])
    async with archive.Archive.launch(aeron, **options) as arch:
        (said,) = [r.getMessage() for r in caplog_archive.records]  # at its start
        assert "recording 0 has a corrupt catalog entry: " in said
        assert arch.conductor.errors.get() == 1
        async with archive.connect(aeron, **archive.LOCAL, message_timeout_s=5) as client:
            listed = await client.list_recordings()
            assert [(d.recording_id, d.stop_position) for d in listed] == [
                (1, intact.stop_position)
            ]
            if kind == "zeroed":
                assert await client.list_recording(0) is None
                with pytest.raises(archive.ArchiveError, match="unknown recording id 0"):
                    await client.start_replay(0, 0, -1, "aeron:ipc", 2002)
            else:
                named = f"recording 0 has a corrupt catalog entry: {PROBLEMS[kind]}"
                with pytest.raises(archive.ArchiveError, match=named):
                    await client.list_recording(0)
                with pytest.raises(archive.ArchiveError, match=named):
                    await client.start_replay(0, 0, -1, "aeron:ipc", 2002)
            subscription = await client.replay(1, 0, -1, "aeron:ipc", 2003)
            async with asyncio.timeout(10):
                assert (await subscription.receive()).data == messages(50)[0]
            await subscription.close()


async def record_stopped(aeron, client, recording_id: int, payloads: list[bytes]) -> None:
    """`payloads` recorded from IPC stream STREAM as `recording_id`, then stopped."""
    await client.start_recording(IPC, STREAM)
    publication = await aeron.add_exclusive_publication(IPC, STREAM)
    await publish(publication, payloads)
    await wait_recorded(client, recording_id, publication.position)
    await client.stop_recording(IPC, STREAM)
    await publication.close()


async def test_segment_files_whose_entry_was_lost_are_never_a_new_recordings(
    aeron, tmp_path, caplog_archive
):
    """The last entry lost (zeroed: a page of the catalog the OS never wrote back) with its
    segment files still there: the archive says so, counted, and its next recording takes the
    id after them. Before, the new recording took that id, wrote into those files and, were it
    recovered, a replay of it went on into the lost recording's stream."""
    options = dict(archive_dir=tmp_path / "a", segment_file_length=SEGMENT, **archive.LOCAL_ARCHIVE)
    first, second = messages(60, seed=5), messages(20, seed=6)
    async with archive.Archive.launch(aeron, **options):
        async with archive.connect(aeron, **archive.LOCAL) as client:
            await record_stopped(aeron, client, 0, first)
    corrupt(tmp_path / "a", 0, *CORRUPTIONS["zeroed"])
    (tmp_path / "a" / "1000000000-0.rec").touch()  # past the catalog's end: no id to skip to
    async with archive.Archive.launch(aeron, **options) as arch:
        (said,) = [r.getMessage() for r in caplog_archive.records]
        assert said == (
            f"{tmp_path / 'a'}: recording 0 has segment files and no catalog entry (lost): they "
            "are kept, and new recordings take ids after it"
        )
        assert arch.conductor.errors.get() == 1
        async with archive.connect(aeron, **archive.LOCAL) as client:
            await record_stopped(aeron, client, 1, second)
            assert [d.recording_id for d in await client.list_recordings()] == [1]
            got = await test_archive.replay_all(client, 1, 0, -1, len(second))
            assert [data for data, _ in got] == second
            assert await client.get_stop_position(1) == got[-1][1]
    assert sorted(os.listdir(tmp_path / "a"))[:2] == ["0-0.rec", "1-0.rec"]


def catalog_of(archive_dir: Path, stops: list[int]) -> Path:
    """An archive's catalog with a recording stopped at each of `stops` (NULL_POSITION: left
    active)."""
    with Catalog(archive_dir, max_entries=4) as catalog:
        for recording_id, stop in enumerate(stops):
            catalog.add_recording(
                start_position=0, start_timestamp=1, initial_term_id=7,
                segment_file_length=SEGMENT, term_buffer_length=64 * 1024, mtu_length=1408,
                session_id=42, stream_id=STREAM, stripped_channel="aeron:ipc",
                original_channel="aeron:ipc", source_identity="ipc",
            )  # fmt: skip
            if stop != archive.NULL_POSITION:
                catalog.recording_stopped(recording_id, stop, 2)
    return archive_dir / "archive.catalog"


async def test_no_archive_starts_on_a_catalog_cut_inside_a_record(aeron, tmp_path):
    archive_dir = tmp_path / "a"
    path = catalog_of(archive_dir, [0, 0])
    os.truncate(path, 2 * RECORD + 500)  # 500 bytes into recording 1's record
    before = path.read_bytes()
    with pytest.raises(CatalogError) as caught:
        archive.Archive.launch(aeron, archive_dir=archive_dir, **archive.LOCAL_ARCHIVE)
    assert str(caught.value) == (
        f"{path}: 2548 bytes is not a whole number of 1024-byte records: recording 1's record "
        "is cut short at 500 bytes: no archive starts on it"
    )
    assert path.read_bytes() == before
    with Catalog(archive_dir, lock=True):  # and the lock is released
        pass


async def test_a_catalog_of_another_version_leaves_no_lock_behind(aeron, tmp_path):
    """Refused for its version, the catalog was left locked (and mapped) until a garbage
    collection: fixed, it still could not be opened ("in use by a running archive")."""
    path = catalog_of(tmp_path / "a", [0])
    header = path.read_bytes()[:16]
    with open(path, "r+b") as f:
        f.write(CatalogHeader(7, RECORD).encode_block())
    with pytest.raises(CatalogError, match="version 7"):
        archive.Archive.launch(aeron, archive_dir=tmp_path / "a", **archive.LOCAL_ARCHIVE)
    with open(path, "r+b") as f:
        f.write(header)
    with Catalog(tmp_path / "a", lock=True) as catalog:
        assert catalog.stop_position(0) == 0


async def test_a_segment_that_cannot_be_mapped_is_named_and_not_taken_for_none(aeron, tmp_path):
    """A recording left active whose segment cannot be mapped (here a directory of its name)
    stops the archive's start, naming the file: recovery took it for a missing segment and
    stored the recording stopped at its start, losing what the file held; the error (a bare
    OSError) left the catalog locked."""
    path = catalog_of(tmp_path / "a", [archive.NULL_POSITION])
    (tmp_path / "a" / "0-0.rec").mkdir()
    with pytest.raises(SegmentError) as caught:
        archive.Archive.launch(aeron, archive_dir=tmp_path / "a", **archive.LOCAL_ARCHIVE)
    assert str(caught.value).startswith(
        f"segment file {tmp_path / 'a' / '0-0.rec'} cannot be mapped"
    )
    with Catalog(tmp_path / "a", lock=True) as catalog:  # unlocked, and still active
        assert catalog.stop_position(0) == archive.NULL_POSITION
    assert path.exists()
