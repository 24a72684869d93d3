"""Publications: append messages to a log (concurrent or exclusive), with awaitable back-pressure.

`try_offer` returns at once with a position or one of Aeron's result codes; `await offer` waits
through back-pressure, admin actions and (until connected) NOT_CONNECTED without blocking the
loop. An append is one synchronous step, so cancelling an `await offer` never leaves a partial
frame in the log. The per-message methods (`try_offer`, `try_claim`, `try_offer_batch`, `offer`)
are the compiled core's `PublicationBase`; this module adds the waiting and the lifecycle.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING

from aeronio import _core, counters, idle
from aeronio.counters import SENDER_POSITION_TYPE_ID
from aeronio.errors import (
    AeronError,
    MaxPositionExceededError,
    OfferBatchTimeoutError,
    PublicationClosedError,
)
from aeronio.logbuffer import signals, waker
from aeronio.protocol import control as p

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from aeronio._core import _Bytes as Buffer  # a bytes-like object, an ndarray included
    from aeronio.client.conductor import ClientConductor

NOT_CONNECTED: int = _core.NOT_CONNECTED
BACK_PRESSURED: int = _core.BACK_PRESSURED
ADMIN_ACTION: int = _core.ADMIN_ACTION
CLOSED: int = _core.CLOSED
MAX_POSITION_EXCEEDED: int = _core.MAX_POSITION_EXCEEDED


class Publication(_core.PublicationBase):
    """A concurrent publication: `try_offer`, `try_claim` and `try_offer_batch` are safe from
    many threads and processes at once; the awaitables (`offer`, `offer_batch`, `claim`, the
    waits) and `close` belong to the client's event loop."""

    # No instance dict: a Python subclass of a core type gets a dict that CPython 3.12+ never
    # lays out inline (the core's tp_new is not object's), and with such a dict it leaves every
    # `publication.try_offer(...)` an unspecialised lookup (about 100 ns more per call, measured
    # in docs/benchmarks.md). With slots the lookup is specialised on every Python.
    __slots__ = (
        "_conductor", "channel", "stream_id", "registration_id", "original_registration_id",
        "session_id", "log_file", "_signals", "_metadata", "_released", "channel_status_id",
        "__weakref__",
    )  # fmt: skip
    is_exclusive = False

    def __init__(
        self,
        conductor: ClientConductor,
        channel: str,
        stream_id: int,
        registration_id: int,
        original_registration_id: int,
        session_id: int,
        log_file: str,
        appender: _core.LogAppender,
        log_signals: signals.LogSignals,
        metadata: _core.AtomicBuffer,
        channel_status_id: int = p.CHANNEL_STATUS_INDICATOR_NOT_ALLOCATED,
    ):
        self._conductor = conductor
        self.channel = channel
        self.stream_id = stream_id
        # As Aeron's: this add's correlation id, which removes it; and the log's, the first
        # add's (by this or another client), which names its counters and destinations.
        self.registration_id = registration_id
        self.original_registration_id = original_registration_id
        self.session_id = session_id
        self.log_file = log_file
        self._appender = appender
        self._signals = log_signals
        self._metadata = metadata
        self._released = False
        self.channel_status_id = channel_status_id  # its endpoint's, from the driver

    # -- properties ---------------------------------------------------------------------

    @property
    def position(self) -> int:
        """The position the next message will be appended at."""
        return self._appender.position

    @property
    def position_limit(self) -> int:
        """The position beyond which offers are back-pressured, as the driver last moved it.
        Read with less than a quarter of a term left, it asks the driver to move it as the
        subscribers consume (as a refused offer does), so a publisher may wait on it."""
        return self._appender.position_limit

    @property
    def signals(self) -> signals.LogSignals:
        """The log's doorbells in this process (data, consumed, limit: logbuffer.signals)."""
        return self._signals

    @property
    def is_original(self) -> bool:
        """True when this add made the log (no other add of it was open)."""
        return self.registration_id == self.original_registration_id

    @property
    def max_message_length(self) -> int:
        return self._appender.max_message_length

    @property
    def max_payload_length(self) -> int:
        return self._appender.max_payload_length

    @property
    def term_length(self) -> int:
        return self._appender.log.term_length

    @property
    def initial_term_id(self) -> int:
        return self._appender.log.initial_term_id

    @property
    def is_connected(self) -> bool:
        return not self._appender.is_closed and self._appender.log.is_connected()

    @property
    def is_closed(self) -> bool:
        return self._appender.is_closed

    @property
    def local_socket_addresses(self) -> list[str]:
        """The local addresses ("host:port", as bound) of its UDP endpoint's sockets, from the
        driver's counters (Aeron's localSocketAddresses()); none for IPC, once closed, or while
        the endpoint is not ACTIVE."""
        if self.is_closed:
            return []
        return counters.local_socket_addresses(self._conductor.counters, self.channel_status_id)

    # -- awaitable offers ---------------------------------------------------------------

    async def _offer_after_turn(
        self, buffer: Buffer, offset: int, length: int | None, timeout: float | None
    ) -> int:
        """offer() once the event loop had its turn (cython_core/awaitables.pxi)."""
        await asyncio.sleep(0)
        result = self.try_offer(buffer, offset, length)
        if result > 0:
            return result
        return await self._offer_slowly(buffer, offset, length, timeout, result)

    async def _offer_slowly(
        self, buffer: Buffer, offset: int, length: int | None, timeout: float | None, result: int
    ) -> int:
        """offer() after its first attempt was refused with `result`: wait and try again."""
        deadline = idle.deadline(timeout)
        attempt = 0
        while True:
            await self._wait(result, deadline, attempt)
            attempt += 1
            result = self.try_offer(buffer, offset, length)
            if result > 0:
                return result

    async def offer_batch(
        self, messages: Sequence[Buffer] | NDArray[np.uint8], *, timeout: float | None = None
    ) -> int:
        """Append every message (a sequence of buffers or a 2-D uint8 array of records), waiting
        as `offer` does; returns the position after the last one (this publication's own, even
        when other writers share the log). The messages go in as far as the window allows, part
        by part: OfferBatchTimeoutError (a TimeoutError) says how many were appended when
        `timeout` passed; cancelled (in a wait, or in the loop's turn between parts), those
        before it stay appended too, and the CancelledError says how many in its `appended`
        (and a note; an outer timeout's TimeoutError has it as `__cause__`). Where no other
        publication writes to the log (an ExclusivePublication) `position` is exactly where the
        last of them ends: each message takes a 32-byte header and its length (per fragment of
        max_payload_length), aligned to 32 bytes."""
        deadline = idle.deadline(timeout)
        start, count, attempt = 0, len(messages), 0
        if not count:
            return self.position  # nothing appended: where the next message goes
        offer = self._appender.offer_batch_positioned  # its own position, whatever other
        try:  # threads append meanwhile
            while start < count:
                if self._turn_due():  # before the first part and between parts
                    await asyncio.sleep(0)
                result, last = offer(messages, start)
                if result > 0:
                    start += result
                    attempt = 0
                    continue
                try:
                    await self._wait(result, deadline, attempt)
                except AeronError:  # DriverTimeoutError is a TimeoutError too: not this one
                    raise
                except TimeoutError as timed_out:
                    raise OfferBatchTimeoutError(
                        f"offer_batch: {start} of {count} messages appended; {timed_out}",
                        appended=start,
                    ) from None
                attempt += 1
        except asyncio.CancelledError as cancelled:  # in a wait or a turn: the caller's to
            cancelled.appended = start  # type: ignore[attr-defined]  # re-offer the rest
            cancelled.add_note(f"offer_batch: {start} of {count} messages appended")
            raise
        return last

    @contextlib.asynccontextmanager
    async def claim(
        self, length: int, *, timeout: float | None = None
    ) -> AsyncIterator[memoryview]:
        """Reserve `length` bytes in the log to write in place: committed when the block exits,
        aborted (turned into padding) when it raises."""
        if self._turn_due():
            await asyncio.sleep(0)
        deadline = idle.deadline(timeout)
        attempt = 0
        while True:
            claim = self.try_claim(length)
            if not isinstance(claim, int):
                break
            await self._wait(claim, deadline, attempt)
            attempt += 1
        try:
            yield claim.buffer
        except BaseException:
            claim.abort()
            raise
        else:
            claim.commit()

    async def _wait(
        self, result: int, deadline: float | None, attempt: int, needed: int = 1
    ) -> None:
        """Handle a failed append: raise for a terminal code, else idle until there may be room
        for `needed` bytes (an offer or a claim needs its start below the limit, as Aeron's; a
        block needs all of it)."""
        if result == CLOSED:
            self._conductor.check_alive()
            raise self._closed_error()
        if result == MAX_POSITION_EXCEEDED:
            raise MaxPositionExceededError(
                f"publication {self.registration_id} reached its max position "
                f"{self.term_length << 31}"
            )
        if result == ADMIN_ACTION:
            return
        if deadline is not None and time.monotonic() >= deadline:
            state = "not connected" if result == NOT_CONNECTED else "back-pressured"
            raise TimeoutError(
                f"offer timed out ({state}) at position {self.position}, "
                f"limit {self.position_limit}"
            )
        await self._idle(attempt, deadline, lambda: self._no_space(needed))

    def _closed_error(self) -> PublicationClosedError:
        if not self._appender.is_closed and self._appender.log.is_publication_revoked():
            return PublicationClosedError(
                f"publication {self.registration_id} on {self.channel} was revoked (by a holder "
                f"of it): its stream ended at {self._appender.log.end_of_stream_position()}"
            )
        return PublicationClosedError(
            f"publication {self.registration_id} on {self.channel} is closed"
        )

    async def _idle(
        self, attempt: int, deadline: float | None, still_waiting: Callable[[], bool]
    ) -> None:
        """One idle step of a wait: the client must be alive; parks while `still_waiting`."""
        self._conductor.check_alive()
        await self._conductor.idle_strategy.idle(
            attempt, lambda t: self._park(t, deadline, still_waiting)
        )

    async def _park(
        self, timeout: float, deadline: float | None, still_waiting: Callable[[], bool]
    ) -> None:
        """Park until the conductor moves the limit (woken in this process by a doorbell, from
        another by a datagram), the driver is lost, or `timeout` passes."""
        if deadline is not None:
            timeout = max(0.0, min(timeout, deadline - time.monotonic()))
        consumed = self._signals.consumed
        consumed.add_waiter()  # readers here ring the conductor while we wait
        registration = waker.register_space_waiter(self._metadata)
        try:
            await signals.park([self._signals.limit], timeout, still_waiting)
        finally:
            registration.cancel()
            consumed.remove_waiter()

    def _no_space(self, needed: int) -> bool:
        return self.position + needed > self.position_limit and not self._appender.is_closed

    def _not_connected(self) -> bool:
        return not self.is_connected and not self._appender.is_closed

    async def wait_connected(self, timeout: float | None = None) -> None:
        """Wait until a subscriber is connected (is_connected). TimeoutError after `timeout`
        seconds; PublicationClosedError if the publication is closed meanwhile."""
        deadline = idle.deadline(timeout)
        attempt = 0
        while self._not_connected():
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(
                    f"publication {self.registration_id} on {self.channel} not connected "
                    f"within {timeout} s"
                )
            await self._idle(attempt, deadline, self._not_connected)
            attempt += 1
        if self.is_closed:
            raise self._closed_error()

    async def wait_sent(self, position: int | None = None, *, timeout: float | None = None) -> int:
        """Wait until the driver's sender has sent this publication's log up to `position` (by
        default all offered so far, `self.position`): its `snd-pos` counter reached it. Returns
        the sender position; TimeoutError after `timeout` seconds. An IPC publication has no
        sender (its subscribers read the log itself): returns `position` at once.
        PublicationClosedError if it is closed, before or meanwhile.

        Closing a publication never drops what was offered: the driver drains and lingers it
        until its receivers acknowledged it (bounded by the linger timeout), and an embedded
        driver waits for that before it goes. This is for a publisher that wants to know it
        went out, with its own timeout (an error to act on, rather than a loss reported by
        the driver)."""
        if self.is_closed:
            raise self._closed_error()
        position = self.position if position is None else position
        counters = self._conductor.counters
        counter_id = counters.find_by_type_id_and_registration_id(
            SENDER_POSITION_TYPE_ID, self.original_registration_id
        )
        if counter_id is None:
            return position
        deadline = idle.deadline(timeout)

        def unsent() -> bool:
            return counters.get_counter_value(counter_id) < position and not self.is_closed

        attempt = 0
        while unsent():
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(
                    f"publication {self.registration_id} on {self.channel} sent up to "
                    f"{counters.get_counter_value(counter_id)}, not {position}, within {timeout} s"
                )
            await self._idle(attempt, deadline, unsent)
            attempt += 1
        if self.is_closed:
            raise self._closed_error()
        return counters.get_counter_value(counter_id)

    # -- multi-destination-cast ---------------------------------------------------------

    async def add_destination(self, endpoint_channel: str) -> int:
        """Also send to `aeron:udp?endpoint=host:port` (a publication on a channel with
        `control-mode=manual` only); ChannelUriError/DriverError when refused. Returns the
        destination's registration id (for `remove_destination_by_id`)."""
        return await self._conductor.change_destination(p.AddDestination, self, endpoint_channel)

    async def remove_destination(self, endpoint_channel: str) -> None:
        """Stop sending to a destination `add_destination` added."""
        await self._conductor.change_destination(p.RemoveDestination, self, endpoint_channel)

    async def remove_destination_by_id(self, registration_id: int) -> None:
        """Stop sending to the destination whose `add_destination` returned `registration_id`
        (as Aeron's driver, one that is no destination's changes nothing)."""
        await self._conductor.remove_destination_by_id(self, registration_id)

    # -- lifecycle ----------------------------------------------------------------------

    async def close(self) -> None:
        """Stop offering (further offers return CLOSED) and release the publication. On another
        event loop or in a forked child, AeronError, and nothing is touched."""
        await self._release(revoke=False)

    async def revoke(self) -> None:
        """Close it revoked (Aeron's revoke): its stream ends where it stopped, at once, not
        drained. Its subscribers' images go at once with what they had not read (their
        `is_publication_revoked` says why), a network publication's receivers' too. The
        driver revokes the publication whoever else holds it: their offers return CLOSED from
        then (an awaited one raises PublicationClosedError saying it was revoked), and its log
        is kept until they close it too."""
        await self._release(revoke=True)

    async def _release(self, revoke: bool) -> None:
        self._conductor.transport.check_home()  # elsewhere: nothing touched, still open here
        if self._released:
            return
        self._released = True
        self._appender.close()
        self._signals.limit.ring()  # an offer parked on this publication sees CLOSED at once
        await self._conductor.release_publication(self, revoke)

    async def __aenter__(self) -> Publication:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(channel={self.channel!r}, stream_id={self.stream_id}, "
            f"session_id={self.session_id}, position={self.position})"
        )


