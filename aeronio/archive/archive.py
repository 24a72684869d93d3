"""Archive: the archive service on this event loop, a client of a media driver.

    async with aeronio.connect() as aeron:
        async with archive.Archive.launch(aeron, archive_dir="rec") as arch:
            ...

Its conductor runs as one task, yielding to the event loop after each duty cycle that did work
(as the driver's agents do: a flood of requests cannot starve an embedded driver or the
clients on the same loop). When a duty cycle finds no work it backs off (spin, yield, then
sleeps of up to a millisecond, the reference archive's BackoffIdleStrategy) while work may come
that nothing signals (a replay, a session connecting or with answers to send); otherwise it
parks until a control message, a new image or a recording's end wakes it (at most
IDLE_PARK_S). A failure in
a duty cycle is counted, and the next cycle runs: the archive does not die of one. Failures in a
row are logged once (the first, with its traceback; the recovery says how many followed) and
back off, each wait twice the last, from FAILURE_BACKOFF_S to IDLE_PARK_S. A client that lost its
driver (or was closed) ends the task, logged as an error: an archive can neither record nor
answer then (`wait_ended` raises it; `aeronio archive serve` exits with it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from aeronio.archive.catalog import Catalog
from aeronio.archive.conductor import ArchiveConductor
from aeronio.archive.context import ArchiveContext
from aeronio.client.aeron import Aeron
from aeronio.errors import AeronError
from aeronio.idle import BackoffIdleStrategy

log = logging.getLogger("aeronio.archive")
IDLE_PARK_S = 1.0  # the longest an idle archive sleeps (its sessions' timeouts are in seconds)
FAILURE_BACKOFF_S = 0.001  # the wait after a failed duty cycle, doubled while failures go on


class Archive:
    """An archive on a client of a media driver: it records streams into segment files,
    keeps a catalog and replays recordings, answering ArchiveClients over its control channel
    (Aeron Archive's wire protocol). `aeronio archive serve` runs one."""

    def __init__(self, aeron: Aeron, ctx: ArchiveContext):
        self.aeron = aeron
        self.ctx = ctx
        self.conductor = ArchiveConductor(aeron, ctx)
        self._task: asyncio.Task | None = None
        self._idle = BackoffIdleStrategy()
        self._closing = False
        self._closed = asyncio.Event()

    @classmethod
    def launch(cls, aeron: Aeron, **options: Any) -> Archive:
        """An archive on `aeron` (options: `ArchiveContext` fields, e.g. `archive_dir`); start it
        with `await archive.start()` or `async with`."""
        return cls(aeron, ArchiveContext(**options))

    @property
    def catalog(self) -> Catalog:
        return self.conductor.catalog

    async def start(self) -> Archive:
        """Start the archive's conductor and its duty-cycle task; returns self."""
        await self.conductor.start()
        self._task = asyncio.create_task(self._run(), name="aeronio-archive")
        return self

    async def _run(self) -> None:
        attempt = failures = 0
        while not self._closing:
            try:
                self.aeron.check_alive()
            except AeronError as lost:
                log.error("archive on %s ends: %s", self.aeron.driver_dir, lost)
                raise
            try:
                work = await self.conductor.do_work()
            except asyncio.CancelledError:
                raise
            except Exception:
                self.conductor.count_error()
                if not failures:
                    log.exception("archive duty cycle failed (until one succeeds: counted only)")
                failures += 1
                backoff = FAILURE_BACKOFF_S * 2 ** min(failures - 1, 30)
                await asyncio.sleep(min(backoff, IDLE_PARK_S))
                continue
            if failures:
                log.warning("archive duty cycle recovered after %d failed cycles", failures)
                failures = 0
            if work:
                attempt = 0
                await asyncio.sleep(0)  # the loop's other tasks (an embedded driver) run too
            elif self.conductor.busy:
                await self._idle.idle(attempt, asyncio.sleep)
                attempt += 1
            else:
                await self.conductor.park(IDLE_PARK_S)

    async def wait_ended(self) -> None:
        """Until the duty cycle ends by itself, raising what ended it (DriverTimeoutError: the
        client lost its driver); cancelled when the archive closes."""
        if self._task is not None:
            await asyncio.shield(self._task)

    async def close(self) -> None:
        """Stop the duty cycle, end every recording and replay, close the catalog (once: a
        close called while one runs, or after, returns once that one has finished)."""
        if self._closing:
            await self._closed.wait()
            return
        # the flag ends the loop even should a cancellation be swallowed on its way (Python
        # 3.11's wait_for can swallow one that races with its result)
        self._closing = True
        try:
            if self._task is not None:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError, AeronError):  # AeronError logged
                    await self._task
                self._task = None
            await self.conductor.close()
        finally:
            self._closed.set()

    async def __aenter__(self) -> Archive:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
