"""UDP channel endpoints: the sockets of network publications and subscriptions.

A SendChannelEndpoint (one per publication channel endpoint) sends its publications' datagrams to
the endpoint and receives their status messages, NAKs and RTT measurements. A
ReceiveChannelEndpoint (one per subscribed endpoint, and one per multi-destination subscription)
receives on its destinations' sockets (ReceiveDestination: the endpoint, or each endpoint added
to a multi-destination subscription); what arrives goes to its DataDispatcher (data packets
through the C router, from the driver's DataPath), and it sends the images' control frames back
to each sender. Every socket is drained with recvmmsg in one call.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from collections.abc import Callable, Mapping
from typing import NamedTuple

from aeronio._core import ControlReceiver, DatagramReceiver, DatagramSender
from aeronio.counters import Counter, SystemCounters
from aeronio.driver.data_dispatcher import ELICIT_INTERVAL_NS, DataDispatcher
from aeronio.driver.receiver_state import SM_TIMEOUT_NS
from aeronio.driver.sender_state import Position, SenderStateMachine
from aeronio.errors import AeronError, ChannelUriError
from aeronio.protocol.channel import ChannelUri, split_address
from aeronio.protocol.frames import (
    HDR_TYPE_ERR,
    HDR_TYPE_NAK,
    HDR_TYPE_RTTM,
    HDR_TYPE_SM,
    ErrorFrame,
    FrameRef,
    MalformedFrameError,
    NakFrame,
    RttmFrame,
    StatusMessage,
    iter_frames,
)

Address = tuple[str, int]
SOL_UDP = 17
UDP_SEGMENT = 103  # linux/udp.h
UDP_GRO = 104
IP_MTU = 14  # linux/in.h: the path MTU of a connected socket
IP_MULTICAST_ALL = 49  # linux/in.h: receive every group joined on the host (default 1)
# A dynamic multi-destination-cast destination silent this long is dropped (Aeron's default).
DESTINATION_TIMEOUT_NS = 5_000_000_000
# A status message repeated within this (twice a receiver's period) is absorbed in C (its
# ControlReceiver); one not heard for REPEAT_MEMORY_NS is forgotten, and of more than
# REPEAT_MEMORY_CAPACITY (receivers times sessions), the one Python saw longest ago.
SM_REPEAT_WINDOW_NS = 2 * SM_TIMEOUT_NS
REPEAT_MEMORY_NS = 10_000_000_000
REPEAT_MEMORY_CAPACITY = 4096


def resolve_host(host: str) -> str:
    """A host name or address as the IPv4 address the driver's sockets use (what
    `ChannelUri.canonical_form` resolves with); an IPv6 address is refused by name."""
    if ":" in host:  # only an IPv6 address has one: split_address took the port off
        raise AeronError(f"host {host!r} is an IPv6 address: aeronio's UDP channels are IPv4 only")
    try:
        return socket.gethostbyname(host)
    except (OSError, UnicodeError) as e:
        raise AeronError(f"cannot resolve host {host!r}: {e}") from None


def resolve(address: Address) -> Address:
    """(host, port) as an IPv4 (address, port)."""
    return resolve_host(address[0]), address[1]


def _udp_socket(
    channel: ChannelUri, bind: Address, groups: tuple[str, ...] = (), interface: str = "0.0.0.0"
) -> socket.socket:
    """A non-blocking UDP socket bound to `bind` with the channel's buffer sizes. On a
    multicast channel it sends multicast from `interface` with the channel's ttl, looped back
    to this host's other members; with `groups` it is shared (SO_REUSEADDR: every receiver of
    a group on a host binds its port) and a member of each group on `interface`."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        if channel.so_sndbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, channel.so_sndbuf)
        if channel.so_rcvbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, channel.so_rcvbuf)
        if groups:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(bind)
        if channel.is_multicast:
            _multicast_options(sock, channel, interface)
        if groups:  # only the groups this socket joined, not every group of the host's
            sock.setsockopt(socket.IPPROTO_IP, IP_MULTICAST_ALL, 0)
        for group in groups:
            membership = socket.inet_aton(group) + socket.inet_aton(interface)
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, membership)
    except OSError as e:
        sock.close()
        raise AeronError(f"cannot bind {bind[0]}:{bind[1]} for {channel}: {e.strerror}") from None
    sock.setblocking(False)
    return sock


