"""Cross-process wake-ups: a process parked on a log is woken by a datagram from the writer.

Each process has one Waker: a random wake id and a Unix datagram socket bound to the abstract
address `aeronio-wake-<id>`, read by its event loop(s). While any of its tasks is parked on a
log, the process holds one of the log's ten wake slots (`LOG_WAKE_SLOTS_OFFSET` in the log
metadata): its wake id, with a bit that says whether it waits for data or for space. An appender
(for data), or the conductor after moving the limit (for space), claims each such slot of
another process by CAS and sends it one datagram; a reader that sees a space waiter wakes the
conductor. A datagram wakes every parked task of the receiving process (a spurious wake-up costs
one re-check). The slot of a process that died is cleared by the first writer that finds it.
With more parked processes than slots, the extra ones wake on their fallback timer.
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
from aeronio.logbuffer.descriptor import (
    LOG_WAKE_SLOT_COUNT,
    LOG_WAKE_SLOTS_OFFSET,
    LOG_WAKE_SPACE_BIT,
)


def _address(wake_id: int) -> bytes:
    return b"\0aeronio-wake-%x" % wake_id


class Waker:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.id = random.getrandbits(62) or 1
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(_address(self.id))
        self.sock.setblocking(False)
        self._loops: set[asyncio.AbstractEventLoop] = set()
        self.callbacks: list[Callable[[], None]] = []
        _core.set_waker(self.id, self.send, self._wake_here)

    def send(self, wake_id: int) -> None:
        try:
            self.sock.sendto(b"\x01", _address(wake_id))
        except OSError:
            pass  # the process is gone or its socket is full: it will wake on its timer

    def wake(self, wake_id: int) -> None:
        """Wake the process of `wake_id`: a datagram, or the callbacks here when it is this one."""
        if wake_id == self.id:
            for callback in list(self.callbacks):
                callback()
        else:
            self.send(wake_id)

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Read wake-ups on `loop` (idempotent)."""
        if loop not in self._loops:
            loop.add_reader(self.sock.fileno(), self._drain)
            self._loops.add(loop)

    def _drain(self) -> None:
        try:
            while self.sock.recv(64):
                pass
        except OSError:
            pass
        self._wake_here()

    def _wake_here(self) -> None:
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


class _Slot:
    """This process's slot on one log for one kind of wait, shared by its parked tasks."""

    __slots__ = ("meta", "value", "index", "users")

    def __init__(self, meta: _core.AtomicBuffer, value: int):
        self.meta, self.value, self.index, self.users = meta, value, -1, 0

    def claim(self) -> None:
        """Hold a slot (again, if a writer claimed ours to wake us)."""
        if self.index >= 0 and self.meta.get_int64_volatile(self._offset(self.index)) == self.value:
            return
        self.index = -1
        for i in range(LOG_WAKE_SLOT_COUNT):
            if self.meta.compare_and_set_int64(self._offset(i), 0, self.value):
                self.index = i
                return

    def release(self) -> None:
        if self.index >= 0:
            self.meta.compare_and_set_int64(self._offset(self.index), self.value, 0)
            self.index = -1

    @staticmethod
    def _offset(index: int) -> int:
        return LOG_WAKE_SLOTS_OFFSET + 8 * index


_slots: dict[tuple[int, bool], _Slot] = {}
_slots_lock = threading.Lock()


class Registration:
    """A parked task's share of its process's wake slot on one log; cancel() when it wakes."""

    __slots__ = ("_key",)

    def __init__(self, meta: _core.AtomicBuffer, space: bool):
        self._key = (id(meta), space)
        value = waker().id | (LOG_WAKE_SPACE_BIT if space else 0)
        with _slots_lock:
            slot = _slots.get(self._key)
            if slot is None:
                slot = _slots[self._key] = _Slot(meta, value)
            slot.users += 1
            slot.claim()

    def renew(self) -> None:
        """Hold the slot again if a writer took it to wake this process."""
        with _slots_lock:
            _slots[self._key].claim()

    def cancel(self) -> None:
        with _slots_lock:
            slot = _slots[self._key]
            slot.users -= 1
            if slot.users == 0:
                slot.release()
                del _slots[self._key]


def register_data_waiter(meta: _core.AtomicBuffer) -> Registration:
    return Registration(meta, space=False)


def register_space_waiter(meta: _core.AtomicBuffer) -> Registration:
    return Registration(meta, space=True)
