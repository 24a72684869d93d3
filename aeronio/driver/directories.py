"""Driver directories left behind by drivers that died: found by their lock, removed.

A live driver holds an flock on its directory's `driver.lock` for its whole life, and the kernel
drops it when the process dies, SIGKILL included. So a directory under the default base whose
lock can be taken belongs to no driver. Rules:

- Only directories named `aeronio-*` (the embedded drivers' default names) directly under the
  base are looked at, and only those with a lock file: nothing else is ours to remove.
- Whether the owner lives is decided by the lock, never by a pid: pids are reused.
- A lock file written less than YOUNG_S ago is left alone even when free: a driver may be between
  creating its directory and locking it.
- The lock is held while the directory is removed, so no driver can claim it meanwhile.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field

from aeronio.protocol.layout import LOCK_FILE

PREFIX = "aeronio-"
YOUNG_S = 5.0
log = logging.getLogger("aeronio.driver")


def default_base() -> str:
    """Where embedded drivers make their directories: /dev/shm, or the temp dir without it."""
    return "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


@dataclass
class Cleaning:
    """What a scan found: directories removed (with the bytes they held), directories of live
    drivers (with the pid the lock file names), and free ones too young to judge."""

    removed: list[tuple[str, int]] = field(default_factory=list)
    live: list[tuple[str, str]] = field(default_factory=list)
    young: list[str] = field(default_factory=list)


def remove_dead_driver_dirs(base: str | None = None) -> Cleaning:
    """Remove every `aeronio-*` directory under `base` (default_base()) whose driver is dead."""
    base = default_base() if base is None else base
    found = Cleaning()
    try:
        entries = [e for e in os.scandir(base) if e.name.startswith(PREFIX)]
    except OSError as e:
        log.warning("cannot scan %s for dead drivers' directories: %s", base, e)
        return found
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            try:
                _judge(entry.path, found)
            except OSError as e:  # another cleaner, permissions: never fatal
                log.warning("cannot check driver directory %s: %s", entry.path, e)
    for path, size in found.removed:
        log.info("removed %s (%d bytes): its driver is gone", path, size)
    return found


def is_live(path: str) -> bool:
    """Whether a driver holds the lock of the driver directory `path` (False without one)."""
    try:
        fd = os.open(os.path.join(path, LOCK_FILE), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also drops a lock taken here
    return False


def _judge(path: str, found: Cleaning) -> None:
    lock_path = os.path.join(path, LOCK_FILE)
    try:
        fd = os.open(lock_path, os.O_RDWR)
    except FileNotFoundError:
        return  # not a driver directory (or not one yet)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            found.live.append((path, pid))
            return
        if time.time() - os.fstat(fd).st_mtime < YOUNG_S:
            found.young.append(path)
            return
        size = _size(path)
        shutil.rmtree(path)
        found.removed.append((path, size))
    finally:
        os.close(fd)


def _size(path: str) -> int:
    """The bytes the files under `path` take (allocated blocks, as tmpfs counts them)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total