def _multicast_options(sock: socket.socket, channel: ChannelUri, interface: str) -> None:
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(interface))
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
    if channel.ttl is not None:
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, channel.ttl)


def _interface(channel: ChannelUri) -> str:
    """The local address `interface=` names, else any; ChannelUriError naming the interface
    when it is no address of this host (a socket would fail on it naming another address)."""
    interface = channel.interface_address()
    if interface is None:
        return "0.0.0.0"
    try:
        address = resolve_host(interface[0])
        if ipaddress.IPv4Address(address).is_multicast:  # a socket binds one, and sends nothing
            raise AeronError(f"{address} is a multicast group, no address of this host")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.bind((address, 0))
    except AeronError as e:
        reason = str(e)
    except OSError as e:
        reason = f"{address} is no address of this host: {e.strerror}"
    else:
        return address
    raise ChannelUriError(f"interface {channel.interface!r} of {channel}: {reason}") from None


def _check_socket_options(channel: ChannelUri, first: ChannelUri, whose: str) -> None:
    """`channel`, sharing the endpoint made for `first` (whose `whose` are on it), asks no
    other socket option than `first` gave: ChannelUriError naming it (as Aeron's)."""
    for key in ("ttl", "so-sndbuf", "so-rcvbuf"):
        attribute = key.replace("-", "_")
        value, existing = getattr(channel, attribute), getattr(first, attribute)
        if value is not None and value != existing:
            has = "the OS default" if existing is None else f"{key}={first.get(key)}"
            raise ChannelUriError(
                f"{channel}: {key}={channel.get(key)} does not match {has} of the {whose} on "
                f"its endpoint ({first}), whose socket it shares"
            )


def _supports_gso(sock: socket.socket) -> bool:
    """Whether the kernel can cut one send into several datagrams (UDP_SEGMENT, Linux 4.18+)."""
    try:
        sock.setsockopt(SOL_UDP, UDP_SEGMENT, 0)
    except OSError:
        return False
    return True


def _max_segment(destination: Address) -> int:
    """The largest datagram the path to `destination` carries unfragmented (what a GSO segment
    may be): its MTU less the IPv4 and UDP headers."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(destination)
            return probe.getsockopt(socket.IPPROTO_IP, IP_MTU) - 28
    except OSError:
        return 1500 - 28


def _enable_gro(sock: socket.socket) -> None:
    """Let the kernel hand over a run of equal datagrams as one (UDP_GRO, Linux 5.0+), where
    it can; DatagramReceiver reports the segment size and the router cuts them apart."""
    with contextlib.suppress(OSError):
        sock.setsockopt(SOL_UDP, UDP_GRO, 1)


class _Endpoint:
    """A UDP socket drained in batches (recvmmsg)."""

    sockaddr: Counter  # snd- or rcv-local-sockaddr: UdpMedia's, once the socket is bound

    def __init__(self, sock: socket.socket, receiver: DatagramReceiver):
        self.socket = sock
        self.fd = sock.fileno()
        self.receiver = receiver

    def bound_address(self) -> str:
        """The socket's local address as bound, "host:port" (the port the OS chose for 0)."""
        host, port = self.socket.getsockname()
        return f"{host}:{port}"

    def close(self) -> None:
        self.socket.close()


