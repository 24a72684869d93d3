"""Aeron's many-to-one ring buffer: byte-exact records and trailer, wrap with padding, full,
unblock, and many producers (threads, processes) to one consumer."""

import mmap
import struct
import subprocess
import sys
import threading

import pytest

from aeronio.concurrent import records
from aeronio.concurrent import ring_buffer as rb
from aeronio.concurrent.ring_buffer import ManyToOneRingBuffer

CAPACITY = 1024


def new_ring(capacity: int = CAPACITY) -> tuple[bytearray, ManyToOneRingBuffer]:
    buffer = bytearray(capacity + rb.TRAILER_LENGTH)
    return buffer, ManyToOneRingBuffer(buffer)


def trailer_i64(buffer: bytearray, capacity: int, offset: int) -> int:
    return struct.unpack_from("<q", buffer, capacity + offset)[0]


def drain(ring: ManyToOneRingBuffer, limit: int = 2**31 - 1) -> list[tuple[int, bytes]]:
    got = []
    ring.read(lambda type_id, payload: got.append((type_id, bytes(payload))), limit)
    return got


def test_layout_is_aerons():
    """Trailer fields each on their own 128 bytes (aeron_rb_descriptor_t), 8-byte records."""
    assert (rb.TRAILER_LENGTH, records.HEADER_LENGTH, records.ALIGNMENT) == (768, 8, 8)
    assert (
        rb.TAIL_POSITION_OFFSET,
        rb.HEAD_CACHE_POSITION_OFFSET,
        rb.HEAD_POSITION_OFFSET,
        rb.CORRELATION_COUNTER_OFFSET,
        rb.CONSUMER_HEARTBEAT_OFFSET,
    ) == (128, 256, 384, 512, 640)


def test_write_lays_out_records_byte_exact():
    buffer, ring = new_ring()
    assert ring.write(7, b"hello") is True
    assert ring.write(101, b"") is True
    expected = struct.pack("<ii", 13, 7) + b"hello" + bytes(3) + struct.pack("<ii", 8, 101)
    assert bytes(buffer[: len(expected)]) == expected
    assert not any(buffer[len(expected) : CAPACITY])
    assert trailer_i64(buffer, CAPACITY, rb.TAIL_POSITION_OFFSET) == 24
    assert ring.producer_position() == 24 and ring.consumer_position() == 0 and ring.size() == 24


def test_read_hands_over_in_order_and_zeroes_what_it_consumed():
    buffer, ring = new_ring()
    for i in range(5):
        assert ring.write(i + 1, bytes([i]) * i)
    assert drain(ring, limit=3) == [(1, b""), (2, b"\x01"), (3, b"\x02\x02")]
    assert ring.consumer_position() == 8 + 16 + 16
    assert not any(buffer[:40]) and any(buffer[40:CAPACITY])
    assert drain(ring) == [(4, b"\x03" * 3), (5, b"\x04" * 4)]
    assert not any(buffer[:CAPACITY])
    assert trailer_i64(buffer, CAPACITY, rb.HEAD_POSITION_OFFSET) == 72 == ring.producer_position()
    assert ring.size() == 0 and drain(ring) == []


def test_a_record_that_does_not_fit_before_the_end_is_preceded_by_padding():
    buffer, ring = new_ring()
    assert ring.write(1, bytes(120 - 8))  # 120 bytes
    for _ in range(7):
        assert ring.write(1, bytes(128 - 8))
    assert ring.producer_position() == 1016
    drain(ring)
    assert ring.write(9, b"wrapped!")  # 16 bytes: 8 left before the end
    assert struct.unpack_from("<ii", buffer, 1016) == (8, records.PADDING_MSG_TYPE_ID)
    assert bytes(buffer[:16]) == struct.pack("<ii", 16, 9) + b"wrapped!"
    assert ring.producer_position() == 1024 + 16
    assert drain(ring) == []  # the padding alone, up to the end of the buffer
    assert ring.consumer_position() == 1024
    assert drain(ring) == [(9, b"wrapped!")]


def test_write_returns_false_when_full_and_true_once_read():
    _, ring = new_ring()
    assert ring.max_msg_length == CAPACITY // 8
    payload = bytes(ring.max_msg_length)
    written = 0
    while ring.write(3, payload):
        written += 1
    assert written == CAPACITY // (ring.max_msg_length + 8)
    assert len(drain(ring, limit=1)) == 1
    assert ring.write(3, payload) is True


