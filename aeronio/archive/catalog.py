"""`archive.catalog`: the archive's recording descriptors, in the reference 1.15.1 format.

The file
--------
- Record 0 (1024 bytes) holds the `CatalogHeader` block (version 0, entry length 1024).
- Recording `n` is record `n + 1`: a 32-byte `RecordingDescriptorHeader` (descriptor length,
  valid flag), then the `RecordingDescriptor` body (no message header). Ids are dense from 0;
  the catalog ends after its last record with a non-zero length (a record zeroed by damage
  before it is a hole, not the end). An archive's next id is past any recording's segment
  files too (`orphans`: their entry lost), so that a new recording never adopts them.
- The file is sized for `max_entries` records when created (the reference's default 8192),
  sparse: a record's extent is allocated (fallocate) before it is first written through the
  mapping, so that a full disk refuses the recording (CatalogError) instead of a SIGBUS.

Damage
------
`descriptor` checks what it reads (the body decodes; term length a power of two in Aeron's
limits, segment length a power-of-two multiple of it, start position frame aligned, stop
position unset or aligned and not before the start) and raises CatalogError naming the
recording; `entries` reports each corrupt entry (a hole too) next to the sound ones, and
iteration, `find_last` and `recover` skip corrupt entries, so one does not hide the others.

Concurrency
-----------
One archive writes (it holds an exclusive `flock` on the file, as does `aeronio archive verify`);
any process may read. A new descriptor is written body first and published
by the ordered store of its length; stop position and timestamp are ordered stores; readers
load them with acquire loads (`AtomicBuffer`).

Sync levels (`file_sync_level`): 0 leaves writes to the page cache, 1 msyncs the record after
each change, 2 also fsyncs the file's metadata.
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import msgspec
import numpy as np

from aeronio._core import AtomicBuffer
from aeronio.archive import segments
from aeronio.archive.codecs import (
    NULL_POSITION,
    NULL_TIMESTAMP,
    CatalogHeader,
    RecordingDescriptor,
    RecordingDescriptorHeader,
)
from aeronio.errors import AeronError
from aeronio.logbuffer.descriptor import FRAME_ALIGNMENT
from aeronio.protocol import limits

CATALOG_FILE_NAME = "archive.catalog"
CATALOG_VERSION = 0
RECORD_LENGTH = 1024
DESCRIPTOR_HEADER_LENGTH = RecordingDescriptorHeader.BLOCK_LENGTH
DEFAULT_MAX_ENTRIES = 8192
VALID, INVALID = 1, 0
# Field offsets in a record (descriptor header, then the descriptor body).
_BODY = DESCRIPTOR_HEADER_LENGTH
_STOP_TIMESTAMP = _BODY + 32
_START_POSITION = _BODY + 40
_STOP_POSITION = _BODY + 48
# The three strings share what is left of a record after the fixed parts and their lengths.
MAX_STRINGS_LENGTH = RECORD_LENGTH - _BODY - RecordingDescriptor.BLOCK_LENGTH - 3 * 4


class CatalogError(AeronError):
    """A catalog that cannot be opened or changed as asked; the message says why."""


def descriptor_problem(d: RecordingDescriptor) -> str | None:
    """What makes a descriptor's layout fields impossible (Aeron's limits), or None."""
    try:
        limits.check_term_length(d.term_buffer_length, "term length", CatalogError)
        limits.check_segment_length(
            d.segment_file_length, d.term_buffer_length, "segment length", CatalogError
        )
    except CatalogError as e:
        return str(e)
    if d.start_position < 0 or d.start_position % FRAME_ALIGNMENT:
        return f"start position {d.start_position} is not a frame aligned position"
    stop = d.stop_position
    if stop != NULL_POSITION and (stop < d.start_position or stop % FRAME_ALIGNMENT):
        return f"stop position {stop} is not a frame aligned position from the start"
    return None


def _data_end(path: Path) -> int:
    """Where the file's last data region ends (its size where the file system cannot say)."""
    with open(path, "rb") as f:
        fd, end, offset = f.fileno(), 0, 0
        size = os.fstat(fd).st_size
        try:
            while offset < size:
                offset = os.lseek(fd, offset, os.SEEK_DATA)
                offset = end = os.lseek(fd, offset, os.SEEK_HOLE)
        except OSError as e:
            if e.errno != errno.ENXIO:  # ENXIO: no data after `offset`
                return size
        return end


