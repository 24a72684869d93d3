"""The driver's side of a network publication (Aeron's NetworkPublication): its log, its sender
(the SenderStateMachine and the shared SendChannelEndpoint it sends through) and its spies, the
subscribers that read its log directly.

Its limit is the slowest of the sender and the spies plus the term window, and one term behind
stays for retransmits. It is connected while a receiver answers (spies connect it only with
spies-simulate-connection).

Released, it lingers until it has delivered its stream: all of it sent, acknowledged by every
receiver heard lately (status messages at or past the end of stream) and read by its spies,
and its end of stream announced (an EOS heartbeat), so that nothing offered before the release
is lost when the driver goes (Aeron lingers for the whole linger timeout, or until a unicast
receiver says it closed). The linger timeout bounds it, and it ends when no receiver is left
(none heard for RECEIVER_TIMEOUT_NS) once its spies have read it all; ended with data not
acknowledged or read, it is reported (`report_loss`).

Revoked, it ends at once where its publishers stopped (`DriverPublication.revoke`): its sender
sends what was appended as flow control allows, then heartbeats flagged EOS and REVOKED, which
end its receivers' images at once, for its whole linger (as Aeron 1.53's).
"""

from __future__ import annotations

from collections.abc import Callable

from aeronio.counters import Counter
from aeronio.driver.channel_endpoints import SendChannelEndpoint
from aeronio.driver.driver_publication import DriverPublication, PublicationParts, State
from aeronio.driver.resources import slowest
from aeronio.driver.sender_state import SenderStateMachine, nobody_told
from aeronio.protocol.frames import ErrorFrame


class NetworkPublication(DriverPublication):
    def __init__(
        self,
        parts: PublicationParts,
        *,
        sender: SenderStateMachine,
        sender_counters: list[Counter],
        endpoint: SendChannelEndpoint,
        release_endpoint: Callable[[SendChannelEndpoint], None],
        spies_simulate_connection: bool,
    ):
        super().__init__(parts)
        self.sender = sender
        self.sender_counters = sender_counters
        self.endpoint = endpoint
        self._release_endpoint = release_endpoint
        self.spies_simulate_connection = spies_simulate_connection
        endpoint.publications[(self.session_id, self.stream_id)] = sender
        sender.on_receiver_error = self._on_receiver_error
        sender.say_connected = self.say_connected
        self.signals.data.add_callback(self._wake)

    @property
    def channel_status_id(self) -> int:
        return self.endpoint.status.id

    def _on_receiver_error(self, error: ErrorFrame, source: tuple[str, int]) -> None:
        """A receiver refused its image (Aeron's NetworkPublication.onError): every client is
        told (ON_PUBLICATION_ERROR), as Aeron's driver tells them."""
        self._proxy.publication_error(
            self,
            error.error_code,
            error.error_message.decode(errors="replace"),
            source=source,
            receiver_id=error.receiver_id,
            group_tag=error.group_tag,
        )

    def consumer_position(self) -> int | None:
        spies = slowest(self.subscribers)
        if self.sender.is_connected:
            position = self.sender.sender_position.get()
            return position if spies is None else min(position, spies)
        return spies if self.sender.spies_connected else None

    def update_publisher_limit(self) -> int:
        if self.sender.spies_connected and not self.sender.is_connected:
            self.sender.skip_to(max(spy.counter.get() for spy in self.subscribers))
        return super().update_publisher_limit()

    def unblock_position(self) -> int | None:
        """The sender's position: a spy that stopped reading must not stop unblocking."""
        connected = self.sender.is_connected or self.sender.spies_connected
        return self.sender.sender_position.get() if connected else None

    def _subscribers_changed(self) -> None:
        """The sender's status messages say whether it is connected; its spies only with
        spies-simulate-connection."""
        self.sender.spies_connected = self.spies_simulate_connection and bool(self.subscribers)
        self.sender.refresh_connected()

    def _clean_limit(self, consumer: int) -> int:
        return consumer - self.log.term_length  # a term behind the sender, for retransmits

    # -- lingering ----------------------------------------------------------------------

    @property
    def awaiting_delivery(self) -> bool:
        """Released and not yet delivered: draining, then lingering until acknowledged (not
        revoked: the rest is not delivered)."""
        return not self.revoked and (self.state is State.DRAINING or self.state is State.LINGER)

    def _spies_read_all(self) -> bool:
        spies = slowest(self.subscribers)
        return spies is None or spies >= self.log.end_of_stream_position

    def _delivered(self) -> bool:
        end = self.log.end_of_stream_position
        return self.sender.has_delivered(end, self.released_ns) and self._spies_read_all()

    def _linger_ended(self, now_ns: int) -> bool:
        """Delivered; or no receiver heard lately left to deliver to (nor a spy that simulates
        a connection), once its spies have read it all (Aeron's draining waits for them); or
        the linger timed out. Revoked, it lingers its whole linger, as Aeron's, and at least
        until a heartbeat told its receivers (their images end at once), if it has any;
        nothing it had is reported lost."""
        if self.revoked:
            sender = self.sender
            told = sender.heartbeat_sent_since(self.released_ns) or not sender.receivers_heard
            return told and now_ns >= self.linger_deadline_ns()
        if self._delivered():
            return True
        if not (self.sender.receivers_heard or self.sender.spies_connected):
            if self._spies_read_all():
                self.report_loss("with no receiver left")
                return True
        if now_ns >= self.linger_deadline_ns():
            self.report_loss(f"after its linger of {self.linger_ns // 1_000_000} ms")
            return True
        return False

    def deadline_ns(self) -> int | None:
        """The linger's end, and until the EOS heartbeat went, the sender's next heartbeat (the
        DataPath sends it without Python; then this looks whether all is delivered)."""
        deadline = super().deadline_ns()
        end = self.log.end_of_stream_position
        if deadline is not None and not self.sender.end_of_stream_sent(end, self.released_ns):
            deadline = min(deadline, self.sender.data_sender.heartbeat_deadline_ns)
        return deadline

    def undelivered(self) -> str | None:
        if self.state is State.ACTIVE or self.revoked:
            return None
        end = self.log.end_of_stream_position
        acknowledged = self.sender.acknowledged_position
        spies = slowest(self.subscribers)
        lost = []
        if acknowledged < end and self.sender.heard_any:
            lost.append(
                f"its receivers have not acknowledged up to {end} (acknowledged up to "
                f"{acknowledged}, sent up to {self.sender.sender_position.get()})"
            )
        if spies is not None and spies < end:
            lost.append(f"its spies read up to {spies}, not up to {end}")
        return "; ".join(lost) or None

    def close(self) -> None:
        self.signals.data.remove_callback(self._wake)
        # It and its sender refer to each other until here: its log goes without the collector.
        self.sender.on_receiver_error = nobody_told
        self.sender.say_connected = self.log.mapped.set_connected
        self.endpoint.publications.pop((self.session_id, self.stream_id), None)
        self._counters.free(*self.sender_counters)
        self._release_endpoint(self.endpoint)
        super().close()