def test_write_refuses_bad_type_ids_and_oversized_payloads():
    _, ring = new_ring()
    with pytest.raises(ValueError, match="msg_type_id must be >= 1"):
        ring.write(0, b"x")
    with pytest.raises(ValueError, match="exceeds max_msg_length 128"):
        ring.write(1, bytes(129))
    with pytest.raises(ValueError, match="power of two"):
        ManyToOneRingBuffer(bytearray(1000 + rb.TRAILER_LENGTH))


def test_correlation_ids_and_consumer_heartbeat_live_in_the_trailer():
    buffer, ring = new_ring()
    assert [ring.next_correlation_id() for _ in range(3)] == [0, 1, 2]
    assert trailer_i64(buffer, CAPACITY, rb.CORRELATION_COUNTER_OFFSET) == 3
    ring.set_consumer_heartbeat_time(1_700_000_000_123)
    assert trailer_i64(buffer, CAPACITY, rb.CONSUMER_HEARTBEAT_OFFSET) == 1_700_000_000_123
    assert ring.consumer_heartbeat_time == 1_700_000_000_123


def test_unblock_turns_a_dead_producers_claim_into_padding():
    buffer, ring = new_ring()
    assert ring.unblock() is False  # empty
    # a producer claimed 16 bytes (tail moved, length negative) and died
    struct.pack_into("<q", buffer, CAPACITY + rb.TAIL_POSITION_OFFSET, 16)
    struct.pack_into("<i", buffer, 0, -16)
    assert ring.write(4, b"after")
    assert drain(ring) == []  # stuck behind the claim
    assert ring.unblock() is True
    assert struct.unpack_from("<ii", buffer, 0) == (16, records.PADDING_MSG_TYPE_ID)
    assert drain(ring) == [(4, b"after")]


def test_unblock_skips_a_claim_whose_length_was_never_stored():
    buffer, ring = new_ring()
    struct.pack_into("<q", buffer, CAPACITY + rb.TAIL_POSITION_OFFSET, 24)  # claimed, died
    assert ring.write(4, b"after")
    assert ring.unblock() is True
    assert struct.unpack_from("<ii", buffer, 0) == (24, records.PADDING_MSG_TYPE_ID)
    assert drain(ring) == [(4, b"after")]


def _claim_and_write_length(buffer: bytearray, ring: ManyToOneRingBuffer, claim: int, length: int):
    """A producer that claims `claim` bytes at the tail and stores a record length of `length`."""
    tail = trailer_i64(buffer, CAPACITY, rb.TAIL_POSITION_OFFSET)
    struct.pack_into("<q", buffer, CAPACITY + rb.TAIL_POSITION_OFFSET, tail + claim)
    struct.pack_into("<ii", buffer, tail % CAPACITY, length, 4)
    return tail


@pytest.mark.parametrize(
    "length,problem",
    [
        (5, "record at position 16 of length 5 is shorter than its 8-byte header"),
        (4096, "record at position 16 of length 4096 is longer than a record can be (136 bytes)"),
        (2**31 - 1, "of length 2147483647 is longer than a record can be"),
        (64, "record at position 16 of length 64 runs past the tail at position 40"),
    ],
)
def test_a_record_that_cannot_be_whole_stops_the_consumer_until_unblocked(length, problem):
    """Handed out, a length the producer did not claim would take the consumer past the tail
    or the buffer; it stops there instead, and unblock turns it into padding up to the records
    that lead to the tail it is given, which are then read."""
    buffer, ring = new_ring()
    assert ring.write(3, b"before")  # 8 + 6 bytes: 16
    assert _claim_and_write_length(buffer, ring, 24, length) == 16
    assert ring.read(lambda *_: None) == 1  # "before"
    assert problem in ring.unreadable_record()
    seen_tail = ring.producer_position() + 16  # the record after the bad one is not lost
    for i in range(4):  # other producers move the tail past where the bad one would end
        assert ring.write(4, b"after %d" % i)
        assert drain(ring) == []
        assert ring.consumer_position() == 16
    assert ring.unblock() is False  # without a tail seen while stopped: where would it go?
    assert ring.unblock(seen_tail) is True
    assert drain(ring) == [(4, b"after %d" % i) for i in range(4)]
    assert ring.unreadable_record() is None
    assert ring.consumer_position() == ring.producer_position() == seen_tail + 3 * 16
    assert bytes(buffer[:CAPACITY]) == bytes(CAPACITY)  # all of it freed (zeroed)


