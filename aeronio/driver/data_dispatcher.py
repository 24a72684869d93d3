"""Routes received datagrams to publication images, sans-IO (Aeron's DataPacketDispatcher).

A data packet (DATA frames, or a PAD) for a session that has an image goes, whole, to that
image's rebuilder; the Cython ImageRouter (`router`, run by the driver's DataPath on what the
endpoint's sockets received) does this without Python work per datagram. The rest is decided
here: a heartbeat moves its image's high-water mark; a SETUP for a subscribed stream asks
`on_setup` for a new image; a SETUP, a heartbeat or a data packet (the router notes the
senders new to an image: `on_data_senders`) tells `connections` which source it came from (the
image sends its control frames to every source it heard, and its stream ends once each of them
ended it: a replay's EOS does not end an image the live stream feeds). Only the heartbeats of
an image's connections (the first sender heard on each destination) count: those of another
sender of its session (a publisher restarted from another port) neither keep it alive nor end its
stream, so that it goes silent and its subscribers learn that it went away. DATA for a subscribed
stream with no image yet gets a setup-eliciting status message back, unless it ends its stream
(EOS: no SETUP would come) or the session's image just ended. During that cool-down (over
early if its stream is subscribed anew) what the session sends is answered with the image's
farewell (its last status message, flagged end-of-stream) if it had one, so that its
publication hears where its stream was left (each answer at most once per source every
100 ms). Anything malformed is counted as an invalid packet and dropped — nothing a datagram
holds can raise out of `on_slow_datagrams`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Generic, NamedTuple, Protocol, TypeVar

from aeronio._core import TYPE_FIELD_OFFSET, DatagramReceiver, ImageRouter
from aeronio.counters import SystemCounters
from aeronio.driver.receiver_state import ReceiverStateMachine
from aeronio.driver.sender_state import Position
from aeronio.errors import AeronError
from aeronio.protocol.frames import (
    EOS_FLAG,
    HDR_TYPE_DATA,
    HDR_TYPE_ERR,
    HDR_TYPE_NAK,
    HDR_TYPE_PAD,
    HDR_TYPE_SETUP,
    SM_SETUP_FLAG,
    DataHeader,
    FrameRef,
    MalformedFrameError,
    NakFrame,
    SetupFrame,
    iter_frames,
    status_message,
)

ELICIT_INTERVAL_NS = 100_000_000
_ANSWERS_REMEMBERED = 1024


class _CoolDown(NamedTuple):
    until_ns: int
    farewell: bytes | None  # what the session's data is answered with


# Where a datagram came from, as `send_control` answers it (the driver's: a Connection).
Source = TypeVar("Source", bound=Hashable)
Source_contra = TypeVar("Source_contra", bound=Hashable, contravariant=True)


class Connections(Protocol[Source_contra]):
    """The sources each image heard (the driver's ReceiveChannelEndpoint)."""

    def connect(self, image: tuple[int, int], source: Source_contra) -> bool:
        """A SETUP, heartbeat or data packet of `image` from `source`: True if the source is
        new to it."""
        ...

    def end_of_stream(self, image: tuple[int, int], source: Source_contra) -> bool:
        """`source` ended its stream: True once every source of `image` did."""
        ...

    def is_connection(self, image: tuple[int, int], source: Source_contra) -> bool:
        """Whether `source` is one of the senders `image` answers (the first heard on its
        destination)."""
        ...


class DataDispatcher(Generic[Source]):
    def __init__(
        self,
        receiver_id: int,
        system: Mapping[SystemCounters, Position],
        on_setup: Callable[[SetupFrame, Source, int], ReceiverStateMachine | None],
        send_control: Callable[[bytes, Source], None],
        hears_naks: bool = False,
        connections: Connections[Source] | None = None,
    ):
        """`hears_naks`: the endpoint is a multicast group member that hears the other
        receivers' NAKs (they suppress the images' own). `connections`: the sources each image
        heard; one new to an image gets a status message at once, and an end of stream counts
        only once every source of the image sent one (without `connections`, at once)."""
        self.receiver_id = receiver_id
        self.hears_naks = hears_naks
        self.system = system
        self.on_setup = on_setup
        self.send_control = send_control
        self.connections = connections
        self.images: dict[tuple[int, int], ReceiverStateMachine] = {}
        self.streams: dict[int, int] = {}
        # (source, frame) -> when sent, the oldest first
        self._answered: dict[tuple[Source, bytes], int] = {}
        self._cooling: dict[tuple[int, int], _CoolDown] = {}
        self.router = ImageRouter(
            system[SystemCounters.BYTES_RECEIVED],
            system[SystemCounters.INVALID_PACKETS],
            system[SystemCounters.HEARTBEATS_RECEIVED],
        )

    def add_subscription(self, stream_id: int) -> None:
        if stream_id not in self.streams:  # subscribed anew: its sessions make images at once
            for key in [key for key in self._cooling if key[1] == stream_id]:
                del self._cooling[key]
        self.streams[stream_id] = self.streams.get(stream_id, 0) + 1

    def remove_subscription(self, stream_id: int) -> None:
        if self.streams.get(stream_id, 0) <= 1:
            self.streams.pop(stream_id, None)
        else:
            self.streams[stream_id] -= 1

    def remove_image(self, session_id: int, stream_id: int) -> None:
        self.images.pop((session_id, stream_id), None)
        self.router.remove(session_id, stream_id)

    def cool_down(
        self, session_id: int, stream_id: int, until_ns: int, farewell: bytes | None
    ) -> None:
        """Ignore the session (an image that ended) until `until_ns`: the heartbeats and SETUPs
        of its lingering publication must not make it a new image (Aeron's cool-down). What it
        sends meanwhile is answered with `farewell` (the image's farewell), if any."""
        key = (session_id, stream_id)
        self._cooling.pop(key, None)  # kept in the order they end (all last as long)
        self._cooling[key] = _CoolDown(until_ns, farewell)

    def _forget_cool_downs(self, now_ns: int) -> None:
        """Forget the cool-downs that are over, of sessions never seen again among them."""
        cooling = self._cooling
        while cooling:
            key = next(iter(cooling))
            if now_ns < cooling[key].until_ns:
                return
            del cooling[key]

    def _cool_down_of(self, key: tuple[int, int], now_ns: int) -> _CoolDown | None:
        """The session's cool-down; None once it is over, or if it had none."""
        cooling = self._cooling.get(key)
        if cooling is None or now_ns < cooling.until_ns:
            return cooling
        del self._cooling[key]
        return None

    def on_slow_datagrams(self, datagrams: list[tuple[memoryview, Source]], now_ns: int) -> None:
        """What the router left of a receive: (datagram, source) pairs."""
        self._forget_cool_downs(now_ns)
        for datagram, source in datagrams:
            self._on_other(datagram, source, now_ns)

    def _on_other(self, datagram: memoryview, source: Source, now_ns: int) -> None:
        """Everything that is not a data packet for a known image."""
        self.system[SystemCounters.BYTES_RECEIVED].increment(len(datagram))
        try:
            for ref in iter_frames(datagram):
                if ref.type in (HDR_TYPE_DATA, HDR_TYPE_PAD):
                    self._on_data(DataHeader.decode(datagram, ref.offset), ref, source, now_ns)
                elif ref.type == HDR_TYPE_SETUP:
                    self._on_setup(SetupFrame.decode(datagram, ref.offset), source, now_ns)
                elif ref.type == HDR_TYPE_NAK and self.hears_naks:  # on the control group
                    nak = NakFrame.decode(datagram, ref.offset)
                    image = self.images.get((nak.session_id, nak.stream_id))
                    if image is not None:
                        image.on_nak_heard(nak.term_id, nak.term_offset, nak.length, now_ns)
        except MalformedFrameError:
            self.system[SystemCounters.INVALID_PACKETS].increment()

    def _on_data(self, header: DataHeader, ref: FrameRef, source: Source, now_ns: int) -> None:
        """A heartbeat, or data of a session with no image (a new image from a SETUP makes
        the router take its later packets)."""
        key = (header.session_id, header.stream_id)
        image = self.images.get(key)
        if image is None:
            cooling = self._cool_down_of(key, now_ns)
            if cooling is None:
                # A stream that ended sends no SETUP: asking would only repeat.
                if header.stream_id in self.streams and not header.flags & EOS_FLAG:
                    self.elicit_setup(key, source, now_ns)
            elif cooling.farewell is not None:
                self._answer(cooling.farewell, source, now_ns)
        elif ref.is_heartbeat:
            self.system[SystemCounters.HEARTBEATS_RECEIVED].increment()
            self._connect(key, image, source, now_ns)
            if self.connections is not None and not self.connections.is_connection(key, source):
                return  # another sender's (a publisher restarted with the session id): not alive
            flags = header.flags
            if (
                flags & EOS_FLAG
                and self.connections is not None
                and not self.connections.end_of_stream(key, source)
            ):
                flags &= ~EOS_FLAG  # the image's other sources go on
            image.on_heartbeat(header.term_id, header.term_offset, flags, now_ns)

    def _on_setup(self, setup: SetupFrame, source: Source, now_ns: int) -> None:
        key = (setup.session_id, setup.stream_id)
        if setup.stream_id not in self.streams or self._cool_down_of(key, now_ns) is not None:
            return
        image = self.images.get(key)
        if image is None:
            try:
                image = self.on_setup(setup, source, now_ns)
            except (AeronError, ValueError):  # a SETUP no log can be made for
                self.system[SystemCounters.INVALID_PACKETS].increment()
                return
            if image is None:
                return
            self.images[key] = image
            self.router.add(image.rebuilder)
        self._connect(key, image, source, now_ns)

    def forget_receiver(self, receiver: DatagramReceiver) -> None:
        """A destination's socket is gone: its images' rebuilders let go of its receiver."""
        for image in self.images.values():
            image.rebuilder.forget_receiver(receiver)

    def on_data_senders(
        self, source_of: Callable[[object, tuple[str, int]], Source | None], now_ns: int
    ) -> None:
        """The senders of data packets the router routed (taken, or dropped as duplicates or
        outside the window) that were new to their images, taken from the images' rebuilders:
        `source_of(receiver, sender address)` names each (None: not one any more); each is a
        source of its image from now on, as a SETUP's or heartbeat's."""
        self.router.sources_changed = False
        for key, image in self.images.items():
            for receiver, sender in image.rebuilder.take_new_sources():
                source = source_of(receiver, sender)
                if source is not None:
                    self._connect(key, image, source, now_ns)

    def _connect(
        self, key: tuple[int, int], image: ReceiverStateMachine, source: Source, now_ns: int
    ) -> None:
        """A SETUP, heartbeat or data packet of `image` from `source`: a sender new to it gets a
        status message at once."""
        if self.connections is not None and self.connections.connect(key, source):
            image.status_message_due(now_ns)

    def elicit_setup(self, key: tuple[int, int], source: Source, now_ns: int) -> None:
        """Ask `source` for a SETUP of session and stream `key`."""
        self._answer(
            status_message(
                session_id=key[0],
                stream_id=key[1],
                consumption_term_id=0,
                consumption_term_offset=0,
                receiver_window=0,
                receiver_id=self.receiver_id,
                flags=SM_SETUP_FLAG,
            ).encode(),
            source,
            now_ns,
        )

    def _answer(self, frame: bytes, source: Source, now_ns: int) -> None:
        """Send `source` the status message or ERR frame `frame` (a rejected image's farewell),
        unless it went there in the last 100 ms (of the answers, the last _ANSWERS_REMEMBERED
        are remembered)."""
        answered = self._answered
        key = (source, frame)
        last = answered.get(key)
        if last is not None and now_ns - last < ELICIT_INTERVAL_NS:
            return
        answered.pop(key, None)  # in the order they went
        answered[key] = now_ns
        if len(answered) > _ANSWERS_REMEMBERED:
            del answered[next(iter(answered))]
        frame_type = int.from_bytes(frame[TYPE_FIELD_OFFSET : TYPE_FIELD_OFFSET + 2], "little")
        if frame_type == HDR_TYPE_ERR:
            self.system[SystemCounters.ERROR_FRAMES_SENT].increment()
        else:
            self.system[SystemCounters.STATUS_MESSAGES_SENT].increment()
        self.send_control(frame, source)
