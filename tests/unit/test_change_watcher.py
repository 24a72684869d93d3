"""ChangeWatcher: a thread without the GIL that signals an eventfd while shared memory shows
unread work (a ring buffer's tail past its head; a broadcast tail past what was seen)."""

import os
import select
import time

import numpy as np
import pytest

from aeronio._core import AtomicBuffer, ChangeWatcher

INTERVAL_NS = 2_000_000
QUIET_S = 0.1  # 50 looks


@pytest.fixture
def eventfd():
    fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
    yield fd
    os.close(fd)


def signals(fd: int, timeout: float) -> int:
    """The looks that signalled since the last read, after waiting up to `timeout` for one."""
    if not select.select([fd], [], [], timeout)[0]:
        return 0
    return os.eventfd_read(fd)


def signals_over(fd: int, seconds: float) -> int:
    """Every signal within `seconds` (however the loads fall)."""
    total, deadline = 0, time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        total += signals(fd, left)
    return total


def test_tail_past_head_signals_until_the_head_catches_up(eventfd):
    buffer = AtomicBuffer(np.zeros(64, dtype=np.uint8))
    watcher = ChangeWatcher(buffer, 0, 8, INTERVAL_NS, eventfd)
    watcher.start()
    try:
        assert signals_over(eventfd, QUIET_S) == 0
        buffer.put_int64_ordered(0, 64)  # a producer wrote a record
        assert signals(eventfd, 10.0) >= 1
        buffer.put_int64_ordered(8, 64)  # the consumer read it
        signals(eventfd, 0)  # a look that loaded the tail before the head moved may still signal
        assert signals_over(eventfd, QUIET_S) <= 1
    finally:
        watcher.close()


def test_tail_past_the_seen_value_signals_until_seen(eventfd):
    buffer = AtomicBuffer(np.zeros(64, dtype=np.uint8))
    buffer.put_int64_ordered(16, 7)
    watcher = ChangeWatcher(buffer, 16, -1, INTERVAL_NS, eventfd)  # 7 counts as seen
    watcher.start()
    try:
        assert signals_over(eventfd, QUIET_S) == 0
        buffer.put_int64_ordered(16, 40)
        assert signals(eventfd, 10.0) >= 1
        watcher.seen(40)
        signals(eventfd, 0)
        assert signals_over(eventfd, QUIET_S) <= 1
    finally:
        watcher.close()


def test_close_stops_the_thread_and_bad_arguments_are_refused(eventfd):
    buffer = AtomicBuffer(np.zeros(64, dtype=np.uint8))
    watcher = ChangeWatcher(buffer, 0, 8, INTERVAL_NS, eventfd)
    watcher.start()
    watcher.close()
    buffer.put_int64_ordered(0, 8)
    assert signals_over(eventfd, QUIET_S) == 0
    with pytest.raises(IndexError):
        ChangeWatcher(buffer, 64, 8, INTERVAL_NS, eventfd)
    with pytest.raises(ValueError, match="not aligned"):
        ChangeWatcher(buffer, 4, 8, INTERVAL_NS, eventfd)
    with pytest.raises(ValueError, match="interval_ns"):
        ChangeWatcher(buffer, 0, 8, 0, eventfd)


def test_paused_it_does_not_look_and_resumed_it_looks_at_once(eventfd):
    buffer = AtomicBuffer(np.zeros(64, dtype=np.uint8))
    watcher = ChangeWatcher(buffer, 0, 8, 3_600 * 1_000_000_000, eventfd)  # an hour apart
    watcher.start()
    try:
        assert watcher.active
        watcher.pause()
        assert not watcher.active
        buffer.put_int64_ordered(0, 64)  # unread work while paused
        assert signals_over(eventfd, QUIET_S) == 0
        watcher.resume()  # looks now, not in an hour
        assert watcher.active and signals(eventfd, 10.0) == 1
    finally:
        watcher.close()  # wakes the thread from its hour-long pause
