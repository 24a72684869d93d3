"""The driver's side of a network image (Aeron's PublicationImage): the log a session is rebuilt
into, its receiver (the ReceiverStateMachine, whose losses go to the driver's loss report, and
the ReceiveChannelEndpoint it came in on, which sends its control frames to every sender it
heard), its rcv-hwm and rcv-pos counters and the subscribers that read it. It ends when its
stream ended and its subscribers consumed it to its end (Aeron's drained image), or when it
went silent (then its session is ignored for a while), or with its endpoint (the
registry ends it then)."""

from __future__ import annotations

from collections.abc import Callable

from aeronio.counters import Counter, SystemCounters
from aeronio.driver.channel_endpoints import ReceiveChannelEndpoint
from aeronio.driver.client_proxy import ClientProxy
from aeronio.driver.raw_log_factory import free_log
from aeronio.driver.receiver_state import IMAGE_LIVENESS_TIMEOUT_NS, ReceiverStateMachine
from aeronio.driver.resources import SubscriberPosition, slowest
from aeronio.driver.stream_counters import StreamCounters
from aeronio.logbuffer import descriptor as d
from aeronio.logbuffer import signals
from aeronio.protocol import control as p
from aeronio.protocol.frames import error_frame

# How long the session of an image that ended is ignored: longer than a publication's default
# linger, during which it still sends heartbeats and answers with SETUPs.
IMAGE_COOL_DOWN_NS = 10_000_000_000


