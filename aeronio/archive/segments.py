"""A recording's segment files: where each position lives, and reading what was recorded.

The rules (the reference 1.15.1 archive's, so that each side reads the other's directories)
-------------------------------------------------------------------------------------------
- A recording's bytes are its stream's terms, verbatim (PAD frames included), from its start
  position. The files begin at the *start term's base* position (start position rounded down
  to the term length); a recording that starts mid-term leaves the bytes before its start
  position zero in its first file.
- Segment `i` of recording `r` holds positions `[base + i*L, base + (i+1)*L)` where `L` is the
  segment file length (a power-of-two multiple of the term length) and is named
  `<r>-<i>.rec`; `segment_base_position(i)` is the position its first byte stands for. (The
  reference page names files by that position; 1.15.1, which this archive is compatible with,
  names them by index. For a recording from position 0 the first file is `<r>-0.rec` in both.)
- A frame's length word is written last (see `recording_writer`), so a reader stops at the
  first zero length: what it sees is only whole frames.

The frame format, for every reader
----------------------------------
This module is where the archive's readers (replay, `aeronio archive dump`/`verify`) and Spark's
(aeronio/spark, and the constants of its Java reader, checked by a test) take the recorded
format from: the DATA/PAD header (`FRAME_HEADER`, `HEADER_LENGTH`, the `*_FIELD_OFFSET`s), the
frame types and flags, `align_frame`, and `written_end`, the end of the last whole frame of a
recording being written. The constants are `aeronio._core`'s (cython_core/frame.pxi), the header
struct `protocol.frames.DataHeader`'s.

Damage
------
Below a recording's recorded end (its stop position, or `rec-pos` while it records) every byte
is a whole frame, so a reader that finds no sound frame header there (the file missing, empty or
cut short, a length, type or term offset that does not fit: `frame_problem`) has found damage:
`RecordingReader` raises SegmentError naming the recording, the position and the file, and
never hands out the frame before an unsound header either (its length led there: a shortened
length would otherwise deliver a cut message). `check_segments` walks every segment of a
recording term by term (`aeronio archive verify`); `frame_boundary_problem` says whether a
position a request names (a replay's start, a truncation) is a frame boundary. The 1.15.1
format has no checksums: a payload byte flipped on disk reads back as recorded, unnoticed.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple, TypeVar

import numpy as np

from aeronio._core import (
    BEGIN_FRAG_FLAG,
    END_FRAG_FLAG,
    FLAGS_FIELD_OFFSET,
    FRAME_ALIGNMENT,
    FRAME_LENGTH_FIELD_OFFSET,
    HDR_TYPE_DATA,
    HDR_TYPE_PAD,
    HEADER_LENGTH,
    RESERVED_VALUE_FIELD_OFFSET,
    TERM_ID_FIELD_OFFSET,
    TERM_OFFSET_FIELD_OFFSET,
    TYPE_FIELD_OFFSET,
    MappedSegment,
    map_segment_file,
    scan_whole_frames,
)
from aeronio.errors import AeronError
from aeronio.protocol.frames import DataHeader

__all__ = [  # the frame format, re-exported for every reader of segment files
    "BEGIN_FRAG_FLAG",
    "END_FRAG_FLAG",
    "FLAGS_FIELD_OFFSET",
    "FRAME_ALIGNMENT",
    "FRAME_HEADER",
    "FRAME_LENGTH_FIELD_OFFSET",
    "HDR_TYPE_DATA",
    "HDR_TYPE_PAD",
    "HEADER_LENGTH",
    "RESERVED_VALUE_FIELD_OFFSET",
    "TERM_ID_FIELD_OFFSET",
    "TERM_OFFSET_FIELD_OFFSET",
    "TYPE_FIELD_OFFSET",
]

SEGMENT_SUFFIX = ".rec"
FRAME_HEADER: struct.Struct = DataHeader.STRUCT  # the DATA/PAD header
_LENGTH = struct.Struct("<i")


_Lengths = TypeVar("_Lengths", int, np.ndarray)


def align_frame(length: _Lengths) -> _Lengths:
    """A frame length (an int or a numpy array of them) aligned to `FRAME_ALIGNMENT`."""
    return (length + FRAME_ALIGNMENT - 1) & -FRAME_ALIGNMENT


class SegmentError(AeronError, ValueError):
    """A segment file or position that does not fit its recording."""


class SegmentAbsentError(SegmentError):
    """A segment file missing or empty: nothing was written there (or it was removed)."""


def segment_file_name(recording_id: int, segment_index: int) -> str:
    return f"{recording_id}-{segment_index}{SEGMENT_SUFFIX}"


class RecordingLayout(NamedTuple):
    """Where a recording's positions are in its segment files."""

    recording_id: int
    start_position: int
    term_length: int
    segment_length: int

    @property
    def base_position(self) -> int:
        """The position of the first byte of segment 0: the start term's base."""
        return self.start_position - (self.start_position & (self.term_length - 1))

    def segment_index(self, position: int) -> int:
        """The index of the segment that holds `position`."""
        return (position - self.base_position) // self.segment_length

    def segment_offset(self, position: int) -> int:
        """The offset of `position` within its segment file."""
        return (position - self.base_position) & (self.segment_length - 1)

    def segment_base_position(self, segment_index: int) -> int:
        """The stream position of the first byte of segment `segment_index`."""
        return self.base_position + segment_index * self.segment_length

    def file_name(self, segment_index: int) -> str:
        """The segment file's name: `<recording id>-<segment index>.rec`, as Aeron 1.15 names it."""
        return segment_file_name(self.recording_id, segment_index)


