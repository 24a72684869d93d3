"""The counters file: positions and system counters shared by the driver and its clients.

One memory-mapped file holds every counter. The driver writes it through a `CountersManager`;
any process maps it with `CountersReader`. All integers are native byte order (little-endian
on the supported platforms). Every access to a counter value, record state, driver pid or
heartbeat goes through `AtomicBuffer` atomics; key and label bytes are immutable once a
record is published, because they are written before its state is stored with release
semantics and read after its state is loaded with acquire semantics.

Layout::

    Header, 4096 bytes at 0
        @0   magic                 8 bytes  b"AIOCNT01" (stored last, with release semantics)
        @8   version               i32      1
        @12  max_counters          i32
        @16  metadata_offset       i64      4096
        @24  values_offset         i64      4096 + max_counters * 512
        @32  driver_pid            i64
        @40  start_timestamp_ms    i64      epoch ms the file was created
        @48  driver_heartbeat_ms   i64      epoch ms, stored ordered by the driver

    Metadata section: max_counters records of 512 bytes at metadata_offset
        @0   state                 i32      0 UNUSED, 1 ALLOCATED, -1 RECLAIMED
        @4   type_id               i32
        @8   free_for_reuse_deadline_ms  i64   NOT_FREE_TO_REUSE while allocated
        @16  key                   112 bytes
        @128 label_length          i32      bytes of UTF-8 label
        @132 label                 380 bytes UTF-8

    Values section: max_counters records of 128 bytes (own cache lines) at values_offset
        @0   value                 i64
        @8   registration_id       i64
        @16  owner_id              i64
        @24  padding to 128 bytes

    File length: 4096 + max_counters * (512 + 128), rounded up to a multiple of 4096.
"""

from __future__ import annotations

import os
import struct
import threading
import time
from collections.abc import Callable, Iterator
from enum import IntEnum
from typing import NamedTuple, Self

import numpy as np

from aeronio._core import AtomicBuffer
from aeronio.errors import AeronError

__all__ = [
    "CLIENT_HEARTBEAT_TYPE_ID",
    "Counter",
    "CounterInfo",
    "CountersFileError",
    "CountersFullError",
    "CountersManager",
    "CountersReader",
    "PER_IMAGE_TYPE_ID",
    "PUBLISHER_LIMIT_TYPE_ID",
    "PUBLISHER_POS_TYPE_ID",
    "RECEIVER_HWM_TYPE_ID",
    "RECEIVER_POS_TYPE_ID",
    "RECORD_ALLOCATED",
    "RECORD_RECLAIMED",
    "RECORD_UNUSED",
    "SENDER_BPE_TYPE_ID",
    "SENDER_LIMIT_TYPE_ID",
    "SENDER_POSITION_TYPE_ID",
    "SUBSCRIBER_POSITION_TYPE_ID",
    "SYSTEM_COUNTER_TYPE_ID",
    "SystemCounters",
    "allocate_system_counters",
]

# Type ids, as in Aeron.
SYSTEM_COUNTER_TYPE_ID = 0
PUBLISHER_LIMIT_TYPE_ID = 1
SENDER_POSITION_TYPE_ID = 2
RECEIVER_HWM_TYPE_ID = 3
SUBSCRIBER_POSITION_TYPE_ID = 4
RECEIVER_POS_TYPE_ID = 5
SENDER_LIMIT_TYPE_ID = 9
PER_IMAGE_TYPE_ID = 10
CLIENT_HEARTBEAT_TYPE_ID = 11
PUBLISHER_POS_TYPE_ID = 12
SENDER_BPE_TYPE_ID = 13
FLOW_CONTROL_RECEIVERS_TYPE_ID = 17  # fc-receivers: receivers a one-to-many sender tracks
MDC_DESTINATIONS_TYPE_ID = 18  # mdc-num-dests: a multi-destination-cast channel's destinations

MAGIC = b"AIOCNT01"
VERSION = 1
PAGE_SIZE = 4096
HEADER_LENGTH = 4096

