"""The client conductor (Aeron's ClientConductor): one client's link to its driver, and the
owner of what the driver made for it.

It sends commands (client/transport.py) and matches their answers, maps logs, makes the
publications, subscriptions, images and counters, and keeps them in step with the driver's
notifications. It is the narrow interface between `Aeron` and its resources: they call its
public methods (`request`, `change_destination`, `track_subscription`, `release_*`,
`check_alive`); it closes the appenders and readers it made for them and tells a subscription
of its images through the `ImageEvents` the subscription handed over: nothing reaches
another's private attributes. A keepalive task keeps this client's heartbeat counter and
watches the driver's: when the driver dies, every pending and later call raises
DriverTimeoutError.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable
from typing import TypeVar, cast

from aeronio import _core
from aeronio.client.counter import ClientCounter
from aeronio.client.publication import Publication
from aeronio.client.subscription import Image, ImageEvents, ImageHandler, Subscription
from aeronio.client.transport import CncTransport, map_cnc, wake_key
from aeronio.cnc import CONTROL_PROTOCOL_VERSION, CncFile
from aeronio.concurrent.heartbeat import HeartbeatWatch
from aeronio.counters import CLIENT_DOORBELL_TYPE_ID, Counter, control_protocol_version
from aeronio.errors import (
    AeronError,
    ChannelUriError,
    ClientTimeoutError,
    ConfigurationError,
    DriverError,
    DriverTimeoutError,
    StorageSpaceError,
)
from aeronio.idle import IdleStrategy
from aeronio.logbuffer import signals, waker
from aeronio.logbuffer.log_buffers import LogBuffers
from aeronio.protocol import control as p
from aeronio.protocol import limits
from aeronio.protocol.channel import ChannelUri

KEEPALIVE_INTERVAL_S = 0.5  # Aeron's: how often the heartbeat counter is stored
log = logging.getLogger("aeronio.client")
Reply = (
    p.PublicationReady
    | p.SubscriptionReady
    | p.CounterReady
    | p.OperationSuccess
    | p.StaticCounter
    | p.NextAvailableSessionId
)
# The commands the driver answers (by their correlation id).
Request = (
    p.AddPublication
    | p.RemovePublication
    | p.AddSubscription
    | p.RemoveSubscription
    | p.AddDestination
    | p.RemoveDestination
    | p.RemoveDestinationById
    | p.AddRcvDestination
    | p.RemoveRcvDestination
    | p.AddCounter
    | p.RemoveCounter
    | p.AddStaticCounter
    | p.GetNextAvailableSessionId
    | p.RejectImage
)
DestinationCommand = (
    p.AddDestination | p.RemoveDestination | p.AddRcvDestination | p.RemoveRcvDestination
)
# What a user gives to be told of its publications' errors (Aeron's
# publicationErrorFrameHandler): called on the client's loop, with each error's fields.
PublicationErrorHandler = Callable[[p.PublicationError], object]
R = TypeVar("R", bound=Reply)
P = TypeVar("P", bound=Publication)


class ClientConductor:
    """One client's commands, answers, logs and resources on the driver of `dir`; made by
    `connect` (Aeron's ClientConductor). `Aeron` is its public face."""

    def __init__(
        self,
        dir: str,
        cnc: CncFile,
        idle_strategy: IdleStrategy,
        driver_timeout_s: float,
        publication_error_handler: PublicationErrorHandler | None = None,
    ):
        self.driver_dir = dir
        self.publication_error_handler = publication_error_handler
        self.idle_strategy = idle_strategy
        self.driver_timeout_s = driver_timeout_s
        self.lost: AeronError | None = None  # why the driver is gone, or dropped this client
        self.is_closed = False
        self._closing = False  # close() began: what was asked before it gets no resource
        self._pending: dict[int, asyncio.Future[Reply | p.ErrorResponse]] = {}
        self._abandoned: dict[int, Request] = {}
        self._subscriptions: dict[int, tuple[Subscription, ImageEvents]] = {}
        self._publications: dict[int, tuple[Publication, _core.LogAppender]] = {}
        self._counters: dict[int, ClientCounter] = {}  # by registration id
        self._images: dict[int, _core.ImageReader] = {}  # by id(image)
        self._logs: dict[str, tuple[LogBuffers, int]] = {}
        self._rejects: dict[int, int] = {}  # image correlation ids, by their REJECT_IMAGE's
        self._keepalive: asyncio.Task[None] | None = None
        self.transport = CncTransport(dir, cnc, self._on_response, self._fail, driver_timeout_s)
        self.client_id = self.transport.client_id
        self.counters = self.transport.counters
        self.control_protocol_version = control_protocol_version(self.counters)

    @classmethod
    async def connect(
        cls,
        dir: str,
        idle_strategy: IdleStrategy,
        driver_timeout_s: float,
        publication_error_handler: PublicationErrorHandler | None = None,
    ) -> ClientConductor:
        """Reach the driver of `dir` through its cnc.dat (waiting for it up to
        `driver_timeout_s`) and take a client id; `start` then."""
        cnc = await map_cnc(dir, driver_timeout_s)
        try:
            return cls(dir, cnc, idle_strategy, driver_timeout_s, publication_error_handler)
        except BaseException:
            cnc.close()
            raise

    async def start(self) -> None:
        """Send the first keepalive, start the heartbeat, register the doorbell."""
        self.transport.keepalive()  # the first command: the driver makes the heartbeat counter
        liveness_s = self.transport.client_liveness_timeout_ns / 1e9
        interval = min(KEEPALIVE_INTERVAL_S, liveness_s / 4)
        self._keepalive = asyncio.get_running_loop().create_task(self._keep_alive(interval))
        await self.request(
            p.AddCounter(
                self.next_correlation_id(),
                self.client_id,
                CLIENT_DOORBELL_TYPE_ID,
                wake_key(waker.waker().id),
                f"aeronio client doorbell: {self.client_id}",
            ),
            p.CounterReady,
        )

    # -- liveness -----------------------------------------------------------------------

    async def _keep_alive(self, interval: float) -> None:
        """Every `interval`: this client's heartbeat, and a look at the driver's. The driver is
        lost once its heartbeat stood still for `driver_timeout_s` of this loop's time
        (HeartbeatWatch: a wall clock that steps ends nothing)."""
        liveness_s = self.transport.client_liveness_timeout_ns / 1e9
        cnc = self.transport.cnc
        last = time.monotonic_ns()  # connect made the first keepalive
        driver = HeartbeatWatch(cnc.driver_heartbeat_ms, last, period_ns=int(interval * 1e9))
        while not self.lost:
            await asyncio.sleep(interval)
            now = time.monotonic_ns()
            if (quiet_s := (now - last) / 1e9) > liveness_s:
                # This loop was blocked for longer than the driver waits: it has timed us out.
                self._fail(
                    ClientTimeoutError(
                        f"client {self.client_id} sent no keepalive for {quiet_s:.1f} s "
                        f"(driver liveness timeout {liveness_s:.1f} s)"
                    )
                )
                return
            last = now
            if cnc.driver_closed:
                self._on_driver_lost("it closed")
                return
            silent_ms = driver.look(cnc.driver_heartbeat_ms, now) / 1e6
            if silent_ms > self.driver_timeout_s * 1000:
                self._on_driver_lost(f"no driver heartbeat for {silent_ms:.0f} ms")
                return
            self.transport.keepalive()
            self.transport.poll()  # a doorbell or a watcher look lost is made up for here

    def _on_driver_lost(self, reason: str) -> None:
        self._fail(DriverTimeoutError(f"media driver on {self.driver_dir} lost: {reason}"))

    def _fail(self, error: AeronError) -> None:
        """The driver is gone or dropped us: fail what waits, make publications inert (their
        counters may belong to others now), close every image as unavailable (`poll` then
        raises `error`), wake what parks."""
        if self.lost or self.is_closed:
            return
        self.lost = error
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)
        for _, appender in self._publications.values():
            appender.close()
        self._detach_counters()
        for _, events in self._subscriptions.values():
            events.client_lost()
        signals.ring_all()

    def check_alive(self) -> None:
        """Raise DriverTimeoutError if the driver was lost, AeronError if this client is closed."""
        if self.lost:
            raise self.lost
        if self.is_closed:
            raise AeronError("the Aeron client is closed")

    # -- commands -----------------------------------------------------------------------

    def next_correlation_id(self) -> int:
        return self.transport.next_correlation_id()

    async def change_destination(
        self, kind: type[DestinationCommand], owner: Publication | Subscription, channel: str
    ) -> int:
        """Add or remove (`kind`) a destination of a publication (multi-destination-cast) or
        subscription (multi-destination); the command's correlation id (a destination's
        registration id when added to a publication)."""
        _check_open(owner)
        ChannelUri.parse(channel)  # a channel at all: ChannelUriError naming what is wrong
        correlation_id = self.next_correlation_id()
        command = kind(correlation_id, self.client_id, _destinations_id(owner), channel)
        await self.request(command, p.OperationSuccess)
        return correlation_id

    async def remove_destination_by_id(self, owner: Publication, destination_id: int) -> None:
        """Remove the destination of `owner` that `change_destination` added as
        `destination_id`."""
        _check_open(owner)
        limits.check_int64(destination_id, "registration_id")
        command = p.RemoveDestinationById(
            self.next_correlation_id(),
            self.client_id,
            _destinations_id(owner),
            destination_id,
        )
        await self.request(command, p.OperationSuccess)

    async def request(self, command: Request, reply: type[R]) -> R:
        """Send `command` and await the driver's answer: `reply`, or its ErrorResponse raised
        (ChannelUriError, StorageSpaceError, DriverError); DriverTimeoutError when none comes
        in time."""
        self.transport.check_home()
        self.check_alive()
        makes = reply in _MAKES
        if makes and self._closing:
            raise AeronError("the Aeron client is closed")
        _check_length(command, self.transport.max_command_length)
        future = asyncio.get_running_loop().create_future()
        self._pending[command.correlation_id] = future
        try:
            await self.transport.send(command)
        except BaseException as e:
            self._pending.pop(command.correlation_id, None)
            if isinstance(e, asyncio.CancelledError) and isinstance(command, _RELEASES):
                self.transport.submit(command)  # what is closed here goes from the driver too
            raise
        try:
            # Not wait_for (on 3.11 it loses a cancel that meets the answer); shielded, so that
            # an answer that comes as the caller gives up is still seen, and released.
            async with asyncio.timeout(self.driver_timeout_s):
                response = await asyncio.shield(future)
        except _ClosedUnder:
            if isinstance(command, _REMOVES):  # the client's close released it
                return cast(R, p.OperationSuccess(command.correlation_id))
            raise AeronError(
                f"the Aeron client closed before {type(command).__name__} was answered"
            ) from None
        except TimeoutError:
            if future.done() and future.exception() is not None:
                raise  # the driver was lost (_fail's DriverTimeoutError), not this wait's end
            self._abandon(command, future)
            raise DriverTimeoutError(
                f"driver on {self.driver_dir} did not answer {type(command).__name__} "
                f"within {self.driver_timeout_s} s (its driver heartbeat is "
                f"{self.transport.driver_heartbeat_age_ms:.0f} ms old)"
            ) from None
        except asyncio.CancelledError:
            self._abandon(command, future)
            raise
        finally:
            self._pending.pop(command.correlation_id, None)
        if makes and self._closing:  # the close began as it waited: what it made goes with it
            raise AeronError(f"the Aeron client closed before {type(command).__name__} was done")
        if isinstance(response, p.ErrorResponse):
            if response.code == p.INVALID_CHANNEL:
                raise ChannelUriError(response.message)
            if response.code == p.STORAGE_SPACE:
                raise StorageSpaceError(response.message, response.code)
            raise DriverError(response.message, response.code)
        if not isinstance(response, reply):
            raise DriverError(
                f"the driver answered {type(command).__name__} with {type(response).__name__}, "
                f"not {reply.__name__}",
                p.GENERIC_ERROR,
            )
        return response

    def _on_response(self, response: p.Response) -> None:
        """Handle a driver message; nothing raised here (a user callback included) may reach the
        driver or the transport."""
        try:
            self._dispatch(response)
        except Exception:
            log.exception("aeronio client %d failed handling %r", self.client_id, response)

    def _dispatch(self, response: p.Response) -> None:
        if isinstance(response, Reply | p.ErrorResponse) and (
            response.correlation_id in self._abandoned
        ):
            self._release_abandoned(response)
            return
        if isinstance(response, p.OperationSuccess | p.ErrorResponse) and (
            response.correlation_id in self._rejects
        ):
            image_id = self._rejects.pop(response.correlation_id)
            if isinstance(response, p.ErrorResponse):
                log.warning(
                    "aeronio client %d: the driver did not reject image %d, which holds its "
                    "publisher: %s",
                    self.client_id,
                    image_id,
                    response.message,
                )
            return
        match response:
            case p.ClientTimeout():
                self._fail(ClientTimeoutError(f"the driver timed out client {self.client_id}"))
            case p.ImageReady():
                self._on_image_ready(response)
            case p.ImageUnavailable():
                tracked = self._subscriptions.get(response.subscription_registration_id)
                if tracked is not None:
                    tracked[1].unavailable(response.correlation_id)
            case p.UnavailableCounter():
                pass  # a counter went (this client's own are freed by their close)
            case p.PublicationError():
                self._on_publication_error(response)
            case _:
                future = self._pending.get(response.correlation_id)
                if future is not None and not future.done():
                    future.set_result(response)

    def _holds_publication(self, registration_id: int) -> bool:
        """A publication of this client's, or one whose add the driver has answered (the
        answer read with what came after it, before the add's coroutine takes it up)."""
        publications = self._publications.values()
        if any(pub.original_registration_id == registration_id for pub, _ in publications):
            return True
        return any(
            future.done()
            and not future.cancelled()
            and future.exception() is None
            and isinstance(ready := future.result(), p.PublicationReady)
            and ready.registration_id == registration_id
            for future in self._pending.values()
        )

    def _on_publication_error(self, error: p.PublicationError) -> None:
        """An error of one of this client's publications (a receiver's error frame, an image
        rejected): logged, and handed to the user's `publication_error_handler` (what it raises
        is logged). Other clients' publications' errors are theirs."""
        if not self._holds_publication(error.registration_id):
            return
        log.warning(
            "aeronio client %d: publication %d (session %d, stream %d) got error %d from "
            "receiver %d at %s:%d: %s",
            self.client_id,
            error.registration_id,
            error.session_id,
            error.stream_id,
            error.error_code,
            error.receiver_id,
            error.source_address,
            error.source_port,
            error.error_message,
        )
        if self.publication_error_handler is not None:
            try:
                self.publication_error_handler(error)
            except Exception:
                log.exception(
                    "publication error handler %r raised for %r",
                    self.publication_error_handler,
                    error,
                )

    def _abandon(self, command: Request, future: asyncio.Future[Reply | p.ErrorResponse]) -> None:
        """The caller gave up on `command`: what the driver makes for it is released when the
        answer comes, or now if it came just before the caller gave up."""
        self._abandoned[command.correlation_id] = command
        if future.done():
            if future.exception() is None:
                self._release_abandoned(future.result())
            else:  # the client closed or lost its driver: nothing to undo
                del self._abandoned[command.correlation_id]

    def _release_abandoned(self, response: Reply | p.ErrorResponse) -> None:
        """An answer to a request whose caller gave up: undo what the driver did for it."""
        command = self._abandoned.pop(response.correlation_id)
        if isinstance(response, p.PublicationReady):
            self.transport.submit(
                p.RemovePublication(
                    self.next_correlation_id(), self.client_id, command.correlation_id
                )
            )
        elif isinstance(response, p.CounterReady):
            self.transport.submit(
                p.RemoveCounter(self.next_correlation_id(), self.client_id, command.correlation_id)
            )
        elif isinstance(response, p.SubscriptionReady) and isinstance(command, p.AddSubscription):
            self.transport.submit(
                p.RemoveSubscription(
                    self.next_correlation_id(), self.client_id, command.correlation_id
                )
            )

    # -- logs ---------------------------------------------------------------------------

    def _map_log(self, log_file: str) -> tuple[LogBuffers, signals.LogSignals]:
        """Map a log (once per client), counting its users; and its signals in this process."""
        log, users = self._logs.get(log_file) or (LogBuffers.open(log_file), 0)
        self._logs[log_file] = (log, users + 1)
        return log, signals.acquire(log_file)

    def _unmap_log(self, log_file: str) -> None:
        """Drop one user of a log and its signals; the last one unmaps it (views already handed
        out keep the memory alive until they go)."""
        signals.release(log_file)
        log, users = self._logs.pop(log_file)
        if users > 1:
            self._logs[log_file] = (log, users - 1)
        else:
            log.close()

    def _on_image_ready(self, ready: p.ImageReady) -> None:
        tracked = self._subscriptions.get(ready.subscription_registration_id)
        if tracked is None or tracked[0].is_closed:
            return
        subscription, events = tracked
        # The driver set the position before it told; only the image moves it on.
        position = self.counters.get_counter_value(ready.subscriber_position_id)
        try:
            log, log_signals = self._map_log(ready.log_file)
        except (OSError, ValueError) as e:  # never read here: rejected, not to hold its publisher
            events.refused(ready.session_id, ready.log_file, position, e)
            self._reject_image(
                ready.correlation_id,
                position,
                f"aeronio client {self.client_id} could not map the image's log "
                f"{ready.log_file}: {e}",
            )
            return
        reader = _core.ImageReader(
            log.mapped,
            self.counters.buffer.owner,
            self.counters.value_offset(ready.subscriber_position_id),
            log_signals.consumed,
        )
        image = Image(
            subscription,
            ready.correlation_id,
            ready.session_id,
            ready.log_file,
            position,
            ready.source_identity,
            reader,
            log_signals,
            log.metadata,
            self.reject_image,
        )
        self._images[id(image)] = reader
        events.available(image)

    async def reject_image(self, image: Image, reason: str) -> None:
        """Reject `image` at its position (Aeron's REJECT_IMAGE, answered: DriverError if the
        driver refuses); `reason` checked against Aeron's limit."""
        if not isinstance(reason, str):
            raise ConfigurationError(f"reason must be a str, not {type(reason).__name__}")
        if len(reason.encode()) > limits.MAX_ERROR_MESSAGE_LENGTH:
            raise ConfigurationError(
                f"reason of {len(reason.encode())} bytes is over the "
                f"{limits.MAX_ERROR_MESSAGE_LENGTH} bytes an image's rejection may give"
            )
        command = p.RejectImage(
            self.next_correlation_id(), self.client_id, image.correlation_id, image.position, reason
        )
        await self.request(command, p.OperationSuccess)

    def _reject_image(self, image_id: int, position: int, reason: str) -> None:
        """Ask the driver to reject the image of correlation id `image_id` (Aeron's
        REJECT_IMAGE; `reason` cut to Aeron's limit), so that its publisher is held by it no
        more and told why; a refusal is logged."""
        reason = reason.encode()[: limits.MAX_ERROR_MESSAGE_LENGTH].decode(errors="ignore")
        command = p.RejectImage(
            self.next_correlation_id(), self.client_id, image_id, position, reason
        )
        self._rejects[command.correlation_id] = image_id
        self.transport.submit(command)

    def release_image(self, image: Image) -> None:
        """Make `image` inert (polls return 0, its position counter is left alone) and let go
        of its log; its subscription calls this when the image goes."""
        reader = self._images.pop(id(image), None)
        if reader is not None:
            reader.close()
            self._unmap_log(image.log_file)

    # -- resources ----------------------------------------------------------------------

    async def add_publication(self, channel: str, stream_id: int, cls: type[P]) -> P:
        """A publication (`cls`: Publication or ExclusivePublication) of `channel` (canonical)
        and `stream_id` (both checked)."""
        exclusive = cls.is_exclusive
        correlation_id = self.next_correlation_id()
        ready = await self.request(
            p.AddPublication(correlation_id, self.client_id, channel, stream_id, exclusive),
            p.PublicationReady,
        )
        log, log_signals = self._map_log(ready.log_file)
        appender = _core.LogAppender(
            log.mapped,
            self.counters.buffer.owner,
            self.counters.value_offset(ready.position_limit_counter_id),
            exclusive,
            log_signals.data,
            log_signals.consumed,
        )
        publication = cls(
            self,
            channel,
            stream_id,
            correlation_id,
            ready.registration_id,
            ready.session_id,
            ready.log_file,
            appender,
            log_signals,
            log.metadata,
            ready.channel_status_indicator_id,
        )
        self._publications[id(publication)] = (publication, appender)
        return publication

    async def release_publication(self, publication: Publication, revoke: bool) -> None:
        """`publication` closed (its appender first): let go of its log, remove it (revoked:
        REMOVE_PUBLICATION's REVOKE flag)."""
        self._publications.pop(id(publication), None)
        self._unmap_log(publication.log_file)
        flags = p.REMOVE_PUBLICATION_FLAG_REVOKE if revoke else 0
        await self._remove(p.RemovePublication, publication.registration_id, flags)

    async def add_subscription(
        self,
        channel: str,
        stream_id: int,
        available_image: ImageHandler | None,
        unavailable_image: ImageHandler | None,
    ) -> Subscription:
        """A subscription of `channel` (canonical) and `stream_id` (both checked)."""
        correlation_id = self.next_correlation_id()
        subscription = Subscription(  # which tracks itself
            self, channel, stream_id, correlation_id, available_image, unavailable_image
        )
        try:
            ready = await self.request(
                p.AddSubscription(correlation_id, self.client_id, channel, stream_id),
                p.SubscriptionReady,
            )
        except BaseException:  # given up: the driver's side is removed (_abandon), and the
            self._subscriptions.pop(correlation_id, None)  # images that came meanwhile go here
            subscription.let_go()
            raise
        subscription.channel_status_id = ready.channel_status_indicator_id
        return subscription

    def track_subscription(self, subscription: Subscription, events: ImageEvents) -> None:
        """Tell `subscription` of its images through `events` (it calls this when made)."""
        self._subscriptions[subscription.registration_id] = (subscription, events)

    async def release_subscription(self, subscription: Subscription) -> None:
        """`subscription` closed (its images first): remove it."""
        self._subscriptions.pop(subscription.registration_id, None)
        await self._remove(p.RemoveSubscription, subscription.registration_id)

    async def add_counter(self, type_id: int, label: str, key: bytes) -> ClientCounter:
        correlation_id = self.next_correlation_id()
        ready = await self.request(
            p.AddCounter(correlation_id, self.client_id, type_id, key, label), p.CounterReady
        )
        counter = ClientCounter(
            self.counters, ready.counter_id, correlation_id, self.release_counter
        )
        self._counters[correlation_id] = counter
        return counter

    async def release_counter(self, counter: ClientCounter) -> None:
        """`counter` closed (detached first): remove it."""
        self._counters.pop(counter.registration_id, None)
        await self._remove(p.RemoveCounter, counter.registration_id)

    def _detach_counters(self) -> None:
        """The client closed or is lost: the driver frees its counters, so their handles let
        go of the file."""
        for counter in self._counters.values():
            counter.detach()
        self._counters.clear()

    async def _remove(
        self,
        kind: type[p.RemovePublication | p.RemoveSubscription | p.RemoveCounter],
        registration_id: int,
        *flags: int,
    ) -> None:
        """Ask the driver to remove what `registration_id` made (unless it is gone, or this
        client is closed: then the driver removes it with the client)."""
        if not self.is_closed and not self.lost:
            command = kind(self.next_correlation_id(), self.client_id, registration_id, *flags)
            await self.request(command, p.OperationSuccess)

    async def add_static_counter(
        self, type_id: int, label: str, registration_id: int, key: bytes
    ) -> Counter:
        command = p.AddStaticCounter(
            self.next_correlation_id(), self.client_id, registration_id, type_id, key, label
        )
        ready = await self.request(command, p.StaticCounter)
        return self.counters.counter(ready.counter_id)

    async def next_session_id(self, stream_id: int) -> int:
        """The driver's next session id; a random one from a driver that has no such command
        (control protocol before 1.0.0), as Aeron's clients do."""
        if self.control_protocol_version < CONTROL_PROTOCOL_VERSION:
            return int.from_bytes(os.urandom(4), "little", signed=True)
        command = p.GetNextAvailableSessionId(self.next_correlation_id(), self.client_id, stream_id)
        return (await self.request(command, p.NextAvailableSessionId)).next_session_id

    # -- lifecycle ----------------------------------------------------------------------

    async def close(self) -> None:
        """Close every publication and subscription, stop the heartbeat, tell the driver."""
        if self.is_closed:
            return
        self._closing = True
        self._close_under_pending()
        try:
            await self._close_streams()
        finally:  # cancelled under a remove: the rest close without asking (ClientClose frees)
            self.is_closed = True
            await self._close_streams()  # closed, the client waits for no answer
            self._detach_counters()
            self._close_under_pending()  # those asked while it closed
            if not self.lost:
                self.transport.submit(p.ClientClose(self.client_id))
            if self._keepalive is not None:
                self._keepalive.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._keepalive
            await self.transport.close()

    async def _close_streams(self) -> None:
        """Close every publication and subscription (removing each, unless `is_closed`)."""
        for publication, _ in list(self._publications.values()):
            with contextlib.suppress(AeronError):
                await publication.close()
        for subscription, _ in list(self._subscriptions.values()):
            with contextlib.suppress(AeronError):
                await subscription.close()

    def _close_under_pending(self) -> None:
        """The requests waiting as the client closes: their answers may never come now."""
        for future in self._pending.values():
            if not future.done():
                future.set_exception(_ClosedUnder())


