"""The Aeron client: connects to a media driver and creates publications and subscriptions.

Commands go to the driver as typed messages; the driver's answers resolve the awaiting calls and
its image notifications add and remove the images of subscriptions.
"""

from __future__ import annotations

import asyncio
import os
import random
from typing import Any

from aeronio import _core
from aeronio.client.publication import ExclusivePublication, Publication
from aeronio.client.subscription import Image, Subscription
from aeronio.counters import CountersReader
from aeronio.driver import protocol as p
from aeronio.driver.conductor import COUNTERS_FILE
from aeronio.driver.media_driver import MediaDriver, find_embedded
from aeronio.errors import (
    AeronError,
    ChannelUriError,
    ConfigurationError,
    DriverError,
    DriverNotFoundError,
    DriverTimeoutError,
)
from aeronio.logbuffer import signals
from aeronio.logbuffer.log_buffers import LogBuffers
from aeronio.protocol.channel import ChannelUri

DEFAULT_COMMAND_TIMEOUT_S = 10.0


class Aeron:
    """A client of one media driver. Use `async with Aeron.connect(dir=...) as aeron`."""

    def __init__(self, driver: MediaDriver, owns_driver: bool = False):
        self._driver = driver
        self._owns_driver = owns_driver
        self.client_id = random.getrandbits(63)
        self._next_correlation = random.getrandbits(40)
        self._pending: dict[int, asyncio.Future] = {}
        self._subscriptions: dict[int, Subscription] = {}
        self._publications: dict[int, Publication] = {}
        self._logs: dict[str, tuple[LogBuffers, int]] = {}
        self.counters = CountersReader.open(os.path.join(driver.dir, COUNTERS_FILE))
        self.is_closed = False

    @classmethod
    def connect(cls, dir: str | os.PathLike | None = None, **driver_options: Any) -> _Connection:
        """Attach to the driver on `dir`; with no dir, launch an embedded driver on the running
        loop (with `driver_options`) that this client owns and closes."""
        return _Connection(cls, dir, driver_options)

    @property
    def driver_dir(self) -> str:
        return self._driver.dir

    # -- commands -----------------------------------------------------------------------

    def _correlation_id(self) -> int:
        self._next_correlation += 1
        return self._next_correlation

    async def _request(self, command: p.Command) -> p.Response:
        if self.is_closed:
            raise AeronError("the Aeron client is closed")
        future = asyncio.get_running_loop().create_future()
        self._pending[command.correlation_id] = future
        self._driver.submit(command, self._on_response)
        try:
            response = await asyncio.wait_for(future, DEFAULT_COMMAND_TIMEOUT_S)
        except TimeoutError:
            raise DriverTimeoutError(
                f"driver on {self.driver_dir} did not answer {type(command).__name__}"
            ) from None
        finally:
            self._pending.pop(command.correlation_id, None)
        if isinstance(response, p.ErrorResponse):
            error = ChannelUriError if response.code == p.INVALID_CHANNEL else DriverError
            if error is DriverError:
                raise DriverError(response.message, response.code)
            raise error(response.message)
        return response

    def _on_response(self, response: p.Response) -> None:
        match response:
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
        if subscription is None:
            return
        log = self._map_log(ready.log_file)
        log_signals = signals.acquire(ready.log_file)
        reader = _core.ImageReader(
            log.mapped,
            self.counters.buffer.owner,
            self.counters.value_offset(ready.subscriber_position_counter_id),
            log_signals.consumed,
        )
        image = Image(
            subscription,
            ready.correlation_id,
            ready.session_id,
            ready.log_file,
            ready.join_position,
            ready.source_identity,
            reader,
            log_signals,
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
        _check_stream_id(stream_id)
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
        )
        self._publications[id(publication)] = publication
        return publication

    async def _release_publication(self, publication: Publication) -> None:
        self._publications.pop(id(publication), None)
        self._unmap_log(publication.log_file)
        if not self.is_closed:
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
        _check_stream_id(stream_id)
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

    async def _release_subscription(self, subscription: Subscription) -> None:
        self._subscriptions.pop(subscription.registration_id, None)
        if not self.is_closed:
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
            await publication.close()
        for subscription in list(self._subscriptions.values()):
            await subscription.close()
        self.is_closed = True
        self._driver.submit(p.ClientClose(self.client_id), lambda response: None)
        self.counters.close()
        if self._owns_driver:
            await self._driver.close()

    async def __aenter__(self) -> Aeron:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()


class _Connection:
    """What `Aeron.connect` returns: await it, or use it with `async with`."""

    def __init__(self, cls, dir, driver_options):
        self._cls, self._dir, self._options = cls, dir, driver_options
        self._client: Aeron | None = None

    async def _connect(self) -> Aeron:
        if self._dir is not None and not self._options:
            driver = find_embedded(str(self._dir))
            if driver is None:
                raise DriverNotFoundError(f"no media driver runs on dir {self._dir}")
            self._client = self._cls(driver)
        else:
            if self._dir is not None:
                self._options["dir"] = str(self._dir)
            driver = await MediaDriver.launch(**self._options).start()
            self._client = self._cls(driver, owns_driver=True)
        return self._client

    def __await__(self):
        return self._connect().__await__()

    async def __aenter__(self) -> Aeron:
        return await self._connect()

    async def __aexit__(self, *exc) -> None:
        if self._client is not None:
            await self._client.close()


def connect(dir: str | os.PathLike | None = None, **driver_options: Any) -> _Connection:
    """Connect to the driver on `dir`, or launch an embedded one on the running loop."""
    return Aeron.connect(dir, **driver_options)


def _check_stream_id(stream_id: int) -> None:
    if (
        not isinstance(stream_id, int)
        or isinstance(stream_id, bool)
        or not -(2**31) <= stream_id < 2**31
    ):
        raise ConfigurationError(f"stream_id {stream_id!r} must be a signed 32-bit integer")
