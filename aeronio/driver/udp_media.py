"""Network publications and images in the driver (run by the conductor's duty cycle: Aeron's
shared threading mode, conductor, sender and receiver on one agent).

Publications on `aeron:udp` channels get a sender (a SenderStateMachine) and a
SendChannelEndpoint (the socket, shared per endpoint). Subscriptions on `aeron:udp` channels get
a ReceiveChannelEndpoint bound to the endpoint (shared per endpoint; a multi-destination
subscription, `control-mode=manual`, has one of its own, receiving on the destinations added to
it); each session that announces itself with a SETUP becomes a PublicationImage with its own
log, linked to every subscription of that stream on the endpoint. What it needs of the driver is
passed in (`UdpServices`); the publications and images themselves are held by the driver's
resource registry.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from aeronio._core import DataPath
from aeronio.counters import ChannelStatus, Counter, CountersFullError, SystemCounters
from aeronio.driver.channel_endpoints import (
    Connection,
    ReceiveChannelEndpoint,
    ReceiveDestination,
    SendChannelEndpoint,
    resolve_host,
)
from aeronio.driver.client_proxy import ClientProxy
from aeronio.driver.context import DriverContext
from aeronio.driver.data_dispatcher import DataDispatcher
from aeronio.driver.data_path_parts import DataPathParts
from aeronio.driver.driver_publication import PublicationParts
from aeronio.driver.flow_control import flow_control_for, group_tag_feedback
from aeronio.driver.log_params import image_log_params
from aeronio.driver.loss_detector import LossDetector, multicast_nak_delay
from aeronio.driver.loss_report import ImageLosses, LossReport
from aeronio.driver.network_publication import NetworkPublication
from aeronio.driver.publication_image import PublicationImage
from aeronio.driver.raw_log_factory import RawLogFactory, free_log
from aeronio.driver.receiver_state import ReceiverStateMachine
from aeronio.driver.resources import (
    DriverResources,
    SubscriberPosition,
    SubscriptionLink,
    slowest,
)
from aeronio.driver.retransmit_handler import RetransmitHandler
from aeronio.driver.sender_state import Position, SenderStateMachine
from aeronio.driver.stream_counters import StreamCounters
from aeronio.errors import StorageSpaceError
from aeronio.logbuffer import descriptor as d
from aeronio.logbuffer import signals, waker
from aeronio.protocol.channel import ChannelUri
from aeronio.protocol.frames import SetupFrame

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class UdpServices:
    """What UDP media uses of the driver."""

    ctx: DriverContext
    resources: DriverResources
    counters: StreamCounters
    logs: RawLogFactory  # the images' logs
    proxy: ClientProxy
    system: Mapping[SystemCounters, Position]
    next_id: Callable[[], int]  # images' registration ids: the clients' correlation sequence
    record_error: Callable[[BaseException | str], None]
    wake: Callable[[], None]
    wake_id: int
    watch: Callable[[int], None]  # a socket the conductor's loop should wake on
    unwatch: Callable[[int], None]
    loss_report: LossReport  # the images' losses (`aeronio loss`)


class UdpMedia:
    def __init__(self, services: UdpServices):
        self.services = services
        self.resources = services.resources
        self.send_endpoints: dict[str, SendChannelEndpoint] = {}
        self.receive_endpoints: dict[str, ReceiveChannelEndpoint] = {}
        self._watches: list = []
        self._watched: int | None = None  # the resources' `changes` when they were made
        self.images_added = False  # since the conductor last looked

    @property
    def publications(self) -> list[NetworkPublication]:
        return [pub for pub in self.resources.publications if isinstance(pub, NetworkPublication)]

    # -- publications -----------------------------------------------------------------

    def new_publication(
        self, uri: ChannelUri, now_ns: int, parts: PublicationParts
    ) -> NetworkPublication:
        """A network publication of `parts` (a new log), with its sender, counters and (shared)
        endpoint; on failure none of these is left."""
        log = parts.log
        one_to_many = uri.is_multicast or uri.is_multi_destination
        with contextlib.ExitStack() as undo:
            counters = self.services.counters.sender(
                parts.registration_id, log.session_id, log.stream_id, parts.channel, one_to_many
            )
            undo.callback(self.services.counters.free, *counters)
            endpoint = self._acquire_send_endpoint(uri, parts.registration_id)
            undo.callback(self._release_send_endpoint, endpoint)
            sender = SenderStateMachine(
                log,
                sender_position=counters[0],
                sender_limit=counters[1],
                sender_bpe=counters[2],
                system=self.services.system,
                now_ns=now_ns,
                ttl=uri.ttl or 0,
                flow_control=flow_control_for(uri.fc, one_to_many),
                retransmit=RetransmitHandler(
                    group=one_to_many,
                    on_overflow=self.services.system[SystemCounters.RETRANSMIT_OVERFLOW].increment,
                ),
                receivers=counters[3] if one_to_many else None,
            )
            publication = NetworkPublication(
                parts,
                sender=sender,
                sender_counters=counters,
                endpoint=endpoint,
                release_endpoint=self._release_send_endpoint,
                spies_simulate_connection=bool(uri.spies_simulate_connection),
            )
            undo.pop_all()
        return publication

    def _acquire_send_endpoint(
        self, channel: ChannelUri, registration_id: int
    ) -> SendChannelEndpoint:
        """The send endpoint of the channel, made (with its mdc-num-dests counter for
        multi-destination-cast) if it is the first publication on it."""
        endpoint = self.send_endpoints.get(channel.canonical_form(resolve_host))
        if endpoint is not None:
            endpoint.check_shared_by(channel)
            return endpoint
        with contextlib.ExitStack() as undo:
            counter = None
            if channel.is_multi_destination:
                counter = self.services.counters.mdc_destinations(registration_id, channel)
                undo.callback(self.services.counters.free, counter)
            endpoint = SendChannelEndpoint(
                channel, self.services.system, self.services.ctx.udp_offload, counter
            )
            undo.callback(endpoint.close)
            endpoint.status = self._channel_status(True, registration_id, channel, [endpoint])
            undo.pop_all()
        self.send_endpoints[endpoint.key] = endpoint
        self.services.watch(endpoint.socket.fileno())
        return endpoint

    def _release_send_endpoint(self, endpoint: SendChannelEndpoint) -> None:
        """A publication let go of `endpoint`: close it after the last one."""
        if endpoint.publications:
            return
        self.services.unwatch(endpoint.socket.fileno())
        endpoint.close()
        self.services.counters.close_channel(endpoint.sockaddr, endpoint.status)
        if endpoint.destinations_counter is not None:
            self.services.counters.free(endpoint.destinations_counter)
        del self.send_endpoints[endpoint.key]

    # -- subscriptions ----------------------------------------------------------------

    def add_subscription(self, link: SubscriptionLink) -> int:
        """Link a subscription to its endpoint (made, bound, if it is the first on it);
        returns the id of the endpoint's channel status counter."""
        endpoint = self.receive_endpoints.get(link.media_key)
        if endpoint is not None:
            endpoint.check_shared_by(link.channel)
        else:
            endpoint = ReceiveChannelEndpoint(
                link.channel,
                link.media_key,
                self._dispatcher_for,
                self.services.system,
                self.services.ctx.udp_offload,
            )
            try:
                endpoint.status = self._channel_status(
                    False, link.registration_id, link.channel, [*endpoint.destinations.values()]
                )
            except BaseException:
                endpoint.close()
                raise
            self.receive_endpoints[link.media_key] = endpoint
            for destination in endpoint.destinations.values():
                self.services.watch(destination.fd)
        images = [
            image
            for image in self.resources.images
            if image.endpoint is endpoint and image.stream_id == link.stream_id
        ]
        positions: list[tuple[PublicationImage, SubscriberPosition]] = []
        try:  # its positions first, all or none: counters may be full
            for image in images:
                positions.append((image, self._position(image, link)))
        except BaseException:
            self.services.counters.free(*(subscriber.counter for _, subscriber in positions))
            raise
        endpoint.dispatcher.add_subscription(link.stream_id)
        for image, subscriber in positions:
            image.add_subscriber(subscriber)
        return endpoint.status.id

    def remove_subscription(self, link: SubscriptionLink, now_ns: int) -> None:
        endpoint = self.receive_endpoints.get(link.media_key)
        if endpoint is None:
            return
        endpoint.dispatcher.remove_subscription(link.stream_id)
        for image in self.resources.images:
            image.remove_subscriber(link.registration_id)
        # An image nobody reads goes at once, saying farewell: its publisher must not take its
        # status messages for a reader's.
        for image in [i for i in self.resources.images if i.endpoint is endpoint]:
            if not image.subscribers:
                image.leave(now_ns)
                self.resources.end(image)
        if not endpoint.dispatcher.streams:
            self._close_receive_endpoint(endpoint)
            del self.receive_endpoints[endpoint.key]

    def add_destination(self, link: SubscriptionLink, destination: ChannelUri) -> None:
        """A multi-destination subscription also receives on `destination`'s endpoint."""
        endpoint = self.receive_endpoints[link.media_key]
        added = endpoint.add_destination(destination)
        try:
            added.sockaddr = self.services.counters.local_sockaddr(
                False, link.registration_id, endpoint.status, added.bound_address()
            )
        except BaseException:
            endpoint.remove_destination(destination)
            added.close()
            raise
        self.services.watch(added.fd)

    def remove_destination(self, link: SubscriptionLink, destination: ChannelUri) -> None:
        """Close a multi-destination subscription's socket on `destination`'s endpoint; its
        images go on with the other destinations."""
        endpoint = self.receive_endpoints[link.media_key]
        removed = endpoint.remove_destination(destination)
        self.services.unwatch(removed.fd)
        removed.close()
        self.services.counters.close_channel(removed.sockaddr)

    def _close_receive_endpoint(self, endpoint: ReceiveChannelEndpoint) -> None:
        sockaddrs = [destination.sockaddr for destination in endpoint.destinations.values()]
        for destination in endpoint.destinations.values():
            self.services.unwatch(destination.fd)
        endpoint.close()
        self.services.counters.close_channel(*sockaddrs, endpoint.status)

    def _channel_status(
        self,
        sending: bool,
        registration_id: int,
        channel: ChannelUri,
        sockets: Sequence[SendChannelEndpoint | ReceiveDestination],
    ) -> Counter:
        """The channel status counter of a new endpoint on `channel` made by
        `registration_id`'s command, with a local socket address counter for each of its bound
        `sockets`; ACTIVE once they are all there (a client then finds every address)."""
        counters = self.services.counters
        addresses = [each.bound_address() for each in sockets]
        label_address = addresses[0] if addresses else ""
        status = counters.channel_status(sending, registration_id, str(channel), label_address)
        with contextlib.ExitStack() as undo:
            undo.callback(counters.free, status)
            for each, address in zip(sockets, addresses, strict=True):
                each.sockaddr = counters.local_sockaddr(sending, registration_id, status, address)
                undo.callback(counters.free, each.sockaddr)
            undo.pop_all()
        status.set(ChannelStatus.ACTIVE)
        return status

    def _dispatcher_for(self, endpoint: ReceiveChannelEndpoint) -> DataDispatcher:
        return DataDispatcher[Connection](
            random.getrandbits(63),  # the endpoint's receiver id, as Aeron gives each its own
            self.services.system,
            lambda setup, source, now_ns: self._new_image(endpoint, setup, source, now_ns),
            endpoint.send_control,
            hears_naks=endpoint.multicast,
            connections=endpoint,
        )

    def _links_on(self, endpoint: ReceiveChannelEndpoint, stream_id: int) -> list[SubscriptionLink]:
        return [
            link
            for link in self.resources.subscriptions
            if not link.reads_logs
            and link.media_key == endpoint.key
            and link.stream_id == stream_id
        ]

    def _new_image(
        self,
        endpoint: ReceiveChannelEndpoint,
        setup: SetupFrame,
        source: Connection,
        now_ns: int,
    ) -> ReceiverStateMachine | None:
        """The image of a new session: its log, positions and links to the subscriptions. A
        SETUP no log can be made for raises (an invalid packet); a failure of this driver's
        (no space, no counter left) is recorded and leaves nothing behind (None)."""
        services = self.services
        registration_id = services.next_id()
        links = self._links_on(endpoint, setup.stream_id)
        channels = [link.channel for link in links]  # the first to give a setting gives it
        window = _first(channel.rcv_wnd for channel in channels)
        reliable = _first(channel.reliable for channel in channels) is not False
        nak_delay = _first(channel.nak_delay_ns for channel in channels)
        params = image_log_params(
            endpoint.channel,
            receiver_window_length=window,
            reliable=reliable,
            multicast=endpoint.multicast,
            sparse=services.ctx.term_buffer_sparse_file,
        )
        with contextlib.ExitStack() as undo:
            try:
                log = services.logs.new_image(registration_id, setup, params)
                undo.callback(free_log, log)
                counters = services.counters.image(
                    registration_id, setup.session_id, setup.stream_id, str(endpoint.channel)
                )
                undo.callback(services.counters.free, *counters)
                hwm, pos = counters
                log_file = os.fspath(log.path)
                log_signals = signals.acquire(log_file)
                undo.callback(signals.release, log_file)
                host, port = source.sender
                source_address = f"{host}:{port}"
                losses = ImageLosses(
                    services.loss_report,
                    setup.session_id,
                    setup.stream_id,
                    str(endpoint.channel),
                    source_address,
                )
                subscribers: list[SubscriberPosition] = []  # the image's, read by its receiver
                receiver = ReceiverStateMachine(
                    log,
                    join_position=d.compute_position(
                        setup.active_term_id,
                        setup.term_offset,
                        setup.term_length,
                        setup.initial_term_id,
                    ),
                    receiver_id=endpoint.dispatcher.receiver_id,
                    rebuild_position=pos,
                    hwm_position=hwm,
                    consumption_position=functools.partial(slowest, subscribers),
                    system=services.system,
                    now_ns=now_ns,
                    window=window,
                    reliable=reliable,
                    loss_detector=LossDetector(
                        delay_ns=nak_delay or 0,
                        delay=multicast_nak_delay()
                        if endpoint.multicast and nak_delay is None
                        else None,
                    ),
                    feedback=group_tag_feedback(_first(channel.gtag for channel in channels)),
                    loss_handler=losses.on_gap_detected,
                    data_doorbell=log_signals.data,
                    report=services.record_error,
                )
                image = PublicationImage(
                    registration_id=registration_id,
                    receiver=receiver,
                    subscribers=subscribers,
                    endpoint=endpoint,
                    source_address=source_address,
                    log_file=log_file,
                    log_signals=log_signals,
                    counters=counters,
                    stream_counters=services.counters,
                    proxy=services.proxy,
                    wake=services.wake,
                )
            except (OSError, CountersFullError, StorageSpaceError) as e:  # ours, not the SETUP's
                services.record_error(e)
                return None
            undo.pop_all()
        log.mapped.set_conductor_wake_id(services.wake_id)
        self.resources.add(image)
        self.images_added = True
        for link in links:
            try:
                self._link(image, link)
            except CountersFullError as e:  # this subscription goes without the image
                services.record_error(e)
        return receiver

    def _link(self, image: PublicationImage, link: SubscriptionLink) -> None:
        image.add_subscriber(self._position(image, link))

    def _position(self, image: PublicationImage, link: SubscriptionLink) -> SubscriberPosition:
        """The subscription's position on the image, at its rebuild position (CountersFullError
        when none is left)."""
        join = image.receiver.rebuild_position.get()
        counter = self.services.counters.subscriber_position(
            link.registration_id, image.session_id, image.stream_id, link.channel, join,
            link.client_id,
        )  # fmt: skip
        return SubscriberPosition(link.registration_id, link.client_id, str(link.channel), counter)

    def watch_activity(self, idle: bool) -> None:
        """While idle, be woken by appends to network publications (to send them) and by
        subscribers consuming images (to send status messages): doorbells in this process,
        wake slots from others. Asked again while idle, it renews the wake slots (a writer in
        another process takes the slot it wakes) or, if publications or images came or went
        since, watches them anew."""
        if idle:
            if self._watched == self.resources.changes:
                for _, registration in self._watches:
                    registration.renew()
                return
            self.watch_activity(False)
            self._watched = self.resources.changes
            for publication in self.publications:
                self._watches.append(
                    (publication.signals.data, waker.register_data_waiter(publication.log.metadata))
                )
            for image in self.resources.images:
                metadata = image.receiver.log.metadata
                self._watches.append(
                    (image.signals.consumed, waker.register_space_waiter(metadata))
                )
            for doorbell, _ in self._watches:
                doorbell.add_waiter()
        else:
            for doorbell, registration in self._watches:
                doorbell.remove_waiter()
                registration.cancel()
            self._watches.clear()
            self._watched = None

    # -- duty cycle -------------------------------------------------------------------

    def data_path_parts(self) -> DataPathParts:
        """The parts of a DataPath for the sockets, publications and images there are now: the
        send endpoints' sockets (control input, read here), the receive endpoints' sockets with
        their receivers and routers, each network publication's data sender and its endpoint's
        datagram sender, what gives bookkeeping when it moves (the images' subscriber positions
        and high-water marks, the network publications' sender positions and logs) and the
        windows it keeps open (the images' and the publications')."""
        publications, images = self.publications, self.resources.images
        return DataPathParts(
            controls=tuple(
                (endpoint.fd, endpoint.receiver, endpoint.control)
                for endpoint in self.send_endpoints.values()
            ),
            receivers=tuple(
                (destination.fd, destination.receiver, endpoint.dispatcher.router)
                for endpoint in self.receive_endpoints.values()
                for destination in endpoint.destinations.values()
            ),
            senders=tuple((pub.sender.data_sender, pub.endpoint.sender) for pub in publications),
            counters=(
                *(sub.counter for image in images for sub in image.subscribers),
                *(image.receiver.hwm_position for image in images),
                *(pub.sender.sender_position for pub in publications),
            ),
            logs=tuple(pub.log.mapped for pub in publications),
            windows=(
                *(image.receiver.window for image in images),
                *(pub.term_window_length for pub in publications),
            ),
        )

    def do_work(self, now_ns: int, data_path: DataPath) -> tuple[int, int]:
        """What the DataPath leaves to Python, each conductor duty cycle: control frames in,
        SETUPs, retransmits and heartbeats out (new data is the DataPath's), what the
        router left of the data received, the images' bookkeeping (receiver positions, NAKs,
        status messages, cleaning), the receive endpoints' due timers. Returns (images whose
        rebuilt position moved, datagrams sent: data, SETUPs, heartbeats, status messages,
        NAKs)."""
        rebuilt_images = sent = 0
        for endpoint in self.send_endpoints.values():
            rest = data_path.slow_datagrams(endpoint.receiver)
            if rest is None:  # a socket opened since the DataPath was made
                endpoint.poll(now_ns)
            elif rest:
                endpoint.on_control_datagrams(rest, now_ns)
        for publication in self.publications:
            datagrams = publication.sender.send(now_ns)
            if datagrams:
                publication.endpoint.send(datagrams)
                sent += len(datagrams)
        for receive_endpoint in self.receive_endpoints.values():
            if receive_endpoint.dispatcher.router.sources_changed:  # before an EOS among the rest
                receive_endpoint.connect_data_senders(now_ns)
            for destination in receive_endpoint.destinations.values():
                rest = data_path.slow_datagrams(destination.receiver)
                if rest:
                    receive_endpoint.on_slow_datagrams(destination, rest, now_ns)
            deadline_ns = receive_endpoint.deadline_ns
            if deadline_ns is not None and now_ns >= deadline_ns:
                receive_endpoint.on_timer(now_ns)
        for image in self.resources.images:
            receiver = image.receiver
            rebuilt = receiver.rebuild_position.get()
            for frame in receiver.do_work(now_ns):
                image.send_control(frame)
                sent += 1
            if receiver.rebuild_position.get() != rebuilt:
                image.wake_subscribers()
                rebuilt_images += 1
        return rebuilt_images, sent

    def deadlines_ns(self) -> list[int]:
        """When each sender, receiver and receive endpoint next has something due though
        nothing arrives (a SETUP, heartbeat, retransmit, status message, NAK, setup request)."""
        deadlines = [publication.sender.deadline_ns() for publication in self.publications]
        deadlines += [image.receiver.deadline_ns() for image in self.resources.images]
        deadlines += [endpoint.deadline_ns for endpoint in self.receive_endpoints.values()]
        return [deadline for deadline in deadlines if deadline is not None]

    def on_timer(self, now_ns: int) -> None:
        """At the conductor's timer interval: the status messages the DataPath absorbed as
        repeats, then receivers gone silent, endpoints' own timers (the images' liveness is
        their resource lifecycle). A receive endpoint's timer also runs when its own deadline
        comes (do_work)."""
        for send_endpoint in self.send_endpoints.values():
            send_endpoint.take_repeats(now_ns)
        for publication in self.publications:
            publication.sender.check_receiver_liveness(now_ns)
        for send_endpoint in self.send_endpoints.values():
            send_endpoint.on_timer(now_ns)
        for receive_endpoint in self.receive_endpoints.values():
            receive_endpoint.on_timer(now_ns)

    def close(self) -> None:
        for image in list(self.resources.images):
            self.resources.end(image)
        for endpoint in self.send_endpoints.values():
            self.services.unwatch(endpoint.socket.fileno())
            endpoint.close()
        for receive_endpoint in self.receive_endpoints.values():
            self._close_receive_endpoint(receive_endpoint)
        self.send_endpoints.clear()
        self.receive_endpoints.clear()


def _first(values: Iterable[T | None]) -> T | None:
    """The first of `values` that is not None (None if none is)."""
    return next((value for value in values if value is not None), None)