class _ClosedUnder(AeronError):
    """What a request still waiting when its client began to close gets instead of an answer."""


# The answers that hand out something of this client's (refused once it closes) ...
_MAKES = (p.PublicationReady, p.SubscriptionReady, p.CounterReady, p.StaticCounter)
# ... and the commands whose work the client's close does (done when it closes under them).
_REMOVES = (
    p.RemovePublication,
    p.RemoveSubscription,
    p.RemoveCounter,
    p.RemoveDestination,
    p.RemoveDestinationById,
    p.RemoveRcvDestination,
)
# The removes of what a close lets go of: sent even when the close is cancelled while the
# to-driver ring buffer is full (the publication, subscription or counter is closed here).
_RELEASES = (p.RemovePublication, p.RemoveSubscription, p.RemoveCounter)


def _destinations_id(owner: Publication | Subscription) -> int:
    """The id a destination command names `owner` by: a publication's log's (the first
    add's, as Aeron's clients), a subscription's own."""
    if isinstance(owner, Subscription):
        return owner.registration_id
    return owner.original_registration_id


def _check_open(owner: Publication | Subscription) -> None:
    if owner.is_closed:
        what = "subscription" if isinstance(owner, Subscription) else "publication"
        raise AeronError(f"the {what} is closed")


def _check_length(command: p.Command, max_length: int) -> None:
    """ConfigurationError, naming the longest field, for a command longer than the driver's
    ring buffer takes."""
    length = len(p.encode(command)[1])
    if length > max_length:
        sizes = {
            name: len(value)
            for name in command.__struct_fields__
            if isinstance(value := getattr(command, name), str | bytes)
        }
        name = max(sizes, key=lambda n: sizes[n])
        raise ConfigurationError(
            f"{name} of {sizes[name]} characters makes {type(command).__name__} {length} bytes "
            f"long, over the {max_length} bytes the driver's ring buffer takes"
        )