class SendChannelEndpoint(_Endpoint):
    """The socket(s) of the publications on one channel: unicast (data to the endpoint, control
    back on the same socket), multicast (data to the odd data group, control received on the
    even control group) or multi-destination-cast (data to each destination, control on the
    control address: destinations added by the publication, or, in dynamic control mode, by
    the receivers whose status messages arrive, until they fall silent)."""

    status: Counter  # snd-channel, UdpMedia's once the socket is bound

    def __init__(
        self,
        channel: ChannelUri,
        system: Mapping[SystemCounters, Position],
        offload: bool = True,
        destinations_counter: Counter | None = None,
    ):
        self.key = channel.canonical_form(resolve_host)
        self.channel = channel  # the first publication's: its socket options are the endpoint's
        self.system = system
        self.manual = channel.is_multi_destination and channel.control_mode == "manual"
        self.dynamic = channel.is_multi_destination and not self.manual
        self.destinations_counter = destinations_counter
        interface = _interface(channel)
        if channel.is_multicast:
            control = channel.multicast_control
            control_socket = _udp_socket(channel, control, (control[0],), interface)
            try:
                self._send_socket = _udp_socket(channel, (interface, 0))
            except BaseException:
                control_socket.close()
                raise
        elif channel.is_multi_destination:
            control = resolve(channel.address("control"))
            control_socket = self._send_socket = _udp_socket(channel, control)
        else:
            control_socket = self._send_socket = _udp_socket(channel, (interface, 0))
        super().__init__(control_socket, DatagramReceiver(32, 2048))
        self.control = ControlReceiver(
            system[SystemCounters.STATUS_MESSAGES_RECEIVED],
            SM_REPEAT_WINDOW_NS,
            REPEAT_MEMORY_CAPACITY,
        )
        self.sender = DatagramSender(
            self._send_socket.fileno(),
            system[SystemCounters.SHORT_SENDS],
            offload and _supports_gso(self._send_socket),
        )
        # destination -> (the largest GSO segment its path takes, when it last sent an SM)
        self.destinations: dict[Address, list[int]] = {}
        self.destination_ids: dict[int, Address] = {}  # a manual one's, by registration id
        if channel.endpoint is not None:
            self._add(resolve(channel.address("endpoint")), 0)
        self.publications: dict[tuple[int, int], SenderStateMachine] = {}

    def check_shared_by(self, channel: ChannelUri) -> None:
        """A publication on `channel` may share this endpoint: in its control mode (a control
        address takes destinations one way: a dynamic publication's receivers on a manual
        endpoint would never be added, nor destinations to a dynamic one), asking no other
        socket option than it has (as Aeron's: the socket is the first publication's)."""
        manual = channel.is_multi_destination and channel.control_mode == "manual"
        if manual != self.manual:
            mode, other = ("manual", "dynamic") if manual else ("dynamic", "manual")
            raise ChannelUriError(
                f"{channel}: control-mode={mode}, but the publications on control "
                f"{channel.control} are control-mode={other}: one control address, one mode"
            )
        _check_socket_options(channel, self.channel, "publications")

    def close(self) -> None:
        if self._send_socket is not self.socket:
            self._send_socket.close()
        super().close()

    # -- destinations -------------------------------------------------------------------

    def add_destination(self, endpoint: str, now_ns: int, registration_id: int) -> None:
        """A manual multi-destination-cast publication also sends to `endpoint`, a destination
        that `remove_destination_by_id(registration_id)` removes too."""
        self._check_manual("added to")
        destination = resolve(split_address("endpoint", endpoint))
        self._add(destination, now_ns)
        self.destination_ids[registration_id] = destination

    def remove_destination(self, endpoint: str) -> None:
        self._check_manual("removed from")
        if not self._remove(resolve(split_address("endpoint", endpoint))):
            raise AeronError(f"{endpoint} is not a destination of this publication")

    def remove_destination_by_id(self, registration_id: int) -> None:
        """Remove the destination `add_destination` added with `registration_id`; as Aeron's,
        an id that no destination has removes nothing."""
        self._check_manual("removed from")
        destination = self.destination_ids.get(registration_id)
        if destination is not None:
            self._remove(destination)

    def _remove(self, destination: Address) -> bool:
        if self.destinations.pop(destination, None) is None:
            return False
        self.destination_ids = {
            k: address for k, address in self.destination_ids.items() if address != destination
        }
        self._destinations_changed()
        return True

    def _check_manual(self, verb: str) -> None:
        if not self.manual:
            raise AeronError(f"destinations are {verb} only publications with control-mode=manual")

    def _add(self, destination: Address, now_ns: int) -> None:
        if destination not in self.destinations:
            self.destinations[destination] = [_max_segment(destination), now_ns]
            self._destinations_changed()
        self.destinations[destination][1] = now_ns

    def _destinations_changed(self) -> None:
        self.sender.set_destinations(
            [
                (destination, max_segment)
                for destination, (max_segment, _) in self.destinations.items()
            ]
        )
        if self.destinations_counter is not None:
            self.destinations_counter.set(len(self.destinations))

    def on_timer(self, now_ns: int) -> None:
        """Dynamic control mode: receivers silent for DESTINATION_TIMEOUT_NS are dropped."""
        if self.dynamic:
            for destination, (_, seen) in list(self.destinations.items()):
                if now_ns - seen > DESTINATION_TIMEOUT_NS:
                    del self.destinations[destination]
                    self._destinations_changed()

    # -- control frames in --------------------------------------------------------------

    def poll(self, now_ns: int) -> int:
        """Read and handle the control frames that arrived (a socket the driver's DataPath does
        not read yet); returns how many datagrams were read."""
        count = self.receiver.recv(self.fd)
        datagrams = [(self.receiver.data(i), self.receiver.address(i)) for i in range(count)]
        self.on_control_datagrams(datagrams, now_ns)
        return count

    def on_control_datagrams(self, datagrams: list, now_ns: int) -> None:
        """Handle (datagram, sender address) pairs: what the DataPath left of a receive."""
        for datagram, source in datagrams:
            try:
                for ref in iter_frames(datagram):
                    self._on_control(datagram, ref, source, now_ns)
            except MalformedFrameError:
                self.system[SystemCounters.INVALID_PACKETS].increment()

    def take_repeats(self, now_ns: int) -> None:
        """The status messages the DataPath absorbed as repeats, each handled as heard at its
        latest repeat (before the timer decides which receivers and destinations went silent)."""
        for frame, source, heard_ns in self.control.take_repeats(now_ns, REPEAT_MEMORY_NS):
            self._on_status_message(StatusMessage.decode(frame), source, heard_ns)

    def _on_control(
        self, datagram: memoryview, ref: FrameRef, source: Address, now_ns: int
    ) -> None:
        if ref.type == HDR_TYPE_SM:
            self.system[SystemCounters.STATUS_MESSAGES_RECEIVED].increment()
            self._on_status_message(StatusMessage.decode(datagram, ref.offset), source, now_ns)
        elif ref.type == HDR_TYPE_NAK:
            nak = NakFrame.decode(datagram, ref.offset)
            publication = self.publications.get((nak.session_id, nak.stream_id))
            if publication is not None:
                publication.on_nak(nak, now_ns)
        elif ref.type == HDR_TYPE_ERR:
            self.system[SystemCounters.ERROR_FRAMES_RECEIVED].increment()
            error = ErrorFrame.decode(datagram, ref.offset)
            publication = self.publications.get((error.session_id, error.stream_id))
            if publication is not None:
                publication.on_error(error, source, now_ns)
        elif ref.type == HDR_TYPE_RTTM:
            rttm = RttmFrame.decode(datagram, ref.offset)
            publication = self.publications.get((rttm.session_id, rttm.stream_id))
            reply = publication.on_rttm(rttm, now_ns) if publication is not None else None
            if reply is not None:
                try:
                    self.socket.sendto(reply, source)
                except OSError:
                    self.system[SystemCounters.SHORT_SENDS].increment()

    def _on_status_message(self, sm: StatusMessage, source: Address, now_ns: int) -> None:
        if self.dynamic and not sm.is_end_of_stream:  # a farewell keeps no destination
            self._add(source, now_ns)
        if sm.session_id == 0 and sm.stream_id == 0 and sm.is_setup_eliciting:
            if not self.dynamic:
                return
            for each in self.publications.values():  # a new receiver asks for all
                each.on_status_message(sm, now_ns)
            return
        publication = self.publications.get((sm.session_id, sm.stream_id))
        if publication is not None:
            publication.on_status_message(sm, now_ns)

    def send(self, datagrams: list) -> None:
        """Send the datagrams to every destination (what the kernel refuses is a short send)."""
        self.sender.send(datagrams)


