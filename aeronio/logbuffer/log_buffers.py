"""LogBuffers: a log buffer file (3 terms + metadata) memory-mapped as a numpy array.

The driver creates the file and writes the metadata; publications and images in any process map
the same file. Mutable shared fields (tails, active term count, end of stream, is-connected) are
only touched through the Cython atomics.

A file created sparse gets its terms' pages as they fill (cheap to create, slow the first time
through the terms; the driver allocates them ahead of the writers: driver/storage.py LogPages),
its metadata's at once; a file created allocated (not `LogParams.sparse`, Java Aeron's default)
is mapped with MAP_POPULATE, so no appender or reader ever takes a page fault on it.

A process maps a log file once: an embedded driver and its clients in one process (or two
clients) share the mapping of the same file (its device and inode) while any of them holds it, so
a new stream's 48 MiB log is not populated again for each (about 18 ms each here).
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
import weakref
from pathlib import Path

import numpy as np

from aeronio._core import AtomicBuffer, MappedLog
from aeronio.errors import ConfigurationError
from aeronio.logbuffer import descriptor as d
from aeronio.protocol import limits
from aeronio.protocol.frames import DataHeader, data_header


class LogBuffers:
    """A mapped log buffer file."""

    def __init__(self, path: str | os.PathLike, array: np.ndarray):
        """Raises ValueError naming `path` for a log whose metadata its length or no driver
        gives (MappedLog's checks)."""
        self.path = Path(path)
        self.array = array
        try:
            self.mapped = MappedLog(array)
        except ValueError as e:
            raise ValueError(f"{path} is not a log buffer: {e}") from None
        self.metadata = AtomicBuffer(array[-d.LOG_META_DATA_LENGTH :])
        self.term_length = self.mapped.term_length

    @classmethod
    def create(
        cls,
        path: str | os.PathLike,
        *,
        term_length: int,
        initial_term_id: int,
        session_id: int,
        stream_id: int,
        mtu: int,
        correlation_id: int = 0,
        page_size: int = limits.PAGE_MIN_SIZE,
        term_id: int | None = None,
        term_offset: int = 0,
        params: d.LogParams | None = None,
    ) -> LogBuffers:
        """Create and initialise a log file; term_id/term_offset start it at a chosen position.
        `params` go into the metadata as Aeron's driver writes them (default: a sparse
        concurrent publication's); a log not sparse is allocated on disk now."""
        params = params or d.LogParams(sparse=True)
        limits.check_term_length(term_length)
        limits.check_page_size(page_size)
        limits.check_mtu(mtu)
        active_term_id = initial_term_id if term_id is None else term_id
        term_count = d._int32(active_term_id - initial_term_id)
        if term_count < 0:
            raise ConfigurationError(
                f"term_id {active_term_id} is before init_term_id {initial_term_id}"
            )
        if not 0 <= term_offset <= term_length or term_offset % 32:
            raise ConfigurationError(
                f"term_offset {term_offset} must be a multiple of 32 in 0..{term_length}"
            )
        length = d.compute_log_length(term_length, page_size)
        with open(path, "xb") as f:  # never over a live log
            f.truncate(length)
            # A sparse log's metadata, written now, is allocated first: no room is ENOSPC
            # here, not a SIGBUS as it is written (its terms: the driver's storage.LogPages).
            start = 0 if not params.sparse else length - d.LOG_META_DATA_LENGTH
            os.posix_fallocate(f.fileno(), start, length - start)
        array = _map(path)
        meta = array[-d.LOG_META_DATA_LENGTH :].data  # a memoryview: struct takes it
        header = data_header(  # Aeron's default header: its term id is the initial one
            frame_length=0,
            term_offset=0,
            session_id=session_id,
            stream_id=stream_id,
            term_id=initial_term_id,
        ).encode()
        struct.pack_into("<q", meta, d.LOG_CORRELATION_ID_OFFSET, correlation_id)
        struct.pack_into(
            "<iiiii",
            meta,
            d.LOG_INITIAL_TERM_ID_OFFSET,
            initial_term_id,
            len(header),
            mtu,
            term_length,
            page_size,
        )
        meta[d.LOG_DEFAULT_FRAME_HEADER_OFFSET : d.LOG_DEFAULT_FRAME_HEADER_OFFSET + 32] = header
        d.write_log_params(meta, params)
        struct.pack_into("<q", meta, d.LOG_END_OF_STREAM_POSITION_OFFSET, d.END_OF_STREAM_UNSET)
        # The active term starts at term_offset; the other two hold the ids they would have had.
        for i in range(d.PARTITION_COUNT):
            index = d.index_by_term_count(term_count + i)
            tid = d._int32(active_term_id + i - (d.PARTITION_COUNT if i else 0))
            offset = term_offset if i == 0 else 0
            struct.pack_into(
                "<q", meta, d.TERM_TAIL_COUNTERS_OFFSET + 8 * index, d.pack_tail(tid, offset)
            )
        struct.pack_into("<i", meta, d.LOG_ACTIVE_TERM_COUNT_OFFSET, term_count)
        return cls(path, array)

    @classmethod
    def open(cls, path: str | os.PathLike) -> LogBuffers:
        """Map an existing log file (read-write, so that atomics work)."""
        return cls(path, _map(path))

    # -- metadata -----------------------------------------------------------------------

    def _int(self, offset: int) -> int:
        return self.metadata.get_int32(offset)

    @property
    def initial_term_id(self) -> int:
        return self._int(d.LOG_INITIAL_TERM_ID_OFFSET)

    @property
    def mtu(self) -> int:
        return self._int(d.LOG_MTU_LENGTH_OFFSET)

    @property
    def page_size(self) -> int:
        return self._int(d.LOG_PAGE_SIZE_OFFSET)

    @property
    def correlation_id(self) -> int:
        return self.metadata.get_int64(d.LOG_CORRELATION_ID_OFFSET)

    @property
    def params(self) -> d.LogParams:
        """What the driver made this log with (fixed before the log was handed out)."""
        start = len(self.array) - d.LOG_META_DATA_LENGTH
        return d.read_log_params(self.array[start:])

    @property
    def default_frame_header(self) -> bytes:
        start = len(self.array) - d.LOG_META_DATA_LENGTH + d.LOG_DEFAULT_FRAME_HEADER_OFFSET
        return bytes(self.array[start : start + 32])

    @property
    def session_id(self) -> int:
        return DataHeader.decode(self.default_frame_header).session_id

    @property
    def stream_id(self) -> int:
        return DataHeader.decode(self.default_frame_header).stream_id

    @property
    def active_term_count(self) -> int:
        return self.metadata.get_int32_volatile(d.LOG_ACTIVE_TERM_COUNT_OFFSET)

    def raw_tail(self, index: int) -> int:
        return self.metadata.get_int64_volatile(d.TERM_TAIL_COUNTERS_OFFSET + 8 * index)

    @property
    def producer_position(self) -> int:
        return self.mapped.producer_position_volatile()

    @property
    def end_of_stream_position(self) -> int:
        return self.mapped.end_of_stream_position()

    @property
    def active_transport_count(self) -> int:
        """An image's: how many of its senders its driver hears."""
        return self.metadata.get_int32_volatile(d.LOG_ACTIVE_TRANSPORT_COUNT_OFFSET)

    @property
    def is_connected(self) -> bool:
        return self.mapped.is_connected()

    def set_publication_revoked(self) -> None:
        """Say in the metadata that its publication was revoked (a byte, the low one of the
        little-endian int32 it shares with the log's type and padding, which stay)."""
        offset = d.LOG_IS_PUBLICATION_REVOKED_OFFSET
        word = self.metadata.get_int32_volatile(offset)
        self.metadata.put_int32_ordered(offset, word & ~0xFF | 1)

    def term(self, index: int) -> np.ndarray:
        return self.array[index * self.term_length : (index + 1) * self.term_length]

    def close(self) -> None:
        """Drop this mapping (once: then the array, mapped log and metadata are gone); views
        handed out keep the memory alive until they go too."""
        if hasattr(self, "array"):
            del self.array, self.mapped, self.metadata


# The log files this process has mapped, by (device, inode), while a mapping is held. A mapped
# file, even unlinked, keeps its inode, so a key never names two live files.
_mapped: weakref.WeakValueDictionary[tuple[int, int], np.ndarray] = weakref.WeakValueDictionary()
_mapped_lock = threading.Lock()


def _map(path: str | os.PathLike) -> np.ndarray:
    """Map a log file read-write (shared), or hand out this process's mapping of it; a new
    mapping is populated when the file is fully allocated."""
    fd = os.open(path, os.O_RDWR)
    try:
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        with _mapped_lock:
            array = _mapped.get(key)
            if array is not None and len(array) == st.st_size:
                return array
            flags = mmap.MAP_SHARED
            if st.st_blocks * 512 >= st.st_size:
                flags |= mmap.MAP_POPULATE
            array = np.frombuffer(mmap.mmap(fd, st.st_size, flags=flags), dtype=np.uint8)
            _mapped[key] = array
    finally:
        os.close(fd)
    return array