def frame_problem(
    segment: MappedSegment | memoryview, offset: int, position: int, term_length: int, stop: int
) -> str | None:
    """What keeps the header at `offset` of a mapped segment from being a sound recorded frame
    for stream `position` (bytes before `stop` are recorded), or None: it must be within the
    file, be DATA or PAD, carry `position`'s term offset, and have a length of a header at least
    that keeps the frame within its term, the recorded bytes and the file."""
    size = len(segment)
    if offset + HEADER_LENGTH > size:
        return f"the file ends at {size} bytes"
    length, _, _, kind, term_offset = FRAME_HEADER.unpack_from(segment, offset)[:5]
    expected = position & (term_length - 1)
    if length < HEADER_LENGTH:
        return f"frame length {length}"
    if kind not in (HDR_TYPE_DATA, HDR_TYPE_PAD):
        return f"frame type {kind}"
    if term_offset != expected:
        return f"term offset {term_offset} where {expected} belongs"
    aligned = align_frame(length)
    if expected + aligned > term_length:
        return f"frame length {length} goes past its term's end"
    if position + aligned > stop:
        return f"frame length {length} goes past the recorded end {stop}"
    if offset + aligned > size:
        return f"frame length {length} goes past the file's end at {size} bytes"
    return None


def walk_sound_frames(
    segment: MappedSegment | memoryview, offset: int, position: int, term_length: int, stop: int
) -> tuple[int, int, str | None]:
    """The frames from `offset` (stream `position`) up to position `stop`, each header checked
    (`frame_problem`): (the offset after the last sound frame, that frame's offset (`offset`
    when there is none), what is wrong with the header after it, or None when `stop` is
    reached). For checks and damage only: a replay walks lengths in C (`scan_frames`)."""
    last, base = offset, position - offset  # a frame at `offset` is at position base + offset
    while offset < stop - base:
        problem = frame_problem(segment, offset, base + offset, term_length, stop)
        if problem is not None:
            return offset, last, problem
        last = offset
        offset += align_frame(_LENGTH.unpack_from(segment, offset)[0])
    return offset, last, None


