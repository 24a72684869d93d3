"""cnc.dat, Aeron's CnC file: the header byte-exact, the buffers where Aeron puts them, and the
errors a client or tool gets for a missing, unfinished, foreign or short file."""

import struct
import subprocess
import sys
from pathlib import Path

import pytest

from aeronio.cnc import (
    CNC_FILE,
    CNC_VERSION,
    CncFile,
    CncFileError,
    CncNotReadyError,
    semantic_version,
)
from aeronio.concurrent.broadcast import BroadcastTransmitter, CopyBroadcastReceiver


def small(dir: Path, **kwargs) -> CncFile:
    return CncFile.create(
        dir,
        to_driver_capacity=kwargs.pop("to_driver_capacity", 1024),
        to_clients_capacity=kwargs.pop("to_clients_capacity", 2048),
        max_counters=4,
        error_log_length=256,
        client_liveness_timeout_ns=5_000_000_000,
        pid=4242,
        start_ms=1_700_000_000_000,
        **kwargs,
    )


def test_header_is_aerons_byte_exact(tmp_path):
    small(tmp_path).close()
    raw = (tmp_path / CNC_FILE).read_bytes()
    assert CNC_VERSION == semantic_version(0, 2, 0) == 0x200
    lengths = (1024 + 768, 2048 + 128, 4 * 512, 4 * 128, 256)
    expected = struct.pack(
        "<i5iqqqi", 0x200, *lengths, 5_000_000_000, 1_700_000_000_000, 4242, 4096
    )
    assert raw[:128] == expected + bytes(128 - len(expected))
    total = 128 + sum(lengths)
    assert len(raw) == -(-total // 4096) * 4096
    assert not any(raw[128:])


def test_buffers_follow_the_header_in_aerons_order(tmp_path):
    cnc = small(tmp_path)
    assert (cnc.to_driver_buffer_length, cnc.to_clients_buffer_length) == (1792, 2176)
    assert (cnc.counter_metadata_buffer_length, cnc.counter_values_buffer_length) == (2048, 512)
    assert (cnc.error_log_buffer_length, cnc.file_page_size, cnc.pid) == (256, 4096, 4242)
    assert cnc.client_liveness_timeout_ns == 5_000_000_000
    assert cnc.start_timestamp_ms == 1_700_000_000_000 and cnc.cnc_version == CNC_VERSION
    marks = [
        (cnc.to_driver_buffer, 1),
        (cnc.to_clients_buffer, 2),
        (cnc.counters_metadata_buffer, 3),
        (cnc.counters_values_buffer, 4),
        (cnc.error_log_buffer, 5),
    ]
    for buffer, mark in marks:
        buffer[0] = buffer[len(buffer) - 1] = mark
    cnc.to_driver.set_consumer_heartbeat_time(99)
    cnc.close()
    raw = (tmp_path / CNC_FILE).read_bytes()
    starts = [128, 128 + 1792, 128 + 1792 + 2176, 128 + 1792 + 2176 + 2048, 6656]
    ends = [*starts[1:], 6656 + 256]
    for (start, end), (_, mark) in zip(zip(starts, ends, strict=True), marks, strict=True):
        assert (raw[start], raw[end - 1]) == (mark, mark)
    assert struct.unpack_from("<q", raw, 128 + 1024 + 640) == (99,)  # consumer heartbeat


def test_a_client_maps_what_the_driver_wrote_in_another_process(tmp_path):
    driver = small(tmp_path)
    driver.to_driver.set_consumer_heartbeat_time(1_700_000_000_500)
    transmitter = BroadcastTransmitter(driver.to_clients_buffer)
    script = (
        "import sys\n"
        "from aeronio.cnc import CncFile\n"
        "from aeronio.concurrent.broadcast import CopyBroadcastReceiver\n"
        "cnc = CncFile.map(sys.argv[1])\n"
        "receiver = CopyBroadcastReceiver(cnc.to_clients_buffer)\n"
        "print(cnc.pid, cnc.driver_heartbeat_ms, cnc.to_driver.next_correlation_id(), flush=True)\n"
        "sys.stdin.readline()\n"
        "receiver.receive(lambda t, p: print(t, bytes(p).decode()))\n"
        "assert cnc.to_driver.write(3, b'hello driver')\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline() == "4242 1700000000500 0\n"
        transmitter.transmit(7, b"hello client")
        out, _ = child.communicate("go\n", timeout=60)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == 0 and out == "7 hello client\n"
    got = []
    driver.to_driver.read(lambda t, p: got.append((t, bytes(p))))
    assert got == [(3, b"hello driver")] and driver.to_driver.next_correlation_id() == 1
    assert CopyBroadcastReceiver(driver.to_clients_buffer).receive(lambda t, p: None) == 1
    driver.close()


def test_map_errors_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError):
        CncFile.map(tmp_path)
    path = tmp_path / CNC_FILE
    for size in (0, 64):  # made, not yet sized: a client waits (it raised CncFileError at once)
        path.write_bytes(bytes(size))
        with pytest.raises(CncNotReadyError, match=f"{size} bytes, shorter than its header"):
            CncFile.map(tmp_path)
    small(tmp_path).close()
    raw = bytearray(path.read_bytes())
    path.write_bytes(bytes(4) + raw[4:])
    with pytest.raises(CncNotReadyError, match="not ready"):
        CncFile.map(tmp_path)
    path.write_bytes(struct.pack("<i", semantic_version(0, 1, 3)) + raw[4:])
    with pytest.raises(CncFileError, match="CnC version 0.1.3, this client needs 0.2.0"):
        CncFile.map(path)
    path.write_bytes(struct.pack("<i", 15) + raw[4:])  # Aeron 1.15.1's: major 0, another layout
    with pytest.raises(CncFileError, match="CnC version 0.0.15, this client needs 0.2.0"):
        CncFile.map(path)
    path.write_bytes(raw[:4096])
    with pytest.raises(CncFileError, match="4096 bytes, shorter than the 6912 its header gives"):
        CncFile.map(path)


@pytest.mark.parametrize(
    ("offset", "length", "said"),
    [
        (4, 1000, "ring buffer capacity must be a power of two of at least 8 bytes (buffer "
         "length - 768 trailer), got 232"),
        (8, 1000, "broadcast buffer capacity must be a power of two of at least 16 (buffer "
         "length - 128 trailer), got 872"),
        (8, 0, "broadcast buffer capacity must be a power of two of at least 16 (buffer "
         "length - 128 trailer), got -128"),
        (8, 136, "broadcast buffer capacity must be a power of two of at least 16 (buffer "
         "length - 128 trailer), got 8"),  # its one record would write over the trailer
    ],
)  # fmt: skip
def test_buffer_lengths_no_driver_writes_are_refused_naming_the_file(
    tmp_path, offset, length, said
):
    """Lengths that fit the file but give no ring or broadcast buffer: a CncFileError naming
    cnc.dat when it is mapped (it was a bare ValueError, and `aeronio stat` an unexpected
    error), not when the client makes its broadcast receiver."""
    small(tmp_path).close()
    path = tmp_path / CNC_FILE
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(struct.pack("<i", length))
    with pytest.raises(CncFileError) as raised:
        CncFile.map(tmp_path)
    assert str(raised.value) == f"{str(path)!r} has no buffer its header gives: {said}"


def test_create_refuses_bad_lengths(tmp_path):
    with pytest.raises(ValueError, match="to_driver_capacity must be a power of two"):
        small(tmp_path, to_driver_capacity=1000)
    with pytest.raises(ValueError, match="to_clients_capacity must be at least 16, got 8"):
        small(tmp_path, to_clients_capacity=8)  # a record of one byte wrote over the trailer
    assert not (tmp_path / CNC_FILE).exists()
