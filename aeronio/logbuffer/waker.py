"""Cross-process wake-ups: a process parked on a log is woken by a datagram from the writer.

Each process has one Waker: a random 63-bit wake id and a Unix datagram socket bound to the
abstract address `aeronio-wake-<id>`, read by its event loop(s). A task that parks on a log
counts itself in the log's data or space waiter count and puts the wake id in a free slot of the
log metadata (see `cython_core/frame.pxi`); an appender that sees data waiters, or the
conductor that moved the limit for space waiters, claims each slot by CAS and sends one datagram
to its owner. A datagram wakes every parked task of the receiving process (a spurious wake-up
costs one re-check). With more parked processes than slots, the extra ones wake on their
fallback timer.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import threading
from collections.abc import Callable

from aeronio import _core
from aeronio.logbuffer import signals

DATA_WAITERS_OFFSET = 32
SPACE_WAITERS_OFFSET = 36
CONDUCTOR_WAKE_ID_OFFSET = 40
WAKE_SLOTS_OFFSET = 48
WAKE_SLOT_COUNT = 10


def _address(wake_id: int) -> bytes:
    return b"\0aeronio-wake-%x" % wake_id


class Waker:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.id = random.getrandbits(63) or 1
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(_address(self.id))
        self.sock.setblocking(False)
        self._loops: set[asyncio.AbstractEventLoop] = set()
        self.callbacks: list[Callable[[], None]] = []
        _core.set_waker(self.id, self.send)

    def send(self, wake_id: int) -> None:
        try:
            self.sock.sendto(b"\x01", _address(wake_id))
        except OSError:
            pass  # the process is gone or its socket is full: it will wake on its timer

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Read wake-ups on `loop` (idempotent)."""
        if loop not in self._loops:
            loop.add_reader(self.sock.fileno(), self._drain)
            self._loops.add(loop)

    def detach(self, loop: asyncio.AbstractEventLoop) -> None:
        if loop in self._loops:
            self._loops.discard(loop)
            if not loop.is_closed():
                loop.remove_reader(self.sock.fileno())

    def _drain(self) -> None:
        try:
            while self.sock.recv(64):
                pass
        except OSError:
            pass
        signals.ring_all()
        for callback in list(self.callbacks):
            callback()


_waker: Waker | None = None
_lock = threading.Lock()


def waker() -> Waker:
    """This process's Waker (made anew in a forked child)."""
    global _waker
    with _lock:
        if _waker is None or _waker.pid != os.getpid():
            _waker = Waker()
        return _waker


class Registration:
    """A parked task's entry in one log's waiter count and wake slots."""

    __slots__ = ("_meta", "_count_offset", "_wake_id", "_slot")

    def __init__(self, meta: _core.AtomicBuffer, count_offset: int, wake_id: int):
        self._meta = meta
        self._count_offset = count_offset
        self._wake_id = wake_id
        meta.get_and_add_int32(count_offset, 1)
        self._slot = -1
        for i in range(WAKE_SLOT_COUNT):
            if meta.compare_and_set_int64(WAKE_SLOTS_OFFSET + 8 * i, 0, wake_id):
                self._slot = i
                break

    def cancel(self) -> None:
        if self._slot >= 0:
            self._meta.compare_and_set_int64(WAKE_SLOTS_OFFSET + 8 * self._slot, self._wake_id, 0)
        self._meta.get_and_add_int32(self._count_offset, -1)


def register_data_waiter(meta: _core.AtomicBuffer) -> Registration:
    return Registration(meta, DATA_WAITERS_OFFSET, waker().id)


def register_space_waiter(meta: _core.AtomicBuffer) -> Registration:
    return Registration(meta, SPACE_WAITERS_OFFSET, waker().id)
