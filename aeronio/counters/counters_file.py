"""Counters: positions and system counters shared by the driver and its clients, in the counters
metadata and values buffers of cnc.dat (aeronio.cnc), laid out as Aeron's (aeronc.h's
aeron_counter_metadata_descriptor_t and aeron_counter_value_descriptor_t).

The driver writes them through a `CountersManager`; any process maps them with
`CountersReader.open(driver_dir)`. All integers are native byte order (little-endian on the
supported platforms). Every access to a counter value or record state goes through
`AtomicBuffer` atomics; key and label bytes are immutable once a record is published, because
they are written before its state is stored with release semantics and read after its state is
loaded with acquire semantics.

Layout::

    Metadata buffer: max_counters records of 512 bytes
        @0   state                 i32      0 UNUSED, 1 ALLOCATED, -1 RECLAIMED
        @4   type_id               i32
        @8   free_for_reuse_deadline_ms  i64   NOT_FREE_TO_REUSE while allocated
        @16  key                   112 bytes
        @128 label_length          i32      bytes of UTF-8 label
        @132 label                 380 bytes UTF-8

    Values buffer: max_counters records of 128 bytes (own cache lines)
        @0   value                 i64
        @8   registration_id       i64
        @16  owner_id              i64
        @24  reference_id          i64
        @32  padding to 128 bytes

The driver's pid, start time and heartbeat are in cnc.dat's header and to-driver buffer.
"""

from __future__ import annotations

import os
import struct
import threading
import time
from collections.abc import Callable, Iterator
from enum import IntEnum
from typing import Any, NamedTuple, Self

from aeronio import __version__
from aeronio._core import AtomicBuffer
from aeronio.cnc import CONTROL_PROTOCOL_VERSION, CncFile, semantic_version
from aeronio.errors import AeronError

__all__ = [
    "AERONIO_SYSTEM_COUNTER_TYPE_ID",
    "CLIENT_DOORBELL_TYPE_ID",
    "CLIENT_HEARTBEAT_TYPE_ID",
    "DRIVER_DOORBELL_TYPE_ID",
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
    "RECEIVE_CHANNEL_STATUS_TYPE_ID",
    "LOCAL_SOCKADDR_KEY",
    "LOCAL_SOCKADDR_TYPE_ID",
    "SEND_CHANNEL_STATUS_TYPE_ID",
    "ChannelStatus",
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
    "control_protocol_version",
    "local_socket_addresses",
]

# Type ids, as in Aeron.
SYSTEM_COUNTER_TYPE_ID = 0
PUBLISHER_LIMIT_TYPE_ID = 1
SENDER_POSITION_TYPE_ID = 2
RECEIVER_HWM_TYPE_ID = 3
SUBSCRIBER_POSITION_TYPE_ID = 4
RECEIVER_POS_TYPE_ID = 5
SEND_CHANNEL_STATUS_TYPE_ID = 6  # snd-channel: a send endpoint's ChannelStatus
RECEIVE_CHANNEL_STATUS_TYPE_ID = 7  # rcv-channel: a receive endpoint's ChannelStatus
SENDER_LIMIT_TYPE_ID = 9
PER_IMAGE_TYPE_ID = 10
CLIENT_HEARTBEAT_TYPE_ID = 11
PUBLISHER_POS_TYPE_ID = 12
SENDER_BPE_TYPE_ID = 13
LOCAL_SOCKADDR_TYPE_ID = 14  # snd-local-sockaddr and rcv-local-sockaddr: a socket's bound address
FLOW_CONTROL_RECEIVERS_TYPE_ID = 17  # fc-receivers: receivers a one-to-many sender tracks
MDC_DESTINATIONS_TYPE_ID = 18  # mdc-num-dests: a multi-destination-cast channel's destinations
# aeronio's doorbells, beside Aeron's counters (type ids outside Aeron's): the key is a process's
# wake id (aeronio.logbuffer.waker), the first 8 bytes, native order. The driver allocates one
# for its own process; a client registers its process's with ADD_COUNTER, and the driver rings
# it after transmitting to clients. Aeron's clients and drivers ignore them.
DRIVER_DOORBELL_TYPE_ID = 0x41494F01  # "AIO" 1
CLIENT_DOORBELL_TYPE_ID = 0x41494F02  # "AIO" 2
AERONIO_SYSTEM_COUNTER_TYPE_ID = 0x41494F03  # "AIO" 3: aeronio's own system counters

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
REFERENCE_ID_OFFSET = 24

