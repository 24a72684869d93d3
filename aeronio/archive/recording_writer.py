"""RecordingWriter: writes an image's blocks, verbatim, into a recording's segment files.

The rules
---------
- A block is whole frames of one term (the image's `block_poll` never crosses a term), and a
  segment is a whole number of terms, so a block never crosses a segment: when a segment is
  full the next block opens the next one (`<recordingId>-<index>.rec`, sized to the segment
  length up front, zero beyond what was written).
- A block is written in two steps: everything but its first frame's length word, then that
  word. A reader (or a recovery after a crash) stops at the first zero length, so it never sees
  part of a block.
- A recording writes runs of blocks straight from the image's log (`record`, the core's
  `record_blocks`), with the GIL released for the whole run: rec-pos moves after each block,
  never past what is written. (A block at a time through Python, the recorder's thread waited
  for the event loop's thread to give the GIL back after each write.)
- Each block's extent in the segment is allocated (fallocate, the file's length unchanged)
  just before it is written, except on tmpfs: a buffered write into allocated space skips the
  file system's delayed allocation per page (ext4: a quarter less CPU per byte written). A
  segment holds the same bytes either way; a recording stopped early leaves its segment sparse
  beyond what it wrote, as the reference's.
- Sync level 1 makes each write durable (fdatasync), 2 the file's metadata too (fsync).
- Each run's bytes and time, and its longest write, go to the recorder's counters
  (`RecorderCounters`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from aeronio._core import write_block
from aeronio.archive.context import MAX_BLOCK_LENGTH
from aeronio.archive.segments import RecordingLayout

if TYPE_CHECKING:
    from aeronio.client.counter import ClientCounter
    from aeronio.client.subscription import Image
    from aeronio.counters import Counter


class RecorderCounters:
    """The recorder's counters (shared by its recording sessions): the longest write in ns,
    and total bytes and ns written."""

    def __init__(
        self,
        max_write_time: ClientCounter,
        total_write_bytes: ClientCounter,
        total_write_time: ClientCounter,
    ) -> None:
        self.max_write_time = max_write_time
        self.total_write_bytes = total_write_bytes
        self.total_write_time = total_write_time

    def on_write(self, length: int, elapsed_ns: int, longest_ns: int) -> None:
        """`length` bytes written in `elapsed_ns`, the longest single write `longest_ns`."""
        self.total_write_bytes.increment(length)
        self.total_write_time.increment(elapsed_ns)
        self.max_write_time.propose_max(longest_ns)


class RecordingWriter:
    """Appends blocks at the recording's position, opening segments as they fill."""

    def __init__(
        self,
        archive_dir: str | os.PathLike[str],
        layout: RecordingLayout,
        position: int,
        file_sync_level: int = 0,
        counters: RecorderCounters | None = None,
    ):
        self.archive_dir = Path(archive_dir)
        self.layout = layout
        self.position = position
        self.file_sync_level = file_sync_level
        self.counters = counters
        self._fd = -1
        self._segment_index = -1

    def _open(self, index: int) -> None:
        self.close()
        path = self.archive_dir / self.layout.file_name(index)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < self.layout.segment_length:
                os.ftruncate(fd, self.layout.segment_length)
        except BaseException:
            os.close(fd)
            raise
        self._fd, self._segment_index = fd, index

    def record(self, image: Image, position: Counter, max_length: int) -> int:
        """Write the image's blocks from the position on, through the segment it is in at most
        and about `max_length` bytes (`Image.record_blocks`: the GIL released, `position`,
        rec-pos, moved after each block); returns the bytes written. OSError (a full disk)
        after the position moved past what was written before the failed write."""
        layout = self.layout
        index = layout.segment_index(self.position)
        if index != self._segment_index:
            self._open(index)
        base = layout.segment_base_position(index)
        length, total_ns, longest_ns, error = image.record_blocks(
            self._fd, base, base + layout.segment_length, MAX_BLOCK_LENGTH, max_length,
            position, self.file_sync_level,
        )  # fmt: skip
        if length and self.counters is not None:
            self.counters.on_write(length, total_ns, longest_ns)
        self.position += length
        if error:
            raise OSError(error, os.strerror(error))
        return length

    def write(self, block: memoryview) -> int:
        """Write `block` (whole frames of one term) at the position; returns the new position.
        OSError (a full disk) leaves the position where it was."""
        layout, length = self.layout, len(block)
        index = layout.segment_index(self.position)
        if index != self._segment_index:
            self._open(index)
        elapsed_ns = write_block(
            self._fd, block, layout.segment_offset(self.position), self.file_sync_level
        )
        if self.counters is not None:
            self.counters.on_write(length, elapsed_ns, elapsed_ns)
        self.position += length
        return self.position

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd, self._segment_index = -1, -1
