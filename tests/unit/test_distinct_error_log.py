"""Aeron's distinct error log over shared memory: byte-exact records, counting, text, cut of
long messages, a full log, and readers in another process while the driver writes."""

import mmap
import struct
import subprocess
import sys

import pytest

from aeronio.concurrent import error_log as el
from aeronio.concurrent.error_log import (
    MAX_MESSAGE_LENGTH,
    DistinctErrorLog,
    ErrorObservation,
    read_error_log,
)


class Clock:
    def __init__(self, now: int = 0):
        self.now = now

    def __call__(self) -> int:
        return self.now


def raise_and_catch(error: BaseException) -> BaseException:
    def deep_in_the_driver():
        raise error

    try:
        deep_in_the_driver()
    except BaseException as caught:
        return caught
    raise AssertionError("not raised")


def test_records_are_aerons_layout_byte_exact():
    buffer, clock = bytearray(256), Clock(1_700_000_000_001)
    log = DistinctErrorLog(buffer, clock)
    assert log.record("client 7 timed out")
    clock.now += 5
    assert log.record("client 8 timed out")  # the same error, numbers abstracted
    clock.now += 1
    assert log.record(ValueError("bad mtu"))
    first = struct.pack("<iiqq", 24 + 18, 2, 1_700_000_000_006, 1_700_000_000_001)
    first += b"client 7 timed out" + bytes(6)  # aligned to 8
    second = struct.pack("<iiqq", 24 + 19, 1, 1_700_000_000_007, 1_700_000_000_007)
    second += b"ValueError: bad mtu" + bytes(5)
    assert bytes(buffer[:96]) == first + second
    assert not any(buffer[96:])
    assert (el.HEADER_LENGTH, el.RECORD_ALIGNMENT) == (24, 8)


def test_record_counts_distinct_errors_with_first_and_last_times():
    buffer, clock = bytearray(4096), Clock()
    log = DistinctErrorLog(buffer, clock)
    for now, error in [
        (1000, ValueError("bad term length")),
        (1500, "client 7 timed out"),
        (2000, ValueError("bad term length")),
        (2500, ValueError("bad mtu")),
        (2600, KeyError("bad term length")),  # another type: another error
        (3000, ValueError("bad term length")),
    ]:
        clock.now = now
        log.record(error)
    assert read_error_log(buffer) == [
        ErrorObservation(3, 1000, 3000, "ValueError: bad term length"),
        ErrorObservation(1, 1500, 1500, "client 7 timed out"),
        ErrorObservation(1, 2500, 2500, "ValueError: bad mtu"),
        ErrorObservation(1, 2600, 2600, "KeyError: 'bad term length'"),
    ]
    assert [o.text for o in read_error_log(buffer, since_ms=2500)] == [
        "ValueError: bad term length",
        "ValueError: bad mtu",
        "KeyError: 'bad term length'",
    ]
    assert len(log) == 4


def test_exception_text_includes_the_traceback():
    buffer = bytearray(65536)
    try:
        try:
            raise raise_and_catch(OSError("disk full"))
        except OSError as e:
            raise RuntimeError("could not create log buffer") from e
    except RuntimeError as error:
        DistinctErrorLog(buffer).record(error)
    (observation,) = read_error_log(buffer)
    text = observation.text
    assert text.splitlines()[0] == "RuntimeError: could not create log buffer"
    assert "deep_in_the_driver" in text and "OSError: disk full" in text
    assert "The above exception was the direct cause" in text


def test_variants_differing_in_numbers_are_one_error():
    buffer = bytearray(4096)
    log = DistinctErrorLog(buffer)
    for i in range(500):
        log.record(f"control frame of {1048577 + i} bytes exceeds 1048576")
        log.record(ValueError(f"no subscription {i} on 0x{i:x}, 10.0.0.{i % 256}:{4000 + i}"))
    log.record(ValueError("stream_id is not int32"))
    log.record(ValueError("stream_id is not int64"))  # a word, not a number
    assert [(o.count, o.text) for o in read_error_log(buffer)] == [
        (500, "control frame of 1048577 bytes exceeds 1048576"),
        (500, "ValueError: no subscription 0 on 0x0, 10.0.0.0:4000"),
        (1, "ValueError: stream_id is not int32"),
        (1, "ValueError: stream_id is not int64"),
    ]


