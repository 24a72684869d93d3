"""The Aeron client: connects to a media driver and creates publications and subscriptions.

Commands go to the driver, any driver (aeronio's or Aeron's), as Aeron's client protocol through
the driver directory's cnc.dat (client/transport.py). `Aeron` is the public face; its client
conductor (client/conductor.py) sends the commands, resolves the awaiting calls with the driver's
answers, adds and removes the images of subscriptions, and keeps the heartbeats: when the driver
dies, every pending and later call raises DriverTimeoutError.
"""

from __future__ import annotations

import asyncio
import os

from aeronio.client.conductor import ClientConductor, PublicationErrorHandler
from aeronio.client.counter import ClientCounter
from aeronio.client.publication import ExclusivePublication, Publication
from aeronio.client.subscription import ImageHandler, Subscription
from aeronio.counters import Counter, CountersReader
from aeronio.errors import AeronError, ConfigurationError
from aeronio.idle import DEFAULT_IDLE_STRATEGY, IdleStrategy, check_seconds
from aeronio.protocol import embedded, limits
from aeronio.protocol.channel import ChannelUri

DEFAULT_DRIVER_TIMEOUT_S = 10.0


class Aeron:
    """A client of one media driver. Use `async with aeronio.connect(dir=...) as aeron`."""

    def __init__(
        self,
        dir: str,
        *,
        idle_strategy: IdleStrategy = DEFAULT_IDLE_STRATEGY,
        driver_timeout_s: float = DEFAULT_DRIVER_TIMEOUT_S,
        publication_error_handler: PublicationErrorHandler | None = None,
    ):
        """`publication_error_handler(error)`, if given, is told each error of this client's
        publications (a `protocol.control.PublicationError`: IMAGE_REJECTED when a subscriber
        rejected its image), as Aeron's publicationErrorFrameHandler; each is logged too."""
        check_seconds(driver_timeout_s, "driver_timeout_s")
        if publication_error_handler is not None and not callable(publication_error_handler):
            raise ConfigurationError(
                f"publication_error_handler {publication_error_handler!r} is not callable"
            )
        if not callable(getattr(idle_strategy, "idle", None)):
            raise ConfigurationError(
                f"idle_strategy {idle_strategy!r} has no idle(attempt, park) method"
            )
        self.driver_dir = os.path.abspath(dir)
        self.idle_strategy = idle_strategy
        self.driver_timeout_s = driver_timeout_s
        self.publication_error_handler = publication_error_handler
        self.client_id = -1  # from the driver's ring buffer, on attach
        self.counters: CountersReader | None = None  # the driver's, on attach
        self.is_closed = False
        self._closed = asyncio.Event()  # set once the first close has finished
        self._conductor: ClientConductor | None = None
        self._owned_driver: embedded.EmbeddedDriver | None = None

    async def attach(self, owned: embedded.EmbeddedDriver | None = None) -> Aeron:
        """Reach the driver of `driver_dir` through its cnc.dat (`owned`: one launched for this
        client, which closes it); register this process's doorbell with it.
        `aeronio.connect` calls this."""
        conductor = await ClientConductor.connect(
            self.driver_dir,
            self.idle_strategy,
            self.driver_timeout_s,
            self.publication_error_handler,
        )
        self._conductor = conductor
        self.client_id = conductor.client_id
        self.counters = conductor.counters
        try:
            await conductor.start()
        except BaseException:
            await self.close()  # not `owned`: the caller, who launched it, closes it
            raise
        self._owned_driver = owned
        return self

    def _attached(self) -> ClientConductor:
        """The client conductor (AeronError before `attach` and once closed)."""
        if self.is_closed:
            raise AeronError("the Aeron client is closed")
        if self._conductor is None:
            raise AeronError(f"the Aeron client of {self.driver_dir} is not attached")
        return self._conductor

    @property
    def driver_pid(self) -> int:
        return self._attached().transport.driver_pid

    def check_alive(self) -> None:
        """Raise DriverTimeoutError if the driver was lost, AeronError if this client is closed."""
        if self._conductor is not None:
            self._conductor.check_alive()
        elif self.is_closed:
            raise AeronError("the Aeron client is closed")

    # -- publications -------------------------------------------------------------------

    async def add_publication(self, channel: str, stream_id: int) -> Publication:
        """A concurrent publication; publications of the same channel and stream share a log."""
        uri = ChannelUri.parse(channel)
        limits.check_int32(stream_id, "stream_id")
        return await self._attached().add_publication(str(uri), stream_id, Publication)

    async def add_exclusive_publication(self, channel: str, stream_id: int) -> ExclusivePublication:
        """A publication with its own session, for one writer."""
        uri = ChannelUri.parse(channel)
        limits.check_int32(stream_id, "stream_id")
        return await self._attached().add_publication(str(uri), stream_id, ExclusivePublication)

    # -- subscriptions ------------------------------------------------------------------

    async def add_subscription(
        self,
        channel: str,
        stream_id: int,
        *,
        available_image: ImageHandler | None = None,
        unavailable_image: ImageHandler | None = None,
    ) -> Subscription:
        """A subscription; images of matching publications arrive as the driver links them."""
        uri = ChannelUri.parse(channel)
        limits.check_int32(stream_id, "stream_id")
        for name, handler in (
            ("available_image", available_image),
            ("unavailable_image", unavailable_image),
        ):
            if handler is not None and not callable(handler):
                raise ConfigurationError(f"{name} {handler!r} is not callable")
        return await self._attached().add_subscription(
            str(uri), stream_id, available_image, unavailable_image
        )

    # -- counters -----------------------------------------------------------------------

    async def add_counter(self, type_id: int, label: str, key: bytes = b"") -> ClientCounter:
        """A counter in the driver's counters (cnc.dat) (shown by `aeronio stat`) that this client
        owns and writes; it is freed by `close()` or when this client ends."""
        limits.check_int32(type_id, "type_id")
        _check_label_and_key(label, key)
        return await self._attached().add_counter(type_id, label, bytes(key))

    async def add_static_counter(
        self, type_id: int, label: str, registration_id: int, key: bytes = b""
    ) -> Counter:
        """The driver's counter of `type_id` and `registration_id`, made (with `label` and
        `key`) if there is none: no client owns it, it outlives this one (Aeron's
        addStaticCounter); DriverError if a client owns the one there is."""
        limits.check_int32(type_id, "type_id")
        limits.check_int64(registration_id, "registration_id")
        _check_label_and_key(label, key)
        return await self._attached().add_static_counter(
            type_id, label, registration_id, bytes(key)
        )

    async def next_session_id(self, stream_id: int) -> int:
        """A session id the driver gives no publication on `stream_id` now, for a channel's
        `session-id=` (Aeron's nextSessionId); the driver will not give it itself soon. A
        driver too old to be asked (control protocol before 1.0.0) gives none: the id is then
        random, as with Aeron's clients."""
        limits.check_int32(stream_id, "stream_id")
        return await self._attached().next_session_id(stream_id)

    # -- lifecycle ----------------------------------------------------------------------

    async def close(self) -> None:
        """Close every publication and subscription of this client (and its own driver); a
        close called while another runs returns once that one has finished. In a process
        forked from the one that made it, or on another event loop, AeronError: nothing is
        touched (a forked child connects a client of its own)."""
        if self._conductor is not None:  # in a forked child, or on another loop: nothing is
            self._conductor.transport.check_home()  # touched, the original's to close
        if self.is_closed:
            await self._closed.wait()
            return
        self.is_closed = True
        try:
            if self._conductor is not None:
                await self._conductor.close()
        finally:  # cancelled or failed, the client's own driver closes all the same
            try:
                if self._owned_driver is not None:
                    await self._owned_driver.close()
            finally:
                self._closed.set()

    async def __aenter__(self) -> Aeron:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _check_label_and_key(label: object, key: object) -> None:
    if not isinstance(label, str):
        raise ConfigurationError(f"label must be a str, not {type(label).__name__}")
    if not isinstance(key, bytes | bytearray | memoryview):
        raise ConfigurationError(f"key must be bytes, not {type(key).__name__}")
