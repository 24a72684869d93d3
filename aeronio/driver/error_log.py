"""The driver's distinct error log, like Aeron's: each distinct error once, with a count and
its first and last observation times, persisted as `errors.json` in the driver directory.
Errors are told apart by type and message with their numbers abstracted ("frame of 9 bytes" and
"frame of 12 bytes" are one error, shown with the first text seen), so that variants of one
error do not fill the log and keep new errors out.

The driver is the only writer. `record` is cheap: it updates memory and writes the file at
most every `flush_interval_ms` (call `maybe_flush` from the duty cycle and `flush` on close).
The file is replaced atomically, so a reader in another process sees a whole log or the
previous one, never a torn write.
"""

from __future__ import annotations

import os
import re
import time
import traceback
from typing import NamedTuple

import msgspec

from aeronio.errors import AeronError

MAX_DISTINCT_ERRORS = 1000
MAX_MESSAGE_LENGTH = 16 * 1024
FLUSH_INTERVAL_MS = 100
FORMAT_VERSION = 1


class ErrorLogError(AeronError, ValueError):
    """An error log file that cannot be read (not JSON, or not an aeronio error log)."""


class ErrorObservation(NamedTuple):
    """One distinct error: how often it was seen, first and last (epoch ms), and its text."""

    count: int
    first_ms: int
    last_ms: int
    text: str


class _Entry(msgspec.Struct):
    count: int
    first_ms: int
    last_ms: int
    text: str


class _LogFile(msgspec.Struct):
    version: int
    dropped: int
    errors: list[_Entry]


def _observation(entry: _Entry) -> ErrorObservation:
    return ErrorObservation(entry.count, entry.first_ms, entry.last_ms, entry.text)


def _epoch_ms() -> int:
    return time.time_ns() // 1_000_000


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
    """Distinct errors observed by the driver, persisted to `path` (one writer)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        max_errors: int = MAX_DISTINCT_ERRORS,
        flush_interval_ms: int = FLUSH_INTERVAL_MS,
    ):
        self.path = os.fspath(path)
        self.max_errors = max_errors
        self.flush_interval_ms = flush_interval_ms
        self.dropped = 0  # observations of new distinct errors beyond max_errors
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._dirty = False
        self._last_flush_ms: int | None = None

    def record(self, error: BaseException | str, now_ms: int | None = None) -> None:
        """Count one observation of error (an exception or a message) at now_ms (epoch ms).

        Persists at once unless the file was written in the last flush interval; never
        raises on I/O (a failed write is retried by the next maybe_flush)."""
        now_ms = _epoch_ms() if now_ms is None else now_ms
        key, text = _describe(error)
        entry = self._entries.get(key)
        if entry is not None:
            entry.count += 1
            entry.last_ms = max(entry.last_ms, now_ms)
        elif len(self._entries) < self.max_errors:
            self._entries[key] = _Entry(1, now_ms, now_ms, text)
        else:
            self.dropped += 1
        self._dirty = True
        try:
            self.maybe_flush(now_ms)
        except OSError:
            pass

    def maybe_flush(self, now_ms: int | None = None) -> bool:
        """Write the file if it changed and the flush interval has passed; True if written."""
        if not self._dirty:
            return False
        now_ms = _epoch_ms() if now_ms is None else now_ms
        last = self._last_flush_ms
        if last is not None and 0 <= now_ms - last < self.flush_interval_ms:
            return False
        self.flush()
        self._last_flush_ms = now_ms
        return True

    def flush(self) -> None:
        """Write the whole log now: to a temporary file, then renamed over `path`."""
        data = msgspec.json.encode(
            _LogFile(FORMAT_VERSION, self.dropped, list(self._entries.values()))
        )
        tmp = f"{self.path}.{os.getpid()}.tmp"
        try:
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        self._dirty = False
        self._last_flush_ms = _epoch_ms()

    def observations(self) -> list[ErrorObservation]:
        """The distinct errors so far, in order of first observation."""
        return [
            ErrorObservation(e.count, e.first_ms, e.last_ms, e.text) for e in self._entries.values()
        ]

    def __len__(self) -> int:
        return len(self._entries)


def load_error_log(path: str | os.PathLike[str]) -> tuple[list[ErrorObservation], int]:
    """The observations in an error log file and the count of dropped ones; ([], 0) if the
    file does not exist. Raises ErrorLogError for a file that is not a valid error log."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return [], 0
    try:
        log = msgspec.json.decode(data, type=_LogFile)
    except msgspec.DecodeError as e:
        raise ErrorLogError(f"error log {os.fspath(path)!r} is corrupt: {e}") from None
    if log.version != FORMAT_VERSION:
        raise ErrorLogError(
            f"error log {os.fspath(path)!r} has version {log.version}, expected {FORMAT_VERSION}"
        )
    return [_observation(e) for e in log.errors], log.dropped