def test_unblock_drops_an_unreadable_record_up_to_the_buffers_end_when_the_tail_wrapped():
    """A padding record past the buffer's end: dropped up to the end, where the next lap starts
    with a record."""
    buffer, ring = new_ring()
    for offset in (rb.TAIL_POSITION_OFFSET, rb.HEAD_CACHE_POSITION_OFFSET, rb.HEAD_POSITION_OFFSET):
        struct.pack_into("<q", buffer, CAPACITY + offset, 1000)
    struct.pack_into("<q", buffer, CAPACITY + rb.TAIL_POSITION_OFFSET, 1024)  # 24 bytes claimed
    struct.pack_into("<ii", buffer, 1000, 128, records.PADDING_MSG_TYPE_ID)  # 128: past the end
    assert ring.write(4, b"wrapped")  # at 1024: index 0
    assert drain(ring) == []
    assert ring.unreadable_record() == (
        "record at position 1000 of length 128 runs past the buffer's end (capacity 1024)"
    )
    assert ring.unblock(ring.producer_position()) is True
    assert drain(ring) + drain(ring) == [(4, b"wrapped")]  # a read stops at the buffer's end


def check_every_message_once_in_order(got: list[tuple[int, bytes]], producers: int, count: int):
    seen = {p: [] for p in range(1, producers + 1)}
    for type_id, payload in got:
        producer, seq = struct.unpack("<ii", payload[:8])
        assert type_id == producer and payload[8:] == bytes([seq % 251]) * (seq % 40)
        seen[producer].append(seq)
    assert seen == {p: list(range(count)) for p in seen}


def produce(ring: ManyToOneRingBuffer, producer: int, count: int) -> None:
    for seq in range(count):
        payload = struct.pack("<ii", producer, seq) + bytes([seq % 251]) * (seq % 40)
        while not ring.write(producer, payload):
            pass


def consume(ring: ManyToOneRingBuffer, expected: int, alive) -> list[tuple[int, bytes]]:
    got: list[tuple[int, bytes]] = []
    while len(got) < expected:
        producing = alive()  # checked first: a producer that ends after it has written all
        if ring.read(lambda t, p: got.append((t, bytes(p)))) == 0:
            assert producing, f"producers gone with {len(got)} of {expected} messages read"
    return got


@pytest.mark.slow
def test_many_producer_threads_one_consumer():
    _, ring = new_ring(4096)
    producers, count = 4, 3000
    threads = [
        threading.Thread(target=produce, args=(ring, p, count)) for p in range(1, producers + 1)
    ]
    for t in threads:
        t.start()
    got = consume(ring, producers * count, lambda: any(t.is_alive() for t in threads))
    for t in threads:
        t.join()
    check_every_message_once_in_order(got, producers, count)
    assert drain(ring) == []


PRODUCER = """
import mmap, struct, sys
from aeronio.concurrent.ring_buffer import ManyToOneRingBuffer
from tests.unit.test_ring_buffer import produce
with open(sys.argv[1], "r+b") as f:
    mapped = mmap.mmap(f.fileno(), 0)
produce(ManyToOneRingBuffer(memoryview(mapped)), int(sys.argv[2]), int(sys.argv[3]))
"""


@pytest.mark.slow
def test_many_producer_processes_one_consumer(tmp_path):
    path = tmp_path / "ring"
    path.write_bytes(bytes(4096 + rb.TRAILER_LENGTH))
    with open(path, "r+b") as f:
        mapped = mmap.mmap(f.fileno(), 0)
    ring = ManyToOneRingBuffer(memoryview(mapped))
    producers, count = 3, 2000
    children = [
        subprocess.Popen([sys.executable, "-c", PRODUCER, str(path), str(p), str(count)])
        for p in range(1, producers + 1)
    ]
    try:
        got = consume(ring, producers * count, lambda: any(c.poll() is None for c in children))
        assert [c.wait(timeout=60) for c in children] == [0] * producers
    finally:
        for c in children:
            c.kill()
            c.wait()
    check_every_message_once_in_order(got, producers, count)
    del ring
    mapped.close()
