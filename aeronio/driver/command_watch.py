"""CommandWatch: the driver looks for commands that no doorbell announces only while a client
that rings none may be there.

aeronio's clients ring the driver's doorbell with each command they write into cnc.dat's
to-driver ring buffer, so a parked driver sleeps until one does. Aeron's clients (C, Java, C++,
pyaeron) ring none: for them a ChangeWatcher thread looks at the ring buffer every
`command_watch_interval_ns` (10 ms), the bound on how long their command waits. Each look is a
wake-up of a parked process (about 50 µs of CPU here, 0.5% of a core at 100 a second), so the
watcher looks only while the rules below say such a client may be there, and sleeps otherwise.

Rules
- Opened: a client maps cnc.dat by opening it. From each open of cnc.dat (inotify) on, the driver
  looks, until a scan settles who maps it.
- Settled: once every open is closed (Aeron's clients close the file once mapped), or a second
  after the latest open (a client maps what it opened within it; Python's mmap keeps the file
  open), a scan of /proc settles who maps cnc.dat: a process that maps it writable and has not
  loaded aeronio's core (`.../aeronio/_core.*`) may write commands without ringing. While one
  does, the driver looks; otherwise it stops.
- Stale: a scan begun before the latest open settles nothing; another follows.
- Gone: while a foreign writer maps it, a scan repeats after 1 s, doubling to 8 s, to see it go.
- Always: without inotify (its per-user limit reached), once the file's watch is lost, or with
  `command_watch_always`, the driver looks always.

Not seen by the scan, so waiting up to the conductor's timer (`timer_interval_ns`, 1 s) unless
`command_watch_always` is set: an Aeron client in a process that also loaded aeronio's core, and
one in a process whose /proc maps the driver may not read (another user's, where cnc.dat's mode
lets that user write it).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import struct
from collections.abc import Callable, Iterator

from aeronio._core import AtomicBuffer, ChangeWatcher, inotify_watch

# inotify's event masks (linux/inotify.h)
IN_CLOSE_WRITE = 0x0000_0008
IN_CLOSE_NOWRITE = 0x0000_0010
IN_OPEN = 0x0000_0020
IN_Q_OVERFLOW = 0x0000_4000
IN_IGNORED = 0x0000_8000
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name)

SETTLE_S = 1.0
RESCAN_FIRST_S = 1.0
RESCAN_MAX_S = 8.0
AERONIO_CORE_MARK = f"{os.sep}aeronio{os.sep}_core.".encode()


class WatchRules:
    """The rules above as a state machine without I/O: fed inotify's events, the settling
    time and the scans' verdicts, it says whether to look (`watching`) and when to scan."""

    def __init__(self) -> None:
        self.opened = 0  # opens of cnc.dat not yet closed
        self.settling = False  # within SETTLE_S of the latest open
        self.generation = 0  # moves at each open: older scans are stale
        self.foreign: bool | None = None  # the last settled scan's verdict; None: to settle
        self.scanning = False
        self.always = False
        self._rescan_s = RESCAN_FIRST_S

    @property
    def watching(self) -> bool:
        return self.always or self.foreign is not False

    @property
    def scan_wanted(self) -> bool:
        if self.always or self.scanning or self.foreign is not None:
            return False
        return not self.opened or not self.settling

    def on_open(self) -> None:
        """cnc.dat opened: the caller calls `on_settled` SETTLE_S after the latest open."""
        self.opened += 1
        self.settling = True
        self.generation += 1
        self.foreign = None
        self._rescan_s = RESCAN_FIRST_S

    def on_close(self) -> None:
        self.opened = max(0, self.opened - 1)  # opens before the watch began close unmatched

    def on_settled(self) -> None:
        self.settling = False

    def on_overflow(self) -> None:
        """inotify dropped events: who has it open is unknown, a scan settles it."""
        self.opened = 0
        self.settling = False
        self.generation += 1
        self.foreign = None

    def look_always(self) -> None:
        """No inotify, its watch lost, or asked for: look for good."""
        self.always = True

    def begin_scan(self) -> int:
        """A scan starts: returns the generation to hand back to `end_scan`."""
        self.scanning = True
        return self.generation

    def end_scan(self, generation: int, foreign: bool) -> float | None:
        """A scan's verdict; returns the seconds after which to rescan (a foreign writer maps
        cnc.dat), else None."""
        self.scanning = False
        if generation != self.generation:
            return None  # stale: `scan_wanted` asks for another
        self.foreign = foreign
        if not foreign:
            return None
        delay, self._rescan_s = self._rescan_s, min(self._rescan_s * 2, RESCAN_MAX_S)
        return delay

    def on_rescan_due(self) -> None:
        if self.foreign:
            self.foreign = None