class ReceiveDestination(_Endpoint):
    """One socket images arrive on. Unicast: bound to the endpoint; status messages and NAKs go
    back to each sender, or with a control address (dynamic multi-destination-cast) to it.
    Multicast: bound to the port, a member of the data group and of the control group (to hear
    other receivers' NAKs), sending control frames to the control group."""

    def __init__(self, channel: ChannelUri, short_sends: Position, offload: bool = True):
        self.address = resolve(channel.address("endpoint"))
        self.multicast = channel.is_multicast
        self.dynamic = channel.control is not None  # asks the control address to add it
        if self.multicast:
            control = channel.multicast_control
            self.control: Address | None = control
            groups = (self.address[0], control[0])
            sock = _udp_socket(channel, ("0.0.0.0", self.address[1]), groups, _interface(channel))
        else:
            self.control = resolve(channel.address("control")) if self.dynamic else None
            sock = _udp_socket(channel, self.address)
        super().__init__(sock, DatagramReceiver(64, 65536))
        if offload:
            _enable_gro(self.socket)
        self._short_sends = short_sends

    def send_control(self, frame: bytes, sender: Address) -> None:
        """Send a status message or NAK to a sender (or to the control address or group, where
        the channel has one)."""
        try:
            self.socket.sendto(frame, self.control or sender)
        except OSError:
            self._short_sends.increment()

    def control_sender(self, sender: Address) -> DatagramSender:
        """What sends control frames to `sender` as `send_control` does, from C."""
        control = DatagramSender(self.fd, self._short_sends)
        control.set_destinations([(self.control or sender, 0)])
        return control


