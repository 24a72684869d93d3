"""Subscriptions and images: one Image per publication session on the subscribed stream.

Poll paths (`poll`, `controlled_poll`, `block_poll`, `batch_poll`) hand handlers views into the
log, valid during the call. `async for message in subscription` yields whole, copied messages;
`subscription.messages(copy=False)` yields them in place, `subscription.batches()` as lists. The
iterators are the compiled core's `SubscriptionBase` (no coroutine per message while messages
are there); this module adds the waiting, the images and the lifecycle. The copying iterators
poll a batch at a time: what they did not hand out (a loop left with break) comes first to the
next read of any kind (poll and controlled_poll: whole, each as one unfragmented fragment);
batch_poll and block_poll raise AeronError until it is taken.

An image that goes away before its end of stream (its receiver fell too far behind and the
driver dropped it, its source went silent) is lost: whatever was not read from it will not come
from it, and a new image of the same session may take the stream up at another position. The
iterators then raise ImageUnavailableError, after the messages taken before, before any taken
after; iterating again goes on with the other images. Poll paths are told by the
`unavailable_image` callback (a subscription only polled keeps the first MAX_LOST_IMAGES of
these errors for an iterator, and none once closed).

An image whose log the client refuses as it comes (not a log buffer, unreadable) is never
read: the next poll of any kind or iterator step raises ImageUnavailableError naming its
session, its log and why, once; the subscription goes on with its other images. The client
rejects that image (Aeron's REJECT_IMAGE), so that it does not hold its publisher: the driver
tells the publisher, and links the subscription to it again after a cool-down.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

from aeronio import _core, counters, idle
from aeronio.errors import AeronError, ImageUnavailableError, SubscriptionClosedError
from aeronio.logbuffer import descriptor, signals, waker
from aeronio.protocol import control as p

if TYPE_CHECKING:
    from aeronio.client.conductor import ClientConductor

Header: TypeAlias = _core.Header
Message: TypeAlias = _core.Message
FragmentAssembler: TypeAlias = _core.FragmentAssembler
FragmentBatch: TypeAlias = _core.FragmentBatch
ImageHandler = Callable[["Image"], object]
log = logging.getLogger("aeronio.client")
MAX_LOST_IMAGES = 64  # image losses kept for the iterators to raise


class ControlledPollAction(enum.IntEnum):
    """What a controlled_poll handler tells the image to do after a fragment."""

    ABORT = 1
    BREAK = 2
    COMMIT = 3
    CONTINUE = 4


class Image:
    """The replicated log of one publication session, as seen by one subscription."""

    def __init__(
        self,
        subscription: Subscription,
        correlation_id: int,
        session_id: int,
        log_file: str,
        join_position: int,
        source_identity: str,
        reader: _core.ImageReader,
        log_signals: signals.LogSignals,
        metadata: _core.AtomicBuffer,
        reject: Callable[[Image, str], Awaitable[None]],
    ):
        self.subscription = subscription
        self.correlation_id = correlation_id
        self.session_id = session_id
        self.stream_id = subscription.stream_id
        self.log_file = log_file
        self.join_position = join_position
        self.source_identity = source_identity
        self._reader = reader
        self._reject = reject
        self.signals = log_signals
        self.metadata = metadata
        self.poll = reader.poll
        self.controlled_poll = reader.controlled_poll
        self.block_poll = reader.block_poll
        self.batch_poll = reader.batch_poll
        self.poll_messages = reader.poll_messages

    @property
    def position(self) -> int:
        return self._reader.position

    @property
    def taken_position(self) -> int:
        """Just after the last message taken from the image: `position`, or past it the end of
        the message `messages(copy=False)` lent out (consumed at the image's next read), or
        before it the beginning of a message the iterators hold the first fragments of."""
        return self._reader.taken_position

    def record_blocks(
        self,
        fd: int,
        file_position: int,
        file_end: int,
        block_length_limit: int,
        max_length: int,
        position: counters.Counter,
        sync_level: int,
    ) -> tuple[int, int, int, int]:
        """The archive recorder's write path: this image's blocks into a file, `position`
        (rec-pos) following each (see `_core.record_blocks`)."""
        return _core.record_blocks(
            self._reader, fd, file_position, file_end, block_length_limit, max_length,
            position.buffer, position.offset, sync_level,
        )  # fmt: skip

    async def reject(self, reason: str) -> None:
        """Refuse this image (Aeron's Image.reject): the driver tells its publisher `reason` (at
        most 1023 bytes: else ConfigurationError) and takes the image from the subscription (an
        IPC publication's image from all its subscribers, for a cool-down; a network image ends).
        DriverError if the driver refuses."""
        await self._reject(self, reason)

    @property
    def term_length(self) -> int:
        return self._reader.log.term_length

    @property
    def initial_term_id(self) -> int:
        return self._reader.log.initial_term_id

    @property
    def mtu_length(self) -> int:
        return self.metadata.get_int32(descriptor.LOG_MTU_LENGTH_OFFSET)

    @property
    def active_transport_count(self) -> int:
        """How many of the image's senders its driver hears (0 on an IPC subscription's image:
        no transport), as Aeron's Image.activeTransportCount."""
        return self.metadata.get_int32_volatile(descriptor.LOG_ACTIVE_TRANSPORT_COUNT_OFFSET)

    @property
    def is_end_of_stream(self) -> bool:
        return self._reader.is_end_of_stream

    @property
    def is_publication_revoked(self) -> bool:
        """Its publication was revoked (Aeron's Image.isPublicationRevoked): its stream ended
        where its publisher stopped, and the image goes at once, with what was not read."""
        revoked = self.metadata.get_int32_volatile(descriptor.LOG_IS_PUBLICATION_REVOKED_OFFSET)
        return bool(revoked & 0xFF)

    @property
    def is_closed(self) -> bool:
        """The image went: its polls return 0 (the client conductor closed its reader)."""
        return self._reader.is_closed

    def __repr__(self) -> str:
        return (
            f"Image(session_id={self.session_id}, stream_id={self.stream_id}, "
            f"position={self.position})"
        )


class ImageEvents(NamedTuple):
    """What the client conductor tells a subscription: the subscription's own methods, handed
    to the conductor (`track_subscription`) when it is made."""

    available: Callable[[Image], None]
    unavailable: Callable[[int], None]  # by the image's correlation id
    refused: Callable[[int, str, int, Exception], None]  # session id, log file, position, why
    client_lost: Callable[[], None]


class Subscription(_core.SubscriptionBase):
    """Receives the messages of every publication session on a channel and stream."""

    # No instance dict, so that `subscription.poll(...)` is a specialised lookup (see Publication).
    # Weakly referable through SubscriptionBase.
    __slots__ = (
        "_conductor", "channel", "stream_id", "registration_id", "available_image",
        "unavailable_image", "_round_robin", "changed", "channel_status_id",
    )  # fmt: skip

    def __init__(
        self,
        conductor: ClientConductor,
        channel: str,
        stream_id: int,
        registration_id: int,
        available_image: ImageHandler | None = None,
        unavailable_image: ImageHandler | None = None,
    ):
        self._conductor = conductor
        self.channel = channel
        self.stream_id = stream_id
        self.registration_id = registration_id
        self.available_image = available_image
        self.unavailable_image = unavailable_image
        self._round_robin = 0
        self.changed = _core.Doorbell()  # rung when images come or go, or the driver is lost
        self.is_closed = False
        # Its endpoint's channel status counter (the driver's answer says which).
        self.channel_status_id = p.CHANNEL_STATUS_INDICATOR_NOT_ALLOCATED
        conductor.track_subscription(
            self,
            ImageEvents(
                self._add_image, self._remove_image, self._refuse_image, self._remove_images
            ),
        )

    @property
    def images(self) -> tuple[Image, ...]:
        return tuple(self._images)

    @property
    def image_count(self) -> int:
        return len(self._images)

    @property
    def is_connected(self) -> bool:
        return bool(self._images)

    @property
    def local_socket_addresses(self) -> list[str]:
        """The local addresses ("host:port", as bound: the port the OS chose for an endpoint of
        port 0) of its UDP endpoint's sockets, from the driver's counters (Aeron's
        localSocketAddresses()); none for IPC and spies, once closed, or while the endpoint is
        not ACTIVE."""
        if self.is_closed:
            return []
        return counters.local_socket_addresses(self._conductor.counters, self.channel_status_id)

    def image_by_session_id(self, session_id: int) -> Image | None:
        """The image of the publication with this session id, or None."""
        return next((i for i in self._images if i.session_id == session_id), None)

    # -- image lifecycle (the ImageEvents handed to the client conductor) ----------------

    def _add_image(self, image: Image) -> None:
        self._set_images([*self._images, image])
        self.changed.ring()
        _call_back(self.available_image, image)

    def _remove_image(self, correlation_id: int) -> None:
        image = next((i for i in self._images if i.correlation_id == correlation_id), None)
        if image is None:
            return
        self._set_images([i for i in self._images if i is not image])
        if not image.is_end_of_stream and len(self._lost) < MAX_LOST_IMAGES:
            position = image.taken_position
            why = " (its publication was revoked)" if image.is_publication_revoked else ""
            self._lost.append(
                ImageUnavailableError(
                    f"the image of session {image.session_id} on {self.channel} stream "
                    f"{self.stream_id} went away at position {position}, before its end{why}",
                    session_id=image.session_id,
                    stream_id=self.stream_id,
                    position=position,
                )
            )
        self._conductor.release_image(image)
        self.changed.ring()
        _call_back(self.unavailable_image, image)

    def _refuse_image(self, session_id: int, log_file: str, position: int, why: Exception) -> None:
        """The client could not map a new image's log: its messages are lost to this
        subscription, which the next poll or iterator step raises."""
        error = ImageUnavailableError(
            f"the image of session {session_id} on {self.channel} stream {self.stream_id} was "
            f"refused at position {position}, its messages lost: its log {log_file} did not "
            f"map: {why}",
            session_id=session_id,
            stream_id=self.stream_id,
            position=position,
        )
        log.warning("%s", error)
        if len(self._refused) < MAX_LOST_IMAGES:
            self._refused.append(error)
            if len(self._lost) < MAX_LOST_IMAGES:
                self._lost.append(error)
        self.changed.ring()

    def _remove_images(self) -> None:
        """The client lost its driver, or was timed out: every image goes, as unavailable. What
        the iterators and polls raise is the client's error, not each image's loss."""
        for image in self.images:
            self._remove_image(image.correlation_id)
        self._lost.clear()
        self._refused.clear()
        self.changed.ring()

    # -- polling ------------------------------------------------------------------------

    def _poll_each(self, method: str, handler: Callable[..., object], limit: int) -> int:
        """Poll the images in turn (starting one further each call) up to `limit` in all."""
        images = self._images
        count = len(images)
        if count == 1:
            return getattr(images[0], method)(handler, limit)
        if not count:
            self._check_client()
            return 0
        start = self._round_robin = (self._round_robin + 1) % count
        done = 0
        for i in range(count):
            done += getattr(images[(start + i) % count], method)(handler, limit - done)
            if done >= limit:
                break
        return done

    def controlled_poll(
        self, handler: Callable[[memoryview, Header], int | None], fragment_limit: int
    ) -> int:
        """Like poll; the handler returns a ControlledPollAction (None means CONTINUE)."""
        if self._refused:
            self._raise_refused()
        if self._untaken():
            return self._poll_untaken(handler, fragment_limit, True)
        return self._poll_each("controlled_poll", handler, fragment_limit)

    def batch_poll(self, handler: Callable[[FragmentBatch], object], fragment_limit: int) -> int:
        """Deliver up to fragment_limit fragments as FragmentBatch objects (one per image/term)."""
        if self._refused:
            self._raise_refused()
        self._check_nothing_untaken("batch_poll")
        images = self._images
        if len(images) == 1:
            return images[0].batch_poll(handler, fragment_limit)
        return self._poll_each("batch_poll", handler, fragment_limit)

    def block_poll(
        self, handler: Callable[[memoryview, int, int], object], block_length_limit: int
    ) -> int:
        """Deliver whole-frame blocks as handler(block, session_id, term_id); returns bytes."""
        if self._refused:
            self._raise_refused()
        self._check_nothing_untaken("block_poll")
        if not self._images:
            self._check_client()
        return sum(image.block_poll(handler, block_length_limit) for image in self._images)

    def _check_nothing_untaken(self, method: str) -> None:
        """The log's own views cannot hold the messages the iterators polled and did not hand
        out (poll and controlled_poll hand them over first): say so rather than skip them."""
        if untaken := self._untaken():
            raise AeronError(
                f"{method}: {untaken} messages polled by async for, receive() or batches() were"
                " not handed out (a loop left with break): take them with receive() or"
                " batches(), or poll them with poll() or controlled_poll(), first"
            )

    def _check_client(self) -> None:
        """Raise what the client lost (ClientTimeoutError, DriverTimeoutError), if it did: a
        poll without images tells it (its images went with it)."""
        lost = self._conductor.lost
        if lost is not None:
            raise lost

    # -- async iteration: the waits behind SubscriptionBase's iterators ------------------

    async def _after_turn(self, step: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """An iterator's next step, its slow path `step(*args)` (which takes what is there at
        once), after the event loop had its turn (cython_core/awaitables.pxi)."""
        await asyncio.sleep(0)
        return await step(*args)

    async def _next_slowly(self) -> Message:
        await self._wait(self._has_pending)
        return self._take_one()

    async def _receive_slowly(self) -> Message:
        try:
            return await self._next_slowly()
        except StopAsyncIteration:
            raise SubscriptionClosedError(
                f"subscription {self.registration_id} on {self.channel} is closed"
            ) from None

    async def _batch_slowly(self, batches: _core.MessageBatches) -> list[Message]:
        await self._wait(batches.ready)
        return batches.take()

    async def _view_slowly(self, views: _core.MessageViews) -> Message[bytes | memoryview]:
        await self._wait(views.ready)
        return views.take()

    async def _wait(self, ready: Callable[[], bool]) -> None:
        """Idle through the client's idle strategy until `ready()`; StopAsyncIteration once the
        subscription is closed, ImageUnavailableError for an image lost."""
        attempt, read = 0, self._read_to()
        while not ready():
            if self._lost:
                error = self._lost.pop(0)
                if error in self._refused:
                    self._refused.remove(error)
                raise error
            if self.is_closed:
                raise StopAsyncIteration
            self._conductor.check_alive()
            if (now := self._read_to()) != read:  # part of a long message came: the rest
                attempt, read = 0, now  # may be there, so no park yet
            await self._conductor.idle_strategy.idle(attempt, lambda t: self._park(t, ready))
            attempt += 1

    async def _park(self, timeout: float, ready: Callable[[], bool]) -> None:
        def still_idle() -> bool:
            read = self._read_to()
            return not ready() and self._read_to() == read

        await park_for_data([self], timeout, still_idle)

    def _read_to(self) -> int:
        """How far the images were read, all told: it moves while a wait's reads take the
        fragments of a message not yet whole (a long message comes a term window at a time)."""
        return sum(image.position for image in self._images)

    async def wait_connected(self, timeout: float | None = None) -> None:
        """Wait until the subscription has an image (a publication is connected to it).
        TimeoutError after `timeout` seconds; SubscriptionClosedError if it is closed."""
        deadline = idle.deadline(timeout)
        while not self._images:
            if self.is_closed:
                raise SubscriptionClosedError(
                    f"subscription {self.registration_id} on {self.channel} is closed"
                )
            left = 1.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(
                    f"subscription {self.registration_id} on {self.channel} has no image "
                    f"after {timeout} s"
                )
            self._conductor.check_alive()
            await signals.park(
                [self.changed], min(left, 1.0), lambda: not self._images and not self.is_closed
            )

    # -- multi-destination subscription -------------------------------------------------

    async def add_destination(self, endpoint_channel: str) -> None:
        """Also receive on `aeron:udp?endpoint=host:port` (a subscription on
        `aeron:udp?control-mode=manual` only): datagrams of every destination feed the same
        images. ChannelUriError/DriverError when refused."""
        await self._conductor.change_destination(p.AddRcvDestination, self, endpoint_channel)

    async def remove_destination(self, endpoint_channel: str) -> None:
        """Stop receiving on a destination `add_destination` added (its socket is closed; the
        images go on with the other destinations)."""
        await self._conductor.change_destination(p.RemoveRcvDestination, self, endpoint_channel)

    # -- lifecycle ----------------------------------------------------------------------

    async def close(self) -> None:
        """Remove the subscription from the driver; its images go (idempotent). On another
        event loop or in a forked child, AeronError, and nothing is touched."""
        self._conductor.transport.check_home()
        if self.is_closed:
            return
        self.let_go()
        await self._conductor.release_subscription(self)

    def let_go(self) -> None:
        """Closed on this side: its images go (their logs unmapped); the driver's side is
        removed by whoever calls this (`close`, or the conductor for an add given up)."""
        self.is_closed = True
        self._lost.clear()
        self._refused.clear()
        self.changed.ring()
        for image in self._images:
            self._conductor.release_image(image)
        self._set_images([])

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return (
            f"Subscription(channel={self.channel!r}, stream_id={self.stream_id}, "
            f"images={len(self._images)})"
        )


def _call_back(callback: ImageHandler | None, image: Image) -> None:
    """Run a user's image callback; what it raises is logged, never passed to the driver."""
    if callback is not None:
        try:
            callback(image)
        except Exception:
            log.exception("image callback %r raised for %r", callback, image)


async def park_for_data(
    subscriptions: list[Subscription],
    timeout: float,
    still_idle: Callable[[], bool],
    also: tuple[_core.Doorbell, ...] = (),
) -> None:
    """Park until a writer (in any process) appends to an image of `subscriptions`, an image
    comes or goes, one of `also` rings, or `timeout` passes; unless `still_idle()`, checked
    once the wake-ups are asked for, says there is something already."""
    images = [image for subscription in subscriptions for image in subscription.images]
    registrations = [waker.register_data_waiter(image.metadata) for image in images]
    try:
        await signals.park(
            [image.signals.data for image in images]
            + [subscription.changed for subscription in subscriptions]
            + list(also),
            timeout,
            still_idle,
        )
    finally:
        for registration in registrations:
            registration.cancel()
