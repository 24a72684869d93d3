"""The driver's loss report (Aeron's LossReport): one entry per image that lost data, kept in
`loss-report.dat` in the driver directory in Aeron's layout, so that `aeronio loss` (or Aeron's
LossStat) reads it from another process while the driver writes it.

Entries follow each other from offset 0, each at a multiple of 64 bytes (little-endian):

    @0   observation count   i64   1 is stored last, with release semantics: it publishes the entry
    @8   total bytes lost    i64
    @16  first observation   i64   epoch ms
    @24  last observation    i64   epoch ms
    @32  session id          i32
    @36  stream id           i32
    @40  channel             i32 length, then that many ASCII bytes
    then the source          i32 length, then that many ASCII bytes (the sender's address)

The driver is the only writer: a new entry's fields are written (plainly: the source's length
is not even aligned) before its count is stored with release semantics; a further observation
stores its time with release semantics and adds to the total and the count atomically. A reader
loads the count with acquire semantics before anything else of an entry and stops at the first
count of 0. A full report takes no more entries (the driver goes on).
"""

from __future__ import annotations

import os
import struct
import time
from typing import NamedTuple

import numpy as np

from aeronio._core import AtomicBuffer
from aeronio.errors import AeronError

LOSS_REPORT_LENGTH = 1024 * 1024  # Aeron's default (aeron.loss.report.buffer.length)
ENTRY_ALIGNMENT = 64
OBSERVATION_COUNT_OFFSET = 0
TOTAL_BYTES_LOST_OFFSET = 8
FIRST_OBSERVATION_OFFSET = 16
LAST_OBSERVATION_OFFSET = 24
SESSION_ID_OFFSET = 32
STREAM_ID_OFFSET = 36
CHANNEL_OFFSET = 40
ENTRY_HEADER_LENGTH = CHANNEL_OFFSET + 2 * 4  # and the two strings' lengths
_LENGTH = struct.Struct("<i")  # a string's length


class LossReportError(AeronError, ValueError):
    """A loss report file that cannot be read (too short, or an entry running past its end)."""


class LossEntry(NamedTuple):
    """One image's losses: how many gaps were seen (each NAKed or filled), their bytes in all,
    when the first and the last were seen (epoch ms), and which stream, channel and sender."""

    observation_count: int
    total_bytes_lost: int
    first_observation_ms: int
    last_observation_ms: int
    session_id: int
    stream_id: int
    channel: str
    source: str


def _align(length: int) -> int:
    return (length + ENTRY_ALIGNMENT - 1) & -ENTRY_ALIGNMENT


class ReportEntry:
    """The entry of one image, to record its further losses in."""

    __slots__ = ("_buffer", "_offset")

    def __init__(self, buffer: AtomicBuffer, offset: int):
        self._buffer = buffer
        self._offset = offset

    def record_observation(self, bytes_lost: int, timestamp_ms: int) -> None:
        buffer, offset = self._buffer, self._offset
        buffer.put_int64_ordered(offset + LAST_OBSERVATION_OFFSET, timestamp_ms)
        buffer.get_and_add_int64(offset + TOTAL_BYTES_LOST_OFFSET, bytes_lost)
        buffer.get_and_add_int64(offset + OBSERVATION_COUNT_OFFSET, 1)