class Connection(NamedTuple):
    """A sender heard on a destination (the source of a datagram, as the DataDispatcher sees
    it): the destination's address, whose socket answers it, and the sender's."""

    destination: Address
    sender: Address


ImageKey = tuple[int, int]  # session id, stream id


class ReceiveChannelEndpoint:
    """The images of one subscription channel: its DataDispatcher (one image per session and
    stream) and the destinations that feed it, each a socket of its own: the channel's
    endpoint, or for a multi-destination subscription (`control-mode=manual`, no endpoint) the
    endpoints added to it. Data packets of every destination go to the same images (a frame an
    image has already is ignored). A SETUP, heartbeat or data packet heard on a destination
    makes its sender a connection of the image: status messages and NAKs go to every
    connection until its destination is removed, and the image's stream ends once every
    connection ended it. A destination with a control address (dynamic multi-destination-cast)
    on which no image has a connection asks it to add the destination (an SM of session 0,
    stream 0, eliciting a SETUP)."""

    status: Counter  # rcv-channel, UdpMedia's once its socket is bound

    def __init__(
        self,
        channel: ChannelUri,
        key: str,
        dispatcher_factory: Callable[[ReceiveChannelEndpoint], DataDispatcher],
        system: Mapping[SystemCounters, Position],
        offload: bool = True,
    ):
        self.key = key
        self.channel = channel  # the channel it was made for (the loss report names it)
        self.multicast = channel.is_multicast
        self.destinations: dict[Address, ReceiveDestination] = {}
        self.connections: dict[ImageKey, dict[Address, Address]] = {}  # destination -> sender
        self._ended: dict[ImageKey, set[Address]] = {}  # destinations whose sender sent EOS
        self._short_sends = system[SystemCounters.SHORT_SENDS]
        self._offload = offload
        self.deadline_ns: int | None = None  # when on_timer is due again (None: at the timer's)
        self.dispatcher = dispatcher_factory(self)
        if channel.endpoint is not None:
            self.add_destination(channel)

    def check_shared_by(self, channel: ChannelUri) -> None:
        """A subscription on `channel` may share this endpoint: it asks no other socket option
        than it has (its sockets are the first subscription's)."""
        _check_socket_options(channel, self.channel, "subscriptions")

    def add_destination(self, channel: ChannelUri) -> ReceiveDestination:
        """A socket bound to `channel`'s endpoint, feeding this endpoint's images."""
        if resolve(channel.address("endpoint")) in self.destinations:
            raise AeronError(f"{channel.endpoint} is already a destination of this subscription")
        destination = ReceiveDestination(channel, self._short_sends, self._offload)
        self.destinations[destination.address] = destination
        if destination.dynamic:
            self.deadline_ns = 0  # ask to be added at once
        return destination

    def remove_destination(self, channel: ChannelUri) -> ReceiveDestination:
        """Take the destination of `channel`'s endpoint and its connections out (the caller
        closes it)."""
        address = resolve(channel.address("endpoint"))
        destination = self.destinations.pop(address, None)
        if destination is None:
            raise AeronError(f"{channel.endpoint} is not a destination of this subscription")
        for image, senders in self.connections.items():
            if senders.pop(address, None) is not None:
                self._connections_changed(image)
        for ended in self._ended.values():
            ended.discard(address)
        self.dispatcher.forget_receiver(destination.receiver)
        return destination

    def close(self) -> None:
        """Close its sockets and let go of its dispatcher (which refers back to it), so that
        their receive buffers go now, not at the garbage collector's next full collection."""
        for destination in self.destinations.values():
            destination.close()
        self.destinations.clear()
        del self.dispatcher

    # -- datagrams and connections ------------------------------------------------------

    def on_slow_datagrams(
        self, destination: ReceiveDestination, datagrams: list, now_ns: int
    ) -> None:
        """What the router left of `destination`'s receive, for the dispatcher: (datagram,
        sender address) pairs."""
        self.dispatcher.on_slow_datagrams(
            [(datagram, Connection(destination.address, sender)) for datagram, sender in datagrams],
            now_ns,
        )

    def connect_data_senders(self, now_ns: int) -> None:
        """The senders the router heard data from on a destination become connections of their
        images, as if a SETUP or heartbeat came from them."""
        by_receiver = {id(d.receiver): d.address for d in self.destinations.values()}

        def connection(receiver: object, sender: Address) -> Connection | None:
            destination = by_receiver.get(id(receiver))  # None: a destination removed since
            return None if destination is None else Connection(destination, sender)

        self.dispatcher.on_data_senders(connection, now_ns)

    def connect(self, image: ImageKey, connection: Connection) -> bool:
        """A SETUP, heartbeat or data packet of `image` heard on a destination: True if the
        image had no connection there yet (its sender is one now)."""
        senders = self.connections.setdefault(image, {})
        if connection.destination in senders:
            return False
        senders[connection.destination] = connection.sender
        self._connections_changed(image)
        return True

    def _connections_changed(self, image: ImageKey) -> None:
        """The image's periodic status messages, sent by the DataPath, go to its connections,
        and only their heartbeats are taken in C."""
        receiver = self.dispatcher.images.get(image)
        if receiver is not None:
            connections = self.connections.get(image, {}).items()
            receiver.rebuilder.set_control_senders(
                [
                    self.destinations[destination].control_sender(sender)
                    for destination, sender in connections
                ]
            )
            receiver.rebuilder.set_connections(
                [
                    (self.destinations[destination].receiver, sender)
                    for destination, sender in connections
                ]
            )

    def is_connection(self, image: ImageKey, connection: Connection) -> bool:
        """Whether `connection` is the one `image` has on its destination: the sender first heard
        there, which it answers; another (a publisher restarted from another port with the same
        session id, or a colliding one) neither keeps it alive nor ends its stream."""
        return self.connections.get(image, {}).get(connection.destination) == connection.sender

    def end_of_stream(self, image: ImageKey, connection: Connection) -> bool:
        """`connection` ended its stream (an EOS heartbeat): True once every connection of
        `image` did (the others go on otherwise: a replay ends while live goes on)."""
        ended = self._ended.setdefault(image, set())
        ended.add(connection.destination)
        return ended >= self.connections.get(image, {}).keys()

    def remove_image(self, session_id: int, stream_id: int) -> None:
        self.dispatcher.remove_image(session_id, stream_id)
        self.connections.pop((session_id, stream_id), None)
        self._ended.pop((session_id, stream_id), None)
        self.deadline_ns = 0  # a destination may have lost its last connection

    def send_control(self, frame: bytes, connection: Connection) -> None:
        """Send a control frame to one sender (the dispatcher's setup-eliciting SMs)."""
        self.destinations[connection.destination].send_control(frame, connection.sender)

    def send_to_connections(self, image: ImageKey, frame: bytes) -> None:
        """Send an image's status message or NAK to each of its connections."""
        for destination, sender in self.connections.get(image, {}).items():
            self.destinations[destination].send_control(frame, sender)

    def on_timer(self, now_ns: int) -> None:
        """Dynamic multi-destination-cast: each destination with a control address on which no
        image has a connection asks to be added, again every ELICIT_INTERVAL_NS until one has."""
        asking = False
        for destination in self.destinations.values():
            control = destination.control if destination.dynamic else None
            if control is not None and not any(
                destination.address in senders for senders in self.connections.values()
            ):
                connection = Connection(destination.address, control)
                self.dispatcher.elicit_setup((0, 0), connection, now_ns)
                asking = True
        self.deadline_ns = now_ns + ELICIT_INTERVAL_NS if asking else None
