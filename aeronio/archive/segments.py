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
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from aeronio._core import scan_whole_frames
from aeronio.logbuffer.descriptor import FRAME_ALIGNMENT, align

SEGMENT_SUFFIX = ".rec"
_FRAME = struct.Struct("<iBBHiiiiq")  # the DATA/PAD header, for dumps and checks


class SegmentError(ValueError):
    """A segment file or position that does not fit its recording."""


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


def check_segment_length(segment_length: int, term_length: int, name: str = "segment_length"):
    """A segment file length must be a power-of-two multiple of the term length."""
    if (
        segment_length <= 0
        or segment_length & (segment_length - 1)
        or segment_length < term_length
        or segment_length > 1 << 30
    ):
        raise SegmentError(
            f"{name} {segment_length} must be a power of two from the term length "
            f"({term_length}) to 1 GiB"
        )


def segment_indices(archive_dir: str | os.PathLike[str], recording_id: int) -> list[int]:
    """The indices of the recording's segment files present in the directory, in order."""
    prefix = f"{recording_id}-"
    found = []
    for entry in os.scandir(archive_dir):
        name = entry.name
        if name.startswith(prefix) and name.endswith(SEGMENT_SUFFIX):
            index = name[len(prefix) : -len(SEGMENT_SUFFIX)]
            if index.isdigit():
                found.append(int(index))
    return sorted(found)


def scan_frames(segment, start: int = 0, end: int | None = None) -> int:
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
    last = indices[-1]
    path = Path(archive_dir, layout.file_name(last))
    first = layout.segment_offset(layout.start_position) if last == 0 else 0
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size <= first:
            return layout.segment_base_position(last) + first
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            end = scan_frames(mapped, first, min(size, layout.segment_length))
    return layout.segment_base_position(last) + end


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
        self._map: mmap.mmap | None = None

    def _segment(self, index: int) -> memoryview:
        if index != self._index:
            self.close()
            path = self.archive_dir / self.layout.file_name(index)
            try:
                with open(path, "rb") as f:
                    self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except (FileNotFoundError, ValueError) as e:
                raise SegmentError(f"segment {path} is missing or empty: {e}") from None
            self._index = index
        return memoryview(self._map)

    def peek(self, limit: int, stop_position: int | None = None) -> Block | None:
        """The next block (at most `limit` bytes, never past a term's end or the stop position,
        whole frames only) without moving on, or None when there is nothing to read yet."""
        stop = self.stop_position if stop_position is None else stop_position
        available = stop - self.position
        if available <= 0:
            return None
        layout = self.layout
        term_left = layout.term_length - (self.position & (layout.term_length - 1))
        length = min(available, term_left, limit)
        segment = self._segment(layout.segment_index(self.position))
        start = layout.segment_offset(self.position)
        end = scan_frames(segment, start, min(start + length, len(segment)))
        if end == start:
            return None
        return Block(self.position, segment[start:end])

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

    def __exit__(self, *exc) -> None:
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
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        offset = start
        end = scan_frames(mapped, start)
        while offset < end:
            fields = _FRAME.unpack_from(mapped, offset)
            yield FrameInfo(offset, *fields)
            offset += align(fields[0], FRAME_ALIGNMENT)


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
                    f.seek(offset)
                    f.write(bytes(size - offset))


def check_recording(
    archive_dir: str | os.PathLike[str], layout: RecordingLayout, stop_position: int
) -> str | None:
    """What is wrong with a stopped recording's segment files (a missing segment, or whole
    frames that do not reach the stop position), or None."""
    if stop_position < layout.start_position:
        return f"stop position {stop_position} is before the start {layout.start_position}"
    if stop_position == layout.start_position:
        return None
    last = layout.segment_index(stop_position - 1)
    present = set(segment_indices(archive_dir, layout.recording_id))
    missing = [i for i in range(last + 1) if i not in present]
    if missing:
        return f"segment files missing: {', '.join(layout.file_name(i) for i in missing)}"
    first = layout.segment_offset(layout.start_position) if last == 0 else 0
    with open(Path(archive_dir, layout.file_name(last)), "rb") as f:
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            end = scan_frames(mapped, first, min(len(mapped), layout.segment_length))
    reached = layout.segment_base_position(last) + end
    if reached < stop_position:
        return f"whole frames end at {reached}, before the stop position {stop_position}"
    return None