def frame_boundary_problem(
    archive_dir: str | os.PathLike[str], layout: RecordingLayout, position: int, stop: int
) -> str | None:
    """Why `position` (frame aligned, in [start, stop] of a recording recorded to `stop`) is not
    a frame boundary of the recording, or None when it is: the frames from its term's start (the
    recording's start in its first term) must tile up to it. At most a term is scanned."""
    term_length = layout.term_length
    first = max(position - (position & (term_length - 1)), layout.start_position)
    if position == first:  # a term's start or the recording's: a boundary
        return None
    name = layout.file_name(layout.segment_index(position))
    try:
        mapped = map_segment(Path(archive_dir, name))
    except SegmentError as e:
        return str(e)
    with mapped:
        offset, end = layout.segment_offset(first), layout.segment_offset(position)
        reached = scan_frames(mapped, offset, end)
        if reached == end:
            return None
        at = first + reached - offset
        problem = frame_problem(mapped, reached, at, term_length, stop)
        if problem is not None:
            return f"no whole frame at position {at} in {name}: {problem}"
        length = _LENGTH.unpack_from(mapped, reached)[0]
        return f"it is inside the frame at [{at}, {at + align_frame(length)})"


def _segment_files(archive_dir: str | os.PathLike[str]) -> Iterator[tuple[int, int]]:
    """(recording id, index) of each segment file (`<id>-<index>.rec`) in the directory."""
    for entry in os.scandir(archive_dir):
        name = entry.name
        if name.endswith(SEGMENT_SUFFIX):
            recording_id, _, index = name[: -len(SEGMENT_SUFFIX)].partition("-")
            if all(n.isascii() and n.isdigit() for n in (recording_id, index)):
                yield int(recording_id), int(index)


def segment_indices(archive_dir: str | os.PathLike[str], recording_id: int) -> list[int]:
    """The indices of the recording's segment files present in the directory, in order."""
    return sorted(i for r, i in _segment_files(archive_dir) if r == recording_id)


def recording_ids(archive_dir: str | os.PathLike[str]) -> set[int]:
    """The ids of the recordings that have segment files in the directory."""
    return {r for r, _ in _segment_files(archive_dir)}


def scan_frames(segment: MappedSegment | memoryview, start: int = 0, end: int | None = None) -> int:
    """The offset after the last whole frame from `start` (a frame boundary): stops at a zero
    length, at a length that does not fit before `end`, or at `end` (in C: a replay scans
    every frame it sends)."""
    return scan_whole_frames(segment, start, len(segment) if end is None else end)


def recover_stop_position(archive_dir: str | os.PathLike[str], layout: RecordingLayout) -> int:
    """The stop position of a recording whose writer died: the end of the last whole frame of
    its last segment (its start position when it has no segment)."""
    indices = segment_indices(archive_dir, layout.recording_id)
    if not indices:
        return layout.start_position
    return written_end(archive_dir, layout, indices[-1])


def written_end(
    archive_dir: str | os.PathLike[str],
    layout: RecordingLayout,
    segment_index: int,
    known_end: int | None = None,
) -> int:
    """The end of the last whole frame of a recording being written whose last segment is
    `segment_index`: terms fill in order, so the last one started in that segment (a nonzero
    first length word) is scanned, from `known_end` (where whole frames were found to end
    before) when that is in it. The segment's first position when nothing is written in it or
    it does not exist."""
    base = layout.segment_base_position(segment_index)
    first = max(base, layout.start_position)
    try:
        mapped = map_segment(Path(archive_dir, layout.file_name(segment_index)))
    except SegmentAbsentError:
        return first  # not yet made (or removed), or empty: nothing beyond its base
    with mapped:
        size = min(len(mapped), layout.segment_length)
        if size <= first - base:
            return first
        start = _last_started_term(mapped, layout, first - base, size)
        if start is None:
            return first
        stop = min(start - (start & (layout.term_length - 1)) + layout.term_length, size)
        if known_end is not None and start <= known_end - base <= stop:
            start = known_end - base
        return base + scan_frames(mapped, start, stop)


