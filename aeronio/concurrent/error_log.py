"""Aeron's distinct error log (the error log buffer of cnc.dat): each distinct error once, with
its observation count and its first and last observation times, readable by any process while
the driver writes it.

Errors are told apart by type and message with their numbers abstracted ("frame of 9 bytes" and
"frame of 12 bytes" are one error, shown with the first text seen), so that variants of one
error do not fill the log and keep new errors out. The layout is Aeron's
(aeron_distinct_error_log.h, agrona's DistinctErrorLog)::

    records from offset 0, each 8-byte aligned, a zero length ends the log:
        @0   length                     i32  header + text; stored last, with release
        @4   observation count          i32  atomically incremented
        @8   last observation ms        i64  epoch ms, stored with release
        @16  first observation ms       i64
        @24  text                       UTF-8
"""

from __future__ import annotations

import re
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from aeronio._core import AtomicBuffer

__all__ = ["DistinctErrorLog", "ErrorObservation", "cut", "read_error_log"]

LENGTH_OFFSET = 0
OBSERVATION_COUNT_OFFSET = 4
LAST_OBSERVATION_OFFSET = 8
FIRST_OBSERVATION_OFFSET = 16
HEADER_LENGTH = 24
RECORD_ALIGNMENT = 8
MAX_MESSAGE_LENGTH = 16 * 1024


@dataclass(frozen=True, slots=True)
class ErrorObservation:
    """One distinct error: how often it was seen, first and last (epoch ms), and its text."""

    count: int
    first_ms: int
    last_ms: int
    text: str


def _epoch_ms() -> int:
    return time.time_ns() // 1_000_000


def _align(length: int) -> int:
    return (length + RECORD_ALIGNMENT - 1) & ~(RECORD_ALIGNMENT - 1)


# A number in a message: hexadecimal, or a run of digits not part of a word (`int32` stays).
_NUMBER = re.compile(r"0x[0-9a-fA-F]+|(?<![A-Za-z_])\d+")


def cut(text: str, limit: int) -> str:
    """`text`, or its first `limit` characters and how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more)"


def _describe(error: BaseException | str) -> tuple[tuple[str, str], str]:
    """The key an error is counted under (its type and message, numbers abstracted) and the
    text shown for it; a message over MAX_MESSAGE_LENGTH (quoting a long argument) is cut."""
    if isinstance(error, str):
        error = cut(error, MAX_MESSAGE_LENGTH)
        return ("", _NUMBER.sub("N", error)), error
    name, message = type(error).__name__, cut(str(error), MAX_MESSAGE_LENGTH)
    text = f"{name}: {message}" if message else name
    if error.__traceback__ is not None or error.__cause__ or error.__context__:
        trace = "".join(traceback.format_exception(error)).rstrip("\n")
        text += "\n" + cut(trace, MAX_MESSAGE_LENGTH)
    return (name, _NUMBER.sub("N", message)), text


class DistinctErrorLog:
    """The writer of a distinct error log over `buffer` (shared memory, zeroed when made).

    Thread-safe; readers in any process use `read_error_log`."""

    def __init__(self, buffer: memoryview | bytearray, clock: Callable[[], int] = _epoch_ms):
        self._view = memoryview(buffer).cast("B")
        self._atomic = AtomicBuffer(self._view)
        self._clock = clock
        self._lock = threading.Lock()
        self._offsets: dict[tuple[str, str], int] = {}
        self._next_offset = 0
        self.dropped = 0  # observations of new distinct errors that did not fit

    def record(self, error: BaseException | str) -> bool:
        """Count one observation of error (an exception or a message) now; False if it is a
        new distinct error and the log has no room left for it (counted in `dropped`)."""
        key, text = _describe(error)
        atomic = self._atomic
        with self._lock:
            now = self._clock()
            offset = self._offsets.get(key)
            if offset is None:
                offset = self._append(text, now)
                if offset is None:
                    self.dropped += 1
                    return False
                self._offsets[key] = offset
                return True  # published with this observation counted
        atomic.get_and_add_int32(offset + OBSERVATION_COUNT_OFFSET, 1)
        atomic.put_int64_ordered(offset + LAST_OBSERVATION_OFFSET, now)
        return True

    def _append(self, text: str, now: int) -> int | None:
        data = text.encode("utf-8", "replace")
        offset = self._next_offset
        length = HEADER_LENGTH + len(data)
        if offset + length > len(self._view):
            return None
        start = offset + HEADER_LENGTH
        self._view[start : start + len(data)] = data
        self._atomic.put_int64(offset + FIRST_OBSERVATION_OFFSET, now)
        # The first observation counted and timed before the record is published: a reader
        # never sees a record with a count or a last time of 0.
        self._atomic.put_int64(offset + LAST_OBSERVATION_OFFSET, now)
        self._atomic.put_int32(offset + OBSERVATION_COUNT_OFFSET, 1)
        self._next_offset = _align(offset + length)
        self._atomic.put_int32_ordered(offset + LENGTH_OFFSET, length)  # publishes it
        return offset

    def __len__(self) -> int:
        return len(self._offsets)


def read_error_log(buffer: memoryview | bytearray, since_ms: int = 0) -> list[ErrorObservation]:
    """The distinct errors in an error log buffer last observed at or after since_ms, in order
    of first observation."""
    view = memoryview(buffer).cast("B")
    atomic = AtomicBuffer(view)
    observations = []
    offset, end = 0, len(view)
    while offset + HEADER_LENGTH <= end:
        length = atomic.get_int32_volatile(offset + LENGTH_OFFSET)
        if length <= 0:
            break
        if length < HEADER_LENGTH or offset + length > end:
            raise ValueError(f"error log record at {offset} has a bad length {length}")
        last = atomic.get_int64_volatile(offset + LAST_OBSERVATION_OFFSET)
        if last >= since_ms:
            text = bytes(view[offset + HEADER_LENGTH : offset + length])
            observations.append(
                ErrorObservation(
                    atomic.get_int32_volatile(offset + OBSERVATION_COUNT_OFFSET),
                    atomic.get_int64(offset + FIRST_OBSERVATION_OFFSET),
                    last,
                    text.decode("utf-8", "replace"),
                )
            )
        offset += _align(length)
    return observations
