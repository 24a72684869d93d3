"""A counter a client allocates in the driver's counters (cnc.dat) (Aeron's `Aeron.addCounter`):
the driver owns the file, the client writes the value; it goes when closed or its client ends.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import numpy as np

from aeronio import counters
from aeronio._core import AtomicBuffer


class ClientCounter(counters.Counter):
    """A `counters.Counter` this client owns; `close()` hands it back to the driver.

    Closed, or with its client closed or lost, it is detached: its value lives on in this
    handle alone, never again in the driver's file, where the driver may give its id to
    another counter (of any client) once it freed it."""

    __slots__ = ("registration_id", "is_closed", "_release")

    def __init__(
        self,
        reader: counters.CountersReader,
        counter_id: int,
        registration_id: int,
        release: Callable[[ClientCounter], Awaitable[None]],
    ):
        super().__init__(reader, counter_id)
        self.registration_id = registration_id
        self.is_closed = False
        self._release = release

    def detach(self) -> None:
        """Keep the value in this handle only, from now on (the counter is closed)."""
        if self.is_closed:
            return
        self.is_closed = True
        value = self.get()
        self.buffer, self.offset = AtomicBuffer(np.zeros(1, np.int64).view(np.uint8)), 0
        self.buffer.put_int64_ordered(0, value)

    async def close(self) -> None:
        if not self.is_closed:
            self.detach()
            await self._release(self)

    def __repr__(self) -> str:
        if self.is_closed:
            return f"ClientCounter(id={self.id}, closed, value={self.get()})"
        return super().__repr__()