def _lock(path: Path) -> int:
    """Hold an exclusive lock on the catalog for as long as the fd is open: one writer."""
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise CatalogError(f"{path} is in use by a running archive") from None
    return fd


class Catalog:
    """The recording descriptors of one archive directory (`readonly` for tools and readers)."""

    def __init__(
        self,
        archive_dir: str | os.PathLike[str],
        *,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        file_sync_level: int = 0,
        readonly: bool = False,
        lock: bool = False,
    ):
        if file_sync_level not in (0, 1, 2):
            raise CatalogError(f"file_sync_level must be 0, 1 or 2, got {file_sync_level}")
        self.archive_dir = Path(archive_dir)
        self.path = self.archive_dir / CATALOG_FILE_NAME
        self.file_sync_level = file_sync_level
        self.readonly = readonly
        if not self.path.exists():
            if readonly:
                raise CatalogError(f"no catalog at {self.path}")
            if max_entries < 1:
                raise CatalogError(f"max_entries must be positive, got {max_entries}")
            self.archive_dir.mkdir(parents=True, exist_ok=True)
            self._create(max_entries)
        size = self.path.stat().st_size
        if size < 2 * RECORD_LENGTH:
            raise CatalogError(f"{self.path}: {size} bytes is too short for a catalog")
        self._lock_fd = _lock(self.path) if lock else -1
        try:
            self._map_checked(readonly)
        except BaseException:  # not opened: the lock and the mapping go now, not with a GC
            self.close()
            raise
        records, cut = divmod(len(self._map), RECORD_LENGTH)
        self.max_entries = records - 1
        # A file cut short inside a record: that recording is reported, never read nor written
        self.damage: str | None = None
        if cut:
            self.damage = (
                f"{self.path}: {len(self._map)} bytes is not a whole number of "
                f"{RECORD_LENGTH}-byte records: recording {self.max_entries}'s record is cut "
                f"short at {cut} bytes"
            )
        self.next_recording_id = self._count()
        # Segment files of ids from there have lost their entry (a page of the catalog never
        # written back, damage): a new recording must not adopt them, so ids go on after them
        # (ids past the catalog's end are none a recording could take)
        self.orphans: list[int] = []
        if not readonly:
            self.orphans = sorted(
                r
                for r in segments.recording_ids(archive_dir)
                if self.next_recording_id <= r < self.max_entries
            )
            if self.orphans:
                self.next_recording_id = self.orphans[-1] + 1

    def _map_checked(self, readonly: bool) -> None:
        # "c": never written, so it sees the writer's changes
        mode: Literal["c", "r+"] = "c" if readonly else "r+"
        self._map = np.memmap(self.path, dtype=np.uint8, mode=mode)
        self.buffer = AtomicBuffer(self._map)
        header, _ = CatalogHeader.decode_block(self._map.data)
        if header.version != CATALOG_VERSION or header.entry_length != RECORD_LENGTH:
            raise CatalogError(
                f"{self.path}: version {header.version}, entry length {header.entry_length} "
                f"(this archive reads version {CATALOG_VERSION}, entries of {RECORD_LENGTH})"
            )

    def _create(self, max_entries: int) -> None:
        with open(self.path, "wb") as f:
            f.truncate((max_entries + 1) * RECORD_LENGTH)
            f.write(CatalogHeader(CATALOG_VERSION, RECORD_LENGTH).encode_block())
            self._sync_file(f.fileno())

    def _count(self) -> int:
        """One past the last record with a non-zero length word, looked for from the end of the
        file's data: the holes after it (records never written) are not read, as reading them
        would allocate their pages on tmpfs."""
        count = min(self.max_entries, -(-_data_end(self.path) // RECORD_LENGTH) - 1)
        while count > 0 and self._length(count - 1) == 0:
            count -= 1
        return count

    # -- reading --------------------------------------------------------------------------

    def _offset(self, recording_id: int) -> int:
        return (recording_id + 1) * RECORD_LENGTH

    def _length(self, recording_id: int) -> int:
        return self.buffer.get_int32_volatile(self._offset(recording_id))

    def has_recording(self, recording_id: int) -> bool:
        """Whether the catalog has an entry for `recording_id`."""
        return 0 <= recording_id < self.max_entries and self._length(recording_id) > 0

    def is_valid(self, recording_id: int) -> bool:
        """Whether the recording's entry is not invalidated (by a failed recording): its valid
        flag is not INVALID. A flag neither VALID nor INVALID is damage `descriptor` names."""
        return (
            self.has_recording(recording_id)
            and self._map[self._offset(recording_id) + 4] != INVALID
        )

    def descriptor(self, recording_id: int) -> RecordingDescriptor:
        """The recording's descriptor (stop position and timestamp as of now)."""
        if self.damage is not None and recording_id == self.max_entries:
            raise CatalogError(self.damage)
        if not self.has_recording(recording_id):
            raise CatalogError(f"unknown recording id {recording_id}")
        at = self._offset(recording_id)
        length = self._length(recording_id)
        corrupt = f"{self.path}: recording {recording_id} has a corrupt catalog entry:"
        if not RecordingDescriptor.BLOCK_LENGTH <= length <= RECORD_LENGTH - _BODY:
            raise CatalogError(f"{corrupt} descriptor length {length}")
        if (flag := self._map[at + 4]) not in (VALID, INVALID):
            raise CatalogError(f"{corrupt} valid flag {flag}")
        body = bytes(self._map[at + _BODY : at + _BODY + length])
        try:
            descriptor, _ = RecordingDescriptor.decode_block(body)
        except Exception as e:  # a body that does not decode, whatever the codec says
            raise CatalogError(f"{corrupt} the descriptor does not decode: {e}") from None
        descriptor = msgspec.structs.replace(
            descriptor,
            stop_timestamp=self.buffer.get_int64_volatile(at + _STOP_TIMESTAMP),
            stop_position=self.buffer.get_int64_volatile(at + _STOP_POSITION),
        )
        if descriptor.recording_id != recording_id:
            raise CatalogError(f"{corrupt} its descriptor is recording {descriptor.recording_id}'s")
        problem = descriptor_problem(descriptor)
        if problem is not None:
            raise CatalogError(f"{corrupt} {problem}")
        return descriptor

    def entries(self) -> Iterator[tuple[int, RecordingDescriptor | CatalogError]]:
        """(recording id, its descriptor, or the CatalogError of a corrupt entry) of every entry
        but the invalidated ones, in id order: a zeroed record before the last is corrupt, and
        so is a record the file ends inside (`damage`) or one `descriptor` refuses."""
        for recording_id in range(self._count()):  # not the ids of `orphans` after the last
            if not self.has_recording(recording_id):
                yield (
                    recording_id,
                    CatalogError(
                        f"{self.path}: recording {recording_id} has a corrupt catalog entry: "
                        "zeroed, with recordings after it"
                    ),
                )
            elif self.is_valid(recording_id):
                try:
                    yield recording_id, self.descriptor(recording_id)
                except CatalogError as e:
                    yield recording_id, e
        if self.damage is not None:
            yield self.max_entries, CatalogError(self.damage)

    def __iter__(self) -> Iterator[RecordingDescriptor]:
        """Every valid, sound descriptor, in recording id order (`entries` reports the corrupt
        ones this skips)."""
        for _, entry in self.entries():
            if not isinstance(entry, CatalogError):
                yield entry

    def __len__(self) -> int:
        """One past the last recording id (an archive's own catalog: its next recording id)."""
        return self._count() if self.readonly else self.next_recording_id

    def stop_position(self, recording_id: int) -> int:
        """The recording's stop position (NULL_POSITION while it is active)."""
        if not self.has_recording(recording_id):
            raise CatalogError(f"unknown recording id {recording_id}")
        return self.buffer.get_int64_volatile(self._offset(recording_id) + _STOP_POSITION)

    def find_last(
        self, min_recording_id: int, session_id: int, stream_id: int, channel: str
    ) -> int | None:
        """The id of the last recording from `min_recording_id` of this session and stream whose
        original channel contains `channel`, or None (the reference's `findLast`)."""
        for recording_id in range(len(self) - 1, max(min_recording_id, 0) - 1, -1):
            if not self.is_valid(recording_id):
                continue
            try:
                d = self.descriptor(recording_id)
            except CatalogError:
                continue  # corrupt: not a match for anything
            if d.session_id == session_id and d.stream_id == stream_id:
                if channel in d.original_channel:
                    return recording_id
        return None

    def layout(self, recording_id: int) -> segments.RecordingLayout:
        """Where the recording's segments are and how positions map into them."""
        d = self.descriptor(recording_id)
        return segments.RecordingLayout(
            recording_id, d.start_position, d.term_buffer_length, d.segment_file_length
        )

    # -- writing --------------------------------------------------------------------------

    def add_recording(
        self,
        *,
        start_position: int,
        start_timestamp: int,
        initial_term_id: int,
        segment_file_length: int,
        term_buffer_length: int,
        mtu_length: int,
        session_id: int,
        stream_id: int,
        stripped_channel: str,
        original_channel: str,
        source_identity: str,
    ) -> int:
        """Add an active recording (stop position and timestamp unset); returns its id."""
        self._check_writable()
        recording_id = self.next_recording_id
        if recording_id >= self.max_entries:
            raise CatalogError(f"the catalog is full ({self.max_entries} entries)")
        strings = [stripped_channel, original_channel, source_identity]
        if sum(len(s) for s in strings) > MAX_STRINGS_LENGTH:
            raise CatalogError(
                f"channel and source identity are longer than {MAX_STRINGS_LENGTH} bytes in all"
            )
        body = RecordingDescriptor(
            0, 0, recording_id, start_timestamp, NULL_TIMESTAMP, start_position, NULL_POSITION,
            initial_term_id, segment_file_length, term_buffer_length, mtu_length, session_id,
            stream_id, *strings,
        ).encode_block()  # fmt: skip
        at = self._offset(recording_id)
        self._allocate(at, RECORD_LENGTH)
        self._map[at + _BODY : at + _BODY + len(body)] = np.frombuffer(body, np.uint8)
        self._map[at + 4] = VALID
        self.buffer.put_int32_ordered(at, len(body))  # publishes it
        self.next_recording_id += 1
        self._sync()
        return recording_id

    def recording_stopped(self, recording_id: int, stop_position: int, stop_timestamp: int) -> None:
        """Store the recording's stop position and time (its entry is then complete)."""
        self._set_stop(recording_id, stop_position, stop_timestamp)

    def extend_recording(
        self, recording_id: int, control_session_id: int = 0, correlation_id: int = 0
    ) -> None:
        """Mark a stopped recording active again (its stop position unset), noting the request
        that extends it as the reference does."""
        self._check_writable()
        if not self.has_recording(recording_id):
            raise CatalogError(f"unknown recording id {recording_id}")
        at = self._offset(recording_id) + _BODY
        self.buffer.put_int64_ordered(at, control_session_id)
        self.buffer.put_int64_ordered(at + 8, correlation_id)
        self._set_stop(recording_id, NULL_POSITION, NULL_TIMESTAMP)

    def _set_stop(self, recording_id: int, stop_position: int, stop_timestamp: int) -> None:
        self._check_writable()
        if not self.has_recording(recording_id):
            raise CatalogError(f"unknown recording id {recording_id}")
        at = self._offset(recording_id)
        self.buffer.put_int64_ordered(at + _STOP_TIMESTAMP, stop_timestamp)
        self.buffer.put_int64_ordered(at + _STOP_POSITION, stop_position)
        self._sync()

    def invalidate(self, recording_id: int) -> None:
        """Mark a recording unusable (kept in the file, skipped by listings)."""
        self._check_writable()
        self._map[self._offset(recording_id) + 4] = INVALID
        self._sync()

    def recover(self, now_ms: int) -> list[int]:
        """Give every recording left active (stop position unset) by an archive that died the
        stop position of its last whole frame; returns their ids."""
        fixed = []
        for recording_id, entry in self.entries():
            if not isinstance(entry, CatalogError) and entry.stop_position == NULL_POSITION:
                stop = segments.recover_stop_position(self.archive_dir, self.layout(recording_id))
                self.recording_stopped(recording_id, stop, now_ms)
                fixed.append(recording_id)
        return fixed

    def _allocate(self, offset: int, length: int) -> None:
        fd = os.open(self.path, os.O_RDWR)
        try:
            os.posix_fallocate(fd, offset, length)
        except OSError as e:
            raise CatalogError(f"{self.path}: no room for a new entry: {e}") from None
        finally:
            os.close(fd)

    def _check_writable(self) -> None:
        if self.readonly:
            raise CatalogError(f"{self.path} is open read-only")

    def _sync(self) -> None:
        if self.file_sync_level > 0:
            self._map.flush()
            if self.file_sync_level > 1:
                fd = os.open(self.path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)

    def _sync_file(self, fd: int) -> None:
        if self.file_sync_level > 0:
            os.fsync(fd)

    def close(self) -> None:
        """Unmap the catalog and release its lock."""
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # releases the lock
            self._lock_fd = -1
        if "_map" in vars(self):  # not closed yet
            if not self.readonly:
                self._map.flush()
            vars(self).pop("buffer", None)
            del self._map  # the mapping goes with its last reference

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