def _last_started_term(
    segment: MappedSegment, layout: RecordingLayout, first: int, size: int
) -> int | None:
    """The offset of the last term of a segment with its first frame written (a recording's
    first term from its start offset `first`), or None."""
    term_length = layout.term_length
    starts = np.arange(first - first % term_length, size, term_length, dtype=np.int64)
    starts[0] = first
    starts = starts[starts + _LENGTH.size <= size]
    started = starts[np.frombuffer(memoryview(segment), np.int32, size // 4)[starts // 4] != 0]
    return int(started[-1]) if len(started) else None


def read_segment(
    archive_dir: str | os.PathLike[str], layout: RecordingLayout, position: int, out: memoryview
) -> int:
    """The recording's bytes from `position` copied into `out` (a writable byte view that
    ends within the segment holding `position`) from its segment file: how many were copied,
    fewer when the file ends first. SegmentError naming the file when it is missing."""
    path = Path(archive_dir, layout.file_name(layout.segment_index(position)))
    try:
        with open(path, "rb", buffering=0) as f:
            f.seek(layout.segment_offset(position))
            got = 0
            while got < len(out):
                n = f.readinto(out[got:])
                if not n:
                    break
                got += n
    except FileNotFoundError:
        raise SegmentError(f"segment file {path} is missing") from None
    return got


class Block(NamedTuple):
    """Bytes of whole frames of one term: `data` stands for positions [position, +len)."""

    position: int
    data: memoryview


class RecordingReader:
    """Reads a recording's bytes from `position` up to `stop_position`, a term at most per
    block, from its segment files (no archive process needed)."""

    def __init__(
        self,
        archive_dir: str | os.PathLike[str],
        layout: RecordingLayout,
        position: int,
        stop_position: int,
    ):
        if position & (FRAME_ALIGNMENT - 1) or not (
            layout.start_position <= position <= stop_position
        ):
            raise SegmentError(
                f"position {position} must be frame aligned and within "
                f"[{layout.start_position}, {stop_position}]"
            )
        self.archive_dir = Path(archive_dir)
        self.layout = layout
        self.position = position
        self.stop_position = stop_position
        self._index = -1
        self._map: MappedSegment | None = None

    def _path(self) -> Path:
        return self.archive_dir / self.layout.file_name(self.layout.segment_index(self.position))

    def _segment(self, index: int) -> memoryview:
        """The segment mapped (kept from the last call while it is the same). A file cut
        short since it was mapped is damage: its pages past the new end would be a SIGBUS.
        (Looked at before each read, not during one: a cut in the middle of a read still is.)"""
        mapped = self._map
        path = self.archive_dir / self.layout.file_name(index)
        if index != self._index or mapped is None:
            self.close()
            try:
                mapped = map_segment(path)
            except SegmentError as e:
                raise self._damage(str(e)) from None
            self._map, self._index = mapped, index
        else:
            try:
                size = os.stat(path).st_size
            except FileNotFoundError:  # unlinked: the pages mapped stay readable
                size = len(mapped)
            if size < len(mapped):
                raise self._damage(f"cut to {size} bytes under the read ({len(mapped)} mapped)")
        return memoryview(mapped)

    def mapped_segment(self) -> tuple[memoryview, int]:
        """The mapped segment file that holds the position, and the position its first byte
        stands for (SegmentError when it cannot be mapped)."""
        index = self.layout.segment_index(self.position)
        return self._segment(index), self.layout.segment_base_position(index)

    def _damage(self, problem: str, position: int | None = None) -> SegmentError:
        at = self.position if position is None else position
        return SegmentError(
            f"recording {self.layout.recording_id} is damaged at position {at} in "
            f"{self._path()}: {problem} (read up to position {self.position})"
        )

    def peek(self, limit: int, stop_position: int | None = None) -> Block | None:
        """The next block (at most `limit` bytes, never past a term's end or the stop position,
        whole frames only) without moving on; None when there is nothing to read yet or its
        next frame is longer than `limit`. Bytes before the stop position are recorded: where
        they are no sound frames, SegmentError (the module's "Damage")."""
        stop = self.stop_position if stop_position is None else stop_position
        available = stop - self.position
        if available <= 0:
            return None
        layout = self.layout
        term_length = layout.term_length
        term_left = term_length - (self.position & (term_length - 1))
        length = min(available, term_left, limit)
        segment = self._segment(layout.segment_index(self.position))
        start = layout.segment_offset(self.position)
        problem = frame_problem(segment, start, self.position, term_length, stop)
        if problem is not None:
            raise self._damage(problem)
        end = scan_frames(segment, start, min(start + length, len(segment)))
        after = self.position + end - start
        if after < min(stop, self.position + term_left):  # a recorded frame follows in the term
            problem = frame_problem(segment, end, after, term_length, stop)
            if problem is not None:
                end = self._sound_end(segment, start, end, problem)
        if end == start:
            return None
        return Block(self.position, segment[start:end])

    def _sound_end(self, segment: memoryview, start: int, end: int, problem: str) -> int:
        """Where a block whose whole frames end at an unsound header (`problem`) may end: before
        the first unsound header, less the frame whose length led to it (SegmentError when
        that leaves nothing)."""
        block_end = self.position + end - start
        reached, last, inside = walk_sound_frames(
            segment, start, self.position, self.layout.term_length, block_end
        )
        if inside is not None:
            problem, end = inside, reached
        if last == start:
            raise self._damage(problem, self.position + end - start)
        return last

    def advance(self, block: Block) -> None:
        """Move past a block `peek` gave."""
        self.position = block.position + len(block.data)

    def read(self, limit: int, stop_position: int | None = None) -> Block | None:
        """The next block, moving past it."""
        block = self.peek(limit, stop_position)
        if block is not None:
            self.advance(block)
        return block

    def blocks(self, limit: int = 1 << 20) -> Iterator[Block]:
        """Every block to the stop position."""
        while (block := self.read(limit)) is not None:
            yield block

    def close(self) -> None:
        """Unmap the segments read."""
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:  # a block still exported: the map closes when it is released
                pass
            self._map = None
            self._index = -1

    def __enter__(self) -> RecordingReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FrameInfo(NamedTuple):
    """A frame header as `aeronio archive dump` prints it."""

    segment_offset: int
    frame_length: int
    version: int
    flags: int
    type: int
    term_offset: int
    session_id: int
    stream_id: int
    term_id: int
    reserved_value: int


def iter_frame_headers(path: str | os.PathLike[str], start: int = 0) -> Iterator[FrameInfo]:
    """The frame headers of a segment file from `start` to the first zero length (what the
    reference's SegmentInspector prints)."""
    with map_segment(path) as mapped:
        offset = start
        end = scan_frames(mapped, start)
        while offset < end:
            fields = FRAME_HEADER.unpack_from(mapped, offset)
            yield FrameInfo(offset, *fields)
            offset += align_frame(fields[0])


def truncate(archive_dir: str | os.PathLike[str], layout: RecordingLayout, position: int) -> None:
    """Cut a stopped recording at `position` (a frame boundary): the segments after the one
    holding it go, and that one is zeroed from there, so readers and a later extension see
    nothing past it."""
    keep = layout.segment_index(position)
    for index in segment_indices(archive_dir, layout.recording_id):
        path = Path(archive_dir, layout.file_name(index))
        if index > keep or (
            index == keep and position == layout.segment_base_position(index) and index > 0
        ):
            path.unlink()
        elif index == keep:
            offset = layout.segment_offset(position)
            with open(path, "r+b") as f:
                size = os.fstat(f.fileno()).st_size
                if size > offset:
                    _zero(f.fileno(), offset, size - offset)


_libc = ctypes.CDLL(None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
_PUNCH_HOLE = 0x02 | 0x01  # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE


def _zero(fd: int, offset: int, length: int) -> None:
    """Zero a file's bytes [offset, offset + length): punched out, which allocates nothing (a
    cut on a full disk must not fail half done), or written where the file system cannot."""
    if _libc.fallocate(fd, _PUNCH_HOLE, offset, length) == 0:
        return
    error = ctypes.get_errno()
    if error not in (errno.EOPNOTSUPP, errno.ENOSYS):
        raise OSError(error, os.strerror(error))
    os.pwrite(fd, bytes(length), offset)


def map_segment(path: str | os.PathLike[str]) -> MappedSegment:
    """A segment file mapped read-only, the GIL held throughout (the replayer's thread maps
    segments beside a busy event loop: `MappedSegment` in C); SegmentAbsentError naming it
    when it is missing or empty, SegmentError when it cannot be mapped (not a file, no
    permission: never taken for an absent one)."""
    try:
        mapped = map_segment_file(path)
    except FileNotFoundError:
        raise SegmentAbsentError(f"segment file {path} is missing") from None
    except OSError as e:
        raise SegmentError(f"segment file {path} cannot be mapped: {e}") from None
    if len(mapped) == 0:
        mapped.close()
        raise SegmentAbsentError(f"segment file {path} is empty (0 bytes)")
    return mapped


class SegmentReport(NamedTuple):
    """What `check_segments` found in `files` segment files (a run of missing ones, or one):
    positions [first, end) checked."""

    file_name: str
    first: int
    end: int
    problem: str | None
    files: int = 1


def check_segments(
    archive_dir: str | os.PathLike[str], layout: RecordingLayout, stop_position: int
) -> list[SegmentReport]:
    """Every segment of a stopped recording checked: present, and its recorded positions whole
    frames that tile each term, every header sound (`walk_sound_frames`). A run of missing
    segments is one report, so the work is bounded by the files present whatever the stop
    position says."""
    reports: list[SegmentReport] = []
    if stop_position <= layout.start_position:
        return reports
    last = layout.segment_index(stop_position - 1)
    present = sorted({i for i in segment_indices(archive_dir, layout.recording_id) if i <= last})
    index = 0
    for found in [*present, last + 1]:
        if index < found:  # segments [index, found) are missing
            reports.append(_missing(archive_dir, layout, index, found, stop_position))
        if found <= last:
            reports.append(_check_segment(archive_dir, layout, found, stop_position))
        index = found + 1
    return reports


def _bounds(layout: RecordingLayout, index: int, stop_position: int) -> tuple[int, int]:
    """The recorded positions [first, end) of segment `index`."""
    first = max(layout.segment_base_position(index), layout.start_position)
    return first, min(layout.segment_base_position(index + 1), stop_position)


def _missing(
    archive_dir: str | os.PathLike[str], layout: RecordingLayout, index: int, end: int, stop: int
) -> SegmentReport:
    """The report of segments [index, end), none of whose files is present."""
    first, last_end = _bounds(layout, index, stop)[0], _bounds(layout, end - 1, stop)[1]
    name, count = layout.file_name(index), end - index
    if count == 1:
        problem = f"segment file {Path(archive_dir, name)} is missing"
        return SegmentReport(name, first, last_end, problem)
    last_name = layout.file_name(end - 1)
    problem = f"segment files {Path(archive_dir, name)} to {last_name} are missing ({count} files)"
    return SegmentReport(f"{name} to {last_name}", first, last_end, problem, count)


def _check_segment(
    archive_dir: str | os.PathLike[str], layout: RecordingLayout, index: int, stop: int
) -> SegmentReport:
    first, end = _bounds(layout, index, stop)
    name = layout.file_name(index)
    try:
        with map_segment(Path(archive_dir, name)) as mapped:
            problem = _check_terms(mapped, layout, first, end)
    except SegmentError as e:
        problem = str(e)
    return SegmentReport(name, first, end, problem)


def _check_terms(
    mapped: MappedSegment, layout: RecordingLayout, first: int, end: int
) -> str | None:
    term_length = layout.term_length
    position = first
    while position < end:
        term_end = min(position - (position & (term_length - 1)) + term_length, end)
        offset = layout.segment_offset(position)
        reached, _, problem = walk_sound_frames(mapped, offset, position, term_length, term_end)
        if problem is not None:
            return f"no whole frame at position {position + reached - offset}: {problem}"
        position = term_end
    return None