def test_a_long_message_is_cut():
    buffer = bytearray(1 << 20)
    log = DistinctErrorLog(buffer)
    long = "channel " + "x" * 1_000_000
    log.record(long)
    log.record(raise_and_catch(ValueError(long)))
    plain, raised = read_error_log(buffer)
    assert plain.text == long[:MAX_MESSAGE_LENGTH] + f"... ({len(long) - MAX_MESSAGE_LENGTH} more)"
    assert raised.text.startswith(f"ValueError: {long[:MAX_MESSAGE_LENGTH]}... (")
    assert len(raised.text) < 3 * MAX_MESSAGE_LENGTH  # the traceback's last line cut too


def test_a_full_log_drops_new_errors_counts_them_and_still_counts_known_ones():
    buffer = bytearray(64)
    log = DistinctErrorLog(buffer)
    assert log.record("first error")  # 24 + 11 -> 40 bytes
    assert not log.record("another error")  # 24 + 13 > 24 left
    assert log.record("first error")
    assert log.dropped == 1
    assert [(o.count, o.text) for o in read_error_log(buffer)] == [(2, "first error")]


def test_a_corrupt_length_is_a_clear_error():
    buffer = bytearray(64)
    struct.pack_into("<i", buffer, 0, 100)
    with pytest.raises(ValueError, match="error log record at 0 has a bad length 100"):
        read_error_log(buffer)


class ReadAtPublish:
    """The log's atomic buffer, reading the whole log the moment a record's length is stored."""

    def __init__(self, atomic, buffer: bytearray):
        self._atomic, self._buffer = atomic, buffer
        self.seen: list[list[ErrorObservation]] = []

    def __getattr__(self, name: str):
        return getattr(self._atomic, name)

    def put_int32_ordered(self, offset: int, value: int) -> None:
        self._atomic.put_int32_ordered(offset, value)
        self.seen.append(read_error_log(self._buffer))


def test_a_record_is_published_with_its_first_observation_counted():
    buffer = bytearray(1024)
    log = DistinctErrorLog(buffer, clock=Clock(7))
    spy = log._atomic = ReadAtPublish(log._atomic, buffer)
    log.record("first error")
    log.record("second error")
    log.record("first error")
    assert [[(o.count, o.last_ms, o.text) for o in seen] for seen in spy.seen] == [
        [(1, 7, "first error")],
        [(1, 7, "first error"), (1, 7, "second error")],
    ]
    assert [o.count for o in read_error_log(buffer)] == [2, 1]


WRITER = """
import mmap, sys
from aeronio.concurrent.error_log import DistinctErrorLog
with open(sys.argv[1], "r+b") as f:
    mapped = mmap.mmap(f.fileno(), 0)
log = DistinctErrorLog(memoryview(mapped))
for i in range(2000):
    log.record("error " + "".join(chr(97 + int(d)) for d in str(i % 100)) + " " + "x" * 200)
"""


def test_a_reader_in_another_process_sees_whole_records_while_the_log_is_written(tmp_path):
    path = tmp_path / "errors"
    path.write_bytes(bytes(1 << 16))
    with open(path, "r+b") as f:
        mapped = mmap.mmap(f.fileno(), 0)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)])
    reads = 0
    try:
        while writer.poll() is None:
            for o in read_error_log(memoryview(mapped)):
                assert o.text.startswith("error ") and o.text.endswith("x" * 200)
                assert o.count >= 1 and o.first_ms <= o.last_ms
            reads += 1
    finally:
        writer.wait(timeout=60)
    assert writer.returncode == 0 and reads > 0
    observations = read_error_log(memoryview(mapped))
    assert len(observations) == 100 and sum(o.count for o in observations) == 2000
    mapped.close()