class ExclusivePublication(Publication):
    """A publication with one writer (no CAS on the tail): faster, not thread-safe."""

    __slots__ = ()
    is_exclusive = True

    def try_offer_block(self, block: Buffer) -> int:
        """Append whole frames copied from a log of this term length and initial term id (see
        `offer_block`); returns the new position or a negative result code."""
        return self._appender.try_offer_block(block)

    def try_offer_recorded(
        self,
        segment: Buffer,
        segment_base: int,
        limit: int,
        stop: int,
        block_length: int,
        max_length: int,
        window_wait_ns: int,
    ) -> int:
        """Offer a recording's frames from a mapped segment file (its byte 0 at stream position
        `segment_base`) from this publication's position on, in blocks of at most
        `block_length` bytes within the window (waiting up to `window_wait_ns` at a time while
        it is shut), up to position `limit` and about `max_length` bytes, with the GIL
        released (an archive's replay; the bytes before `stop` are recorded); returns the
        position reached. It stops before anything `try_offer_block` would refuse and any
        header a reader would report as damage."""
        return _core.offer_recorded(
            self._appender,
            segment,
            segment_base,
            limit,
            stop,
            block_length,
            max_length,
            window_wait_ns,
        )

    async def offer_block(self, block: Buffer, *, timeout: float | None = None) -> int:
        """Append a block of whole frames from a log of this term length and initial term id,
        starting at this publication's position and within its term (an archive's replay keeps
        recorded positions so), waiting while back-pressured; returns the new position."""
        if self._turn_due():
            await asyncio.sleep(0)
        deadline = idle.deadline(timeout)
        attempt = 0
        while (result := self._appender.try_offer_block(block)) <= 0:
            # (numpy's stubs make an ndarray a Buffer from Python 3.12 on)
            needed = memoryview(block).nbytes  # type: ignore[arg-type]
            await self._wait(result, deadline, attempt, needed)
            attempt += 1
        return result
