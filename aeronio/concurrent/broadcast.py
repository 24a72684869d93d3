"""Aeron's broadcast buffer (the to-clients buffer of cnc.dat): one transmitter, any number of
receivers that each follow at their own pace; a receiver that falls a whole buffer behind is
lapped: it notices, counts it and goes on after the latest record (as Aeron's, which reports
the lap in place of that record).

The layout is Aeron's (aeron_broadcast_descriptor.h, agrona's BroadcastBufferDescriptor)::

    capacity bytes of records (capacity a power of two), then the 128-byte trailer:
        @capacity + 0   tail intent counter  i64  where the tail will be once this write is done
        @capacity + 8   tail counter         i64
        @capacity + 16  latest counter       i64  start of the last record written

    record, 8-byte aligned:
        @0  length       i32  header + payload
        @4  msg type id  i32  > 0; -1 for the padding that skips the end of the buffer
        @8  payload

The transmitter announces the tail intent before it overwrites anything; a receiver checks,
after copying a record, that the intent has not gone a capacity past the record's start. A
header no transmitter writes (a length out of 8..8 + capacity/8 or past the buffer's end or the
tail intent, a type below 1, padding that does not end at the capacity) that was not overwritten
while read is corruption, never a lap: CorruptRecordError.
"""

from __future__ import annotations

from collections.abc import Callable

from aeronio._core import AtomicBuffer
from aeronio.concurrent.records import (
    HEADER_LENGTH,
    PADDING_MSG_TYPE_ID,
    align,
    check_message,
)
from aeronio.errors import AeronError

__all__ = [
    "TRAILER_LENGTH",
    "BroadcastReceiver",
    "BroadcastTransmitter",
    "CopyBroadcastReceiver",
    "CorruptRecordError",
]

TAIL_INTENT_COUNTER_OFFSET = 0
TAIL_COUNTER_OFFSET = 8
LATEST_COUNTER_OFFSET = 16
TRAILER_LENGTH = 128
MIN_CAPACITY = 16  # the smallest record: its 8-byte header and a payload aligned to 8


def capacity_of(length: int) -> int:
    """The capacity of a broadcast buffer of `length` bytes; ValueError if no buffer has it (a
    power of two, at least MIN_CAPACITY: a record's header and one aligned payload byte)."""
    capacity = length - TRAILER_LENGTH
    if capacity < MIN_CAPACITY or capacity & (capacity - 1):
        raise ValueError(
            f"broadcast buffer capacity must be a power of two of at least {MIN_CAPACITY} "
            f"(buffer length - {TRAILER_LENGTH} trailer), got {capacity}"
        )
    return capacity


class CorruptRecordError(AeronError):
    """A broadcast record whose header no transmitter writes, and not overwritten since: the
    buffer is corrupt (a receiver that is lapped reads torn headers, and counts a lap)."""


class _Broadcast:
    def __init__(self, buffer: memoryview | bytearray):
        view = memoryview(buffer).cast("B")
        capacity = capacity_of(len(view))
        self._view = view
        self._atomic = AtomicBuffer(view)
        self.capacity = capacity
        self.max_msg_length = capacity // 8
        self._tail_intent_at = capacity + TAIL_INTENT_COUNTER_OFFSET
        self._tail_at = capacity + TAIL_COUNTER_OFFSET
        self._latest_at = capacity + LATEST_COUNTER_OFFSET


class BroadcastTransmitter(_Broadcast):
    """The one writer of a broadcast buffer."""

    def transmit(self, msg_type_id: int, payload: bytes | memoryview) -> None:
        """Write one record (overwriting the oldest ones if need be).

        Raises ValueError for a msg_type_id below 1 or a payload over max_msg_length."""
        length = len(payload)
        check_message(msg_type_id, length, self.max_msg_length)
        atomic = self._atomic
        tail = atomic.get_int64(self._tail_at)
        offset = tail & (self.capacity - 1)
        record_length = length + HEADER_LENGTH
        aligned = align(record_length)
        new_tail = tail + aligned
        to_end = self.capacity - offset
        # The tail intent is seen before any byte of the records it overwrites (a release
        # store orders only what comes before it: the fence, what comes after).
        if to_end < aligned:
            atomic.put_int64_ordered(self._tail_intent_at, new_tail + to_end)
            atomic.fence_release()
            atomic.put_int32(offset + 4, PADDING_MSG_TYPE_ID)
            atomic.put_int32(offset, to_end)
            tail += to_end
            offset = 0
        else:
            atomic.put_int64_ordered(self._tail_intent_at, new_tail)
            atomic.fence_release()
        atomic.put_int32(offset, record_length)
        atomic.put_int32(offset + 4, msg_type_id)
        self._view[offset + HEADER_LENGTH : offset + record_length] = payload
        atomic.put_int64_ordered(self._latest_at, tail)
        atomic.put_int64_ordered(self._tail_at, tail + aligned)


