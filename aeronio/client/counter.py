"""A counter a client allocates in the driver's counters (cnc.dat) (Aeron's `Aeron.addCounter`):
the driver owns the file, the client writes the value; it goes when closed or its client ends.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aeronio import counters


class ClientCounter(counters.Counter):
    """A `counters.Counter` this client owns; `close()` hands it back to the driver."""

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

    async def close(self) -> None:
        if not self.is_closed:
            self.is_closed = True
            await self._release(self)
