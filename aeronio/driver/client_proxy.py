"""ClientProxy: the one place that tells clients what the driver did (Aeron's ClientProxy).
Responses go to the command's reply callback; notifications (images, timeouts) to the client
they concern, if it is still there. A client of cnc.dat's to-driver ring buffer is answered on
the to-clients broadcast buffer (`transmit`), which every such client reads; after a duty cycle
that transmitted, `ring_doorbells` wakes each process that registered a client doorbell."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from aeronio.concurrent.broadcast import BroadcastTransmitter
from aeronio.concurrent.error_log import cut
from aeronio.protocol import control as p

if TYPE_CHECKING:
    from aeronio.driver.driver_publication import DriverPublication
    from aeronio.driver.publication_image import PublicationImage
    from aeronio.driver.resources import ClientSession, SubscriberPosition

Reply = Callable[[p.Response], None]
# The longest error message sent to a client (well within the broadcast buffer's longest
# message, an eighth of its capacity: 128 KiB by default).
MAX_ERROR_LENGTH = 16 * 1024


class ClientProxy:
    def __init__(
        self, clients: dict, transmitter: BroadcastTransmitter, ring: Callable[[int], None]
    ):
        self._clients = clients  # client id -> ClientSession (its `send`, its `doorbells`)
        self._transmitter = transmitter
        self._ring = ring  # rings a process's doorbell, by its wake id
        self._transmitted = False

    def transmit(self, response: p.Response) -> None:
        """Send `response` to the clients of the broadcast buffer (the reply of their commands)."""
        self._transmitter.transmit(*p.encode(response))
        self._transmitted = True

    def ring_doorbells(self) -> None:
        """Once something was transmitted: one wake-up per distinct registered client doorbell."""
        if not self._transmitted:
            return
        self._transmitted = False
        wake_ids = {w for client in self._clients.values() for w in client.doorbells.values()}
        for wake_id in wake_ids:
            self._ring(wake_id)

    @staticmethod
    def publication_ready(
        reply: Reply, correlation_id: int, publication: DriverPublication
    ) -> None:
        reply(
            p.PublicationReady(
                correlation_id=correlation_id,
                registration_id=publication.registration_id,
                session_id=publication.session_id,
                stream_id=publication.stream_id,
                position_limit_counter_id=publication.publisher_limit.id,
                channel_status_indicator_id=publication.channel_status_id,
                log_file=publication.log_file,
                exclusive=publication.exclusive,
            )
        )

    @staticmethod
    def subscription_ready(reply: Reply, correlation_id: int, channel_status_id: int) -> None:
        reply(p.SubscriptionReady(correlation_id, channel_status_id))

    @staticmethod
    def operation_success(reply: Reply, correlation_id: int) -> None:
        reply(p.OperationSuccess(correlation_id))

    @staticmethod
    def error(reply: Reply, correlation_id: int, code: int, message: str) -> None:
        """An ErrorResponse; a message over MAX_ERROR_LENGTH (quoting a long argument) is cut,
        so that the response fits in a broadcast buffer message."""
        reply(p.ErrorResponse(correlation_id, code, cut(message, MAX_ERROR_LENGTH)))

    def _send(self, client_id: int, message: p.Response) -> None:
        client = self._clients.get(client_id)
        if client is not None:
            client.send(message)

    def image_ready(
        self,
        image: DriverPublication | PublicationImage,
        subscriber: SubscriberPosition,
        source: str,
    ) -> None:
        """`subscriber` (a SubscriberPosition) now reads `image` (a publication's log for IPC
        and spies, a PublicationImage for UDP) from its position counter's value."""
        self._send(
            subscriber.client_id,
            p.ImageReady(
                correlation_id=image.registration_id,
                session_id=image.session_id,
                stream_id=image.stream_id,
                subscription_registration_id=subscriber.subscription_id,
                subscriber_position_id=subscriber.counter.id,
                log_file=image.log_file,
                source_identity=source,
            ),
        )

    def image_unavailable(
        self, image: DriverPublication | PublicationImage, subscriber: SubscriberPosition
    ) -> None:
        self._send(
            subscriber.client_id,
            p.ImageUnavailable(
                correlation_id=image.registration_id,
                subscription_registration_id=subscriber.subscription_id,
                stream_id=image.stream_id,
                channel=subscriber.channel,
            ),
        )

    def publication_error(
        self,
        publication: DriverPublication,
        error_code: int,
        message: str,
        *,
        source: tuple[str, int] = ("", 0),
        receiver_id: int = p.NULL_VALUE,
        destination_registration_id: int = p.NULL_VALUE,
        group_tag: int = p.NULL_VALUE,
    ) -> None:
        """Tell every client that `publication` got an error (a receiver's error frame from
        `source`, host and port, or its IPC image rejected); each tells its own users of it."""
        self.transmit(
            p.PublicationError(
                registration_id=publication.registration_id,
                destination_registration_id=destination_registration_id,
                session_id=publication.session_id,
                stream_id=publication.stream_id,
                receiver_id=receiver_id,
                group_tag=group_tag,
                source_address=source[0],
                source_port=source[1],
                error_code=error_code,
                error_message=cut(message, MAX_ERROR_LENGTH),
            )
        )

    def client_timeout(self, client: ClientSession) -> None:
        client.send(p.ClientTimeout(client.client_id))

    @staticmethod
    def counter_ready(reply: Reply, registration_id: int, counter_id: int) -> None:
        reply(p.CounterReady(registration_id, counter_id))

    @staticmethod
    def static_counter(reply: Reply, correlation_id: int, counter_id: int) -> None:
        reply(p.StaticCounter(correlation_id, counter_id))

    @staticmethod
    def next_available_session_id(reply: Reply, correlation_id: int, session_id: int) -> None:
        reply(p.NextAvailableSessionId(correlation_id, session_id))

    @staticmethod
    def unavailable_counter(reply: Reply, registration_id: int, counter_id: int) -> None:
        reply(p.UnavailableCounter(registration_id, counter_id))
