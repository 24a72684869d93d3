"""The CnC ("command and control") file, `cnc.dat` in the driver directory: the one boundary
between a media driver and its clients, laid out as Aeron's (aeron_cnc_file_descriptor.h,
CncFileDescriptor.java), so Aeron's tools and clients can read an aeronio driver's.

Layout (native byte order, little-endian on the supported platforms)::

    header, 128 bytes (2 cache lines) at 0, pack 4:
        @0   cnc_version                     i32  stored LAST, with release: 0 = not ready
        @4   to_driver_buffer_length         i32
        @8   to_clients_buffer_length        i32
        @12  counter_metadata_buffer_length  i32
        @16  counter_values_buffer_length    i32
        @20  error_log_buffer_length         i32
        @24  client_liveness_timeout         i64  ns
        @32  start_timestamp                 i64  epoch ms
        @40  pid                             i64
        @48  file_page_size                  i32
    then the buffers, in this order, each of the length above:
        to-driver ring buffer (aeronio.concurrent.ring_buffer; its consumer heartbeat is the
        driver's heartbeat, -1 once the driver closed, as Aeron's), to-clients broadcast buffer
        (aeronio.concurrent.broadcast), counters metadata, counters values (aeronio.counters),
        distinct error log (aeronio.concurrent.error_log)
    file length: all of it, rounded up to file_page_size.
"""

from __future__ import annotations

import mmap
import os
import time
from typing import Self

from aeronio._core import AtomicBuffer
from aeronio.concurrent import broadcast, ring_buffer
from aeronio.concurrent.ring_buffer import ManyToOneRingBuffer
from aeronio.errors import AeronError

__all__ = [
    "CNC_FILE",
    "CNC_VERSION",
    "CONTROL_PROTOCOL_VERSION",
    "CncFile",
    "CncFileError",
    "CncNotReadyError",
    "semantic_version",
    "version_text",
]

CNC_FILE = "cnc.dat"

CNC_VERSION_OFFSET = 0
TO_DRIVER_BUFFER_LENGTH_OFFSET = 4
TO_CLIENTS_BUFFER_LENGTH_OFFSET = 8
COUNTER_METADATA_BUFFER_LENGTH_OFFSET = 12
COUNTER_VALUES_BUFFER_LENGTH_OFFSET = 16
ERROR_LOG_BUFFER_LENGTH_OFFSET = 20
CLIENT_LIVENESS_TIMEOUT_OFFSET = 24
START_TIMESTAMP_OFFSET = 32
PID_OFFSET = 40
FILE_PAGE_SIZE_OFFSET = 48
DRIVER_CLOSED = -1  # the driver heartbeat of a driver that closed (Aeron's NULL_VALUE)
HEADER_LENGTH = 2 * 64  # AERON_CNC_VERSION_AND_META_DATA_LENGTH

# Aeron's C driver defaults.
TO_DRIVER_CAPACITY = 1024 * 1024
TO_CLIENTS_CAPACITY = 1024 * 1024
MAX_COUNTERS = 8 * 1024 * 1024 // 128  # a counters values buffer of 8 MiB
ERROR_LOG_LENGTH = 4 * 1024 * 1024
FILE_PAGE_SIZE = 4096
COUNTER_VALUE_LENGTH = 128
COUNTER_METADATA_LENGTH = 512


def semantic_version(major: int, minor: int, patch: int) -> int:
    """Aeron's semantic version as one i32 (aeron_semantic_version_compose)."""
    return (major << 16) | (minor << 8) | patch


def version_text(version: int) -> str:
    return f"{(version >> 16) & 0xFF}.{(version >> 8) & 0xFF}.{version & 0xFF}"


CNC_VERSION = semantic_version(0, 2, 0)
# The version of Aeron's client protocol the driver speaks (aeron_control_protocol.h, Aeron
# 1.53): 1.0.0 has GET_NEXT_AVAILABLE_SESSION_ID. A driver shows it in its "Control protocol
# version" system counter; a client sends that command only to a driver at 1.0.0 or later.
CONTROL_PROTOCOL_VERSION = semantic_version(1, 0, 0)


class CncFileError(AeronError, ValueError):
    """A cnc.dat that cannot be used: too short, of another version, or with buffer lengths
    no driver writes."""


class CncNotReadyError(CncFileError):
    """A cnc.dat whose driver has not finished writing it yet (version still 0): try again."""


def _epoch_ms() -> int:
    return time.time_ns() // 1_000_000


