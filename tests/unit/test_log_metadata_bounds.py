"""A log file is shared memory another process wrote: metadata no driver writes (a term length,
page size or MTU out of range, a length that is not the file's) is refused when the log is
mapped, naming the file and the field; a negative active term count or subscriber position
(shared counters that change under the mapping) still picks one of the three terms. Never a
crash, never a read or write outside the mapping.

The cases that crashed the process before run in a child process (`isolated`): a crash is a
failing exit status, not a dead test runner."""

from __future__ import annotations

import struct

import pytest

from aeronio.logbuffer import descriptor as d
from aeronio.logbuffer.log_buffers import LogBuffers
from tests.unit.test_frame_bounds import isolated

TERM_LENGTH = 64 * 1024
MTU = 1408


def make_log_file(path) -> None:
    LogBuffers.create(
        path, term_length=TERM_LENGTH, initial_term_id=5, session_id=1, stream_id=2, mtu=MTU
    ).close()


def put_metadata(path, offset: int, fmt: str, value: int) -> None:
    with open(path, "r+b") as f:
        f.seek(-d.LOG_META_DATA_LENGTH + offset, 2)
        f.write(struct.pack(fmt, value))


@pytest.mark.parametrize(
    ("offset", "value", "said"),
    [
        (d.LOG_TERM_LENGTH_OFFSET, 3 * 32 * 1024, "log metadata has an invalid term length 98304"),
        (d.LOG_TERM_LENGTH_OFFSET, 2**31 - 1, "log metadata has an invalid term length 2147483647"),
        (
            d.LOG_TERM_LENGTH_OFFSET,
            2 * TERM_LENGTH,
            "log buffer of 200704 bytes is not the 397312 that its term length 131072 and "
            "page size 4096 give",
        ),
        (d.LOG_PAGE_SIZE_OFFSET, 0, "log metadata has an invalid page size 0"),
        (d.LOG_PAGE_SIZE_OFFSET, 5000, "log metadata has an invalid page size 5000"),
        (
            d.LOG_PAGE_SIZE_OFFSET,
            1 << 20,
            "log buffer of 200704 bytes is not the 1048576 that its term length 65536 and "
            "page size 1048576 give",
        ),
        (d.LOG_MTU_LENGTH_OFFSET, 0, "log metadata has an invalid MTU 0"),
        (d.LOG_MTU_LENGTH_OFFSET, 32, "log metadata has an invalid MTU 32"),
        (d.LOG_MTU_LENGTH_OFFSET, -64, "log metadata has an invalid MTU -64"),
        (d.LOG_MTU_LENGTH_OFFSET, 1000, "log metadata has an invalid MTU 1000"),
        (d.LOG_MTU_LENGTH_OFFSET, 65536, "log metadata has an invalid MTU 65536"),
    ],
)
def test_metadata_no_driver_writes_is_refused_naming_the_file(tmp_path, offset, value, said):
    path = tmp_path / "log"
    make_log_file(path)
    put_metadata(path, offset, "<i", value)
    with pytest.raises(ValueError) as raised:
        LogBuffers.open(path)
    assert str(raised.value) == f"{path} is not a log buffer: {said}"


def test_a_log_file_longer_than_its_metadata_gives_is_refused(tmp_path):
    """The metadata is read at the file's end: a page more that repeats it is refused by the
    length its term length and page size give."""
    path = tmp_path / "log"
    make_log_file(path)
    with open(path, "r+b") as f:
        metadata = f.read()[-d.LOG_META_DATA_LENGTH :]
        f.seek(0, 2)
        f.write(metadata)
    with pytest.raises(
        ValueError, match=".* is not a log buffer: log buffer of 204800 bytes is not the 200704 "
    ):
        LogBuffers.open(path)


def test_the_largest_mtu_and_page_size_map(tmp_path):
    path = tmp_path / "log"
    LogBuffers.create(
        path,
        term_length=TERM_LENGTH,
        initial_term_id=5,
        session_id=1,
        stream_id=2,
        mtu=65504,
        page_size=64 * 1024,
    ).close()
    log = LogBuffers.open(path)
    assert (log.mtu, log.page_size, len(log.array)) == (65504, 64 * 1024, 4 * TERM_LENGTH)
    log.close()


OFFER_AT_NEGATIVE_TERM_COUNT = """
import struct, sys, tempfile
import numpy as np
from aeronio import _core
from aeronio.logbuffer import descriptor as d
from aeronio.logbuffer.log_buffers import LogBuffers
from tests.unit.test_log_metadata_bounds import TERM_LENGTH, make_log_file, put_metadata
with tempfile.TemporaryDirectory() as tmp:
    path = tmp + "/log"
    make_log_file(path)
    put_metadata(path, d.LOG_ACTIVE_TERM_COUNT_OFFSET, "<i", -1)
    # where index -1 would find its tail (the metadata's 8 bytes before), a tail matching it
    with open(path, "r+b") as f:
        f.seek(3 * TERM_LENGTH - 8)
        f.write(struct.pack("<q", d.pack_tail(4, 0)))
    log = LogBuffers.open(path)
    limit = np.zeros(8, dtype=np.uint8)
    _core.AtomicBuffer(limit).put_int64(0, 2**40)
    appender = _core.LogAppender(log.mapped, limit, 0, {exclusive})
    print(appender.try_offer(b"x" * 100))
"""


@pytest.mark.parametrize("exclusive", [False, True], ids=["concurrent", "exclusive"])
def test_an_offer_at_a_negative_active_term_count_stays_in_the_log(exclusive):
    """Term count -1 picked "term -1", before the mapping: the exclusive appender wrote there
    (SIGSEGV), the concurrent one returned position -65376. Now the count picks a term of the
    log (4294967295 % 3 == 0, whose tail is term id 5 at 0): the concurrent appender finds that
    tail is not the count's (ADMIN_ACTION, -3); the exclusive one appends the 100 bytes at term
    0's start (position 160)."""
    printed = isolated(OFFER_AT_NEGATIVE_TERM_COUNT.format(exclusive=exclusive))
    assert printed.split() == (["160"] if exclusive else ["-3"])


POLL_AT_NEGATIVE_POSITION = """
import tempfile
import numpy as np
from aeronio import _core
from aeronio.logbuffer.log_buffers import LogBuffers
from tests.unit.test_log_metadata_bounds import TERM_LENGTH, make_log_file
with tempfile.TemporaryDirectory() as tmp:
    path = tmp + "/log"
    make_log_file(path)
    log = LogBuffers.open(path)
    limit = np.zeros(8, dtype=np.uint8)
    _core.AtomicBuffer(limit).put_int64(0, 2**40)
    print(_core.LogAppender(log.mapped, limit, 0, False).try_offer(b"y" * 64))
    position = np.zeros(8, dtype=np.uint8)
    _core.AtomicBuffer(position).put_int64(0, {position})
    reader = _core.ImageReader(log.mapped, position, 0)
    print(reader.poll(lambda buffer, header: print(bytes(buffer).decode()), 10))
"""


@pytest.mark.parametrize("position", [-TERM_LENGTH, -1000 * TERM_LENGTH])
def test_a_poll_at_a_negative_position_stays_in_the_log(position):
    """A subscriber position counter set negative (by another process) picked "term -1" before
    the mapping (SIGSEGV); now a term of the log: (2**64 + position) >> 16 is 0 modulo 3 for
    both, so the frame at term 0's offset 0 is read."""
    printed = isolated(POLL_AT_NEGATIVE_POSITION.format(position=position))
    assert printed.split() == ["96", "y" * 64, "1"]