MAGIC_OFFSET = 0
VERSION_OFFSET = 8
MAX_COUNTERS_OFFSET = 12
METADATA_OFFSET_OFFSET = 16
VALUES_OFFSET_OFFSET = 24
DRIVER_PID_OFFSET = 32
START_TIMESTAMP_OFFSET = 40
DRIVER_HEARTBEAT_OFFSET = 48

METADATA_LENGTH = 512
STATE_OFFSET = 0
TYPE_ID_OFFSET = 4
FREE_FOR_REUSE_DEADLINE_OFFSET = 8
KEY_OFFSET = 16
MAX_KEY_LENGTH = 112
LABEL_LENGTH_OFFSET = 128
LABEL_OFFSET = 132
MAX_LABEL_LENGTH = 380

VALUE_LENGTH = 128
VALUE_OFFSET = 0
REGISTRATION_ID_OFFSET = 8
OWNER_ID_OFFSET = 16

RECORD_UNUSED = 0
RECORD_ALLOCATED = 1
RECORD_RECLAIMED = -1

NOT_FREE_TO_REUSE = 2**63 - 1

_MAGIC_WORD: int = struct.unpack("=q", MAGIC)[0]


class CountersFileError(AeronError, ValueError):
    """A file that is not a valid counters file (bad magic, version or length)."""


class CountersFullError(AeronError):
    """Every counter in the file is allocated or still waiting out its reuse timeout."""


