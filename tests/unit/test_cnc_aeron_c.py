"""cnc.dat against the bytes Aeron's C media driver (1.53) wrote, captured once by
tests/data/aeron_c/capture_cnc.py: our readers decode them, and our writers make the same bytes
for the same content (header, counter records, error log records, to-driver trailer)."""

import os
import struct
from pathlib import Path

import pytest

from aeronio.cnc import CNC_FILE, HEADER_LENGTH, CncFile
from aeronio.concurrent import ring_buffer
from aeronio.concurrent.error_log import DistinctErrorLog, read_error_log
from aeronio.concurrent.ring_buffer import ManyToOneRingBuffer
from aeronio.counters import CountersManager, CountersReader

DATA = Path(__file__).parents[1] / "data" / "aeron_c"
COUNTERS = 50  # allocated in the capture: 46 system counters, pub-pos, pub-lmt, heartbeat, sub-pos


def captured(name: str) -> bytes:
    return (DATA / f"cnc_{name}.bin").read_bytes()


HEADER = captured("header")
LENGTHS = struct.unpack_from("<5i", HEADER, 4)
LIVENESS_NS, START_MS, PID = struct.unpack_from("<qqq", HEADER, 24)


@pytest.fixture
def c_driver_dir(tmp_path: Path) -> Path:
    """A (sparse) cnc.dat of the C driver's lengths holding the captured pieces."""
    starts = [HEADER_LENGTH]
    for length in LENGTHS:
        starts.append(starts[-1] + length)
    with open(tmp_path / CNC_FILE, "wb") as f:
        f.truncate(starts[-1])
        for offset, piece in [
            (0, HEADER),
            (starts[1] - ring_buffer.TRAILER_LENGTH, captured("to_driver_trailer")),
            (starts[2], captured("counters_metadata")),
            (starts[3], captured("counters_values")),
            (starts[4], captured("error_log")),
        ]:
            f.seek(offset)
            f.write(piece)
    return tmp_path


def test_the_c_drivers_header_and_trailer_decode(c_driver_dir):
    with CncFile.map(c_driver_dir) as cnc:
        assert (cnc.to_driver_buffer_length, cnc.to_clients_buffer_length) == LENGTHS[:2]
        assert (cnc.counter_metadata_buffer_length, cnc.counter_values_buffer_length) == (
            32 * 1024 * 1024,
            8 * 1024 * 1024,
        )
        assert cnc.error_log_buffer_length == 4 * 1024 * 1024 and cnc.file_page_size == 4096
        assert (cnc.client_liveness_timeout_ns, cnc.pid) == (10_000_000_000, PID)
        assert cnc.start_timestamp_ms == START_MS
        ring = cnc.to_driver
        assert ring.capacity == 1024 * 1024
        assert ring.producer_position() == ring.consumer_position() == 216  # 6 commands read
        assert START_MS <= cnc.driver_heartbeat_ms < START_MS + 10_000
        assert ring.next_correlation_id() == 6  # the client took ids 0..5


def test_the_c_drivers_counters_decode(c_driver_dir):
    with CountersReader.open(c_driver_dir) as reader:
        assert reader.max_counters == 65536
        counters = list(reader.for_each())
    assert len(counters) == COUNTERS
    assert [(c.id, c.type_id, c.label) for c in counters[:2]] == [
        (0, 0, "Bytes sent"),
        (1, 0, "Bytes received"),
    ]
    sub_pos = counters[49]
    assert sub_pos.type_id == 4 and sub_pos.label.startswith("sub-pos: 3 ")
    assert (sub_pos.registration_id, sub_pos.owner_id) == (3, 1)
    assert struct.unpack_from("<qiii", sub_pos.key)[0::2] == (3, 1001)  # registration, stream
    with CountersReader.open(c_driver_dir) as reader:
        assert reader.get_counter_reference_id(49) == 2  # the publication it reads
        assert reader.find_by_type_id_and_registration_id(11, 1) == 48  # client-heartbeat: id=1


def test_the_c_drivers_error_log_decodes(c_driver_dir):
    with CncFile.map(c_driver_dir) as cnc:
        (error,) = read_error_log(cnc.error_log_buffer)
    assert error.count == 2 and START_MS <= error.first_ms <= error.last_ms
    assert error.text.startswith("(-1) invalid channel\n")


def test_our_header_is_the_c_drivers_for_the_same_content(tmp_path):
    CncFile.create(
        tmp_path,
        to_driver_capacity=1024 * 1024,
        to_clients_capacity=1024 * 1024,
        max_counters=LENGTHS[3] // 128,
        error_log_length=LENGTHS[4],
        client_liveness_timeout_ns=LIVENESS_NS,
        pid=PID,
        start_ms=START_MS,
    ).close()
    with open(tmp_path / CNC_FILE, "rb") as f:
        assert f.read(HEADER_LENGTH) == HEADER
    # aeron_cnc_computed_length: the header and buffers, aligned to the file page size
    assert os.path.getsize(tmp_path / CNC_FILE) == -(-(HEADER_LENGTH + sum(LENGTHS)) // 4096) * 4096


def test_our_counter_records_are_the_c_drivers_for_the_same_content():
    metadata, values = captured("counters_metadata"), captured("counters_values")
    ours_metadata, ours_values = bytearray(len(metadata)), bytearray(len(values))
    manager = CountersManager(memoryview(ours_metadata), memoryview(ours_values))
    with CountersReader(memoryview(bytearray(metadata)), memoryview(bytearray(values))) as c:
        for info in c.for_each():
            key_length = len(info.key.rstrip(b"\0"))
            counter_id = manager.allocate(
                info.label,
                info.type_id,
                info.key[:key_length],
                info.registration_id,
                info.owner_id,
                c.get_counter_reference_id(info.id),
            )
            assert counter_id == info.id
            manager.counter(counter_id).set(info.value)
    assert bytes(ours_metadata) == metadata
    assert bytes(ours_values) == values
    manager.close()


def test_our_error_log_record_is_the_c_drivers_for_the_same_content():
    log = captured("error_log")
    length, count, last_ms, first_ms = struct.unpack_from("<iiqq", log)
    text = log[24:length].decode()
    ours = bytearray(len(log) + 64)
    times = iter([first_ms, last_ms])
    errors = DistinctErrorLog(memoryview(ours), clock=lambda: next(times))
    for _ in range(count):
        errors.record(text)
    assert bytes(ours[: len(log)]) == log and not any(ours[len(log) :])


def test_our_to_driver_trailer_is_the_c_drivers_for_the_same_traffic():
    trailer = captured("to_driver_trailer")
    tail, _, head, correlation, heartbeat = (
        struct.unpack_from("<q", trailer, offset)[0] for offset in range(128, 768, 128)
    )
    buffer = bytearray(1024 * 1024 + ring_buffer.TRAILER_LENGTH)
    ring = ManyToOneRingBuffer(buffer)
    for _ in range(correlation):
        ring.next_correlation_id()
    assert ring.write(1, bytes(tail - 8))  # as many bytes as the client's commands took
    assert ring.read(lambda msg_type_id, payload: None) == 1
    ring.set_consumer_heartbeat_time(heartbeat)
    assert head == tail and bytes(buffer[1024 * 1024 :]) == trailer
