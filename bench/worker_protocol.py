"""What every worker process of the cross-process benchmarks speaks, whatever its interpreter and
packages (standard library only: bench/aeron_c_workers.py runs it beside pyaeron): its lines on
stdout, and its release when the parent closes its stdin."""

from __future__ import annotations

import asyncio
import contextlib
import struct
import sys
import threading
import time

SEQ = struct.Struct("<Q")  # the number every message carries in its first 8 bytes

# Aeron's C client at its best: it touches every page of a log it maps (off by default), as
# aeronio maps its logs populated (MAP_POPULATE), so neither side takes page faults in its
# timed loops. Set in the environment of every process that runs pyaeron's client.
PYAERON_ENV = {"AERON_CLIENT_PRE_TOUCH_MAPPED_MEMORY": "true"}


class NotReleased(RuntimeError):
    """The parent did not close the worker's stdin in time."""


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class Released:
    """Set when the parent closes this worker's stdin."""

    def __init__(self) -> None:
        self.event = threading.Event()
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        with contextlib.suppress(Exception):
            sys.stdin.read()
        self.event.set()

    async def wait(self, timeout: float) -> None:
        """Wait on the loop (which keeps running, and with it an embedded driver)."""
        deadline = time.monotonic() + timeout
        while not self.event.is_set():
            if time.monotonic() > deadline:
                raise NotReleased("not released by the parent in time")
            await asyncio.sleep(0.005)

    def wait_blocking(self, timeout: float) -> None:
        if not self.event.wait(timeout):
            raise NotReleased("not released by the parent in time")


class Pace:
    """A paced run (versus_aeron_c.py --udp-rate): the sender offers message `i` once it is due
    at `rate` messages a second from its first, sleeping until then (`wait`), and a receiver
    sleeps IDLE after a poll that found nothing. Both sides' workers wait alike, by sleeping,
    so that their waiting takes no CPU from the drivers a paced run measures."""

    IDLE = 100e-6

    @staticmethod
    def nap(rate: float) -> float:
        """How long a receiver sleeps after an empty poll in a run at `rate` (0: unpaced, none)."""
        return Pace.IDLE if rate else 0.0

    def __init__(self, rate: float) -> None:
        self.period = 1.0 / rate
        # An asyncio worker's sleeps block its loop: it turns the loop this often (messages;
        # a tenth of a second), so that what runs there (aeronio's client keepalive) runs.
        self.per_loop_turn = max(1, int(rate / 10))
        self.start: float | None = None
        self.first = 0

    def wait(self, i: int) -> None:
        now = time.perf_counter()
        if self.start is None:
            self.start, self.first = now, i
        due = self.start + (i - self.first) * self.period
        if due > now:
            time.sleep(due - now)