class PublicationImage:
    KIND = "images"

    def __init__(
        self,
        *,
        registration_id: int,
        receiver: ReceiverStateMachine,
        subscribers: list[SubscriberPosition],
        endpoint: ReceiveChannelEndpoint,
        source_address: str,
        log_file: str,
        log_signals: signals.LogSignals,
        counters: list[Counter],
        stream_counters: StreamCounters,
        proxy: ClientProxy,
        wake: Callable[[], None],
    ):
        """Made of its parts, each made first: `receiver` (ringing `log_signals.data`, its
        losses reported) reads its consumption from `subscribers`; `log_signals`, acquired for
        `log_file`, are released when it closes."""
        self.registration_id = registration_id
        self.receiver = receiver
        self.session_id = receiver.session_id
        self.stream_id = receiver.stream_id
        self.endpoint = endpoint
        self.source_address = source_address  # host:port of the sender
        self.log_file = log_file
        self.counters = counters
        self.subscribers = subscribers  # the receiver's consumption is theirs (no cycle)
        self._stream_counters = stream_counters
        self._proxy = proxy
        self._wake = wake
        self._ended = False
        self._left_at: int | None = None  # where its last subscriber left, once none is left
        self.signals = log_signals
        self.signals.consumed.add_callback(wake)

    def consumption(self) -> int | None:
        return slowest(self.subscribers)

    def add_subscriber(self, subscriber: SubscriberPosition) -> None:
        self.subscribers.append(subscriber)
        self._left_at = None
        self._consumers_changed()
        self._proxy.image_ready(self, subscriber, self.source_address)

    def remove_subscriber(self, subscription_id: int) -> None:
        for sub in list(self.subscribers):
            if sub.subscription_id == subscription_id:
                self.subscribers.remove(sub)
                if not self.subscribers:  # what it read counts in the farewell
                    self._left_at = sub.counter.get()
                self._consumers_changed()  # before its counter is freed
                self._stream_counters.free(sub.counter)

    def _consumers_changed(self) -> None:
        """The DataPath's status messages follow the subscribers there are now."""
        self.receiver.rebuilder.set_consumers([sub.counter for sub in self.subscribers])

    def wake_subscribers(self) -> None:
        """The receiver position moved: wake the image's parked subscribers, here and in other
        processes (the router wakes them for the frames it inserts; this is for the rest, such
        as a gap filled with PAD)."""
        if self.signals.data.waiters:
            self.signals.data.ring()
        self.receiver.log.mapped.wake_data_waiters()

    def on_time_event(self, now_ns: int) -> None:
        """End once not alive: silent, or its stream ended and consumed to its end (telling its
        subscribers before would make them drop what they had not read yet); at once once its
        publication was revoked (what they had not read is not theirs). The senders of a
        stream that ended get the image's farewell, then again in answer to what they send
        during the cool-down; those of a silent image are not heard, and get none."""
        receiver = self.receiver
        if receiver.revoked and not self._ended:  # gone at once, not drained (as Aeron's)
            self._end(now_ns, self._say_farewell())
            return
        consumed = self.consumption()
        drained = consumed is None or consumed >= receiver.rebuild_position.get()
        silent = now_ns - receiver.time_of_last_packet_ns > IMAGE_LIVENESS_TIMEOUT_NS
        self._update_active_transport_count(silent)
        if not self._ended and not receiver.is_alive(now_ns) and (drained or silent):
            self._end(now_ns, None if silent else self._say_farewell())

    def leave(self, now_ns: int) -> None:
        """End now, its last subscriber gone (Aeron's image drains once it has none): its
        senders get its farewell, and again in answer to what they send during the cool-down
        (unless its stream is subscribed anew first)."""
        if not self._ended:
            self._end(now_ns, self._say_farewell())

    def reject(self, reason: str, now_ns: int) -> None:
        """A subscriber rejected it (Aeron's REJECT_IMAGE): it ends now, taking no more data
        (its subscribers are told it went), and its senders get an ERR frame (IMAGE_REJECTED,
        `reason`), now and in answer to what they send during its cool-down: their publishers
        are told, and their flow control lets this receiver go."""
        frame = error_frame(
            session_id=self.session_id,
            stream_id=self.stream_id,
            receiver_id=self.receiver.receiver_id,
            error_code=p.IMAGE_REJECTED,
            error_length=len(reason.encode()),
            error_message=reason.encode(),
        ).encode()
        self.send_control(frame)
        self.receiver.system[SystemCounters.ERROR_FRAMES_SENT].increment()
        self._end(now_ns, frame)

    def _end(self, now_ns: int, farewell: bytes | None) -> None:
        self.endpoint.dispatcher.cool_down(
            self.session_id, self.stream_id, now_ns + IMAGE_COOL_DOWN_NS, farewell
        )
        self._ended = True

    def _say_farewell(self) -> bytes:
        """Tell the image's senders where its subscribers left the stream (the receiver's
        farewell); the farewell."""
        farewell = self.receiver.farewell(self._left_at)
        self.send_control(farewell)
        return farewell

    def _update_active_transport_count(self, silent: bool) -> None:
        """The log's active transport count, which Aeron's clients read (Image's
        activeTransportCount): the senders it hears, none once it went silent."""
        key = (self.session_id, self.stream_id)
        count = 0 if silent else len(self.endpoint.connections.get(key, ()))
        metadata = self.receiver.log.metadata
        if metadata.get_int32_volatile(d.LOG_ACTIVE_TRANSPORT_COUNT_OFFSET) != count:
            metadata.put_int32_ordered(d.LOG_ACTIVE_TRANSPORT_COUNT_OFFSET, count)

    def has_reached_end_of_life(self) -> bool:
        return self._ended

    def send_control(self, frame: bytes) -> None:
        """A status message or NAK, to every sender the image heard."""
        self.endpoint.send_to_connections((self.session_id, self.stream_id), frame)

    def close(self) -> None:
        """Say farewell if it goes before it ended (its last subscription or the driver
        closed), then let go of all it holds."""
        if not self._ended:
            self._say_farewell()
        self.endpoint.remove_image(self.session_id, self.stream_id)
        subscribers = list(self.subscribers)
        self.subscribers.clear()
        self._consumers_changed()
        for sub in subscribers:
            self._proxy.image_unavailable(self, sub)
            self._stream_counters.free(sub.counter)
        self._stream_counters.free(*self.counters)
        self.signals.consumed.remove_callback(self._wake)
        signals.release(self.log_file)
        free_log(self.receiver.log)
