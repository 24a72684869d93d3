"""Aeron's many-to-one ring buffer (the to-driver buffer of cnc.dat).

Any number of producers (threads or processes) write records; one consumer reads them in
order. The layout is Aeron's (aeron_rb.h, agrona's RingBufferDescriptor)::

    capacity bytes of records (capacity a power of two), then the trailer:
        @capacity + 128  tail position           i64
        @capacity + 256  head cache position     i64
        @capacity + 384  head position           i64
        @capacity + 512  correlation counter     i64
        @capacity + 640  consumer heartbeat      i64  epoch ms
        trailer length 768 (each field on its own 128 bytes)

    record, 8-byte aligned:
        @0  length       i32  header + payload; negative while a producer fills it
        @4  msg type id  i32  > 0; -1 for the padding that skips the end of the buffer
        @8  payload

A producer claims space by compare-and-set on the tail, stores the negated length (release),
copies the payload and type id, then stores the length (release): the consumer sees a record
only once it is whole. The consumer zeroes what it has read before moving the head on, so a
zero length always means "not written yet".

A record that cannot be whole (shorter than its header, longer than any producer writes, or
running past the buffer's end or past the tail: its producer wrote a length it did not claim)
is never handed out: the consumer stops at it, and stays stopped there (however far the tail
moves on) until `unblock` drops it.
"""

from __future__ import annotations

from collections.abc import Callable

from aeronio._core import AtomicBuffer
from aeronio.concurrent.records import (
    ALIGNMENT,
    HEADER_LENGTH,
    PADDING_MSG_TYPE_ID,
    align,
    check_message,
)

__all__ = [
    "TRAILER_LENGTH",
    "ManyToOneRingBuffer",
]

CACHE_LINE_LENGTH = 64
TAIL_POSITION_OFFSET = 2 * CACHE_LINE_LENGTH
HEAD_CACHE_POSITION_OFFSET = 4 * CACHE_LINE_LENGTH
HEAD_POSITION_OFFSET = 6 * CACHE_LINE_LENGTH
CORRELATION_COUNTER_OFFSET = 8 * CACHE_LINE_LENGTH
CONSUMER_HEARTBEAT_OFFSET = 10 * CACHE_LINE_LENGTH
TRAILER_LENGTH = 12 * CACHE_LINE_LENGTH

MAX_READ_LIMIT = 2**31 - 1


