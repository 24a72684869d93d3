"""The recorder's write path (RecordingSession -> RecordingWriter.record -> the core's
record_blocks) over a log in this process: what it writes is the log, byte for byte, across
terms and segments; rec-pos follows each block and never passes what is written; a duty cycle
writes all its blocks in C (no Python call per block: each would wait for the GIL)."""

from __future__ import annotations

import errno
import os
import struct
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from aeronio import _core
from aeronio.archive.recording_session import RecordingSession, State
from aeronio.archive.recording_writer import RecordingWriter
from aeronio.archive.segments import RecordingLayout
from aeronio.client.subscription import Image
from aeronio.counters import Counter
from aeronio.logbuffer.log_buffers import LogBuffers

TERM = 64 * 1024
SEGMENT = 2 * TERM
SESSION, STREAM, INITIAL_TERM_ID = 7, 8, 100
MESSAGE = 1024


async def _never_rejected(image: Image, reason: str) -> None:
    raise AssertionError(f"the recording rejected its image: {reason}")


class Recording:
    """A log, its exclusive appender, and a recording session of its image into `directory`."""

    def __init__(self, directory: Path, segment_length: int = SEGMENT):
        self.directory = directory
        self.log = LogBuffers.create(
            directory / "log",
            term_length=TERM,
            initial_term_id=INITIAL_TERM_ID,
            session_id=SESSION,
            stream_id=STREAM,
            mtu=1408,
        )
        self.limit = np.zeros(8, dtype=np.uint8)
        self.appender = _core.LogAppender(self.log.mapped, self.limit, 0, exclusive=True)
        self.reader = _core.ImageReader(self.log.mapped, np.zeros(8, dtype=np.uint8), 0)
        subscription = SimpleNamespace(stream_id=STREAM)
        self.image = Image(
            subscription, 1, SESSION, "log", 0, "test", self.reader, None, None, _never_rejected
        )
        buffer = _core.AtomicBuffer(np.zeros(8, dtype=np.uint8))
        self.rec_pos = Counter(SimpleNamespace(buffer=buffer, value_offset=lambda i: 0), 0)
        self.events: list[object] = []
        self.errors: list[BaseException] = []
        layout = RecordingLayout(0, 0, TERM, segment_length)
        self.writer = RecordingWriter(directory / "archive", layout, 0)
        (directory / "archive").mkdir()
        self.session = RecordingSession(
            0,
            self.image,
            self.writer,
            self.rec_pos,
            SimpleNamespace(send=self.events.append),
            self.errors.append,
        )
        self.sent = 0
        self.expected = bytearray()  # the log's bytes the recording must hold

    def offer(self, count: int) -> None:
        """Append `count` 1 KiB messages (sequence numbers) as far as the log holds them, into
        terms cleaned behind the image's position (as the driver cleans them)."""
        position = self.reader.position
        for index in range(3):
            if index != (position // TERM) % 3:
                self.log.term(index)[:] = 0
        _core.AtomicBuffer(self.limit).put_int64_ordered(0, self.reader.position + 2 * TERM)
        for _ in range(count):
            payload = struct.pack("<q", self.sent) + bytes(MESSAGE - 8)
            result = self.appender.try_offer(payload)
            if result == _core.ADMIN_ACTION:
                result = self.appender.try_offer(payload)
            if result < 0:
                return
            self.sent += 1

    def note_pending(self) -> None:
        """What is in the log from the image's position to its end: the next bytes recorded."""
        position, end = self.reader.position, self.log.producer_position
        while position < end:
            index = (position // TERM) % 3
            offset = position % TERM
            take = min(end - position, TERM - offset)
            self.expected += bytes(self.log.term(index)[offset : offset + take])
            position += take

    def recorded(self) -> bytes:
        files = sorted(
            (self.directory / "archive").glob("0-*.rec"), key=lambda p: int(p.stem.split("-")[1])
        )
        return b"".join(p.read_bytes() for p in files)[: self.writer.position]

    def close(self) -> None:
        self.writer.close()
        self.log.close()


@pytest.fixture
def recording(tmp_path):
    recording = Recording(tmp_path)
    yield recording
    recording.close()


def test_1kib_messages_are_recorded_byte_for_byte_across_terms_and_segments(recording):
    while recording.sent < 700:  # about 11 terms, 5.5 segments
        recording.offer(100)
        recording.note_pending()
        for _ in range(2):  # the blocks (at most 2 terms, a duty cycle's run), then nothing
            recording.session.do_work()
            assert recording.rec_pos.get() == recording.writer.position
        assert recording.writer.position == recording.log.producer_position
    assert recording.writer.position > 5 * SEGMENT
    assert recording.recorded() == bytes(recording.expected)  # PADs and all
    files = sorted(p.name for p in (recording.directory / "archive").iterdir())
    assert files == [f"0-{i}.rec" for i in range(6)]
    assert all((recording.directory / "archive" / f).stat().st_size == SEGMENT for f in files)
    assert not recording.errors and recording.session.state is State.RECORDING
    progress = recording.events[-1]
    assert (progress.start_position, progress.position) == (0, recording.writer.position)


def test_a_duty_cycle_writes_all_its_blocks_without_a_python_call_per_block(tmp_path):
    """Before: the image's block_poll called back into Python for each block, so the
    recorder's thread waited for the GIL (held by the event loop's thread for up to the 5 ms
    switch interval) after every write: at 1 KiB, 0.7x the reference's recording rate."""
    recording = Recording(tmp_path, segment_length=8 * TERM)

    def python_calls_of_one_duty_cycle() -> int:
        calls = [0]

        def profile(frame, event, arg):
            if event in ("call", "c_call"):
                calls[0] += 1

        sys.setprofile(profile)
        try:
            assert recording.session.do_work() > 0
        finally:
            sys.setprofile(None)
        return calls[0]

    recording.offer(10)
    recording.session.do_work()  # opens the segment
    recording.offer(10)
    one_block = python_calls_of_one_duty_cycle()
    recording.offer(150)  # three blocks: the rest of two terms (each ends in a PAD), a part
    try:
        three_blocks = python_calls_of_one_duty_cycle()
        assert recording.writer.position == recording.log.producer_position > 2 * TERM
        assert three_blocks == one_block
    finally:
        recording.close()


def test_a_write_that_fails_moves_neither_rec_pos_nor_the_image_and_stops_the_recording(
    recording,
):
    recording.offer(10)
    assert recording.session.do_work() > 0
    written = recording.writer.position
    recording.offer(10)
    os.close(recording.writer._fd)  # every write now fails: EBADF
    try:
        assert recording.session.do_work() == 1
        assert recording.session.state is State.DONE
        assert [e.errno for e in recording.errors] == [errno.EBADF]
        assert recording.rec_pos.get() == recording.reader.position == written
        assert recording.writer.position == written
    finally:
        recording.writer._fd = os.open(os.devnull, os.O_RDONLY)  # for close()


def test_record_blocks_stops_at_the_file_end_and_at_max_length(recording):
    recording.offer(150)
    fd = os.open(recording.directory / "out", os.O_RDWR | os.O_CREAT, 0o644)
    counter = recording.rec_pos
    try:
        length, _, _, error = _core.record_blocks(
            recording.reader, fd, 0, TERM, TERM, 1 << 30, counter.buffer, counter.offset, 0
        )
        assert (length, error) == (TERM, 0)  # one term: the file's end
        length, _, _, error = _core.record_blocks(
            recording.reader, fd, 0, 4 * TERM, 1056, 1, counter.buffer, counter.offset, 0
        )
        assert (length, error) == (1056, 0)  # one block, then max_length is reached
        assert counter.get() == recording.reader.position == TERM + 1056
        with pytest.raises(ValueError, match="block_length_limit"):
            _core.record_blocks(
                recording.reader, fd, 0, 4 * TERM, 8, 1, counter.buffer, counter.offset, 0
            )
    finally:
        os.close(fd)


FS_IOC_FIEMAP = 0xC020660B
FIEMAP_EXTENT_DELALLOC = 0x4
FIEMAP = struct.Struct("<QQIIII")  # start, length, flags, mapped extents, extent count, reserved
FIEMAP_EXTENT = struct.Struct("<QQQQQIIII")  # logical, physical, length, 2 reserved, flags, 3 r.


def extents(path: Path) -> list[tuple[int, int, int]] | None:
    """(logical offset, length, flags) of the file's extents (FIEMAP), or None where the file
    system has no FIEMAP (tmpfs)."""
    import fcntl

    count = 64
    request = bytearray(FIEMAP.size + count * FIEMAP_EXTENT.size)
    FIEMAP.pack_into(request, 0, 0, 2**64 - 1, 0, 0, count, 0)
    with open(path, "rb") as f:
        try:
            fcntl.ioctl(f.fileno(), FS_IOC_FIEMAP, request)
        except OSError:
            return None
    mapped = FIEMAP.unpack_from(request)[3]
    out = []
    for i in range(mapped):
        fields = FIEMAP_EXTENT.unpack_from(request, FIEMAP.size + i * FIEMAP_EXTENT.size)
        out.append((fields[0], fields[2], fields[5]))
    return out


def test_blocks_are_written_into_space_allocated_for_them(recording):
    """Before: segment files were sparse and every page written took the file system's delayed
    allocation (on ext4 here 26 ms of CPU per 128 MiB against 19 ms into allocated space): a
    third of the recorder thread's time at 1 KiB. Now each block's extent is allocated first
    (the bytes and the file's length are the same)."""
    recording.offer(60)
    recording.note_pending()
    assert recording.session.do_work() > 0
    segment = recording.directory / "archive" / "0-0.rec"
    found = extents(segment)
    if found is None:
        pytest.skip(f"no FIEMAP on the file system of {segment}")
    written = recording.writer.position
    assert written > TERM // 2
    covering = [(o, n, f) for o, n, f in found if o < written]
    assert covering and sum(n for _, n, _ in covering) >= written
    assert not [f for _, _, f in covering if f & FIEMAP_EXTENT_DELALLOC], found
    assert segment.stat().st_size == SEGMENT
    assert recording.recorded() == bytes(recording.expected)