class LossReport:
    """The driver's side: entries appended to a mapped file, one per image that lost data."""

    def __init__(self, mapped: np.ndarray):
        self._map: np.ndarray | None = mapped
        self.length = len(mapped)  # bytes mapped
        self._buffer = AtomicBuffer(mapped)
        self._next_offset = 0

    @classmethod
    def create(cls, path: str | os.PathLike[str], length: int = LOSS_REPORT_LENGTH) -> LossReport:
        """A new, empty report of `length` bytes at `path` (replacing what was there), its
        pages allocated: a full file system is ENOSPC here, never a SIGBUS on a loss."""
        with open(path, "wb") as f:
            os.posix_fallocate(f.fileno(), 0, length)
        return cls(np.memmap(path, dtype=np.uint8, mode="r+", shape=(length,)))

    def create_entry(
        self,
        bytes_lost: int,
        timestamp_ms: int,
        session_id: int,
        stream_id: int,
        channel: str,
        source: str,
    ) -> ReportEntry | None:
        """The entry of an image's first loss, or None when the report is full."""
        mapped = self._map
        if mapped is None:
            return None
        channel_bytes = channel.encode("ascii", "replace")
        source_bytes = source.encode("ascii", "replace")
        length = ENTRY_HEADER_LENGTH + len(channel_bytes) + len(source_bytes)
        offset = self._next_offset
        if length > len(mapped) - offset:
            return None
        buffer = self._buffer
        buffer.put_int64(offset + TOTAL_BYTES_LOST_OFFSET, bytes_lost)
        buffer.put_int64(offset + FIRST_OBSERVATION_OFFSET, timestamp_ms)
        buffer.put_int64(offset + LAST_OBSERVATION_OFFSET, timestamp_ms)
        buffer.put_int32(offset + SESSION_ID_OFFSET, session_id)
        buffer.put_int32(offset + STREAM_ID_OFFSET, stream_id)
        at = offset + CHANNEL_OFFSET
        for text in (channel_bytes, source_bytes):
            _LENGTH.pack_into(mapped.data, at, len(text))
            mapped[at + 4 : at + 4 + len(text)] = np.frombuffer(text, dtype=np.uint8)
            at += 4 + len(text)
        buffer.put_int64_ordered(offset + OBSERVATION_COUNT_OFFSET, 1)  # publishes the entry
        self._next_offset = offset + _align(length)
        return ReportEntry(buffer, offset)

    def close(self) -> None:
        """Flush the file and drop the mapping (entries handed out stop recording)."""
        if isinstance(self._map, np.memmap):
            self._map.flush()
        self._map = None


class ImageLosses:
    """One image's losses in the driver's report (Aeron's LossHandler, the image's): its entry
    is made at its first loss, and each further loss is an observation in it; once the report
    is full, no entry is tried again."""

    def __init__(
        self, report: LossReport, session_id: int, stream_id: int, channel: str, source: str
    ):
        self._report: LossReport | None = report  # None once it is full
        self._entry: ReportEntry | None = None
        self._image = (session_id, stream_id, channel, source)

    def on_gap_detected(self, term_id: int, term_offset: int, length: int) -> None:
        """The receiver NAKed (or filled) a gap of `length` bytes."""
        now_ms = time.time_ns() // 1_000_000
        if self._entry is not None:
            self._entry.record_observation(length, now_ms)
        elif self._report is not None:
            self._entry = self._report.create_entry(length, now_ms, *self._image)
            if self._entry is None:
                self._report = None


def read_loss_report(mapped: np.ndarray) -> list[LossEntry]:
    """The entries of a loss report mapped (writable, for the atomics) as `mapped`."""
    buffer = AtomicBuffer(mapped)
    capacity = len(mapped)
    entries = []
    offset = 0
    while offset + ENTRY_HEADER_LENGTH <= capacity:
        count = buffer.get_int64_volatile(offset + OBSERVATION_COUNT_OFFSET)
        if count <= 0:
            break
        texts = []
        at = offset + CHANNEL_OFFSET
        for _ in range(2):
            length = _LENGTH.unpack_from(mapped.data, at)[0] if at + 4 <= capacity else -1
            if not 0 <= length <= capacity - at - 4:
                raise LossReportError(f"loss report entry at {offset} runs past the end")
            texts.append(mapped[at + 4 : at + 4 + length].tobytes().decode("ascii", "replace"))
            at += 4 + length
        entries.append(
            LossEntry(
                count,
                buffer.get_int64_volatile(offset + TOTAL_BYTES_LOST_OFFSET),
                buffer.get_int64(offset + FIRST_OBSERVATION_OFFSET),
                buffer.get_int64_volatile(offset + LAST_OBSERVATION_OFFSET),
                buffer.get_int32(offset + SESSION_ID_OFFSET),
                buffer.get_int32(offset + STREAM_ID_OFFSET),
                *texts,
            )
        )
        offset += _align(at - offset)
    return entries


def load_loss_report(path: str | os.PathLike[str]) -> list[LossEntry]:
    """The entries of the loss report file at `path` (FileNotFoundError if there is none)."""
    if os.path.getsize(path) == 0:
        return []
    return read_loss_report(np.memmap(path, dtype=np.uint8, mode="r+"))