class BroadcastReceiver(_Broadcast):
    """One reader of a broadcast buffer, starting at the latest record when made.

    `receive_next()` moves to the next record (True if there is one); then `msg_type_id`,
    `length` and `offset` describe it in `buffer`, and `validate()` says whether it was
    still intact after you read it."""

    def __init__(self, buffer: memoryview | bytearray):
        super().__init__(buffer)
        latest = self._atomic.get_int64_volatile(self._latest_at)
        self._cursor = self._next_record = latest
        self._record_offset = latest & (self.capacity - 1)
        self._length = self._msg_type_id = 0
        self.lapped_count = 0

    @property
    def buffer(self) -> memoryview:
        return self._view

    @property
    def offset(self) -> int:
        """Where the current record's payload starts in buffer."""
        return self._record_offset + HEADER_LENGTH

    @property
    def length(self) -> int:
        """The current record's payload length."""
        return self._length

    @property
    def msg_type_id(self) -> int:
        return self._msg_type_id

    def receive_next(self) -> bool:
        """Move to the next record; False if there is none yet. After a lap (the transmitter
        overwrote records not read yet) lapped_count goes up and the current record is the
        latest one; a lap caught while reading a header returns False, and the next call goes
        on from the latest record. CorruptRecordError if a header that was not overwritten is
        none a transmitter writes (the reader stays on it)."""
        atomic = self._atomic
        cursor = self._next_record
        if atomic.get_int64_volatile(self._tail_at) <= cursor:
            return False
        if not self._validate_at(cursor):
            self.lapped_count += 1
            cursor = self._next_record = atomic.get_int64_volatile(self._latest_at)
        offset = cursor & (self.capacity - 1)
        length, msg_type_id = atomic.get_int32(offset), atomic.get_int32(offset + 4)
        next_record = cursor + align(length)
        start = cursor
        if msg_type_id == PADDING_MSG_TYPE_ID and length == self.capacity - offset:
            start, offset = next_record, 0
            length, msg_type_id = atomic.get_int32(0), atomic.get_int32(4)
            next_record += align(length)
        atomic.fence_acquire()  # the header above read before the intent that vouches for it
        intent = atomic.get_int64_volatile(self._tail_intent_at)
        bad = self._bad_field(offset, length, msg_type_id)
        if not bad and next_record > intent:
            bad = f"length {length} runs past the tail position {intent}"
        if bad:
            if cursor + self.capacity <= intent:  # overwritten while read: a lap
                self.lapped_count += 1
                self._next_record = atomic.get_int64_volatile(self._latest_at)
                return False
            raise CorruptRecordError(f"record at offset {offset}: {bad}")
        self._cursor, self._next_record, self._record_offset = start, next_record, offset
        self._length, self._msg_type_id = length - HEADER_LENGTH, msg_type_id
        return True

    def _bad_field(self, offset: int, length: int, msg_type_id: int) -> str:
        """What no transmitter writes in the header of a record at `offset` (one that is not
        the padding to the end), or ''."""
        if msg_type_id == PADDING_MSG_TYPE_ID:
            return f"padding of length {length} does not end at the capacity {self.capacity}"
        if msg_type_id < 1:
            return f"msg type id {msg_type_id} is below 1"
        if not HEADER_LENGTH <= length <= HEADER_LENGTH + self.max_msg_length:
            return (
                f"length {length} is not within {HEADER_LENGTH}.."
                f"{HEADER_LENGTH + self.max_msg_length}"
            )
        if offset + length > self.capacity:
            return f"length {length} runs past the capacity {self.capacity}"
        return ""

    def validate(self) -> bool:
        """True if the current record has not been overwritten since receive_next."""
        return self._validate_at(self._cursor)

    def _validate_at(self, cursor: int) -> bool:
        self._atomic.fence_acquire()  # what was read of the record, before the intent
        return cursor + self.capacity > self._atomic.get_int64_volatile(self._tail_intent_at)


class CopyBroadcastReceiver:
    """A BroadcastReceiver that copies each record before handing it over, so the handler
    never sees a record being overwritten."""

    def __init__(self, buffer: memoryview | bytearray):
        self.receiver = BroadcastReceiver(buffer)

    @property
    def lapped_count(self) -> int:
        return self.receiver.lapped_count

    def receive(self, handler: Callable[[int, memoryview], None]) -> int:
        """Hand the next record, copied, to handler(msg_type_id, payload): 1, or 0 if there
        is none or the receiver was lapped (counted in lapped_count; as Aeron's, the record
        the receiver jumped to is the lap's report, and reading goes on after it).
        CorruptRecordError for a record no transmitter writes (see receive_next)."""
        receiver = self.receiver
        lapped = receiver.lapped_count
        if not receiver.receive_next() or receiver.lapped_count != lapped:
            return 0
        msg_type_id, offset, length = receiver.msg_type_id, receiver.offset, receiver.length
        payload = bytes(receiver.buffer[offset : offset + length])
        if not receiver.validate():
            receiver.lapped_count += 1
            return 0
        handler(msg_type_id, memoryview(payload))
        return 1