def file_length(max_counters: int) -> int:
    """Bytes needed for a counters file of max_counters counters."""
    raw = HEADER_LENGTH + max_counters * (METADATA_LENGTH + VALUE_LENGTH)
    return -(-raw // PAGE_SIZE) * PAGE_SIZE


def _epoch_ms() -> int:
    return time.time_ns() // 1_000_000


def _truncate_utf8(label: str) -> bytes:
    """label as UTF-8, cut to MAX_LABEL_LENGTH bytes without splitting a character."""
    data = label.encode("utf-8")
    if len(data) <= MAX_LABEL_LENGTH:
        return data
    end = MAX_LABEL_LENGTH
    while end > 0 and (data[end] & 0xC0) == 0x80:  # data[end] continues a character
        end -= 1
    return data[:end]


class CounterInfo(NamedTuple):
    """A snapshot of one allocated counter."""

    id: int
    type_id: int
    label: str
    value: int
    registration_id: int
    key: bytes
    owner_id: int


class Counter:
    """A handle on one counter value; `buffer` and `offset` can be handed to the Cython core."""

    __slots__ = ("id", "buffer", "offset", "_reader")

    def __init__(self, reader: CountersReader, counter_id: int):
        self._reader = reader
        self.id = counter_id
        self.buffer: AtomicBuffer = reader.buffer
        self.offset = reader.value_offset(counter_id)

    def get(self) -> int:
        """The value (acquire load)."""
        return self.buffer.get_int64_volatile(self.offset)

    def set(self, value: int) -> None:
        """Store value (release store)."""
        self.buffer.put_int64_ordered(self.offset, value)

    def increment(self, delta: int = 1) -> int:
        """Atomically add delta; returns the value before the add."""
        return self.buffer.get_and_add_int64(self.offset, delta)

    def propose_max(self, value: int) -> bool:
        """Atomically store value if it exceeds the current value; True if it was stored."""
        buffer, offset = self.buffer, self.offset
        while True:
            current = buffer.get_int64_volatile(offset)
            if value <= current:
                return False
            if buffer.compare_and_set_int64(offset, current, value):
                return True

    @property
    def label(self) -> str:
        return self._reader.get_counter_label(self.id)

    def __repr__(self) -> str:
        return f"Counter(id={self.id}, label={self.label!r}, value={self.get()})"


class CountersReader:
    """Read access (and counter handles) on a counters file, from any process."""

    def __init__(self, mapped: np.ndarray, path: str | os.PathLike[str] | None = None):
        self.path = path
        self._map: np.ndarray | None = mapped
        self._buffer: AtomicBuffer | None = AtomicBuffer(mapped)
        self._validate()

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Self:
        """Map an existing counters file read-write (atomics need a writable mapping)."""
        size = os.path.getsize(path)
        if size < HEADER_LENGTH:
            raise CountersFileError(
                f"counters file {os.fspath(path)!r} is {size} bytes, shorter than its "
                f"{HEADER_LENGTH}-byte header"
            )
        return cls(np.memmap(path, dtype=np.uint8, mode="r+"), path)

    def _validate(self) -> None:
        buf, name = self.buffer, os.fspath(self.path) if self.path is not None else "<buffer>"
        if len(buf) < HEADER_LENGTH:
            raise CountersFileError(f"counters file {name!r} is shorter than its header")
        if buf.get_int64_volatile(MAGIC_OFFSET) != _MAGIC_WORD:
            magic = bytes(self._bytes(MAGIC_OFFSET, len(MAGIC)))
            raise CountersFileError(
                f"counters file {name!r} has bad magic {magic!r}, expected {MAGIC!r}"
            )
        version = buf.get_int32(VERSION_OFFSET)
        if version != VERSION:
            raise CountersFileError(
                f"counters file {name!r} has version {version}, expected {VERSION}"
            )
        self.max_counters: int = buf.get_int32(MAX_COUNTERS_OFFSET)
        self.metadata_offset: int = buf.get_int64(METADATA_OFFSET_OFFSET)
        self.values_offset: int = buf.get_int64(VALUES_OFFSET_OFFSET)
        if (
            self.max_counters <= 0
            or self.metadata_offset != HEADER_LENGTH
            or self.values_offset != HEADER_LENGTH + self.max_counters * METADATA_LENGTH
            or len(buf) < file_length(self.max_counters)
        ):
            raise CountersFileError(
                f"counters file {name!r} has an inconsistent header: max_counters="
                f"{self.max_counters}, metadata_offset={self.metadata_offset}, values_offset="
                f"{self.values_offset}, length={len(buf)}"
            )

    # -- plumbing --------------------------------------------------------------------------

    @property
    def buffer(self) -> AtomicBuffer:
        """The AtomicBuffer over the whole file."""
        if self._buffer is None:
            raise ValueError("counters file is closed")
        return self._buffer

    def _bytes(self, offset: int, length: int) -> bytes:
        if self._map is None:
            raise ValueError("counters file is closed")
        return self._map[offset : offset + length].tobytes()

    def _check_id(self, counter_id: int) -> None:
        if not 0 <= counter_id < self.max_counters:
            raise ValueError(f"counter id {counter_id} out of range 0..{self.max_counters - 1}")

    def metadata_offset_of(self, counter_id: int) -> int:
        """Byte offset of the counter's metadata record in the file."""
        self._check_id(counter_id)
        return self.metadata_offset + counter_id * METADATA_LENGTH

    def value_offset(self, counter_id: int) -> int:
        """Byte offset of the counter's value in the file."""
        self._check_id(counter_id)
        return self.values_offset + counter_id * VALUE_LENGTH

    # -- header ----------------------------------------------------------------------------

    @property
    def driver_pid(self) -> int:
        return self.buffer.get_int64_volatile(DRIVER_PID_OFFSET)

    @property
    def start_timestamp_ms(self) -> int:
        return self.buffer.get_int64(START_TIMESTAMP_OFFSET)

    @property
    def driver_heartbeat_ms(self) -> int:
        return self.buffer.get_int64_volatile(DRIVER_HEARTBEAT_OFFSET)

    # -- counters --------------------------------------------------------------------------

    def get_counter_state(self, counter_id: int) -> int:
        """RECORD_UNUSED (0), RECORD_ALLOCATED (1) or RECORD_RECLAIMED (-1)."""
        return self.buffer.get_int32_volatile(self.metadata_offset_of(counter_id) + STATE_OFFSET)

    def get_counter_value(self, counter_id: int) -> int:
        return self.buffer.get_int64_volatile(self.value_offset(counter_id))

    def get_counter_registration_id(self, counter_id: int) -> int:
        offset = self.value_offset(counter_id) + REGISTRATION_ID_OFFSET
        return self.buffer.get_int64_volatile(offset)

    def get_counter_owner_id(self, counter_id: int) -> int:
        return self.buffer.get_int64_volatile(self.value_offset(counter_id) + OWNER_ID_OFFSET)

    def get_counter_type_id(self, counter_id: int) -> int:
        return self.buffer.get_int32_volatile(self.metadata_offset_of(counter_id) + TYPE_ID_OFFSET)

    def get_counter_label(self, counter_id: int) -> str:
        record = self.metadata_offset_of(counter_id)
        length = self.buffer.get_int32_volatile(record + LABEL_LENGTH_OFFSET)
        length = min(max(length, 0), MAX_LABEL_LENGTH)
        return self._bytes(record + LABEL_OFFSET, length).decode("utf-8", "replace")

    def get_counter_key(self, counter_id: int) -> bytes:
        """All 112 key bytes (keys shorter than that are zero-padded)."""
        return self._bytes(self.metadata_offset_of(counter_id) + KEY_OFFSET, MAX_KEY_LENGTH)

    def counter(self, counter_id: int) -> Counter:
        """A handle on an allocated counter."""
        state = self.get_counter_state(counter_id)
        if state != RECORD_ALLOCATED:
            raise ValueError(f"counter id {counter_id} is not allocated (state {state})")
        return Counter(self, counter_id)

    def for_each(self) -> Iterator[CounterInfo]:
        """Snapshots of the allocated counters, in id order."""
        for counter_id in range(self.max_counters):
            state = self.get_counter_state(counter_id)
            if state == RECORD_UNUSED:
                break  # ids are handed out in order, so nothing beyond was ever used
            if state == RECORD_ALLOCATED:
                yield CounterInfo(
                    counter_id,
                    self.get_counter_type_id(counter_id),
                    self.get_counter_label(counter_id),
                    self.get_counter_value(counter_id),
                    self.get_counter_registration_id(counter_id),
                    self.get_counter_key(counter_id),
                    self.get_counter_owner_id(counter_id),
                )

    def find_by_type_id_and_registration_id(self, type_id: int, registration_id: int) -> int | None:
        """Id of the first allocated counter with this type and registration id, or None."""
        for counter_id in range(self.max_counters):
            state = self.get_counter_state(counter_id)
            if state == RECORD_UNUSED:
                break
            if (
                state == RECORD_ALLOCATED
                and self.get_counter_type_id(counter_id) == type_id
                and self.get_counter_registration_id(counter_id) == registration_id
            ):
                return counter_id
        return None

    def close(self) -> None:
        """Drop this reader's mapping (Counter handles keep their own reference alive)."""
        self._buffer = None
        self._map = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CountersManager(CountersReader):
    """The driver's side of the counters file: allocates and frees counters (one writer)."""

    def __init__(
        self,
        mapped: np.ndarray,
        path: str | os.PathLike[str] | None = None,
        *,
        reuse_timeout_ms: int = 0,
        clock: Callable[[], int] = _epoch_ms,
    ):
        super().__init__(mapped, path)
        if reuse_timeout_ms < 0:
            raise ValueError(f"reuse_timeout_ms must be >= 0, got {reuse_timeout_ms}")
        self.reuse_timeout_ms = reuse_timeout_ms
        self._clock = clock
        self._lock = threading.Lock()
        self._free_ids: list[int] = []
        self._high_water_id = 0

    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        max_counters: int = 1024,
        *,
        reuse_timeout_ms: int = 0,
        clock: Callable[[], int] = _epoch_ms,
    ) -> Self:
        """Create (or truncate) the counters file at path and write its header."""
        if not 0 < max_counters < 2**31 // (METADATA_LENGTH + VALUE_LENGTH):
            raise ValueError(f"max_counters must be positive and fit the file, got {max_counters}")
        mapped = np.memmap(path, dtype=np.uint8, mode="w+", shape=(file_length(max_counters),))
        buf = AtomicBuffer(mapped)
        buf.put_int32(VERSION_OFFSET, VERSION)
        buf.put_int32(MAX_COUNTERS_OFFSET, max_counters)
        buf.put_int64(METADATA_OFFSET_OFFSET, HEADER_LENGTH)
        buf.put_int64(VALUES_OFFSET_OFFSET, HEADER_LENGTH + max_counters * METADATA_LENGTH)
        buf.put_int64(START_TIMESTAMP_OFFSET, clock())
        buf.put_int64_ordered(DRIVER_PID_OFFSET, os.getpid())
        buf.put_int64_ordered(MAGIC_OFFSET, _MAGIC_WORD)  # publishes the header
        return cls(mapped, path, reuse_timeout_ms=reuse_timeout_ms, clock=clock)

    def allocate(
        self,
        label: str,
        type_id: int = 0,
        key: bytes = b"",
        registration_id: int = 0,
        owner_id: int = 0,
    ) -> int:
        """Allocate a counter with value 0 and return its id."""
        if len(key) > MAX_KEY_LENGTH:
            raise ValueError(f"key is {len(key)} bytes, longer than {MAX_KEY_LENGTH}")
        label_bytes = _truncate_utf8(label)
        buf, mapped = self.buffer, self._map
        assert mapped is not None
        with self._lock:
            counter_id = self._next_id()
            record = self.metadata_offset + counter_id * METADATA_LENGTH
            value = self.values_offset + counter_id * VALUE_LENGTH
            buf.put_int32(record + TYPE_ID_OFFSET, type_id)
            buf.put_int64(record + FREE_FOR_REUSE_DEADLINE_OFFSET, NOT_FREE_TO_REUSE)
            key_at = record + KEY_OFFSET
            mapped[key_at : key_at + MAX_KEY_LENGTH] = 0
            mapped[key_at : key_at + len(key)] = np.frombuffer(bytes(key), dtype=np.uint8)
            label_at = record + LABEL_OFFSET
            mapped[label_at : label_at + MAX_LABEL_LENGTH] = 0
            mapped[label_at : label_at + len(label_bytes)] = np.frombuffer(label_bytes, np.uint8)
            buf.put_int32(record + LABEL_LENGTH_OFFSET, len(label_bytes))
            buf.put_int64_ordered(value + REGISTRATION_ID_OFFSET, registration_id)
            buf.put_int64_ordered(value + OWNER_ID_OFFSET, owner_id)
            buf.put_int64_ordered(value + VALUE_OFFSET, 0)
            buf.put_int32_ordered(record + STATE_OFFSET, RECORD_ALLOCATED)  # publishes it
            return counter_id

    def _next_id(self) -> int:
        now = self._clock()
        for i, counter_id in enumerate(self._free_ids):
            deadline_at = self.metadata_offset_of(counter_id) + FREE_FOR_REUSE_DEADLINE_OFFSET
            if now >= self.buffer.get_int64(deadline_at):
                del self._free_ids[i]
                return counter_id
        if self._high_water_id < self.max_counters:
            self._high_water_id += 1
            return self._high_water_id - 1
        raise CountersFullError(
            f"counters file is full: all {self.max_counters} counters are allocated or "
            f"waiting out the {self.reuse_timeout_ms} ms reuse timeout "
            f"({len(self._free_ids)} freed)"
        )

    def free(self, counter_id: int) -> None:
        """Reclaim an allocated counter; its id is reused once the reuse timeout has passed."""
        with self._lock:
            state = self.get_counter_state(counter_id)  # checks the id range
            if state != RECORD_ALLOCATED:
                raise ValueError(f"counter id {counter_id} is not allocated (state {state})")
            record = self.metadata_offset_of(counter_id)
            deadline = self._clock() + self.reuse_timeout_ms
            self.buffer.put_int64(record + FREE_FOR_REUSE_DEADLINE_OFFSET, deadline)
            self.buffer.put_int32_ordered(record + STATE_OFFSET, RECORD_RECLAIMED)
            self._free_ids.append(counter_id)

    def set_heartbeat(self, now_ms: int) -> None:
        self.buffer.put_int64_ordered(DRIVER_HEARTBEAT_OFFSET, now_ms)

    def set_driver_pid(self, pid: int) -> None:
        self.buffer.put_int64_ordered(DRIVER_PID_OFFSET, pid)

    def close(self) -> None:
        """Flush the file to disk and drop the mapping."""
        if isinstance(self._map, np.memmap):
            self._map.flush()
        super().close()


