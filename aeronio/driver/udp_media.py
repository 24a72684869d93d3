"""Network publications and images in the driver (run by the conductor's duty cycle: Aeron's
shared threading mode, conductor, sender and receiver on one agent).

Publications on `aeron:udp` channels get a log, a SenderStateMachine (what to send) and a
SendChannelEndpoint (the socket, shared per endpoint). Subscriptions on `aeron:udp` channels get
a ReceiveChannelEndpoint bound to the endpoint (shared per endpoint); each session that announces
itself with a SETUP becomes an image with its own log, linked to every subscription of that
stream on the endpoint.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from aeronio._core import DataPath
from aeronio.counters import (
    FLOW_CONTROL_RECEIVERS_TYPE_ID,
    MDC_DESTINATIONS_TYPE_ID,
    RECEIVER_HWM_TYPE_ID,
    RECEIVER_POS_TYPE_ID,
    SENDER_BPE_TYPE_ID,
    SENDER_LIMIT_TYPE_ID,
    SENDER_POSITION_TYPE_ID,
    SUBSCRIBER_POSITION_TYPE_ID,
    Counter,
    CountersFullError,
    CountersManager,
)
from aeronio.driver.channel_endpoints import (
    ReceiveChannelEndpoint,
    SendChannelEndpoint,
    send_endpoint_key,
)
from aeronio.driver.data_dispatcher import DataDispatcher
from aeronio.driver.flow_control import flow_control_for, group_tag_feedback
from aeronio.driver.ipc_publication import IpcPublication, SubscriberPosition, slowest
from aeronio.driver.loss_detector import LossDetector, multicast_nak_delay
from aeronio.driver.receiver_state import ReceiverStateMachine
from aeronio.driver.sender_state import SenderStateMachine
from aeronio.logbuffer import descriptor as d
from aeronio.logbuffer import signals, waker
from aeronio.logbuffer.log_buffers import LogBuffers
from aeronio.protocol import control as p
from aeronio.protocol import layout
from aeronio.protocol.frames import SetupFrame

# How long the session of an image that ended is ignored: longer than a publication's default
# linger, during which it still sends heartbeats and answers with SETUPs.
IMAGE_COOL_DOWN_NS = 10_000_000_000


@dataclass(eq=False)
class NetworkPublicationEntry(IpcPublication):
    """A publication whose consumers are the sender and its spies (subscribers reading the log
    directly): its limit is the slowest of them plus the term window, and one term behind stays
    for retransmits. It is connected while a receiver answers (spies do not connect it)."""

    sender: SenderStateMachine | None = None
    endpoint: SendChannelEndpoint | None = None
    sender_counters: tuple[Counter, ...] = ()
    spies_simulate_connection: bool = False  # spies connect it as receivers do

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

    def _clean_to(self, position: int) -> int:
        return super()._clean_to(position - self.log.term_length)


@dataclass(eq=False)
class ImageEntry:
    registration_id: int
    image: ReceiverStateMachine
    endpoint: ReceiveChannelEndpoint
    source: tuple[str, int]
    log_file: str
    counters: tuple[Counter, ...]
    signals: signals.LogSignals
    subscribers: list[SubscriberPosition] = field(default_factory=list)

    def consumption(self) -> int | None:
        return slowest(self.subscribers)


class UdpMedia:
    def __init__(self, conductor, watch: Callable[[int], None], unwatch: Callable[[int], None]):
        self.conductor = conductor
        self.counters: CountersManager = conductor.counters
        self.system = conductor.system
        self.watch, self.unwatch = watch, unwatch
        self.receiver_id = random.getrandbits(63)
        self.send_endpoints: dict[str, SendChannelEndpoint] = {}
        self.receive_endpoints: dict[str, ReceiveChannelEndpoint] = {}
        self.images: list[ImageEntry] = []
        self.publications: list[NetworkPublicationEntry] = []
        self._watches: list = []
        self.images_added = False  # since the conductor last looked
        os.makedirs(os.path.join(conductor.ctx.dir, layout.IMAGES_DIR), exist_ok=True)

    # -- publications -----------------------------------------------------------------

    def attach_sender(self, entry: NetworkPublicationEntry, channel, now_ns: int) -> None:
        """Give a new network publication its sender, counters and (shared) endpoint; on
        failure nothing is left behind."""
        label = f"{entry.registration_id} {entry.session_id} {entry.stream_id} {entry.channel}"
        one_to_many = channel.is_multicast or channel.is_multi_destination
        names = [
            ("snd-pos", SENDER_POSITION_TYPE_ID),
            ("snd-lmt", SENDER_LIMIT_TYPE_ID),
            ("snd-bpe", SENDER_BPE_TYPE_ID),
        ] + [("fc-receivers", FLOW_CONTROL_RECEIVERS_TYPE_ID)] * one_to_many
        counters: list[Counter] = []
        key = send_endpoint_key(channel)
        endpoint = self.send_endpoints.get(key)
        try:
            for name, type_id in names:
                counters.append(self._counter(f"{name}: {label}", type_id, entry.registration_id))
            if endpoint is None:
                endpoint = self._send_endpoint(channel, entry.registration_id)
                self.send_endpoints[key] = endpoint
                self.watch(endpoint.socket.fileno())
        except BaseException:
            for counter in counters:
                self.counters.free(counter.id)
            raise
        entry.sender = SenderStateMachine(
            entry.log,
            sender_position=counters[0],
            sender_limit=counters[1],
            sender_bpe=counters[2],
            system=self.system,
            now_ns=now_ns,
            ttl=channel.ttl or 0,
            flow_control=flow_control_for(channel.fc, one_to_many),
            receivers=counters[3] if one_to_many else None,
            data_path=True,
        )
        entry.endpoint = endpoint
        entry.sender_counters = tuple(counters)
        entry.spies_simulate_connection = bool(channel.spies_simulate_connection)
        entry.signals.data.add_callback(self.conductor.wake)
        endpoint.publications[(entry.session_id, entry.stream_id)] = entry.sender
        self.publications.append(entry)

    def _send_endpoint(self, channel, registration_id: int) -> SendChannelEndpoint:
        """A new send endpoint; a multi-destination-cast one with its mdc-num-dests counter."""
        counter = None
        if channel.is_multi_destination:
            counter = self._counter(
                f"mdc-num-dests: {registration_id} {channel}",
                MDC_DESTINATIONS_TYPE_ID,
                registration_id,
            )
        try:
            endpoint = SendChannelEndpoint(
                channel, self.system, self.conductor.ctx.udp_offload, counter
            )
        except BaseException:
            if counter is not None:
                self.counters.free(counter.id)
            raise
        return endpoint

    def change_destination(
        self, entry: NetworkPublicationEntry, endpoint: str, add: bool, now_ns: int
    ) -> None:
        """Add or remove a manual multi-destination-cast destination of `entry`'s channel."""
        if add:
            entry.endpoint.add_destination(endpoint, now_ns)
        else:
            entry.endpoint.remove_destination(endpoint)

    def _counter(self, label: str, type_id: int, registration_id: int) -> Counter:
        return self.counters.counter(
            self.counters.allocate(label, type_id, registration_id=registration_id)
        )

    def detach_sender(self, entry: NetworkPublicationEntry) -> None:
        entry.signals.data.remove_callback(self.conductor.wake)
        endpoint = entry.endpoint
        endpoint.publications.pop((entry.session_id, entry.stream_id), None)
        self.publications.remove(entry)
        for counter in entry.sender_counters:
            self.counters.free(counter.id)
        if not endpoint.publications:
            self.unwatch(endpoint.socket.fileno())
            endpoint.close()
            if endpoint.destinations_counter is not None:
                self.counters.free(endpoint.destinations_counter.id)
            del self.send_endpoints[endpoint.key]

    # -- subscriptions ----------------------------------------------------------------

    def add_subscription(self, link) -> None:
        endpoint = self.receive_endpoints.get(link.channel.endpoint)
        if endpoint is None:
            endpoint = ReceiveChannelEndpoint(
                link.channel, self._dispatcher_for, self.conductor.ctx.udp_offload
            )
            self.receive_endpoints[endpoint.key] = endpoint
            self.watch(endpoint.socket.fileno())
        endpoint.dispatcher.add_subscription(link.stream_id)
        for entry in self.images:
            if entry.endpoint is endpoint and entry.image.stream_id == link.stream_id:
                self._link(entry, link)

    def remove_subscription(self, link) -> None:
        endpoint = self.receive_endpoints.get(link.channel.endpoint)
        if endpoint is None:
            return
        endpoint.dispatcher.remove_subscription(link.stream_id)
        for entry in self.images:
            for sub in list(entry.subscribers):
                if sub.subscription_registration_id == link.registration_id:
                    entry.subscribers.remove(sub)
                    self.counters.free(sub.counter.id)
        if not endpoint.dispatcher.streams:
            for entry in [e for e in self.images if e.endpoint is endpoint]:
                self._delete_image(entry)
            self.unwatch(endpoint.socket.fileno())
            endpoint.close()
            del self.receive_endpoints[endpoint.key]

    def _dispatcher_for(self, endpoint: ReceiveChannelEndpoint) -> DataDispatcher:
        return DataDispatcher(
            self.receiver_id,
            self.system,
            lambda setup, source, now_ns: self._new_image(endpoint, setup, source, now_ns),
            endpoint.send_control,
            hears_naks=endpoint.multicast,
        )

    def _new_image(
        self,
        endpoint: ReceiveChannelEndpoint,
        setup: SetupFrame,
        source: tuple[str, int],
        now_ns: int,
    ) -> ReceiverStateMachine | None:
        """The image of a new session: its log, positions and links to the subscriptions. A
        SETUP no log can be made for raises (an invalid packet); a failure of this driver's
        (no space, no counter left) is recorded and leaves nothing behind (None)."""
        registration_id = self.conductor._next_correlation_id()
        log_file = layout.image_log(self.conductor.ctx.dir, registration_id)
        try:
            log = LogBuffers.create(
                log_file,
                term_length=setup.term_length,
                initial_term_id=setup.initial_term_id,
                session_id=setup.session_id,
                stream_id=setup.stream_id,
                mtu=setup.mtu,
                correlation_id=registration_id,
                term_id=setup.active_term_id,
                term_offset=setup.term_offset,
                sparse=self.conductor.ctx.term_buffer_sparse_file,
            )
        except BaseException as e:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(log_file)
            if not isinstance(e, OSError):
                raise
            self.conductor.record_error(e)
            return None
        label = f"{registration_id} {setup.session_id} {setup.stream_id} udp {endpoint.key}"
        positions: list[Counter] = []
        try:
            for name, type_id in (
                ("rcv-hwm", RECEIVER_HWM_TYPE_ID),
                ("rcv-pos", RECEIVER_POS_TYPE_ID),
            ):
                positions.append(self._counter(f"{name}: {label}", type_id, registration_id))
        except CountersFullError as e:
            for counter in positions:
                self.counters.free(counter.id)
            log.close()
            os.unlink(log_file)
            self.conductor.record_error(e)
            return None
        hwm, pos = positions
        log.mapped.set_conductor_wake_id(self.conductor.wake_id)
        join = d.compute_position(
            setup.active_term_id, setup.term_offset, setup.term_length, setup.initial_term_id
        )
        entry: ImageEntry | None = None
        nak_delay = self._subscription_setting(endpoint, setup.stream_id, "nak_delay_ns")
        image = ReceiverStateMachine(
            log,
            join_position=join,
            receiver_id=self.receiver_id,
            rebuild_position=pos,
            hwm_position=hwm,
            consumption_position=lambda: entry.consumption(),
            system=self.system,
            now_ns=now_ns,
            window=self._subscription_setting(endpoint, setup.stream_id, "rcv_wnd"),
            reliable=self._subscription_setting(endpoint, setup.stream_id, "reliable") is not False,
            loss_detector=LossDetector(
                delay_ns=nak_delay or 0,
                delay=multicast_nak_delay() if endpoint.multicast and nak_delay is None else None,
            ),
            feedback=group_tag_feedback(
                self._subscription_setting(endpoint, setup.stream_id, "gtag")
            ),
        )
        log_signals = signals.acquire(log_file)
        log_signals.consumed.add_callback(self.conductor.wake)
        image.rebuilder.data_doorbell = log_signals.data
        entry = ImageEntry(
            registration_id, image, endpoint, source, log_file, (hwm, pos), log_signals
        )
        self.images.append(entry)
        self.images_added = True
        for link in self.conductor.subscriptions:
            if (
                not link.reads_logs
                and link.channel.endpoint == endpoint.key
                and link.stream_id == setup.stream_id
            ):
                try:
                    self._link(entry, link)
                except CountersFullError as e:  # this subscription goes without the image
                    self.conductor.record_error(e)
        return image

    def _subscription_setting(self, endpoint: ReceiveChannelEndpoint, stream_id: int, name: str):
        """The value the channel of a subscription of this stream on this endpoint gives the
        parameter `name` (rcv_wnd, reliable, nak_delay_ns, gtag), if one does."""
        return next(
            (
                getattr(link.channel, name)
                for link in self.conductor.subscriptions
                if not link.reads_logs
                and link.channel.endpoint == endpoint.key
                and link.stream_id == stream_id
                and getattr(link.channel, name) is not None
            ),
            None,
        )

    def _link(self, entry: ImageEntry, link) -> None:
        image = entry.image
        join = image.rebuild_position.get()
        counter = self.counters.counter(
            self.counters.allocate(
                f"sub-pos: {link.registration_id} {image.session_id} {image.stream_id} "
                f"{link.channel} @{join}",
                SUBSCRIBER_POSITION_TYPE_ID,
                registration_id=link.registration_id,
                owner_id=link.client_id,
            )
        )
        counter.set(join)
        entry.subscribers.append(SubscriberPosition(link.registration_id, counter))
        client = self.conductor.clients.get(link.client_id)
        if client is not None:
            client.send(
                p.ImageReady(
                    entry.registration_id,
                    link.registration_id,
                    image.session_id,
                    image.stream_id,
                    entry.log_file,
                    counter.id,
                    f"{entry.source[0]}:{entry.source[1]}",
                    join,
                )
            )

    def _delete_image(self, entry: ImageEntry) -> None:
        self.images.remove(entry)
        image = entry.image
        entry.endpoint.dispatcher.remove_image(image.session_id, image.stream_id)
        links = {link.registration_id: link for link in self.conductor.subscriptions}
        for sub in entry.subscribers:
            link = links.get(sub.subscription_registration_id)
            client = self.conductor.clients.get(link.client_id) if link is not None else None
            if client is not None:
                client.send(
                    p.ImageUnavailable(
                        entry.registration_id,
                        link.registration_id,
                        image.session_id,
                        image.stream_id,
                    )
                )
            self.counters.free(sub.counter.id)
        for counter in entry.counters:
            self.counters.free(counter.id)
        entry.signals.consumed.remove_callback(self.conductor.wake)
        signals.release(entry.log_file)
        image.log.close()
        try:
            os.unlink(entry.log_file)
        except FileNotFoundError:
            pass

    def watch_activity(self, idle: bool) -> None:
        """While idle, be woken by appends to network publications (to send them) and by
        subscribers consuming images (to send status messages): doorbells in this process,
        wake slots from others."""
        if idle:
            for entry in self.publications:
                self._watches.append(
                    (entry.signals.data, waker.register_data_waiter(entry.log.metadata))
                )
            for image in self.images:
                self._watches.append(
                    (image.signals.consumed, waker.register_space_waiter(image.image.log.metadata))
                )
            for doorbell, _ in self._watches:
                doorbell.add_waiter()
        else:
            for doorbell, registration in self._watches:
                doorbell.remove_waiter()
                registration.cancel()
            self._watches.clear()

    # -- duty cycle -------------------------------------------------------------------

    def data_path_parts(self) -> dict:
        """The parts of a DataPath (its keyword arguments) for the sockets, publications and
        images there are now: the send endpoints' sockets (control input, read here), the
        receive endpoints' sockets with their receivers and routers, each network publication's
        data sender and its endpoint's datagram sender, what gives bookkeeping when it moves
        (the images' subscriber positions and high-water marks, the network publications'
        sender positions and logs)."""
        return {
            "control_fds": [endpoint.fd for endpoint in self.send_endpoints.values()],
            "receivers": [
                (endpoint.fd, endpoint.receiver, endpoint.dispatcher.router)
                for endpoint in self.receive_endpoints.values()
            ],
            "senders": [
                (entry.sender.data_sender, entry.endpoint.sender) for entry in self.publications
            ],
            "counters": [
                *(sub.counter for entry in self.images for sub in entry.subscribers),
                *(entry.image.hwm_position for entry in self.images),
                *(entry.sender.sender_position for entry in self.publications),
            ],
            "logs": [entry.log.mapped for entry in self.publications],
        }

    def do_work(self, now_ns: int, data_path: DataPath) -> tuple[int, int]:
        """What the DataPath leaves to Python, each conductor duty cycle: control frames in,
        SETUPs, retransmits, heartbeats (and data while a sender is not `fast`) out, what the
        router left of the data received, the images' bookkeeping (receiver positions, NAKs,
        status messages, cleaning). Returns (work, datagrams sent)."""
        work = sent = 0
        for endpoint in self.send_endpoints.values():
            if data_path.has_input(endpoint.fd):
                work += endpoint.poll(now_ns)
        for entry in self.publications:
            datagrams = entry.sender.send(now_ns)
            if datagrams:
                entry.endpoint.send(datagrams)
                sent += len(datagrams)
        for endpoint in self.receive_endpoints.values():
            rest = data_path.slow_datagrams(endpoint.receiver)
            if rest:
                endpoint.dispatcher.on_slow_datagrams(rest, now_ns)
                work += len(rest)
        for entry in self.images:
            rebuilt = entry.image.rebuild_position.get()
            for frame in entry.image.do_work(now_ns):
                entry.endpoint.send_control(frame, entry.source)
            if entry.image.rebuild_position.get() != rebuilt:
                self._wake_subscribers(entry)
                work += 1
        return work + sent, sent

    def on_timer(self, now_ns: int) -> int:
        """Liveness, at the conductor's timer interval: receivers gone silent, images whose
        stream ended or went silent."""
        work = 0
        for entry in self.publications:
            entry.sender.check_receiver_liveness(now_ns)
        for send_endpoint in self.send_endpoints.values():
            send_endpoint.on_timer(now_ns)
        for receive_endpoint in self.receive_endpoints.values():
            receive_endpoint.on_timer(now_ns)
        for entry in list(self.images):
            if not entry.image.is_alive(now_ns):
                image = entry.image
                entry.endpoint.dispatcher.cool_down(
                    image.session_id, image.stream_id, now_ns + IMAGE_COOL_DOWN_NS
                )
                self._delete_image(entry)
                work += 1
        return work

    @staticmethod
    def _wake_subscribers(entry: ImageEntry) -> None:
        """The receiver position moved: wake the image's parked subscribers, here and in other
        processes (the router wakes them for the frames it inserts; this is for the rest, such
        as a gap filled with PAD)."""
        if entry.signals.data.waiters:
            entry.signals.data.ring()
        entry.image.log.mapped.wake_data_waiters()

    def close(self) -> None:
        for entry in list(self.images):
            self._delete_image(entry)
        for endpoint in list(self.send_endpoints.values()) + list(self.receive_endpoints.values()):
            self.unwatch(endpoint.socket.fileno())
            endpoint.close()
        self.send_endpoints.clear()
        self.receive_endpoints.clear()
