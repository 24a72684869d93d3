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
