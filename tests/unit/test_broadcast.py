"""Aeron's broadcast buffer: byte-exact records and trailer, wrap with padding, receivers that
join late, and a lapped receiver detecting it (in one thread and across processes)."""

import mmap
import struct
import subprocess
import sys
import threading

import pytest

from aeronio.concurrent import broadcast as bc
from aeronio.concurrent import records
from aeronio.concurrent.broadcast import (
    BroadcastReceiver,
    BroadcastTransmitter,
    CopyBroadcastReceiver,
)

CAPACITY = 1024


def new_buffer(capacity: int = CAPACITY) -> bytearray:
    return bytearray(capacity + bc.TRAILER_LENGTH)


def trailer(buffer: bytearray, capacity: int = CAPACITY) -> tuple[int, int, int]:
    return struct.unpack_from("<qqq", buffer, capacity)


def receive_all(receiver: CopyBroadcastReceiver) -> list[tuple[int, bytes]]:
    got: list[tuple[int, bytes]] = []
    while receiver.receive(lambda t, p: got.append((t, bytes(p)))):
        pass
    return got


def test_layout_is_aerons():
    assert (bc.TRAILER_LENGTH, records.HEADER_LENGTH, records.ALIGNMENT) == (128, 8, 8)
    assert (bc.TAIL_INTENT_COUNTER_OFFSET, bc.TAIL_COUNTER_OFFSET, bc.LATEST_COUNTER_OFFSET) == (
        0,
        8,
        16,
    )


def test_transmit_lays_out_records_and_trailer_byte_exact():
    buffer = new_buffer()
    transmitter = BroadcastTransmitter(buffer)
    transmitter.transmit(5, b"hello")
    transmitter.transmit(6, b"12345678")
    expected = struct.pack("<ii", 13, 5) + b"hello" + bytes(3)
    expected += struct.pack("<ii", 16, 6) + b"12345678"
    assert bytes(buffer[: len(expected)]) == expected
    assert not any(buffer[len(expected) : CAPACITY])
    assert trailer(buffer) == (32, 32, 16)  # tail intent, tail, latest


def test_a_receiver_starts_at_the_latest_record_and_then_follows():
    buffer = new_buffer()
    transmitter = BroadcastTransmitter(buffer)
    transmitter.transmit(1, b"old")
    transmitter.transmit(2, b"latest")
    receiver = CopyBroadcastReceiver(buffer)
    assert receive_all(receiver) == [(2, b"latest")]
    transmitter.transmit(3, b"next")
    transmitter.transmit(4, b"")
    assert receive_all(receiver) == [(3, b"next"), (4, b"")]
    assert receiver.lapped_count == 0


def test_a_record_that_does_not_fit_before_the_end_is_preceded_by_padding():
    buffer = new_buffer()
    transmitter = BroadcastTransmitter(buffer)
    receiver = CopyBroadcastReceiver(buffer)
    for _ in range(7):
        transmitter.transmit(1, bytes(128 - 8))
    transmitter.transmit(1, bytes(120 - 8))  # tail at 1016: 8 bytes to the end
    assert len(receive_all(receiver)) == 8
    transmitter.transmit(9, b"wrapped!")
    assert struct.unpack_from("<ii", buffer, 1016) == (8, -1)
    assert bytes(buffer[:16]) == struct.pack("<ii", 16, 9) + b"wrapped!"
    assert trailer(buffer) == (1040, 1040, 1024)
    assert receive_all(receiver) == [(9, b"wrapped!")]


def test_transmit_refuses_bad_type_ids_and_oversized_payloads():
    transmitter = BroadcastTransmitter(new_buffer())
    with pytest.raises(ValueError, match="msg_type_id must be >= 1"):
        transmitter.transmit(0, b"")
    with pytest.raises(ValueError, match="exceeds max_msg_length 128"):
        transmitter.transmit(1, bytes(129))
    with pytest.raises(ValueError, match="power of two"):
        BroadcastReceiver(bytearray(1000 + bc.TRAILER_LENGTH))


def test_a_lapped_receiver_counts_it_and_goes_on_from_the_latest():
    buffer = new_buffer()
    transmitter = BroadcastTransmitter(buffer)
    receiver = CopyBroadcastReceiver(buffer)
    for i in range(40):  # 40 x 64 bytes: more than a capacity ahead of the receiver
        transmitter.transmit(1, struct.pack("<i", i) + bytes(52))
    got = receive_all(receiver)
    assert receiver.lapped_count == 1 and got == []  # the lap, reported
    transmitter.transmit(2, b"after")
    assert receive_all(receiver) == [(2, b"after")]
    assert receiver.lapped_count == 1


def test_receive_next_and_validate_describe_the_record_in_place():
    buffer = new_buffer()
    transmitter = BroadcastTransmitter(buffer)
    receiver = BroadcastReceiver(buffer)
    assert receiver.receive_next() is False
    transmitter.transmit(7, b"abc")
    assert receiver.receive_next() is True
    assert (receiver.msg_type_id, receiver.length, receiver.offset) == (7, 3, 8)
    assert bytes(receiver.buffer[8:11]) == b"abc" and receiver.validate()
    for _ in range(20):
        transmitter.transmit(1, bytes(120))
    assert receiver.validate() is False  # overwritten since


