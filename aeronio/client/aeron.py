"""The Aeron client: connects to a media driver and creates publications and subscriptions.

Commands go to the driver, any driver (aeronio's or Aeron's), as Aeron's client protocol through
the driver directory's cnc.dat (client/transport.py); the driver's answers resolve the awaiting
calls and its image notifications add and remove the images of subscriptions. A keepalive task
keeps this client's heartbeat counter and watches the driver's heartbeat: when the driver dies,
every pending and later call raises DriverTimeoutError.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time

from aeronio import _core
from aeronio.client.counter import ClientCounter
from aeronio.client.publication import ExclusivePublication, Publication
from aeronio.client.subscription import Image, Subscription
from aeronio.client.transport import CncTransport, wake_key
from aeronio.counters import CLIENT_DOORBELL_TYPE_ID, Counter, CountersReader
from aeronio.errors import (
    AeronError,
    ChannelUriError,
    ClientTimeoutError,
    ConfigurationError,
    DriverError,
    DriverTimeoutError,
    StorageSpaceError,
)
from aeronio.idle import DEFAULT_IDLE_STRATEGY, IdleStrategy
from aeronio.logbuffer import signals, waker
from aeronio.logbuffer.log_buffers import LogBuffers
from aeronio.protocol import control as p
from aeronio.protocol import embedded, limits
from aeronio.protocol.channel import ChannelUri

DEFAULT_DRIVER_TIMEOUT_S = 10.0
KEEPALIVE_INTERVAL_S = 0.5  # Aeron's: how often the heartbeat counter is stored
log = logging.getLogger("aeronio.client")
_REPLIES = (
    p.PublicationReady,
    p.SubscriptionReady,
    p.CounterReady,
    p.OperationSuccess,
    p.ErrorResponse,
    p.StaticCounter,
    p.NextAvailableSessionId,
)


class Aeron:
    """A client of one media driver. Use `async with aeronio.connect(dir=...) as aeron`."""

    def __init__(
        self,
        dir: str,
        *,
        idle_strategy: IdleStrategy = DEFAULT_IDLE_STRATEGY,
        driver_timeout_s: float = DEFAULT_DRIVER_TIMEOUT_S,
    ):
        self.driver_dir = os.path.abspath(dir)
        self.idle_strategy = idle_strategy
        self.driver_timeout_s = driver_timeout_s
        self.client_id = -1  # from the driver's ring buffer, on attach
        self._pending: dict[int, asyncio.Future] = {}
        self._subscriptions: dict[int, Subscription] = {}
        self._publications: dict[int, Publication] = {}
        self._logs: dict[str, tuple[LogBuffers, int]] = {}
        self._transport: CncTransport | None = None
        self._owned_driver: embedded.EmbeddedDriver | None = None
        self._keepalive: asyncio.Task | None = None
        self._lost: AeronError | None = None
        self._abandoned: dict[int, p.Command] = {}
        self.counters: CountersReader | None = None
        self.is_closed = False

    async def attach(self, owned: embedded.EmbeddedDriver | None = None) -> Aeron:
        """Reach the driver of `driver_dir` through its cnc.dat (`owned`: one launched for this
        client, which closes it); register this process's doorbell with it.
        `aeronio.connect` calls this."""
        self._owned_driver = owned
        self._transport = await CncTransport.connect(
            self.driver_dir, self._on_response, self._fail, self.driver_timeout_s
        )
        self.client_id = self._transport.client_id
        self.counters = self._transport.counters
        self._transport.keepalive()  # the first command: the driver makes the heartbeat counter
        liveness_s = self._transport.client_liveness_timeout_ns / 1e9
        interval = min(KEEPALIVE_INTERVAL_S, liveness_s / 4)
        self._keepalive = asyncio.get_running_loop().create_task(self._keep_alive(interval))
        try:
            await self._request(
                p.AddCounter(
                    self._correlation_id(),
                    self.client_id,
                    CLIENT_DOORBELL_TYPE_ID,
                    wake_key(waker.waker().id),
                    f"aeronio client doorbell: {self.client_id}",
                )
            )
        except BaseException:
            self._owned_driver = None  # the caller, who launched it, closes it
            await self.close()
            raise
        return self

    @property
    def driver_pid(self) -> int:
        return self._transport.driver_pid

    # -- liveness -----------------------------------------------------------------------

    async def _keep_alive(self, interval: float) -> None:
        liveness_s = self._transport.client_liveness_timeout_ns / 1e9
        last = time.monotonic()  # attach made the first keepalive
        while not self._lost:
            await asyncio.sleep(interval)
            now = time.monotonic()
            if now - last > liveness_s:
                # This loop was blocked for longer than the driver waits: it has timed us out.
                self._fail(
                    ClientTimeoutError(
                        f"client {self.client_id} sent no keepalive for {now - last:.1f} s "
                        f"(driver liveness timeout {liveness_s:.1f} s)"
                    )
                )
                return
            last = now
            age_ms = self._transport.driver_heartbeat_age_ms
            if age_ms > self.driver_timeout_s * 1000:
                self._on_driver_lost(f"no driver heartbeat for {age_ms:.0f} ms")
                return
            self._transport.keepalive()
            self._transport.poll()  # a doorbell or a watcher look lost is made up for here

    def _on_driver_lost(self, reason: str) -> None:
        self._fail(DriverTimeoutError(f"media driver on {self.driver_dir} lost: {reason}"))

    def _fail(self, error: AeronError) -> None:
        """The driver is gone or dropped us: fail what waits, make publications inert (their
        counters may belong to others now), close every image as unavailable (`poll` then
        raises `error`), wake what parks."""
        if self._lost or self.is_closed:
            return
        self._lost = error
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)
        for publication in self._publications.values():
            publication._appender.close()
        for subscription in self._subscriptions.values():
            subscription._remove_images()
        signals.ring_all()

    def check_alive(self) -> None:
        """Raise DriverTimeoutError if the driver was lost, AeronError if this client is closed."""
        if self._lost:
            raise self._lost
        if self.is_closed:
            raise AeronError("the Aeron client is closed")

    # -- commands -----------------------------------------------------------------------

    def _correlation_id(self) -> int:
        return self._transport.next_correlation_id()

    async def _destination(
        self, owner: Publication | Subscription, channel: str | int, add: bool
    ) -> int:
        """Add or remove a destination of a publication (multi-destination-cast) or of a
        subscription (multi-destination): by its channel, or a publication's by the
        registration id that adding it returned."""
        if isinstance(owner, Subscription):
            what, kind = "subscription", p.AddRcvDestination if add else p.RemoveRcvDestination
        elif isinstance(channel, int):
            what, kind = "publication", p.RemoveDestinationById
        else:
            what, kind = "publication", p.AddDestination if add else p.RemoveDestination
        if owner.is_closed:
            raise AeronError(f"the {what} is closed")
        correlation_id = self._correlation_id()
        await self._request(kind(correlation_id, self.client_id, owner.registration_id, channel))
        return correlation_id

    async def _request(self, command: p.Command) -> p.Response:
        self.check_alive()
        _check_length(command, self._transport.max_command_length)
        future = asyncio.get_running_loop().create_future()
        self._pending[command.correlation_id] = future
        try:
            await self._transport.send(command)
        except BaseException:
            self._pending.pop(command.correlation_id, None)
            raise
        try:
            # Not wait_for (on 3.11 it loses a cancel that meets the answer); shielded, so that
            # an answer that comes as the caller gives up is still seen, and released.
            async with asyncio.timeout(self.driver_timeout_s):
                response = await asyncio.shield(future)
        except TimeoutError:
            self._abandon(command, future)
            raise DriverTimeoutError(
                f"driver on {self.driver_dir} did not answer {type(command).__name__} "
                f"within {self.driver_timeout_s} s"
            ) from None
        except asyncio.CancelledError:
            self._abandon(command, future)
            raise
        finally:
            self._pending.pop(command.correlation_id, None)
        if isinstance(response, p.ErrorResponse):
            if response.code == p.INVALID_CHANNEL:
                raise ChannelUriError(response.message)
            if response.code == p.STORAGE_SPACE:
                raise StorageSpaceError(response.message)
            raise DriverError(response.message, response.code)
        return response

    def _on_response(self, response: p.Response) -> None:
        """Handle a driver message; nothing raised here (a user callback included) may reach the
        driver or the transport."""
        try:
            self._dispatch(response)
        except Exception:
            log.exception("aeronio client %d failed handling %r", self.client_id, response)

    def _dispatch(self, response: p.Response) -> None:
        if isinstance(response, _REPLIES) and response.correlation_id in self._abandoned:
            self._release_abandoned(response)
            return
        match response:
            case p.ClientTimeout():
                self._fail(ClientTimeoutError(f"the driver timed out client {self.client_id}"))
            case p.ImageReady():
                self._on_image_ready(response)
            case p.ImageUnavailable():
                subscription = self._subscriptions.get(response.subscription_registration_id)
                if subscription is not None:
                    subscription._remove_image(response.correlation_id)
            case _:
                future = self._pending.get(response.correlation_id)
                if future is not None and not future.done():
                    future.set_result(response)

    def _abandon(self, command: p.Command, future: asyncio.Future) -> None:
        """The caller gave up on `command`: what the driver makes for it is released when the
        answer comes, or now if it came just before the caller gave up."""
        self._abandoned[command.correlation_id] = command
        if future.done():
            self._release_abandoned(future.result())

    def _release_abandoned(self, response: p.Response) -> None:
        """An answer to a request whose caller gave up: undo what the driver did for it."""
        command = self._abandoned.pop(response.correlation_id)
        if isinstance(response, p.PublicationReady):
            self._transport.submit(
                p.RemovePublication(
                    self._correlation_id(), self.client_id, response.registration_id
                )
            )
        elif isinstance(response, p.CounterReady):
            self._transport.submit(
                p.RemoveCounter(self._correlation_id(), self.client_id, command.correlation_id)
            )
        elif isinstance(response, p.SubscriptionReady) and isinstance(command, p.AddSubscription):
            self._transport.submit(
                p.RemoveSubscription(self._correlation_id(), self.client_id, command.correlation_id)
            )

    def _map_log(self, log_file: str) -> LogBuffers:
        """Map a log (once per client), counting its users."""
        log, users = self._logs.get(log_file) or (LogBuffers.open(log_file), 0)
        self._logs[log_file] = (log, users + 1)
        return log

    def _unmap_log(self, log_file: str) -> None:
        """Drop one user of a log; the last one unmaps it (views already handed out keep the
        memory alive until they go)."""
        log, users = self._logs.pop(log_file)
        if users > 1:
            self._logs[log_file] = (log, users - 1)
        else:
            log.close()

    def _on_image_ready(self, ready: p.ImageReady) -> None:
        subscription = self._subscriptions.get(ready.subscription_registration_id)
        if subscription is None or subscription.is_closed:
            return
        log = self._map_log(ready.log_file)
        log_signals = signals.acquire(ready.log_file)
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
            # The driver sets the position before it tells; only this image moves it on.
            self.counters.get_counter_value(ready.subscriber_position_id),
            ready.source_identity,
            reader,
            log_signals,
            log.metadata,
        )
        subscription._add_image(image)

    # -- publications -------------------------------------------------------------------

    async def add_publication(self, channel: str, stream_id: int) -> Publication:
        """A concurrent publication; publications of the same channel and stream share a log."""
        return await self._add_publication(channel, stream_id, exclusive=False)

    async def add_exclusive_publication(self, channel: str, stream_id: int) -> ExclusivePublication:
        """A publication with its own session, for one writer."""
        return await self._add_publication(channel, stream_id, exclusive=True)

    async def _add_publication(self, channel: str, stream_id: int, exclusive: bool):
        uri = ChannelUri.parse(channel)
        limits.check_int32(stream_id, "stream_id")
        ready = await self._request(
            p.AddPublication(self._correlation_id(), self.client_id, str(uri), stream_id, exclusive)
        )
        log = self._map_log(ready.log_file)
        log_signals = signals.acquire(ready.log_file)
        appender = _core.LogAppender(
            log.mapped,
            self.counters.buffer.owner,
            self.counters.value_offset(ready.position_limit_counter_id),
            exclusive,
            log_signals.data,
            log_signals.consumed,
        )
        cls = ExclusivePublication if exclusive else Publication
        publication = cls(
            self,
            str(uri),
            stream_id,
            ready.registration_id,
            ready.session_id,
            ready.log_file,
            appender,
            log_signals,
            log.metadata,
        )
        self._publications[id(publication)] = publication
        return publication

    async def _release_publication(self, publication: Publication) -> None:
        self._publications.pop(id(publication), None)
        self._unmap_log(publication.log_file)
        if not self.is_closed and not self._lost:
            await self._request(
                p.RemovePublication(
                    self._correlation_id(), self.client_id, publication.registration_id
                )
            )

    # -- subscriptions ------------------------------------------------------------------

    async def add_subscription(
        self, channel: str, stream_id: int, *, available_image=None, unavailable_image=None
    ) -> Subscription:
        """A subscription; images of matching publications arrive as the driver links them."""
        uri = ChannelUri.parse(channel)
        limits.check_int32(stream_id, "stream_id")
        correlation_id = self._correlation_id()
        subscription = Subscription(
            self, str(uri), stream_id, correlation_id, available_image, unavailable_image
        )
        self._subscriptions[correlation_id] = subscription
        try:
            await self._request(
                p.AddSubscription(correlation_id, self.client_id, str(uri), stream_id)
            )
        except BaseException:
            self._subscriptions.pop(correlation_id, None)
            raise
        return subscription

    async def add_counter(self, type_id: int, label: str, key: bytes = b"") -> ClientCounter:
        """A counter in the driver's counters (cnc.dat) (shown by `aeronio stat`) that this client
        owns and writes; it is freed by `close()` or when this client ends."""
        limits.check_int32(type_id, "type_id")
        if not isinstance(label, str):
            raise ConfigurationError(f"label must be a str, not {type(label).__name__}")
        if not isinstance(key, bytes | bytearray | memoryview):
            raise ConfigurationError(f"key must be bytes, not {type(key).__name__}")
        correlation_id = self._correlation_id()
        ready = await self._request(
            p.AddCounter(correlation_id, self.client_id, type_id, bytes(key), label)
        )
        return ClientCounter(self.counters, ready.counter_id, correlation_id, self._release_counter)

    async def add_static_counter(
        self, type_id: int, label: str, registration_id: int, key: bytes = b""
    ) -> Counter:
        """The driver's counter of `type_id` and `registration_id`, made (with `label` and
        `key`) if there is none: no client owns it, it outlives this one (Aeron's
        addStaticCounter); DriverError if a client owns the one there is."""
        limits.check_int32(type_id, "type_id")
        limits.check_int64(registration_id, "registration_id")
        if not isinstance(label, str):
            raise ConfigurationError(f"label must be a str, not {type(label).__name__}")
        if not isinstance(key, bytes | bytearray | memoryview):
            raise ConfigurationError(f"key must be bytes, not {type(key).__name__}")
        command = p.AddStaticCounter(
            self._correlation_id(), self.client_id, registration_id, type_id, bytes(key), label
        )
        ready = await self._request(command)
        return self.counters.counter(ready.counter_id)

    async def next_session_id(self, stream_id: int) -> int:
        """A session id the driver gives no publication on `stream_id` now, for a channel's
        `session-id=` (Aeron's nextSessionId); the driver will not give it itself soon."""
        limits.check_int32(stream_id, "stream_id")
        command = p.GetNextAvailableSessionId(self._correlation_id(), self.client_id, stream_id)
        return (await self._request(command)).next_session_id

    async def _release_counter(self, counter: ClientCounter) -> None:
        if not self.is_closed and not self._lost:
            await self._request(
                p.RemoveCounter(self._correlation_id(), self.client_id, counter.registration_id)
            )

    async def _release_subscription(self, subscription: Subscription) -> None:
        self._subscriptions.pop(subscription.registration_id, None)
        if not self.is_closed and not self._lost:
            await self._request(
                p.RemoveSubscription(
                    self._correlation_id(), self.client_id, subscription.registration_id
                )
            )

    # -- lifecycle ----------------------------------------------------------------------

    async def close(self) -> None:
        """Close every publication and subscription of this client (and its own driver)."""
        if self.is_closed:
            return
        for publication in list(self._publications.values()):
            with contextlib.suppress(AeronError):
                await publication.close()
        for subscription in list(self._subscriptions.values()):
            with contextlib.suppress(AeronError):
                await subscription.close()
        self.is_closed = True
        if self._keepalive is not None:
            self._keepalive.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keepalive
        if self._transport is not None:
            if not self._lost:
                self._transport.submit(p.ClientClose(self.client_id))
            await self._transport.close()
        if self._owned_driver is not None:
            await self._owned_driver.close()

    async def __aenter__(self) -> Aeron:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()


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
        name = max(sizes, key=sizes.get)
        raise ConfigurationError(
            f"{name} of {sizes[name]} characters makes {type(command).__name__} {length} bytes "
            f"long, over the {max_length} bytes the driver's ring buffer takes"
        )
