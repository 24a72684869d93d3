"""Storage for a new log, checked before it is made (Aeron's RawLogFactory.checkStorage).

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

from aeronio.errors import StorageSpaceError

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
