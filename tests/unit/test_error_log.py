"""The driver's distinct error log: counting, text, atomic persistence, cap, bad files."""

import json
import os
import subprocess
import sys

import pytest

from aeronio.driver.error_log import (
    MAX_MESSAGE_LENGTH,
    DistinctErrorLog,
    ErrorLogError,
    ErrorObservation,
    load_error_log,
)


def raise_and_catch(error: BaseException) -> BaseException:
    def deep_in_the_driver():
        raise error

    try:
        deep_in_the_driver()
    except BaseException as caught:
        return caught
    raise AssertionError("not raised")


def test_record_counts_distinct_errors_with_first_and_last_times(tmp_path):
    log = DistinctErrorLog(tmp_path / "errors.json")
    log.record(ValueError("bad term length"), now_ms=1000)
    log.record("client 7 timed out", now_ms=1500)
    log.record(ValueError("bad term length"), now_ms=2000)
    log.record(ValueError("bad mtu"), now_ms=2500)
    log.record(KeyError("bad term length"), now_ms=2600)  # another type: another error
    log.record(ValueError("bad term length"), now_ms=3000)
    log.flush()
    expected = [
        ErrorObservation(3, 1000, 3000, "ValueError: bad term length"),
        ErrorObservation(1, 1500, 1500, "client 7 timed out"),
        ErrorObservation(1, 2500, 2500, "ValueError: bad mtu"),
        ErrorObservation(1, 2600, 2600, "KeyError: 'bad term length'"),
    ]
    assert log.observations() == expected
    assert load_error_log(tmp_path / "errors.json")[0] == expected
    assert len(log) == 4


def test_exception_text_includes_the_traceback(tmp_path):
    log = DistinctErrorLog(tmp_path / "errors.json")
    try:
        try:
            raise raise_and_catch(OSError("disk full"))
        except OSError as e:
            raise RuntimeError("could not create log buffer") from e
    except RuntimeError as error:
        log.record(error, now_ms=5)
    log.flush()
    (observation,) = load_error_log(tmp_path / "errors.json")[0]
    text = observation.text
    assert text.splitlines()[0] == "RuntimeError: could not create log buffer"
    assert "Traceback (most recent call last):" in text
    assert "deep_in_the_driver" in text  # the cause's frames
    assert "OSError: disk full" in text
    assert "The above exception was the direct cause" in text
    assert "test_exception_text_includes_the_traceback" in text