class ManyToOneRingBuffer:
    """Many producers, one consumer, over `buffer` (capacity + TRAILER_LENGTH bytes, shared)."""

    def __init__(self, buffer: memoryview | bytearray):
        view = memoryview(buffer).cast("B")
        capacity = len(view) - TRAILER_LENGTH
        if capacity < HEADER_LENGTH or capacity & (capacity - 1) or capacity >= 2**31:
            raise ValueError(
                f"ring buffer capacity must be a power of two of at least {HEADER_LENGTH} "
                f"bytes (buffer length - {TRAILER_LENGTH} trailer), got {capacity}"
            )
        self._view = view
        self._atomic = AtomicBuffer(view)
        self.capacity = capacity
        self.max_msg_length = 0 if capacity == HEADER_LENGTH else capacity // 8
        self._tail_at = capacity + TAIL_POSITION_OFFSET
        self._head_cache_at = capacity + HEAD_CACHE_POSITION_OFFSET
        self._head_at = capacity + HEAD_POSITION_OFFSET
        self._correlation_at = capacity + CORRELATION_COUNTER_OFFSET
        self._heartbeat_at = capacity + CONSUMER_HEARTBEAT_OFFSET
        # The head position of a record found unreadable, and why: read stops there.
        self._stopped: tuple[int, str] | None = None

    # -- producers ---------------------------------------------------------------------------

    def write(self, msg_type_id: int, payload: bytes | memoryview) -> bool:
        """Append one record; False if the buffer has no room for it now.

        Raises ValueError for a msg_type_id below 1 or a payload over max_msg_length."""
        length = len(payload)
        check_message(msg_type_id, length, self.max_msg_length)
        record_length = length + HEADER_LENGTH
        index = self._claim(record_length)
        if index < 0:
            return False
        atomic = self._atomic
        atomic.put_int32_ordered(index, -record_length)
        self._view[index + HEADER_LENGTH : index + record_length] = payload
        atomic.put_int32(index + 4, msg_type_id)
        atomic.put_int32_ordered(index, record_length)
        return True

    def _claim(self, record_length: int) -> int:
        """Index of the space claimed for a record, or -1 when full (pads the end if needed)."""
        atomic, capacity = self._atomic, self.capacity
        required = align(record_length)
        mask = capacity - 1
        head = atomic.get_int64_volatile(self._head_cache_at)
        while True:
            tail = atomic.get_int64_volatile(self._tail_at)
            if required > capacity - (tail - head):
                head = atomic.get_int64_volatile(self._head_at)
                if required > capacity - (tail - head):
                    return -1
                atomic.put_int64_ordered(self._head_cache_at, head)
            padding = 0
            tail_index = tail & mask
            to_end = capacity - tail_index
            if required > to_end:
                head_index = head & mask
                if required > head_index:
                    head = atomic.get_int64_volatile(self._head_at)
                    head_index = head & mask
                    if required > head_index:
                        return -1
                    atomic.put_int64_ordered(self._head_cache_at, head)
                padding = to_end
            if atomic.compare_and_set_int64(self._tail_at, tail, tail + required + padding):
                break
        if padding:
            atomic.put_int32_ordered(tail_index, -padding)
            atomic.put_int32(tail_index + 4, PADDING_MSG_TYPE_ID)
            atomic.put_int32_ordered(tail_index, padding)
            tail_index = 0
        return tail_index

    def next_correlation_id(self) -> int:
        """A number unique among everyone using this buffer (atomic increment)."""
        return self._atomic.get_and_add_int64(self._correlation_at, 1)

    # -- the consumer ------------------------------------------------------------------------

    def read(self, handler: Callable[[int, memoryview], None], limit: int = MAX_READ_LIMIT) -> int:
        """Hand up to `limit` whole records to handler(msg_type_id, payload) in order and free
        their space (zeroed). payload is a view into the buffer, valid during the call only.
        Returns the number of records handed over."""
        atomic, view = self._atomic, self._view
        head = atomic.get_int64(self._head_at)
        if self._stopped is not None and self._stopped[0] == head:
            return 0
        head_index = head & (self.capacity - 1)
        block = self.capacity - head_index
        messages = bytes_read = 0
        tail = head  # read again when a record ends past it, after its length was seen
        try:
            while bytes_read < block and messages < limit:
                index = head_index + bytes_read
                record_length = atomic.get_int32_volatile(index)
                if record_length <= 0:
                    break
                msg_type_id = atomic.get_int32(index + 4)
                end = head + bytes_read + align(record_length)
                if end > tail:
                    tail = atomic.get_int64_volatile(self._tail_at)
                problem = self._unreadable(index, record_length, msg_type_id, end, tail)
                if problem is not None:
                    at = head + bytes_read
                    self._stopped = (
                        at,
                        f"record at position {at} of length {record_length} {problem}",
                    )
                    break
                bytes_read += align(record_length)
                if msg_type_id == PADDING_MSG_TYPE_ID:
                    continue
                messages += 1
                handler(msg_type_id, view[index + HEADER_LENGTH : index + record_length])
        finally:
            if bytes_read:
                view[head_index : head_index + bytes_read] = bytes(bytes_read)
                atomic.put_int64_ordered(self._head_at, head + bytes_read)
        return messages

    def head_record(self) -> tuple[int, int, int]:
        """The head, its index in the buffer and the length word of the record there (<= 0: a
        claim not committed yet)."""
        atomic = self._atomic
        head = atomic.get_int64_volatile(self._head_at)
        index = head & (self.capacity - 1)
        return head, index, atomic.get_int32_volatile(index)

    @property
    def consumer_heartbeat_time(self) -> int:
        """The consumer's last heartbeat, epoch ms (the driver's liveness, in cnc.dat)."""
        return self._atomic.get_int64_volatile(self._heartbeat_at)

    def set_consumer_heartbeat_time(self, now_ms: int) -> None:
        self._atomic.put_int64_ordered(self._heartbeat_at, now_ms)

    @property
    def positions(self) -> tuple[AtomicBuffer, int, int]:
        """The buffer and its tail's and head's offsets: for a look from C (records wait while
        they differ)."""
        return self._atomic, self._tail_at, self._head_at

    def producer_position(self) -> int:
        return self._atomic.get_int64_volatile(self._tail_at)

    def consumer_position(self) -> int:
        return self._atomic.get_int64_volatile(self._head_at)

    def size(self) -> int:
        """Bytes between the consumer and the producers (a consistent snapshot)."""
        atomic = self._atomic
        head_after = atomic.get_int64_volatile(self._head_at)
        while True:
            head_before = head_after
            tail = atomic.get_int64_volatile(self._tail_at)
            head_after = atomic.get_int64_volatile(self._head_at)
            if head_after == head_before:
                return tail - head_after

    def _unreadable(
        self, index: int, record_length: int, msg_type_id: int, end: int, tail: int
    ) -> str | None:
        """Why the record at `index` (ending at position `end`) cannot be whole, or None."""
        if record_length < HEADER_LENGTH:
            return f"is shorter than its {HEADER_LENGTH}-byte header"
        if (
            msg_type_id != PADDING_MSG_TYPE_ID
            and record_length > HEADER_LENGTH + self.max_msg_length
        ):
            return f"is longer than a record can be ({HEADER_LENGTH + self.max_msg_length} bytes)"
        if index + align(record_length) > self.capacity:
            return f"runs past the buffer's end (capacity {self.capacity})"
        if end > tail:
            return f"runs past the tail at position {tail}"
        return None

    def unreadable_record(self) -> str | None:
        """What is wrong with the record at the head if `read` found it cannot be whole (and
        stopped at it), else None."""
        head = self._atomic.get_int64_volatile(self._head_at)
        if self._stopped is None or self._stopped[0] != head:
            return None
        return self._stopped[1]

    def unblock(self, seen_tail: int | None = None) -> bool:
        """Turn what stops the consumer into padding, so it can go on; True if it did. Call only
        when the head has not moved for longer than any live producer takes to write.

        A record a dead producer claimed but never finished becomes padding of its claim. A
        record that cannot be whole (`unreadable_record`) tells nothing of where the next one
        starts: it becomes padding up to the first place from which records lead exactly to
        `seen_tail`, a tail seen while the head already stood there (a record boundary, every
        claim before it long written), or to the buffer's end, where the next lap begins with
        a record."""
        atomic, capacity = self._atomic, self.capacity
        head = atomic.get_int64_volatile(self._head_at)
        tail = atomic.get_int64_volatile(self._tail_at)
        if head == tail:
            return False
        mask = capacity - 1
        consumer_index, producer_index = head & mask, tail & mask
        length = atomic.get_int32_volatile(consumer_index)
        if length > 0:
            if seen_tail is None or seen_tail <= head or self.unreadable_record() is None:
                return False
            end = consumer_index + min(seen_tail - head, capacity - consumer_index)
            next_record = self._next_chain(consumer_index, end)
            atomic.put_int32(consumer_index + 4, PADDING_MSG_TYPE_ID)
            atomic.put_int32_ordered(consumer_index, next_record - consumer_index)
            self._stopped = None
            return True
        if length < 0:
            atomic.put_int32(consumer_index + 4, PADDING_MSG_TYPE_ID)
            atomic.put_int32_ordered(consumer_index, -length)
            return True
        if length == 0:
            limit = producer_index if producer_index > consumer_index else capacity
            i = consumer_index + ALIGNMENT
            while i < limit:
                if atomic.get_int32_volatile(i) != 0:
                    if self._still_zeroed(i, consumer_index):
                        atomic.put_int32(consumer_index + 4, PADDING_MSG_TYPE_ID)
                        atomic.put_int32_ordered(consumer_index, i - consumer_index)
                        return True
                    return False
                i += ALIGNMENT
        return False

    def _next_chain(self, start: int, end: int) -> int:
        """The first index after `start` from which records (whole, or claimed: a negative
        length) follow each other to exactly `end`; `end` if none does. Looked for backwards
        from `end`, each index once."""
        atomic = self._atomic
        leads_to_end = {end}
        found = end
        for index in range(end - ALIGNMENT, start, -ALIGNMENT):
            length = abs(atomic.get_int32_volatile(index))
            if length >= HEADER_LENGTH and index + align(length) in leads_to_end:
                leads_to_end.add(index)
                found = index
        return found

    def _still_zeroed(self, start: int, consumer_index: int) -> bool:
        i = start - ALIGNMENT
        while i >= consumer_index:
            if self._atomic.get_int32_volatile(i) != 0:
                return False
            i -= ALIGNMENT
        return True