class SystemCounters(IntEnum):
    """Aeron's system counters (SystemCounterDescriptor); `label` is Aeron's label."""

    label: str

    def __new__(cls, value: int, label: str) -> SystemCounters:
        member = int.__new__(cls, value)
        member._value_ = value
        member.label = label
        return member

    BYTES_SENT = 0, "Bytes sent"
    BYTES_RECEIVED = 1, "Bytes received"
    RECEIVER_PROXY_FAILS = 2, "Failed offers to ReceiverProxy"
    SENDER_PROXY_FAILS = 3, "Failed offers to SenderProxy"
    CONDUCTOR_PROXY_FAILS = 4, "Failed offers to DriverConductorProxy"
    NAK_MESSAGES_SENT = 5, "NAKs sent"
    NAK_MESSAGES_RECEIVED = 6, "NAKs received"
    STATUS_MESSAGES_SENT = 7, "Status Messages sent"
    STATUS_MESSAGES_RECEIVED = 8, "Status Messages received"
    HEARTBEATS_SENT = 9, "Heartbeats sent"
    HEARTBEATS_RECEIVED = 10, "Heartbeats received"
    RETRANSMITS_SENT = 11, "Retransmits sent"
    FLOW_CONTROL_UNDER_RUNS = 12, "Flow control under runs"
    FLOW_CONTROL_OVER_RUNS = 13, "Flow control over runs"
    INVALID_PACKETS = 14, "Invalid packets"
    ERRORS = 15, "Errors"
    SHORT_SENDS = 16, "Short sends"
    FREE_FAILS = 17, "Failed attempts to free log buffers"
    SENDER_FLOW_CONTROL_LIMITS = 18, "Sender flow control limits applied"
    UNBLOCKED_PUBLICATIONS = 19, "Unblocked Publications"
    UNBLOCKED_COMMANDS = 20, "Unblocked Control Commands"
    POSSIBLE_TTL_ASYMMETRY = 21, "Possible TTL Asymmetry"
    CONTROLLABLE_IDLE_STRATEGY = 22, "ControllableIdleStrategy status"
    LOSS_GAP_FILLS = 23, "Loss gap fills"
    CLIENT_TIMEOUTS = 24, "Client liveness timeouts"
    NAKS_SUPPRESSED = 25, "NAKs suppressed (another receiver NAKed the same gap)"
    LOW_STORAGE_WARNINGS = 26, "Logs made with storage below the low-storage threshold"


def allocate_system_counters(manager: CountersManager) -> dict[SystemCounters, Counter]:
    """Allocate every system counter (type 0, key = descriptor id as i32), in enum order.

    On a fresh file each counter's id equals its enum value.
    """
    counters: dict[SystemCounters, Counter] = {}
    for descriptor in SystemCounters:
        counter_id = manager.allocate(
            descriptor.label, SYSTEM_COUNTER_TYPE_ID, key=struct.pack("=i", descriptor)
        )
        counters[descriptor] = manager.counter(counter_id)
    return counters