class CncFile:
    """A mapping of a driver directory's cnc.dat: the header and a view on each buffer."""

    def __init__(self, path: str, mapped: mmap.mmap):
        self.path = path
        self.length = len(mapped)  # bytes mapped
        self._mmap: mmap.mmap | None = mapped
        view = memoryview(mapped)
        self._view: memoryview | None = view
        atomic = AtomicBuffer(view)
        self._atomic = atomic
        if len(view) < HEADER_LENGTH:
            raise CncFileError(f"{path!r} is {len(view)} bytes, shorter than its header")
        version = atomic.get_int32_volatile(CNC_VERSION_OFFSET)
        if version == 0:
            raise CncNotReadyError(f"{path!r} is not ready: its driver is still writing it")
        # Aeron's clients compare the major version only; the whole version is compared here,
        # as Aeron 1.15.1 wrote a plain 15 (0.0.15 read as a semantic version) over another
        # layout.
        if version != CNC_VERSION:
            raise CncFileError(
                f"{path!r} has CnC version {version_text(version)}, this client needs "
                f"{version_text(CNC_VERSION)}"
            )
        lengths = [atomic.get_int32(o) for o in range(4, 24, 4)]
        needed = HEADER_LENGTH + sum(lengths)
        if min(lengths) < 0 or len(view) < needed:
            raise CncFileError(
                f"{path!r} is {len(view)} bytes, shorter than the {needed} its header gives"
            )
        offset = HEADER_LENGTH
        buffers = []
        for length in lengths:
            buffers.append(view[offset : offset + length])
            offset += length
        (
            self.to_driver_buffer,
            self.to_clients_buffer,
            self.counters_metadata_buffer,
            self.counters_values_buffer,
            self.error_log_buffer,
        ) = buffers
        try:
            self.to_driver = ManyToOneRingBuffer(self.to_driver_buffer)
            broadcast.capacity_of(len(self.to_clients_buffer))
        except ValueError as e:
            raise CncFileError(f"{path!r} has no buffer its header gives: {e}") from None

    @classmethod
    def create(
        cls,
        dir: str | os.PathLike[str],
        *,
        to_driver_capacity: int = TO_DRIVER_CAPACITY,
        to_clients_capacity: int = TO_CLIENTS_CAPACITY,
        max_counters: int = MAX_COUNTERS,
        error_log_length: int = ERROR_LOG_LENGTH,
        client_liveness_timeout_ns: int = 10_000_000_000,
        pid: int | None = None,
        start_ms: int | None = None,
        file_page_size: int = FILE_PAGE_SIZE,
    ) -> Self:
        """Write a fresh cnc.dat in dir (replacing any) and map it: the driver's side.

        The capacities are the ring and broadcast buffers' (powers of two, trailers added)."""
        for name, value in (
            ("to_driver_capacity", to_driver_capacity),
            ("to_clients_capacity", to_clients_capacity),
            ("file_page_size", file_page_size),
        ):
            if value < 8 or value & (value - 1):
                raise ValueError(f"{name} must be a power of two of at least 8, got {value}")
        if to_clients_capacity < broadcast.MIN_CAPACITY:
            raise ValueError(
                f"to_clients_capacity must be at least {broadcast.MIN_CAPACITY}, "
                f"got {to_clients_capacity}"
            )
        if max_counters <= 0:
            raise ValueError(f"max_counters must be positive, got {max_counters}")
        if error_log_length <= 0 or error_log_length % 8:
            raise ValueError(
                f"error_log_length must be a positive multiple of 8, got {error_log_length}"
            )
        lengths = (
            to_driver_capacity + ring_buffer.TRAILER_LENGTH,
            to_clients_capacity + broadcast.TRAILER_LENGTH,
            max_counters * COUNTER_METADATA_LENGTH,
            max_counters * COUNTER_VALUE_LENGTH,
            error_log_length,
        )
        total = HEADER_LENGTH + sum(lengths)
        if total > 2**31 - 1:
            raise ValueError(f"cnc.dat of {total} bytes is too long (at most 2 GiB)")
        total = -(-total // file_page_size) * file_page_size
        path = os.path.join(os.fspath(dir), CNC_FILE)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.ftruncate(fd, total)
            os.posix_fallocate(fd, 0, total)  # a full file system: ENOSPC now, not a SIGBUS
            mapped = mmap.mmap(fd, total)
        finally:
            os.close(fd)
        atomic = AtomicBuffer(mapped)
        for offset, length in zip(range(4, 24, 4), lengths, strict=True):
            atomic.put_int32(offset, length)
        atomic.put_int64(CLIENT_LIVENESS_TIMEOUT_OFFSET, client_liveness_timeout_ns)
        atomic.put_int64(START_TIMESTAMP_OFFSET, _epoch_ms() if start_ms is None else start_ms)
        atomic.put_int64(PID_OFFSET, os.getpid() if pid is None else pid)
        atomic.put_int32(FILE_PAGE_SIZE_OFFSET, file_page_size)
        atomic.put_int32_ordered(CNC_VERSION_OFFSET, CNC_VERSION)  # publishes the file
        del atomic
        return cls(path, mapped)

    @classmethod
    def map(cls, dir: str | os.PathLike[str]) -> Self:
        """Map the cnc.dat of a driver directory (or the file itself) read-write: a client's
        or a tool's side. Raises FileNotFoundError without one, CncNotReadyError while the
        driver writes it (shorter than its header: not yet sized), CncFileError for another
        version, a file shorter than its buffers or buffer lengths no driver writes."""
        path = os.fspath(dir)
        if os.path.isdir(path):
            path = os.path.join(path, CNC_FILE)
        fd = os.open(path, os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            if size < HEADER_LENGTH:  # a driver made it and sizes it next (Aeron's clients wait)
                raise CncNotReadyError(f"{path!r} is {size} bytes, shorter than its header")
            mapped = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        return cls(path, mapped)

    # -- header ------------------------------------------------------------------------------

    @property
    def cnc_version(self) -> int:
        return self._atomic.get_int32_volatile(CNC_VERSION_OFFSET)

    @property
    def to_driver_buffer_length(self) -> int:
        return self._atomic.get_int32(TO_DRIVER_BUFFER_LENGTH_OFFSET)

    @property
    def to_clients_buffer_length(self) -> int:
        return self._atomic.get_int32(TO_CLIENTS_BUFFER_LENGTH_OFFSET)

    @property
    def counter_metadata_buffer_length(self) -> int:
        return self._atomic.get_int32(COUNTER_METADATA_BUFFER_LENGTH_OFFSET)

    @property
    def counter_values_buffer_length(self) -> int:
        return self._atomic.get_int32(COUNTER_VALUES_BUFFER_LENGTH_OFFSET)

    @property
    def error_log_buffer_length(self) -> int:
        return self._atomic.get_int32(ERROR_LOG_BUFFER_LENGTH_OFFSET)

    @property
    def client_liveness_timeout_ns(self) -> int:
        return self._atomic.get_int64(CLIENT_LIVENESS_TIMEOUT_OFFSET)

    @property
    def start_timestamp_ms(self) -> int:
        return self._atomic.get_int64(START_TIMESTAMP_OFFSET)

    @property
    def pid(self) -> int:
        return self._atomic.get_int64(PID_OFFSET)

    @property
    def file_page_size(self) -> int:
        return self._atomic.get_int32(FILE_PAGE_SIZE_OFFSET)

    @property
    def driver_heartbeat_ms(self) -> int:
        """The driver's last heartbeat, epoch ms: the to-driver ring buffer's consumer
        heartbeat, which the driver stores on its timer (Aeron's clients check it too)."""
        return self.to_driver.consumer_heartbeat_time

    @property
    def driver_closed(self) -> bool:
        """The driver closed (it marks its heartbeat so before it frees its clients' counters)."""
        return self.driver_heartbeat_ms == DRIVER_CLOSED

    def mark_driver_closed(self) -> None:
        """Store DRIVER_CLOSED as the driver's heartbeat (release): the driver, as it closes."""
        self.to_driver.set_consumer_heartbeat_time(DRIVER_CLOSED)

    def flush(self) -> None:
        if self._mmap is not None:
            self._mmap.flush()

    def close(self) -> None:
        """Drop this mapping's views; the file is unmapped once no view on it remains
        (counters and buffers handed out keep it alive meanwhile)."""
        mapped, self._mmap = self._mmap, None
        if mapped is None:
            return
        for name in (
            "to_driver",
            "to_driver_buffer",
            "to_clients_buffer",
            "counters_metadata_buffer",
            "counters_values_buffer",
            "error_log_buffer",
            "_atomic",
            "_view",
        ):
            setattr(self, name, None)
        try:
            mapped.close()
        except BufferError:
            pass  # views handed out are alive: the mapping goes with the last of them

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
