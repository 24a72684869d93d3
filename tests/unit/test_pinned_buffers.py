"""An address the core keeps is pinned: the buffer it came from cannot be freed or moved under
it. An `AtomicBuffer`, a `MappedLog`, a reader's position and an appender's limit hold their
buffer's export while they live, so the owner's close or resize raises BufferError instead of
leaving a dangling address (the next access a segfault); once the holder is gone the owner is
free again."""

from __future__ import annotations

import gc
import mmap

import numpy as np
import pytest

from aeronio import _core
from aeronio.logbuffer.log_buffers import LogBuffers


def freeing_attempts():
    """Ways an owner frees or moves its memory: (name, make the owner, free it)."""

    def grow(owner):
        owner.extend(bytes(1 << 20))  # a realloc moves the bytes

    def close(owner):
        owner.close()

    return [
        ("a bytearray resized", lambda n: bytearray(n), grow),
        ("an mmap closed", lambda n: mmap.mmap(-1, n), close),
    ]


attempts = pytest.mark.parametrize(
    ("make", "free"),
    [(make, free) for _, make, free in freeing_attempts()],
    ids=[name for name, _, _ in freeing_attempts()],
)


@attempts
def test_an_atomic_buffers_memory_cannot_be_freed_under_it(make, free):
    owner = make(4096)
    atomic = _core.AtomicBuffer(owner)
    atomic.put_int64_ordered(8, 77)
    with pytest.raises(BufferError):
        free(owner)
    assert atomic.get_int64_volatile(8) == 77  # still the owner's memory
    del atomic
    gc.collect()
    free(owner)


def test_a_memoryview_under_an_atomic_buffer_released_leaves_its_memory_pinned():
    """A view handed out (a broadcast receiver's buffer) and released by its user: the mapping
    behind it still cannot be closed while the atomic buffer lives."""
    mapped = mmap.mmap(-1, 4096)
    view = memoryview(mapped)
    atomic = _core.AtomicBuffer(view)
    view.release()
    with pytest.raises(BufferError):
        mapped.close()
    atomic.put_int64_ordered(0, 5)
    assert atomic.get_int64_volatile(0) == 5
    del atomic
    gc.collect()
    mapped.close()


def log_image(tmp_path) -> bytearray:
    """A log file's bytes as a driver made them, in a bytearray."""
    path = tmp_path / "pinned.logbuffer"
    LogBuffers.create(
        path, term_length=64 * 1024, initial_term_id=3, session_id=1, stream_id=2, mtu=1408
    ).close()
    return bytearray(path.read_bytes())


def test_a_mapped_logs_memory_cannot_be_freed_under_it(tmp_path):
    owner = log_image(tmp_path)
    log = _core.MappedLog(owner)
    with pytest.raises(BufferError):
        owner.extend(bytes(1 << 20))
    del log
    gc.collect()
    owner.extend(b"\0")


@attempts
def test_a_readers_position_cannot_be_freed_under_it(tmp_path, make, free):
    log = _core.MappedLog(np.frombuffer(log_image(tmp_path), dtype=np.uint8))
    position = make(64)
    reader = _core.ImageReader(log, position, 8)
    with pytest.raises(BufferError):
        free(position)
    del reader
    gc.collect()
    free(position)


@attempts
def test_an_appenders_limit_cannot_be_freed_under_it(tmp_path, make, free):
    log = _core.MappedLog(np.frombuffer(log_image(tmp_path), dtype=np.uint8))
    limit = make(64)
    _core.AtomicBuffer(limit).put_int64(8, 1 << 20)
    appender = _core.LogAppender(log, limit, 8, False)
    assert appender.try_offer(b"pinned") > 0
    with pytest.raises(BufferError):
        free(limit)
    del appender
    gc.collect()
    free(limit)