def test_persisted_file_is_read_by_another_process(tmp_path):
    path = tmp_path / "errors.json"
    log = DistinctErrorLog(path)
    log.record(raise_and_catch(TimeoutError("client gone")), now_ms=1_700_000_000_000)
    assert path.exists()  # the first record is written at once
    script = (
        "import sys\n"
        "from aeronio.driver.error_log import load_error_log\n"
        "for o in load_error_log(sys.argv[1])[0]:\n"
        "    print(o.count, o.first_ms, o.last_ms, o.text.splitlines()[0])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "1 1700000000000 1700000000000 TimeoutError: client gone\n"
    assert [p.name for p in tmp_path.iterdir()] == ["errors.json"]  # no temporary left over


def test_writes_are_throttled_until_flush_or_interval(tmp_path):
    path = tmp_path / "errors.json"
    log = DistinctErrorLog(path, flush_interval_ms=100)
    log.record("first", now_ms=10_000)
    log.record("second", now_ms=10_050)  # within 100 ms of the last write: kept in memory
    assert [o.text for o in load_error_log(path)[0]] == ["first"]
    assert not log.maybe_flush(10_099)
    assert log.maybe_flush(10_100)
    assert [o.text for o in load_error_log(path)[0]] == ["first", "second"]
    assert not log.maybe_flush(20_000)  # nothing new to write
    log.record("first", now_ms=10_150)
    log.flush()
    assert load_error_log(path)[0][0] == ErrorObservation(2, 10_000, 10_150, "first")


def test_a_reader_never_sees_a_torn_file(tmp_path):
    path = tmp_path / "errors.json"
    script = (
        "import sys\n"
        "from aeronio.driver.error_log import DistinctErrorLog\n"
        f"from {__name__} import _word\n"
        "log = DistinctErrorLog(sys.argv[1], flush_interval_ms=0)\n"
        "for i in range(1000):\n"
        "    log.record('error ' + _word(i % 100) + ' ' + 'x' * 500)\n"
        "log.flush()\n"
    )
    writer = subprocess.Popen([sys.executable, "-c", script, str(path)])
    reads = 0
    try:
        while writer.poll() is None:
            load_error_log(path)[0]  # raises ErrorLogError on a partial file
            reads += 1
    finally:
        writer.wait(timeout=60)
    assert writer.returncode == 0
    observations = load_error_log(path)[0]
    assert len(observations) == 100
    assert sum(o.count for o in observations) == 1000
    assert reads > 0


def _word(i: int) -> str:
    """A distinct text without digits for each i (numbers would be abstracted)."""
    return "".join(chr(ord("a") + int(digit)) for digit in str(i))


def test_cap_drops_new_distinct_errors_and_counts_them(tmp_path):
    path = tmp_path / "errors.json"
    log = DistinctErrorLog(path)
    for i in range(1005):
        log.record(f"error {_word(i)}", now_ms=i)
    log.record("error d", now_ms=2000)  # a known error is still counted
    log.flush()
    observations = load_error_log(path)[0]
    assert len(observations) == 1000 == len(log)
    assert observations[-1].text == f"error {_word(999)}"
    assert observations[3] == ErrorObservation(2, 3, 2000, "error d")
    assert log.dropped == 5
    assert json.loads(path.read_text())["dropped"] == 5


def test_variants_differing_in_numbers_are_one_error_and_leave_room(tmp_path):
    log = DistinctErrorLog(tmp_path / "errors.json", max_errors=3)
    for i in range(500):
        log.record(f"control frame of {1048577 + i} bytes exceeds 1048576", now_ms=i)
        log.record(ValueError(f"no subscription {i} on 0x{i:x}, 10.0.0.{i % 256}:{4000 + i}"))
    log.record(ValueError("stream_id is not int32"), now_ms=600)
    log.record(ValueError("stream_id is not int64"), now_ms=700)  # a word, not a number
    log.flush()
    observations = log.observations()
    assert [(o.count, o.text) for o in observations] == [
        (500, "control frame of 1048577 bytes exceeds 1048576"),
        (500, "ValueError: no subscription 0 on 0x0, 10.0.0.0:4000"),
        (1, "ValueError: stream_id is not int32"),
    ]
    assert observations[0].last_ms == 499
    assert log.dropped == 1


def test_a_long_message_is_cut(tmp_path):
    log = DistinctErrorLog(tmp_path / "errors.json")
    long = "channel " + "x" * 1_000_000
    log.record(long)
    log.record(raise_and_catch(ValueError(long)))
    (plain, raised) = log.observations()
    assert plain.text == long[:MAX_MESSAGE_LENGTH] + f"... ({len(long) - MAX_MESSAGE_LENGTH} more)"
    assert raised.text.startswith(f"ValueError: {long[:MAX_MESSAGE_LENGTH]}... (")
    assert len(raised.text) < 3 * MAX_MESSAGE_LENGTH  # the traceback's last line cut too


def test_missing_file_is_an_empty_log(tmp_path):
    assert load_error_log(tmp_path / "errors.json")[0] == []


@pytest.mark.parametrize(
    "content",
    [b"", b"{not json", b"[]", b'{"version": 1, "dropped": 0}', b'{"version": 1, "errors": 3}'],
)
def test_corrupt_file_is_a_clear_error(tmp_path, content):
    path = tmp_path / "errors.json"
    path.write_bytes(content)
    with pytest.raises(ErrorLogError, match=r"error log .*errors\.json.* is corrupt"):
        load_error_log(path)[0]


def test_other_version_is_refused(tmp_path):
    path = tmp_path / "errors.json"
    path.write_text('{"version": 99, "dropped": 0, "errors": []}')
    with pytest.raises(ErrorLogError, match="version 99"):
        load_error_log(path)[0]


def test_record_survives_an_unwritable_directory(tmp_path):
    log = DistinctErrorLog(tmp_path / "gone" / "errors.json")
    log.record("driver dir was removed")  # must not raise inside the driver's error path
    with pytest.raises(OSError):
        log.flush()
    assert not os.path.exists(tmp_path / "gone")