def test_a_slow_receiver_thread_is_lapped_and_never_sees_a_torn_record():
    buffer = new_buffer()
    transmitter = BroadcastTransmitter(buffer)
    receiver = CopyBroadcastReceiver(buffer)
    done = threading.Event()
    count = 20_000

    def transmit():
        for i in range(count):
            size = i % 60
            transmitter.transmit(1 + i % 3, struct.pack("<ii", i, size) + bytes([i % 256]) * size)
        done.set()

    got: list[int] = []

    def check(type_id: int, payload: memoryview):
        i, size = struct.unpack_from("<ii", payload)
        assert type_id == 1 + i % 3 and bytes(payload[8:]) == bytes([i % 256]) * size
        got.append(i)

    thread = threading.Thread(target=transmit)
    thread.start()
    while not done.is_set() or receiver.receive(check):
        receiver.receive(check)
    thread.join()
    assert got == sorted(got) and len(set(got)) == len(got)
    assert receiver.lapped_count > 0 or len(got) == count


RECEIVER = """
import mmap, struct, sys
from aeronio.concurrent.broadcast import CopyBroadcastReceiver
with open(sys.argv[1], "r+b") as f:
    mapped = mmap.mmap(f.fileno(), 0)
receiver = CopyBroadcastReceiver(memoryview(mapped))
print("ready", flush=True)
def receive_all():
    got = []
    while receiver.receive(lambda t, p: got.append(bytes(p))):
        pass
    return got
sys.stdin.readline()  # the transmitter laps us meanwhile
got = receive_all()
print(receiver.lapped_count, got, flush=True)
sys.stdin.readline()
got = receive_all()
print(receiver.lapped_count, got, flush=True)
"""


def test_a_receiver_in_another_process_detects_the_lap(tmp_path):
    path = tmp_path / "broadcast"
    path.write_bytes(bytes(CAPACITY + bc.TRAILER_LENGTH))
    with open(path, "r+b") as f:
        mapped = mmap.mmap(f.fileno(), 0)
    transmitter = BroadcastTransmitter(memoryview(mapped))
    child = subprocess.Popen(
        [sys.executable, "-c", RECEIVER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline() == "ready\n"
        for _ in range(40):
            transmitter.transmit(1, bytes(56))
        child.stdin.write("lapped\n")
        child.stdin.flush()
        assert child.stdout.readline() == "1 []\n"
        transmitter.transmit(1, b"next")
        out, _ = child.communicate("go\n", timeout=60)
    finally:
        child.kill()
        child.wait()
    assert out == "1 [b'next']\n"
    del transmitter
    mapped.close()


@pytest.mark.parametrize(
    ("at", "field", "error"),
    [
        (0, struct.pack("<i", 0), "record at offset 0: length 0 is not within 8..136"),
        (0, struct.pack("<i", -8), "record at offset 0: length -8 is not within 8..136"),
        (0, struct.pack("<i", 7), "record at offset 0: length 7 is not within 8..136"),
        (0, struct.pack("<i", 1 << 20), "record at offset 0: length 1048576 is not within 8..136"),
        (0, struct.pack("<i", 40), "record at offset 0: length 40 runs past the tail position 24"),
        (4, struct.pack("<i", 0), "record at offset 0: msg type id 0 is below 1"),
        (
            4,
            struct.pack("<i", -1),
            "record at offset 0: padding of length 24 does not end at the capacity 1024",
        ),
    ],
)
def test_a_corrupt_header_is_named_not_counted_as_a_lap(at, field, error):
    """A header no transmitter writes, not overwritten since: CorruptRecordError naming the
    offset and the field, every time (the receiver stays on it), and no lap."""
    buffer = new_buffer()
    transmitter = BroadcastTransmitter(buffer)
    receiver = CopyBroadcastReceiver(buffer)
    transmitter.transmit(1, bytes(16))
    buffer[at : at + 4] = field
    for _ in range(2):
        with pytest.raises(bc.CorruptRecordError) as raised:
            receiver.receive(lambda t, p: None)
        assert str(raised.value) == error
    assert receiver.lapped_count == 0


def test_a_record_past_the_capacity_is_corrupt_even_after_padding():
    buffer = new_buffer()
    transmitter = BroadcastTransmitter(buffer)
    receiver = CopyBroadcastReceiver(buffer)
    for _ in range(7):
        transmitter.transmit(1, bytes(128 - 8))
    transmitter.transmit(1, bytes(64 - 8))  # tail at 960
    assert len(receive_all(receiver)) == 8
    transmitter.transmit(2, bytes(128 - 8))  # padding at 960, the record at 0
    struct.pack_into("<i", buffer, 4, 0)
    with pytest.raises(bc.CorruptRecordError, match="^record at offset 0: msg type id 0 is"):
        receiver.receive(lambda t, p: None)
    struct.pack_into("<ii", buffer, 960, 72, 1)
    with pytest.raises(
        bc.CorruptRecordError, match="^record at offset 960: length 72 runs past the capacity 1024$"
    ):
        receiver.receive(lambda t, p: None)