RECORD_UNUSED = 0
RECORD_ALLOCATED = 1
RECORD_RECLAIMED = -1

NOT_FREE_TO_REUSE = 2**63 - 1


# A local socket address counter's key: its channel status counter's id, the address's length,
# then the address's bytes (Aeron's LocalSocketAddressStatus).
LOCAL_SOCKADDR_KEY = struct.Struct("<ii")


class ChannelStatus(IntEnum):
    """The values of a channel status counter and of a local socket address counter (Aeron's
    ChannelEndpointStatus)."""

    ERRORED = -1  # the endpoint failed: the error log says why
    INITIALIZING = 0
    ACTIVE = 1
    CLOSING = 2


class CountersFileError(AeronError, ValueError):
    """Counters buffers that do not fit together (lengths not Aeron's ratio)."""


class CountersFullError(AeronError):
    """Every counter in the file is allocated or still waiting out its reuse timeout."""


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
    """Read access (and counter handles) on the counters buffers, from any process."""

    def __init__(self, metadata: memoryview, values: memoryview, cnc: CncFile | None = None):
        metadata, values = memoryview(metadata).cast("B"), memoryview(values).cast("B")
        if len(values) < VALUE_LENGTH or len(metadata) != len(values) * 4:
            raise CountersFileError(
                f"counters metadata ({len(metadata)} bytes) must be 4 times the values "
                f"({len(values)} bytes), a whole number of {VALUE_LENGTH}-byte records"
            )
        self.cnc = cnc
        self.max_counters: int = len(values) // VALUE_LENGTH
        self._metadata_view: memoryview | None = metadata
        self._metadata: AtomicBuffer | None = AtomicBuffer(metadata)
        self._buffer: AtomicBuffer | None = AtomicBuffer(values)

    @classmethod
    def of(cls, cnc: CncFile, **kwargs: Any) -> Self:
        """The counters in cnc's buffers (closing them closes cnc); CountersFileError naming
        cnc.dat if their lengths do not fit together."""
        try:
            return cls(cnc.counters_metadata_buffer, cnc.counters_values_buffer, cnc, **kwargs)
        except CountersFileError as e:
            raise CountersFileError(f"{cnc.path!r}: {e}") from None

    @classmethod
    def open(cls, dir_or_path: str | os.PathLike[str]) -> Self:
        """Map the counters of a driver directory's cnc.dat (or of that file).

        Raises FileNotFoundError without one and CncFileError for one not usable."""
        return cls.of(CncFile.map(dir_or_path))

    # -- plumbing --------------------------------------------------------------------------

    @property
    def buffer(self) -> AtomicBuffer:
        """The AtomicBuffer over the values."""
        if self._buffer is None:
            raise ValueError("counters are closed")
        return self._buffer

    @property
    def metadata(self) -> AtomicBuffer:
        """The AtomicBuffer over the metadata records."""
        if self._metadata is None:
            raise ValueError("counters are closed")
        return self._metadata

    def _bytes(self, offset: int, length: int) -> bytes:
        if self._metadata_view is None:
            raise ValueError("counters are closed")
        return bytes(self._metadata_view[offset : offset + length])

    def _check_id(self, counter_id: int) -> None:
        if not 0 <= counter_id < self.max_counters:
            raise ValueError(f"counter id {counter_id} out of range 0..{self.max_counters - 1}")

    def metadata_offset_of(self, counter_id: int) -> int:
        """Byte offset of the counter's metadata record in the metadata buffer."""
        self._check_id(counter_id)
        return counter_id * METADATA_LENGTH

    def value_offset(self, counter_id: int) -> int:
        """Byte offset of the counter's value in the values buffer."""
        self._check_id(counter_id)
        return counter_id * VALUE_LENGTH

    # -- the driver, from cnc.dat ----------------------------------------------------------

    def _cnc(self) -> CncFile:
        if self.cnc is None:
            raise ValueError("these counters were not mapped from a cnc.dat")
        return self.cnc

    @property
    def driver_pid(self) -> int:
        return self._cnc().pid

    @property
    def start_timestamp_ms(self) -> int:
        return self._cnc().start_timestamp_ms

    @property
    def driver_heartbeat_ms(self) -> int:
        return self._cnc().driver_heartbeat_ms

    # -- counters --------------------------------------------------------------------------

    def get_counter_state(self, counter_id: int) -> int:
        """RECORD_UNUSED (0), RECORD_ALLOCATED (1) or RECORD_RECLAIMED (-1)."""
        return self.metadata.get_int32_volatile(self.metadata_offset_of(counter_id) + STATE_OFFSET)

    def get_counter_value(self, counter_id: int) -> int:
        return self.buffer.get_int64_volatile(self.value_offset(counter_id))

    def get_counter_registration_id(self, counter_id: int) -> int:
        offset = self.value_offset(counter_id) + REGISTRATION_ID_OFFSET
        return self.buffer.get_int64_volatile(offset)

    def get_counter_owner_id(self, counter_id: int) -> int:
        return self.buffer.get_int64_volatile(self.value_offset(counter_id) + OWNER_ID_OFFSET)

    def get_counter_reference_id(self, counter_id: int) -> int:
        return self.buffer.get_int64_volatile(self.value_offset(counter_id) + REFERENCE_ID_OFFSET)

    def get_counter_type_id(self, counter_id: int) -> int:
        return self.metadata.get_int32(self.metadata_offset_of(counter_id) + TYPE_ID_OFFSET)

    def get_counter_label(self, counter_id: int) -> str:
        record = self.metadata_offset_of(counter_id)
        length = self.metadata.get_int32_volatile(record + LABEL_LENGTH_OFFSET)
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
        self._buffer = self._metadata = self._metadata_view = None
        if self.cnc is not None:
            self.cnc.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CountersManager(CountersReader):
    """The driver's side of the counters: allocates and frees counters (one writer)."""

    def __init__(
        self,
        metadata: memoryview,
        values: memoryview,
        cnc: CncFile | None = None,
        *,
        reuse_timeout_ms: int = 0,
        clock: Callable[[], int] = _epoch_ms,
    ):
        super().__init__(metadata, values, cnc)
        if reuse_timeout_ms < 0:
            raise ValueError(f"reuse_timeout_ms must be >= 0, got {reuse_timeout_ms}")
        self.reuse_timeout_ms = reuse_timeout_ms
        self._clock = clock
        self._lock = threading.Lock()
        self._free_ids: list[int] = []
        self._high_water_id = 0

    def allocate(
        self,
        label: str,
        type_id: int = 0,
        key: bytes = b"",
        registration_id: int = 0,
        owner_id: int = 0,
        reference_id: int = 0,
    ) -> int:
        """Allocate a counter with value 0 and return its id."""
        if len(key) > MAX_KEY_LENGTH:
            raise ValueError(f"key is {len(key)} bytes, longer than {MAX_KEY_LENGTH}")
        label_bytes = _truncate_utf8(label)
        values, metadata, view = self.buffer, self.metadata, self._metadata_view
        assert view is not None
        with self._lock:
            counter_id = self._next_id()
            record = counter_id * METADATA_LENGTH
            value = counter_id * VALUE_LENGTH
            metadata.put_int32(record + TYPE_ID_OFFSET, type_id)
            metadata.put_int64(record + FREE_FOR_REUSE_DEADLINE_OFFSET, NOT_FREE_TO_REUSE)
            key_at = record + KEY_OFFSET
            view[key_at : key_at + MAX_KEY_LENGTH] = bytes(key).ljust(MAX_KEY_LENGTH, b"\0")
            label_at = record + LABEL_OFFSET
            view[label_at : label_at + MAX_LABEL_LENGTH] = label_bytes.ljust(
                MAX_LABEL_LENGTH, b"\0"
            )
            metadata.put_int32(record + LABEL_LENGTH_OFFSET, len(label_bytes))
            values.put_int64_ordered(value + REGISTRATION_ID_OFFSET, registration_id)
            values.put_int64_ordered(value + OWNER_ID_OFFSET, owner_id)
            values.put_int64_ordered(value + REFERENCE_ID_OFFSET, reference_id)
            values.put_int64_ordered(value + VALUE_OFFSET, 0)
            metadata.put_int32_ordered(record + STATE_OFFSET, RECORD_ALLOCATED)  # publishes it
            return counter_id

    def _next_id(self) -> int:
        now = self._clock()
        for i, counter_id in enumerate(self._free_ids):
            deadline_at = self.metadata_offset_of(counter_id) + FREE_FOR_REUSE_DEADLINE_OFFSET
            if now >= self.metadata.get_int64(deadline_at):
                del self._free_ids[i]
                return counter_id
        if self._high_water_id < self.max_counters:
            self._high_water_id += 1
            return self._high_water_id - 1
        raise CountersFullError(
            f"counters are full: all {self.max_counters} counters are allocated or "
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
            self.metadata.put_int64(record + FREE_FOR_REUSE_DEADLINE_OFFSET, deadline)
            self.metadata.put_int32_ordered(record + STATE_OFFSET, RECORD_RECLAIMED)
            self._free_ids.append(counter_id)


class SystemCounters(IntEnum):
    """The driver's system counters, allocated in this order so that on a fresh cnc.dat each
    one's counter id is its value: first Aeron's (SystemCounterDescriptor as of Aeron 1.53:
    type 0, key and registration id the id, Aeron's labels; Aeron's clients find "Control
    protocol version" at id 43 by that registration id), then aeronio's own, under a type id of
    their own so that no Aeron tool takes them for one of Aeron's later counters. `label` is the
    counter's label, `type_id` its type.

    Aeron's that aeronio's driver has nothing to count for stay 0: name resolution (25, 32, 33),
    the sender's and receiver's cycle times (28-31: the data path in C is not timed), the
    retransmit pool (37) and the native resource agent (45)."""

    label: str
    type_id: int

    def __new__(
        cls, value: int, label: str, type_id: int = SYSTEM_COUNTER_TYPE_ID
    ) -> SystemCounters:
        member = int.__new__(cls, value)
        member._value_ = value
        member.label = label
        member.type_id = type_id
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
    SENDER_FLOW_CONTROL_LIMITS = 18, "Sender flow control limits, i.e. back-pressure events"
    UNBLOCKED_PUBLICATIONS = 19, "Unblocked Publications"
    UNBLOCKED_COMMANDS = 20, "Unblocked Control Commands"
    POSSIBLE_TTL_ASYMMETRY = 21, "Possible TTL Asymmetry"
    CONTROLLABLE_IDLE_STRATEGY = 22, "ControllableIdleStrategy status"
    LOSS_GAP_FILLS = 23, "Loss gap fills"
    CLIENT_TIMEOUTS = 24, "Client liveness timeouts"
    RESOLUTION_CHANGES = 25, "Resolution changes"
    CONDUCTOR_MAX_CYCLE_TIME = 26, "Conductor max cycle time doing its work in ns"
    CONDUCTOR_CYCLE_TIME_THRESHOLD_EXCEEDED = 27, "Conductor work cycle exceeded threshold count"
    SENDER_MAX_CYCLE_TIME = 28, "Sender max cycle time doing its work in ns"
    SENDER_CYCLE_TIME_THRESHOLD_EXCEEDED = 29, "Sender work cycle exceeded threshold count"
    RECEIVER_MAX_CYCLE_TIME = 30, "Receiver max cycle time doing its work in ns"
    RECEIVER_CYCLE_TIME_THRESHOLD_EXCEEDED = 31, "Receiver work cycle exceeded threshold count"
    NAME_RESOLVER_MAX_TIME = 32, "NameResolver max time in ns"
    NAME_RESOLVER_TIME_THRESHOLD_EXCEEDED = 33, "NameResolver exceeded threshold count"
    AERON_VERSION = 34, "Aeron software"  # `allocate_system_counters` adds aeronio's version
    BYTES_CURRENTLY_MAPPED = 35, "Bytes currently mapped"
    RETRANSMITTED_BYTES = 36, "Retransmitted bytes"
    RETRANSMIT_OVERFLOW = 37, "Retransmit Pool Overflow count"
    ERROR_FRAMES_RECEIVED = 38, "Error Frames received"
    ERROR_FRAMES_SENT = 39, "Error Frames sent"
    PUBLICATIONS_REVOKED = 40, "Publications Revoked"
    PUBLICATION_IMAGES_REVOKED = 41, "Publication Images Revoked"
    IMAGES_REJECTED = 42, "Images rejected"
    CONTROL_PROTOCOL_VERSION = 43, "Control protocol version"
    STATUS_MESSAGES_REJECTED = 44, "Status Messages rejected"
    NATIVE_RESOURCE_AGENT_PROXY_FAILS = 45, "Failed offers to NativeResourceAgentProxy"
    # aeronio's own
    NAKS_SUPPRESSED = (
        46,
        "NAKs suppressed (another receiver NAKed the same gap)",
        AERONIO_SYSTEM_COUNTER_TYPE_ID,
    )
    LOW_STORAGE_WARNINGS = (
        47,
        "Logs made with storage below the low-storage threshold",
        AERONIO_SYSTEM_COUNTER_TYPE_ID,
    )


def allocate_system_counters(manager: CountersManager) -> dict[SystemCounters, Counter]:
    """Allocate every system counter (key = its value as i32, registration id its value), in
    enum order: on a fresh file each counter's id equals its value. "Aeron software" reads
    aeronio's version, and "Control protocol version" the version of Aeron's client protocol
    that the driver speaks (`CONTROL_PROTOCOL_VERSION`), as Aeron's driver sets them."""
    counters: dict[SystemCounters, Counter] = {}
    for descriptor in SystemCounters:
        label = descriptor.label
        if descriptor is SystemCounters.AERON_VERSION:
            label = f"{label}: aeronio version={__version__}"
        counter_id = manager.allocate(
            label,
            descriptor.type_id,
            key=struct.pack("=i", descriptor),
            registration_id=int(descriptor),
        )
        counters[descriptor] = manager.counter(counter_id)
    counters[SystemCounters.AERON_VERSION].set(_semantic_version(__version__))
    counters[SystemCounters.CONTROL_PROTOCOL_VERSION].set(CONTROL_PROTOCOL_VERSION)
    return counters


def _semantic_version(version: str) -> int:
    """A version's text ("1.2.3", "1.2.3.dev4+g5") as Aeron's semantic version; 0 if it has no
    major.minor.patch (a source tree never installed)."""
    parts = version.split("+")[0].split(".")
    if len(parts) < 3 or not all(part.isdigit() for part in parts[:3]):
        return 0
    major, minor, patch = (int(part) & 0xFF for part in parts[:3])
    return semantic_version(major, minor, patch)


def control_protocol_version(reader: CountersReader) -> int:
    """The version of Aeron's client protocol the driver speaks, as Aeron's clients read it: its
    "Control protocol version" system counter, at id 43 with registration id 43; 0 for a driver
    that has none (aeronio's before 2026-12, Aeron's before control protocol 1.0.0)."""
    descriptor = SystemCounters.CONTROL_PROTOCOL_VERSION
    if reader.find_by_type_id_and_registration_id(SYSTEM_COUNTER_TYPE_ID, descriptor) != descriptor:
        return 0
    return reader.get_counter_value(descriptor)


def local_socket_addresses(reader: CountersReader, channel_status_id: int) -> list[str]:
    """The addresses ("host:port", as bound) of the sockets of the endpoint whose channel
    status counter is `channel_status_id`, while it is ACTIVE (Aeron's
    LocalSocketAddressStatus.findAddresses); none for an endpoint not ACTIVE, or for the
    NOT_ALLOCATED (-1) of IPC and spies."""
    if channel_status_id < 0 or reader.get_counter_value(channel_status_id) != ChannelStatus.ACTIVE:
        return []
    addresses = []
    for info in reader.for_each():
        if info.type_id != LOCAL_SOCKADDR_TYPE_ID or info.value != ChannelStatus.ACTIVE:
            continue
        status_id, length = LOCAL_SOCKADDR_KEY.unpack_from(info.key)
        if status_id == channel_status_id and length > 0:
            start = LOCAL_SOCKADDR_KEY.size
            addresses.append(info.key[start : start + length].decode(errors="replace"))
    return addresses
