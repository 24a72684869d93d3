"""Storage for a new log, checked before it is made (Aeron's RawLogFactory.checkStorage), and
a sparse log's pages, allocated before its writers reach them (LogPages).

Rules
- A log needs its whole length: an allocated log takes it at once, a sparse one as it fills, and
  on a tmpfs (/dev/shm) it is memory. So the space a new log may count on is the file system's
  usable space, less what the logs already in the driver directory will still take as they fill
  (each file's length less its allocated blocks), and on a tmpfs no more than the memory the
  kernel says is available (MemAvailable): a tmpfs may be larger than memory.
- Less than the new log's length: refused with StorageSpaceError, naming the directory, the bytes
  needed and the bytes left; nothing is created, and the driver goes on serving.
- At or below `low_storage_warning_threshold` left after it (Aeron's 160 MiB): made, and the
  warning counted (LOW_STORAGE_WARNINGS) and logged.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

from aeronio.errors import StorageSpaceError
from aeronio.logbuffer.descriptor import HEADER_LENGTH, PARTITION_COUNT, index_by_position
from aeronio.logbuffer.log_buffers import LogBuffers
from aeronio.protocol.frames import FRAME_ALIGNMENT
from aeronio.protocol.limits import PAGE_MIN_SIZE, max_message_length

log = logging.getLogger("aeronio.driver")


def check(driver_dir: str, directory: str, length: int, low_threshold: int) -> bool:
    """Raise StorageSpaceError if a log of `length` bytes does not fit in `directory` (inside
    `driver_dir`); True when what would be left is at or below `low_threshold`."""
    left = usable_space(driver_dir, directory)
    if left < length:
        raise StorageSpaceError(
            f"insufficient usable storage for a new log of {length:,} bytes in {directory}: "
            f"{max(left, 0):,} bytes left"
        )
    if left - length <= low_threshold:
        log.warning(
            "space is running low in %s: %s bytes left after a new log of %s (threshold %s)",
            directory, f"{left - length:,}", f"{length:,}", f"{low_threshold:,}",
        )  # fmt: skip
        return True
    return False


def usable_space(driver_dir: str, directory: str) -> int:
    """What a new log in `directory` may count on (see the rules above)."""
    stats = os.statvfs(directory)
    usable = stats.f_bavail * stats.f_frsize
    if _is_tmpfs(directory):
        usable = min(usable, _mem_available())
    return usable - _still_to_take(driver_dir)


def _still_to_take(driver_dir: str) -> int:
    """The bytes the files under `driver_dir` will still allocate as they fill."""
    total = 0
    for root, _, files in os.walk(driver_dir):
        for name in files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            total += max(0, st.st_size - st.st_blocks * 512)
    return total


def _is_tmpfs(path: str) -> bool:
    """Whether `path` is on a tmpfs: the longest mount point above it in /proc/self/mounts."""
    real = os.path.realpath(path)
    best, kind = "", ""
    try:
        with open("/proc/self/mounts") as mounts:
            for line in mounts:
                fields = line.split()
                point = fields[1].replace("\\040", " ")
                inside = real == point or real.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best):
                    best, kind = point, fields[2]
    except OSError:
        return False
    return kind == "tmpfs"


def _mem_available() -> int:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 1 << 62  # unknown: the file system's figure decides


class LogPages:
    """The pages of a sparse log, allocated (fallocate) before any writer or reader can touch
    them: on a full file system a page first touched through the mapping is a SIGBUS, in the
    driver (an image's receiver, a sender) or in a client (a publisher, a subscriber).

    Rules
    - Every writer is held by a limit the driver moves: a publication's publishers by its
      publisher limit (an append admitted below it may run past it by `append_reach`), an
      image's receiver by its rebuilder's limit. The driver moves a limit only as far as the
      pages below `allocated_to`, so no one writes, or reads a frame header, in a hole. (Not
      covered: concurrent publishers that all passed the limit check at once, each appending
      a longest message past it: `append_reach` covers one.)
    - Allocation follows positions from the log's start page; once three terms past it every
      page is allocated and nothing is done again. A log not sparse is allocated when made.
    - The file system full: the limit stays where the pages end, the writers are held there
      (back pressure), `report` is told once, and the next `allocate` tries again (no sooner
      than RETRY_NS after a failure)."""

    RETRY_NS = 100_000_000
    ALL = 1 << 63  # allocated_to once every page is

    def __init__(self, log: LogBuffers, position: int, report: Callable[[str], None]):
        self._path = log.path
        self._term_length = log.term_length
        self._report = report
        start = position - position % PAGE_MIN_SIZE
        self.allocated_to = start if log.params.sparse else self.ALL
        self._whole_at = start + PARTITION_COUNT * log.term_length
        self._failed_ns: int | None = None

    @property
    def retry_ns(self) -> int | None:
        """When `allocate` tries again after a failure (monotonic ns); None: none failed."""
        return None if self._failed_ns is None else self._failed_ns + self.RETRY_NS

    def allocate(self, position: int) -> int:
        """Allocate the pages up to `position`'s, included; where the allocated pages end
        (below `position` when the file system has no room)."""
        end = min(-(-(position + 1) // PAGE_MIN_SIZE) * PAGE_MIN_SIZE, self._whole_at)
        if end <= self.allocated_to:
            return self.allocated_to
        now_ns = time.monotonic_ns()
        if self._failed_ns is not None and now_ns - self._failed_ns < self.RETRY_NS:
            return self.allocated_to
        mask = self._term_length - 1
        try:
            with open(self._path, "r+b") as f:
                while self.allocated_to < end:
                    at = self.allocated_to
                    length = min(end - at, self._term_length - (at & mask))
                    offset = index_by_position(at, self._term_length) * self._term_length
                    os.posix_fallocate(f.fileno(), offset + (at & mask), length)
                    self.allocated_to += length
        except OSError as e:
            if self._failed_ns is None:
                self._report(
                    f"no room for the pages of {self._path} up to position {end:,}: {e.strerror}; "
                    f"its writers are held at position {self.allocated_to:,} until there is"
                )
            self._failed_ns = now_ns
            return self.allocated_to
        self._failed_ns = None
        if self.allocated_to == self._whole_at:
            self.allocated_to = self.ALL
        return self.allocated_to


def append_reach(log: LogBuffers) -> int:
    """How far past a publisher limit an append admitted below it may touch the log: the
    longest message, in fragments of the MTU (each with its header and alignment), and the
    header a reader then looks at."""
    longest = max_message_length(log.term_length)
    fragments = -(-longest // (log.mtu - HEADER_LENGTH))
    return longest + fragments * (HEADER_LENGTH + FRAME_ALIGNMENT) + HEADER_LENGTH