def foreign_writers(path: str) -> list[int]:
    """The processes that map `path` writable and shared without aeronio's core loaded, by pid,
    as far as /proc shows them (processes whose maps this one may not read are left out)."""
    st = os.stat(path)
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}".encode()
    inode = str(st.st_ino).encode()
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/maps", "rb") as f:
                maps = f.read()
        except OSError:
            continue  # gone, or not ours to read
        if inode not in maps:
            continue
        writes = aeronio = False
        for line in maps.splitlines():
            fields = line.split(maxsplit=5)  # range perms offset device inode [path]
            if len(fields) < 5:
                continue
            if fields[4] == inode and fields[3] == device and fields[1][1:2] == b"w":
                writes = True
            elif len(fields) == 6 and AERONIO_CORE_MARK in fields[5]:
                aeronio = True
        if writes and not aeronio:
            pids.append(int(entry.name))
    return pids


class CommandWatch:
    """The driver's ChangeWatcher on the to-driver ring buffer's `positions` (its tail against
    its head), paused and resumed by `WatchRules` from inotify's events on cnc.dat and scans of
    /proc (on a worker thread); `always` keeps it looking. `on_written` runs on the loop when a
    look found unread commands."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        cnc_path: str,
        positions: tuple[AtomicBuffer, int, int],
        interval_ns: int,
        on_written: Callable[[], object],
        always: bool = False,
    ) -> None:
        self._loop = loop
        self._path = cnc_path
        self._on_written = on_written
        self.rules = WatchRules()
        self._rescan: asyncio.TimerHandle | None = None
        self._settle: asyncio.TimerHandle | None = None
        self._scan: asyncio.Future | None = None
        self._eventfd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        loop.add_reader(self._eventfd, self._on_signal)
        self.watcher = ChangeWatcher(*positions, interval_ns, self._eventfd)
        try:
            self._inotify: int | None = inotify_watch(
                cnc_path, IN_OPEN | IN_CLOSE_WRITE | IN_CLOSE_NOWRITE
            )
        except OSError:
            self._inotify = None
            self.rules.look_always()
        else:
            loop.add_reader(self._inotify, self._on_events, self._inotify)
        if always:
            self.rules.look_always()
        self.watcher.start()  # looking, until the first scan settles who maps cnc.dat
        self._apply()

    @property
    def watching(self) -> bool:
        return self.watcher.active

    def _on_signal(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.eventfd_read(self._eventfd)
        self._on_written()

    def _on_events(self, inotify: int) -> None:
        try:
            data = os.read(inotify, 64 * 1024)
        except BlockingIOError:
            return
        for offset in _event_offsets(data):
            _, mask, _, _ = _EVENT.unpack_from(data, offset)
            if mask & IN_Q_OVERFLOW:
                self.rules.on_overflow()
            if mask & IN_OPEN:
                self.rules.on_open()
                if self._settle is not None:
                    self._settle.cancel()
                self._settle = self._loop.call_later(SETTLE_S, self._on_settled)
            if mask & (IN_CLOSE_WRITE | IN_CLOSE_NOWRITE):
                self.rules.on_close()
            if mask & IN_IGNORED:
                self.rules.look_always()
        self._apply()

    def _apply(self) -> None:
        """Make the watcher and the scans follow the rules."""
        if self.rules.watching:
            if not self.watcher.active:
                self.watcher.resume()
        elif self.watcher.active:
            self.watcher.pause()
        if self.rules.scan_wanted:
            generation = self.rules.begin_scan()
            self._scan = self._loop.run_in_executor(None, foreign_writers, self._path)
            self._scan.add_done_callback(lambda scan: self._on_scanned(scan, generation))

    def _on_scanned(self, scan: asyncio.Future, generation: int) -> None:
        if self._scan is not scan:
            return  # closed meanwhile
        self._scan = None
        try:
            foreign = bool(scan.result())
        except OSError:
            foreign = True  # cnc.dat unreadable: look, and try again later
        delay = self.rules.end_scan(generation, foreign)
        if delay is not None:
            if self._rescan is not None:
                self._rescan.cancel()
            self._rescan = self._loop.call_later(delay, self._on_rescan_due)
        self._apply()

    def _on_settled(self) -> None:
        self._settle = None
        self.rules.on_settled()
        self._apply()

    def _on_rescan_due(self) -> None:
        self._rescan = None
        self.rules.on_rescan_due()
        self._apply()

    def close(self) -> None:
        self.watcher.close()
        self._scan = None
        for timer in (self._rescan, self._settle):
            if timer is not None:
                timer.cancel()
        self._rescan = self._settle = None
        for fd in (self._inotify, self._eventfd):
            if fd is not None:
                with contextlib.suppress(Exception):
                    self._loop.remove_reader(fd)
                os.close(fd)
        self._inotify = None


def _event_offsets(data: bytes) -> Iterator[int]:
    """The offsets of the inotify events in one read."""
    offset = 0
    while offset + _EVENT.size <= len(data):
        yield offset
        offset += _EVENT.size + _EVENT.unpack_from(data, offset)[3]
