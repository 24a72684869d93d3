"""The driver conductor (Aeron's DriverConductor): handles client commands and runs the duty
cycle of the driver's resources.

Commands arrive in cnc.dat's to-driver ring buffer, from aeronio's clients and Aeron's alike,
read in the duty cycle (driver/to_driver_commands.py); answers and notifications go out through
the ClientProxy on the to-clients broadcast buffer. Every client, subscription, publication and
image is a resource held in the registry (`DriverResources`) and driven through one lifecycle on
the timer. The conductor owns cnc.dat and every log file in the driver directory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import random
import sys
import time
from collections.abc import Callable

from aeronio._core import LINGER_MAX_NS, DataPath, DutySchedule
from aeronio.cnc import CncFile
from aeronio.concurrent.broadcast import BroadcastTransmitter
from aeronio.concurrent.error_log import DistinctErrorLog
from aeronio.counters import (
    CLIENT_DOORBELL_TYPE_ID,
    MAX_KEY_LENGTH,
    CountersFullError,
    CountersManager,
    SystemCounters,
    allocate_system_counters,
)
from aeronio.driver.channel_endpoints import resolve_host
from aeronio.driver.client_proxy import ClientProxy, Reply
from aeronio.driver.context import DriverContext
from aeronio.driver.driver_publication import DriverPublication, PublicationParts, State
from aeronio.driver.ipc_publication import IpcPublication
from aeronio.driver.log_params import (
    RECEIVER_INITIAL_WINDOW_LENGTH,
    os_default_socket_buffer_lengths,
    publication_log_params,
)
from aeronio.driver.loss_report import LossReport
from aeronio.driver.network_publication import NetworkPublication
from aeronio.driver.raw_log_factory import RawLogFactory, free_log
from aeronio.driver.resources import (
    ClientSession,
    DriverResources,
    SubscriberPosition,
    SubscriptionLink,
)
from aeronio.driver.stream_counters import StreamCounters
from aeronio.driver.to_driver_commands import ToDriverCommands
from aeronio.driver.udp_media import UdpMedia, UdpServices
from aeronio.errors import (
    AeronError,
    ChannelUriError,
    ClientTimeoutError,
    DriverError,
    StorageSpaceError,
)
from aeronio.protocol import control as p
from aeronio.protocol import layout, limits
from aeronio.protocol.channel import ChannelUri

log = logging.getLogger("aeronio.driver")

# A freed counter id is not reused for this long, so a client still holding it harms nobody.
COUNTER_REUSE_TIMEOUT_MS = 1000
# The session ids a driver never gives a publication itself (Aeron's default range: kept for
# the session-id= of channels).
PUBLICATION_RESERVED_SESSION_IDS = range(-1, 1001)
# The timed-out clients whose commands are refused naming the timeout: the latest ones.
TIMED_OUT_KEPT = 4096


# The commands that make a client the driver does not know: the adds, as Aeron's, and the
# keepalive aeronio's clients begin with. Others may name no client: Aeron's C client leaves
# REJECT_IMAGE's client id unset, and a driver termination request names one of its own.
_MAKE_CLIENTS = (
    p.AddPublication,
    p.AddSubscription,
    p.AddCounter,
    p.AddStaticCounter,
    p.ClientKeepalive,
)
# What a command of a client the driver does not know names (the rest name a publication).
_UNKNOWN_PUBLICATION = ("publication", p.UNKNOWN_PUBLICATION)
_UNKNOWN_RESOURCES: dict[type, tuple[str, int]] = {
    p.RemoveSubscription: ("subscription", p.UNKNOWN_SUBSCRIPTION),
    p.AddRcvDestination: ("subscription", p.UNKNOWN_SUBSCRIPTION),
    p.RemoveRcvDestination: ("subscription", p.UNKNOWN_SUBSCRIPTION),
    p.RemoveCounter: ("counter", p.UNKNOWN_COUNTER),
}


class DriverConductor:
    def __init__(
        self,
        ctx: DriverContext,
        *,
        wake: Callable[[], None],
        wake_id: int,
        watch: Callable[[int], None],
        unwatch: Callable[[int], None],
        ring: Callable[[int], None] = lambda wake_id: None,
        terminate: Callable[[], None] = lambda: None,
    ):
        """`ring(wake_id)` rings a process's doorbell; `terminate()` stops the driver (a
        TERMINATE_DRIVER command, when `ctx.terminate_driver_enabled`)."""
        self.ctx = ctx
        self._terminate = terminate
        self.wake = wake
        self.wake_id = wake_id
        self.cnc = CncFile.create(
            ctx.dir,
            max_counters=ctx.max_counters,
            client_liveness_timeout_ns=ctx.client_liveness_timeout_ns,
        )
        self.cnc.to_driver.set_consumer_heartbeat_time(time.time_ns() // 1_000_000)
        self.error_log = DistinctErrorLog(self.cnc.error_log_buffer)
        self.loss_report = LossReport.create(os.path.join(ctx.dir, layout.LOSS_REPORT_FILE))
        self.counters = CountersManager.of(self.cnc, reuse_timeout_ms=COUNTER_REUSE_TIMEOUT_MS)
        self.system = allocate_system_counters(self.counters)
        self.stream_counters = StreamCounters(self.counters)
        self.logs = RawLogFactory(ctx, self.system[SystemCounters.LOW_STORAGE_WARNINGS])
        self.resources = DriverResources()
        self.proxy = ClientProxy(
            self.resources.clients, BroadcastTransmitter(self.cnc.to_clients_buffer), ring
        )
        self.to_driver = ToDriverCommands(
            self.cnc.to_driver,
            self._on_ring_command,
            self._on_bad_record,
            ctx.client_liveness_timeout_ns,
        )
        self.doorbell = self.stream_counters.driver_doorbell(wake_id)
        self._session_id_sequence = random.randint(-(2**31), 2**31 - 1)
        # The clients timed out, to refuse their commands saying so: the last TIMED_OUT_KEPT.
        self._timed_out_clients: dict[int, None] = {}
        self.schedule = DutySchedule(ctx.timer_interval_ns)
        self._now_ns = 0  # of the duty cycle that runs
        self.udp = UdpMedia(
            UdpServices(
                ctx=ctx,
                resources=self.resources,
                counters=self.stream_counters,
                logs=self.logs,
                proxy=self.proxy,
                system=self.system,
                next_id=self.cnc.to_driver.next_correlation_id,
                record_error=self.record_error,
                wake=wake,
                wake_id=wake_id,
                watch=watch,
                unwatch=unwatch,
                loss_report=self.loss_report,
            )
        )
        self._data_path = self._new_data_path()

    @property
    def publications(self) -> list[DriverPublication]:
        return self.resources.publications

    # -- commands -----------------------------------------------------------------------

    def _on_ring_command(self, command: p.Command) -> None:
        """A command of the to-driver ring buffer: answered on the broadcast buffer."""
        self._on_command(command, self.proxy.transmit, self._now_ns)

    def _on_bad_record(self, code: int, correlation_id: int | None, message: str) -> None:
        """A ring buffer record that is no command: counted, recorded, answered if it can be."""
        self.record_error(message)
        if correlation_id is not None:
            self.proxy.error(self.proxy.transmit, correlation_id, code, message)

    def _on_command(
        self, command: p.Command, reply: Callable[[p.Response], None], now_ns: int
    ) -> None:
        correlation_id = getattr(command, "correlation_id", 0)
        if command.client_id in self._timed_out_clients:
            message = f"client {command.client_id} was timed out by the driver"
            self.proxy.error(reply, correlation_id, p.GENERIC_ERROR, message)
            return
        try:
            match command:  # what needs no client: a client the driver does not know is not made
                case p.GetNextAvailableSessionId():
                    session_id = self._next_session_id(command.stream_id)
                    self.proxy.next_available_session_id(reply, command.correlation_id, session_id)
                    return
                case p.RejectImage():
                    self._reject_image(command, reply, now_ns)
                    return
                case p.TerminateDriver():
                    self._terminate_driver(command)
                    return
                case p.ClientClose():
                    self._close_client(command.client_id)
                    return
            client = self._client(command, reply)
            client.on_keepalive()
            match command:
                case p.AddPublication():
                    self._add_publication(command, client, now_ns)
                case p.RemovePublication():
                    self._remove_publication(command, client, now_ns)
                case p.AddSubscription():
                    self._add_subscription(command, client)
                case p.RemoveSubscription():
                    self._remove_subscription(command, client)
                case p.AddDestination() | p.RemoveDestination() | p.RemoveDestinationById():
                    self._change_destination(command, client, now_ns)
                case p.AddCounter():
                    self._add_counter(command, client, reply)
                case p.AddStaticCounter():
                    self._add_static_counter(command, reply)
                case p.RemoveCounter():
                    self._remove_counter(command, client, reply)
                case p.AddRcvDestination() | p.RemoveRcvDestination():
                    self._change_rcv_destination(command, client)
                case p.ClientKeepalive():
                    pass
        except ChannelUriError as e:
            self._error(reply, correlation_id, p.INVALID_CHANNEL, str(e))
        except StorageSpaceError as e:
            self._error(reply, correlation_id, p.STORAGE_SPACE, str(e))
        except DriverError as e:
            self._error(reply, correlation_id, e.code, str(e))
        except AeronError as e:
            self._error(reply, correlation_id, p.GENERIC_ERROR, str(e))
        except Exception as e:  # a bug or a resource problem: refuse this command, keep running
            self.record_error(e)
            self.proxy.error(reply, correlation_id, p.GENERIC_ERROR, f"{type(e).__name__}: {e}")

    def _client(self, command: p.Command, reply: Callable[[p.Response], None]) -> ClientSession:
        """The client of `command`. As Aeron's driver, only an add makes one it does not know
        (and a keepalive: aeronio's clients begin with one); a remove or destination of one it
        does not know is refused, its resource unknown."""
        client_id = command.client_id
        client = self.resources.clients.get(client_id)
        if client is None and not isinstance(command, _MAKE_CLIENTS):
            what, code = _UNKNOWN_RESOURCES.get(type(command), _UNKNOWN_PUBLICATION)
            # The resource named: a RemoveDestinationById names its publication so.
            named = getattr(command, "resource_registration_id", None)
            named = getattr(command, "registration_id", named)
            raise DriverError(
                f"unknown {what} registration id {named}: client {client_id} is unknown to "
                "the driver",
                code,
            )
        if client is None:
            client = ClientSession(
                client_id,
                reply,
                self.stream_counters.client_heartbeat(client_id),
                self.ctx.client_liveness_timeout_ns,
                self._release_client,
                self.ctx.timer_interval_ns,
            )
            self.resources.add(client)
            self.proxy.counter_ready(reply, client_id, client.heartbeat.id)
        return client

    def _close_client(self, client_id: int) -> None:
        client = self.resources.clients.get(client_id)
        if client is not None:
            client.closed = True
            self.resources.end(client)

    def _check_unused(self, correlation_id: int) -> None:
        """An add's correlation id becomes the registration id its client removes by: one
        already in use (Aeron's clients draw them from cnc.dat's counter, so only a client
        that does not could repeat one) is refused, not given to a second resource."""
        for client in self.resources.clients.values():
            if (
                correlation_id in client.publications
                or correlation_id in client.subscriptions
                or correlation_id in client.counters
            ):
                raise AeronError(
                    f"correlation id {correlation_id} is already the registration id of a "
                    f"publication, subscription or counter of client {client.client_id}"
                )

    def _terminate_driver(self, command: p.TerminateDriver) -> None:
        """As Aeron's driver: no answer; the driver stops if its context allows it (off by
        default: the refusal is only recorded)."""
        if self.ctx.terminate_driver_enabled:
            log.info("driver terminated by client %d", command.client_id)
            self._terminate()
        else:
            self.record_error(
                f"TERMINATE_DRIVER from client {command.client_id} ignored: "
                "terminate_driver_enabled is off"
            )

    def _error(self, reply: Reply, correlation_id: int, code: int, message: str) -> None:
        self.record_error(message)
        self.proxy.error(reply, correlation_id, code, message)

    def record_error(self, error: BaseException | str) -> None:
        """Count an error and keep it in the distinct error log (`aeronio errors`); a new one
        the full log cannot take is logged instead, as Aeron prints an unrecordable error."""
        self.system[SystemCounters.ERRORS].increment()
        if not self.error_log.record(error):
            log.warning("error log in cnc.dat full, unrecordable error: %.500s", error)

    # -- publications -------------------------------------------------------------------

    def _add_publication(
        self, command: p.AddPublication, client: ClientSession, now_ns: int
    ) -> None:
        channel = ChannelUri.parse(command.channel)
        limits.check_int32(command.stream_id, "stream_id")
        _check_publication_channel(channel)
        self._check_unused(command.correlation_id)
        media_key = channel.canonical_form(resolve_host)
        publication = None
        if not command.exclusive:  # as Aeron's: the stream's shared log, if its params agree
            publication = next(
                (
                    pub
                    for pub in self.publications
                    if not pub.exclusive
                    and pub.stream_id == command.stream_id
                    and pub.media_key == media_key
                    and pub.state is State.ACTIVE
                ),
                None,
            )
        if publication is None:
            publication = self._new_publication(channel, command, now_ns)
            self.resources.add(publication)
            readers = [link for link in self.resources.subscriptions if _reads(link, publication)]
            try:
                positions = self._subscriber_positions([(publication, link) for link in readers])
            except BaseException:
                self.resources.end(publication)
                raise
            self._add_subscribers(positions)
        else:
            _check_same_log_params(channel, publication)
            publication.ref_count += 1
        client.publications[command.correlation_id] = publication.registration_id
        self.proxy.publication_ready(client.send, command.correlation_id, publication)

    def _new_publication(
        self, channel: ChannelUri, command: p.AddPublication, now_ns: int
    ) -> DriverPublication:
        """A publication on a new log, with its counters (and, on UDP, its sender); on failure
        nothing is left behind."""
        ctx = self.ctx
        term_length = channel.term_length or (
            ctx.ipc_term_length if channel.is_ipc else ctx.term_length
        )
        mtu = channel.mtu or (ctx.ipc_mtu if channel.is_ipc else ctx.mtu_length)
        limits.check_mtu_for_term_length(mtu, term_length, error=AeronError)
        media_key = channel.canonical_form(resolve_host)
        session_id = channel.session_id
        if session_id is None:
            session_id = self._next_session_id(command.stream_id)
        elif any(
            pub.session_id == session_id
            and pub.stream_id == command.stream_id
            and pub.media_key == media_key
            for pub in self.publications
        ):  # a clash where both would reach the same receivers (an archive's replay to a
            # late joiner uses the live stream's session id, on another endpoint): as Aeron's,
            raise ChannelUriError(  # INVALID_CHANNEL
                f"session-id {session_id} is already in use on stream {command.stream_id} "
                f"of {channel}"
            )
        registration_id = command.correlation_id  # as Aeron's: the first add's
        if channel.initial_term_id is not None:
            initial_term_id = channel.initial_term_id
            term_id, term_offset = channel.term_id, channel.term_offset
            assert term_offset is not None  # ChannelUri has the three together or none
        else:
            initial_term_id = random.randint(-(2**31), 2**31 - 1)
            term_id, term_offset = None, 0
        window = (ctx.ipc_publication_term_window_length if channel.is_ipc else 0) or (
            term_length // 2
        )
        window = min(window, term_length // 2)
        linger_ns = (
            channel.linger_ns if channel.linger_ns is not None else ctx.publication_linger_ns
        )
        params = publication_log_params(
            channel,
            exclusive=command.exclusive,
            window_length=window,
            linger_ns=linger_ns,
            sparse=channel.sparse if channel.sparse is not None else ctx.term_buffer_sparse_file,
        )
        with contextlib.ExitStack() as undo:
            log = self.logs.new_publication(
                registration_id,
                term_length=term_length,
                initial_term_id=initial_term_id,
                session_id=session_id,
                stream_id=command.stream_id,
                mtu=mtu,
                term_id=term_id,
                term_offset=term_offset,
                params=params,
            )
            undo.callback(free_log, log)
            counters = self.stream_counters.publication(
                registration_id, session_id, command.stream_id, str(channel), command.client_id
            )
            undo.callback(self.stream_counters.free, *counters)
            parts = PublicationParts(
                registration_id=registration_id,
                channel=str(channel),
                media_key=media_key,
                exclusive=command.exclusive,
                log=log,
                counters=counters,
                term_window_length=window,
                unblock_timeout_ns=ctx.publication_unblock_timeout_ns,
                linger_ns=linger_ns,
                unblocked_counter=self.system[SystemCounters.UNBLOCKED_PUBLICATIONS],
                stream_counters=self.stream_counters,
                proxy=self.proxy,
                wake=self.wake,
                report=self._report_loss,
            )
            made: DriverPublication
            if channel.is_udp:  # a socket for it may be refused (a bound port, a group...)
                made = self.udp.new_publication(channel, now_ns, parts)
            else:
                made = IpcPublication(parts)
            undo.pop_all()
        log.mapped.set_conductor_wake_id(self.wake_id)
        return made

    def _next_session_id(self, stream_id: int) -> int:
        """As Aeron's driver: the next id of its sequence (from a random start, wrapping, past
        PUBLICATION_RESERVED_SESSION_IDS) that no publication on `stream_id` has (lingering
        ones included); each call takes one, for a new publication or a client that asked."""
        in_use = {pub.session_id for pub in self.publications if pub.stream_id == stream_id}
        while True:
            session_id = self._session_id_sequence
            if session_id in PUBLICATION_RESERVED_SESSION_IDS:
                session_id = PUBLICATION_RESERVED_SESSION_IDS.stop
            self._session_id_sequence = (session_id + 1 + 2**31) % 2**32 - 2**31
            if session_id not in in_use:
                return session_id

    def _remove_publication(
        self, command: p.RemovePublication, client: ClientSession, now_ns: int
    ) -> None:
        registration_id = client.publications.pop(command.registration_id, None)  # by its add
        if registration_id is None:
            raise DriverError(
                f"unknown publication registration id {command.registration_id}",
                p.UNKNOWN_PUBLICATION,
            )
        if command.flags & p.REMOVE_PUBLICATION_FLAG_REVOKE:
            self._revoke_publication(registration_id, now_ns)
        self._release_publication(registration_id, now_ns)
        self.proxy.operation_success(client.send, command.correlation_id)

    def _revoke_publication(self, registration_id: int, now_ns: int) -> None:
        """A publication revoked ends at once, not drained (`DriverPublication.revoke`; a
        network one's heartbeats then say so to its receivers)."""
        publication = next(
            (pub for pub in self.publications if pub.registration_id == registration_id), None
        )
        if publication is None or publication.state is not State.ACTIVE:
            return
        publication.revoke(now_ns)
        self.system[SystemCounters.PUBLICATIONS_REVOKED].increment()

    def _release_publication(self, registration_id: int, now_ns: int) -> None:
        for publication in self.publications:
            if publication.registration_id == registration_id:
                publication.decref(now_ns)
                return

    def _report_loss(self, message: str) -> None:
        """What a publication lost as it ended: in the error log (and counted), and logged (an
        embedded driver's error log goes with its directory)."""
        self.record_error(message)
        log.warning("%s", message)

    def _advance_released(self, now_ns: int) -> bool:
        """Move released publications on in every full duty cycle, not only on the timer: one
        drained lingers (an IPC one without its subscribers), one delivered ends at once (True:
        one ended or let its subscribers go, the data path reads their positions no more)."""
        reshaped = False
        for publication in [pub for pub in self.publications if pub.state is not State.ACTIVE]:
            subscribers = len(publication.subscribers)
            publication.advance(now_ns)
            reshaped |= len(publication.subscribers) != subscribers
            if publication.has_reached_end_of_life():
                self.resources.end(publication)
                reshaped = True
        return reshaped

    def _change_destination(
        self,
        command: p.AddDestination | p.RemoveDestination | p.RemoveDestinationById,
        client: ClientSession,
        now_ns: int,
    ) -> None:
        """A destination of a manual multi-destination-cast publication (named by its
        registration id or its add's correlation id): added (the destination's registration id
        is the command's correlation id), or removed by its channel or by that id (as Aeron's:
        an id no destination has removes nothing)."""
        if isinstance(command, p.RemoveDestinationById):
            named = command.resource_registration_id
        else:
            named = command.registration_id
        registration_id = client.publications.get(named, named)  # as Aeron's clients name it
        publication = next(
            (pub for pub in self.publications if pub.registration_id == registration_id), None
        )
        if publication is None or registration_id not in client.publications.values():
            raise DriverError(
                f"unknown publication registration id {registration_id} of client "
                f"{client.client_id}",
                p.UNKNOWN_PUBLICATION,
            )
        destination = None  # the channel's, checked before the publication's kind
        if isinstance(command, p.AddDestination):
            destination = _publication_destination(command.channel).endpoint
        elif isinstance(command, p.RemoveDestination):
            destination = _destination_channel(command.channel).endpoint
        if not isinstance(publication, NetworkPublication):
            raise AeronError(f"publication {registration_id} is not on a udp channel")
        endpoint = publication.endpoint
        match command:
            case p.AddDestination():
                assert destination is not None  # _destination_channel checked it
                endpoint.add_destination(destination, now_ns, command.correlation_id)
            case p.RemoveDestination():
                assert destination is not None
                endpoint.remove_destination(destination)
            case p.RemoveDestinationById():
                endpoint.remove_destination_by_id(command.destination_registration_id)
        self.proxy.operation_success(client.send, command.correlation_id)

    def _reject_image(self, command: p.RejectImage, reply: Reply, now_ns: int) -> None:
        """As Aeron's driver: the image (named by its ON_AVAILABLE_IMAGE correlation id) of an
        IPC publication (its registration id) rejected tells its publishers and unlinks its
        subscribers for the image liveness timeout (`IpcPublication.reject`); a network image
        rejected ends, its senders told with ERR frames (`PublicationImage.reject`)."""
        if len(command.reason.encode()) > limits.MAX_ERROR_MESSAGE_LENGTH:
            raise AeronError(
                f"Invalidation reason_text must be {limits.MAX_ERROR_MESSAGE_LENGTH} bytes or less"
            )
        image_id = command.image_correlation_id
        image = next(
            (image for image in self.resources.images if image.registration_id == image_id), None
        )
        publication = next(
            (
                pub
                for pub in self.publications
                if isinstance(pub, IpcPublication) and pub.registration_id == image_id
            ),
            None,
        )
        if image is not None:
            image.reject(command.reason, now_ns)
            self.resources.end(image)
        elif publication is not None:
            publication.reject(command.reason, now_ns, self.ctx.image_liveness_timeout_ns)
        else:
            raise AeronError(f"Unable to resolve image for correlationId={image_id}")
        self.system[SystemCounters.IMAGES_REJECTED].increment()
        self.proxy.operation_success(reply, command.correlation_id)

    def _relink_rejected(self, now_ns: int) -> None:
        """The IPC publications whose rejection cool-down is over link their subscriptions
        again (Aeron's linkIpcSubscriptions): each gets a new image, at the producer position
        (the counters full, the next tick tries again)."""
        for publication in self.publications:
            if not (isinstance(publication, IpcPublication) and publication.cool_down_over(now_ns)):
                continue
            readers = [link for link in self.resources.subscriptions if _reads(link, publication)]
            try:
                positions = self._subscriber_positions([(publication, link) for link in readers])
            except CountersFullError as e:
                self.record_error(e)
                continue
            publication.cool_down_until_ns = None
            self._add_subscribers(positions)

    # -- subscriptions ------------------------------------------------------------------

    def _change_rcv_destination(
        self, command: p.AddRcvDestination | p.RemoveRcvDestination, client: ClientSession
    ) -> None:
        if command.registration_id not in client.subscriptions:
            raise AeronError(f"no subscription {command.registration_id} of this client")
        (link,) = [
            s for s in self.resources.subscriptions if s.registration_id == command.registration_id
        ]
        if link.reads_logs or not link.channel.is_multi_destination:
            raise AeronError(
                "destinations are only for subscriptions with control-mode=manual "
                f"(aeron:udp?control-mode=manual), not for one on {link.channel}"
            )
        destination = _destination_channel(command.channel)
        _check_subscription_channel(destination)
        if isinstance(command, p.AddRcvDestination):
            self.udp.add_destination(link, destination)
        else:
            self.udp.remove_destination(link, destination)
        self.proxy.operation_success(client.send, command.correlation_id)

    def _add_subscription(self, command: p.AddSubscription, client: ClientSession) -> None:
        channel = ChannelUri.parse(command.channel)
        limits.check_int32(command.stream_id, "stream_id")
        _check_subscription_channel(channel)
        self._check_unused(command.correlation_id)
        link = SubscriptionLink(
            command.correlation_id,
            client.client_id,
            channel,
            command.stream_id,
            self._release_subscription,
            media_key=channel.canonical_form(resolve_host, unique_id=command.correlation_id),
        )
        status_id = p.CHANNEL_STATUS_INDICATOR_NOT_ALLOCATED  # IPC and spies: no endpoint
        if link.reads_logs:  # its positions first: counters may be full
            positions = self._subscriber_positions(
                [
                    (publication, link)
                    for publication in self.publications
                    if publication.accepts_subscribers() and _reads(link, publication)
                ]
            )
        else:
            positions = []
            status_id = self.udp.add_subscription(link)  # binds first: a bind error fails it
        self.resources.add(link)
        client.subscriptions.append(link.registration_id)
        self.proxy.subscription_ready(client.send, command.correlation_id, status_id)
        self._add_subscribers(positions)

    def _subscriber_positions(
        self, links: list[tuple[DriverPublication, SubscriptionLink]]
    ) -> list[tuple[DriverPublication, SubscriberPosition]]:
        """A position on each publication's log for its subscription, at the publication's
        join position: all of them, or none (counters full)."""
        made: list[tuple[DriverPublication, SubscriberPosition]] = []
        try:
            for publication, link in links:
                counter = self.stream_counters.subscriber_position(
                    link.registration_id,
                    publication.session_id,
                    publication.stream_id,
                    link.channel,
                    publication.join_position(),
                    link.client_id,
                )
                subscriber = SubscriberPosition(
                    link.registration_id, link.client_id, str(link.channel), counter
                )
                made.append((publication, subscriber))
        except BaseException:
            self.stream_counters.free(*(subscriber.counter for _, subscriber in made))
            raise
        return made

    @staticmethod
    def _add_subscribers(
        positions: list[tuple[DriverPublication, SubscriberPosition]],
    ) -> None:
        for publication, subscriber in positions:
            publication.add_subscriber(subscriber)

    def _remove_subscription(self, command: p.RemoveSubscription, client: ClientSession) -> None:
        if command.registration_id not in client.subscriptions:
            raise DriverError(
                f"unknown subscription registration id {command.registration_id}",
                p.UNKNOWN_SUBSCRIPTION,
            )
        client.subscriptions.remove(command.registration_id)
        for link in self.resources.subscriptions:
            if link.registration_id == command.registration_id:
                self.resources.end(link)
                break
        self.proxy.operation_success(client.send, command.correlation_id)

    def _release_subscription(self, link: SubscriptionLink) -> None:
        """A subscription ended: its positions on images and logs go."""
        if not link.reads_logs:
            self.udp.remove_subscription(link, self._now_ns)
        for publication in self.publications:
            publication.remove_subscriber(link.registration_id)

    # -- client counters ----------------------------------------------------------------

    def _add_counter(self, command: p.AddCounter, client: ClientSession, reply: Reply) -> None:
        _check_counter(command)
        self._check_unused(command.correlation_id)
        counter = self.stream_counters.client_counter(
            command.correlation_id, client.client_id, command.type_id, command.key, command.label
        )
        client.counters[command.correlation_id] = counter
        if command.type_id == CLIENT_DOORBELL_TYPE_ID and len(command.key) >= 8:
            client.doorbells[command.correlation_id] = int.from_bytes(
                command.key[:8], sys.byteorder
            )
        self.proxy.counter_ready(reply, command.correlation_id, counter.id)

    def _add_static_counter(self, command: p.AddStaticCounter, reply: Reply) -> None:
        """As Aeron's: the counter of this type and registration id if there is one (refused if
        a client owns it), else a new one that no client owns and nothing frees."""
        _check_counter(command)
        type_id, registration_id = command.type_id, command.registration_id
        counter_id = self.counters.find_by_type_id_and_registration_id(type_id, registration_id)
        if counter_id is None:
            counter_id = self.stream_counters.static_counter(
                registration_id, type_id, command.key, command.label
            ).id
        elif self.counters.get_counter_owner_id(counter_id) != p.NULL_VALUE:
            raise AeronError(
                "cannot add static counter, because a non-static counter exists "
                f"(counterId={counter_id}) for typeId={type_id} and "
                f"registrationId={registration_id}"
            )
        self.proxy.static_counter(reply, command.correlation_id, counter_id)

    def _remove_counter(
        self, command: p.RemoveCounter, client: ClientSession, reply: Reply
    ) -> None:
        counter = client.counters.pop(command.registration_id, None)
        if counter is None:
            raise DriverError(
                f"unknown counter registration id {command.registration_id}", p.UNKNOWN_COUNTER
            )
        client.doorbells.pop(command.registration_id, None)
        self.stream_counters.free(counter)
        self.proxy.operation_success(reply, command.correlation_id)
        self.proxy.unavailable_counter(reply, command.registration_id, counter.id)

    def _release_client(self, client: ClientSession) -> None:
        """A client ended (closed, or timed out): its subscriptions end, its publications are
        released (they linger), its heartbeat counter goes."""
        for link in [s for s in self.resources.subscriptions if s.client_id == client.client_id]:
            self.resources.end(link)
        for registration_id in client.publications.values():
            self._release_publication(registration_id, self._now_ns)
        for registration_id, counter in client.counters.items():
            self.proxy.unavailable_counter(client.send, registration_id, counter.id)
        self.proxy.unavailable_counter(client.send, client.client_id, client.heartbeat.id)
        self.stream_counters.free(client.heartbeat, *client.counters.values())
        client.counters.clear()
        client.doorbells.clear()
        if client.timed_out:
            self.system[SystemCounters.CLIENT_TIMEOUTS].increment()
            self.record_error(
                ClientTimeoutError(
                    f"client liveness timeout: no keepalive within "
                    f"{self.ctx.client_liveness_timeout_ns // 1_000_000} ms, its resources "
                    "released"
                )
            )
            self._timed_out_clients[client.client_id] = None
            if len(self._timed_out_clients) > TIMED_OUT_KEPT:
                del self._timed_out_clients[next(iter(self._timed_out_clients))]
            self.proxy.client_timeout(client)

    # -- duty cycle ---------------------------------------------------------------------

    def do_work(self, now_ns: int | None = None) -> int:
        """One duty cycle: the data path (C), then, when its DutySchedule says so
        (cython_core/duty_schedule.pxi), the rest in Python: commands, control frames, images'
        and publications' bookkeeping, the timer.

        Returns the traffic seen (positions moved by data sent, received or consumed, images
        rebuilt, publisher limits moved: the agent spins a while after it before it parks), at
        least 1 while bookkeeping is pending in an agent that spins (it must not park before
        the bookkeeping runs).
        Housekeeping (commands, control frames, heartbeats, status messages, the timer) is not
        traffic. An agent that parks at once after work (`spins_wanted`) gets the DataPath's
        work only: it parks with bookkeeping pending (the schedule's `park_ns` has it due
        within BOOKKEEPING_DELAY_NS), and the traffic the bookkeeping saw would only make it
        run an idle duty cycle more before it parks (what the bookkeeping left to do,
        `schedule.busy`, it runs). With `data_path_linger_ns`, a data path that did work goes
        on in C (DataPath.linger) until traffic stops or the rest is due, which then runs in
        the same duty cycle."""
        now_ns = time.monotonic_ns() if now_ns is None else now_ns
        self._now_ns = now_ns
        data_path, schedule = self._data_path, self.schedule
        try:
            work = data_path.do_work(now_ns)  # tells the schedule what it saw
            run = schedule.due
            if work and not run and self._lingers():
                try:
                    work += data_path.linger(work, self.ctx.data_path_linger_ns, LINGER_MAX_NS)
                finally:  # the rest of the duty cycle runs at the time it ended
                    now_ns = self._now_ns = time.monotonic_ns()
                run = schedule.due
        except Exception as e:  # a socket's error: the rest of the duty cycle must still run
            self.record_error(e)
            work, run = 0, True
        if not run:  # pending bookkeeping keeps an agent that spins running
            return work or int(schedule.pending and schedule.spins)
        started_ns = time.monotonic_ns()
        reshaped = spins = False  # publications, images or subscribers may come or go
        timer = busy = schedule.timer_due(now_ns)
        traffic = int(data_path.moved > 0)
        try:
            # More than READ_LIMIT may wait: the next duty cycle looks again (to_driver.pending).
            reshaped = self.to_driver.read() > 0
            data_path.stuck_commands(self.to_driver.stuck)
            rebuilt, sent = self.udp.do_work(now_ns, data_path)
            traffic += rebuilt
            # Look again after sending: a sender stops at a batch of datagrams, and what this
            # process's own endpoints answer is there at once.
            busy |= sent > 0
            for publication in self.publications:
                traffic += publication.update_publisher_limit()
            reshaped |= self._advance_released(now_ns)
        finally:  # a failing data path must not stop liveness, lingering and the heartbeat
            try:
                if timer:
                    self._on_timer(now_ns)
            finally:
                self.proxy.ring_doorbells()
                if reshaped or timer or self.udp.images_added:
                    self._data_path = self._new_data_path(data_path)
                    self.udp.images_added = False
                spins = self.spins_wanted()
                schedule.agent_spins(spins)
                # Followed by another full duty cycle: a tick changes limits and connections.
                schedule.ran(
                    now_ns,
                    ticked=timer,
                    busy=busy,
                    deadlines_ns=[*self.udp.deadlines_ns(), *self._publication_deadlines()],
                    data_path_deadline_ns=self._data_path.deadline_ns(),
                )
                self._track_cycle(time.monotonic_ns() - started_ns)
        return traffic if spins else work

    def _track_cycle(self, cycle_ns: int) -> None:
        """The Python part of a duty cycle took `cycle_ns`: the longest is kept, and one over
        `conductor_cycle_threshold_ns` counted (Aeron's conductor duty cycle tracker; the
        sender's and receiver's, the data path in C, are not tracked)."""
        self.system[SystemCounters.CONDUCTOR_MAX_CYCLE_TIME].propose_max(cycle_ns)
        if cycle_ns > self.ctx.conductor_cycle_threshold_ns:
            self.system[SystemCounters.CONDUCTOR_CYCLE_TIME_THRESHOLD_EXCEEDED].increment()

    def _publication_deadlines(self) -> list[int]:
        """Lingers' ends, and when the publications held short of pages look again."""
        deadlines = [
            pub.deadline_ns() for pub in self.publications if pub.state is not State.ACTIVE
        ]
        deadlines += [pub.pages_deadline_ns() for pub in self.publications]
        return [deadline for deadline in deadlines if deadline is not None]

    def serves_ipc(self) -> bool:
        """Whether an IPC publication has subscribers (its publisher limit must follow them)."""
        return any(isinstance(pub, IpcPublication) and pub.subscribers for pub in self.publications)

    def _lingers(self) -> bool:
        """Whether the data path lingers after work (`data_path_linger_ns`): not while the
        agent spins (it runs the next duty cycle soon anyway, yielding to the loop)."""
        return self.ctx.data_path_linger_ns > 0 and not self.schedule.spins

    def spins_wanted(self) -> bool:
        """Whether the agent spins through idle duty cycles after work: always, or, with
        `conductor_idle_spins_ipc_only` (a standalone driver), while it serves IPC (network
        streams wake it for all they need)."""
        return not self.ctx.conductor_idle_spins_ipc_only or self.serves_ipc()

    def park_ns(self) -> int:
        """How long the agent may park now: until the next deadline (0: run again at once)."""
        return self.schedule.park_ns(time.monotonic_ns(), self.to_driver.pending())

    def _new_data_path(self, previous: DataPath | None = None) -> DataPath:
        """The data path of the sockets, network publications and images there are now
        (replacing `previous`); what gives the conductor bookkeeping: the positions of the UDP
        data path and of the publications' subscribers (they free space), and the windows it
        keeps open (the IPC publications' besides the UDP data path's)."""
        parts = self.udp.data_path_parts()
        subscribers = (sub.counter for pub in self.publications for sub in pub.subscribers)
        ipc = (pub for pub in self.publications if isinstance(pub, IpcPublication))
        parts = dataclasses.replace(
            parts,
            counters=(*parts.counters, *subscribers),
            windows=(*parts.windows, *(pub.term_window_length for pub in ipc)),
        )
        return parts.data_path(
            previous=previous, commands=self.cnc.to_driver.positions, schedule=self.schedule
        )

    def _on_timer(self, now_ns: int) -> None:
        """What the conductor checks once per timer interval (`timer_interval_ns`, Aeron's
        `aeron.timer.interval`), apart from the data path: receiver liveness, the resources'
        lifecycle (client liveness, blocked publishers, lingering publications, dead images),
        its heartbeat (cnc.dat's to-driver consumer heartbeat, as Aeron's), the bytes mapped."""
        self.udp.on_timer(now_ns)
        self.resources.on_time_event(now_ns)
        self._relink_rejected(now_ns)
        if self.to_driver.check_blocked(now_ns):
            self.system[SystemCounters.UNBLOCKED_COMMANDS].increment()
        self.cnc.to_driver.set_consumer_heartbeat_time(time.time_ns() // 1_000_000)
        self._sample_bytes_mapped()

    def _sample_bytes_mapped(self) -> None:
        """Aeron's "Bytes currently mapped", sampled: cnc.dat, the loss report and the logs of
        the publications (lingering ones too) and images the driver holds."""
        logs = [pub.log for pub in self.publications]
        logs += [image.receiver.log for image in self.resources.images]
        mapped = self.cnc.length + self.loss_report.length + sum(log.array.nbytes for log in logs)
        self.system[SystemCounters.BYTES_CURRENTLY_MAPPED].set(mapped)

    def on_idle(self, idle: bool) -> None:
        """While the conductor parks, an append to a network publication wakes it to send."""
        self.udp.watch_activity(idle)

    def close(self) -> None:
        """End every resource (a publication still delivering says what it loses). The cnc is
        marked closed first: a client that finds its heartbeat counter freed then knows that
        the driver went, not that it timed the client out."""
        self.cnc.mark_driver_closed()
        for publication in self.publications:
            if publication.awaiting_delivery:
                publication.report_loss("with the driver")
        for resource in self.resources:
            self.resources.end(resource)
        self.udp.close()
        self.loss_report.close()
        self.cnc.flush()
        self.counters.close()


def _check_counter(command: p.AddCounter | p.AddStaticCounter) -> None:
    limits.check_int32(command.type_id, "type_id")
    if not isinstance(command.label, str):
        raise AeronError(f"counter label must be a str, not {type(command.label).__name__}")
    if len(command.key) > MAX_KEY_LENGTH:
        raise AeronError(f"counter key is {len(command.key)} bytes, over {MAX_KEY_LENGTH}")


def _check_same_log_params(channel: ChannelUri, publication: DriverPublication) -> None:
    """A publication joining an existing log must not ask for different log parameters, as
    Aeron's confirmPublicationMatch: nor another session-id, nor another position to start at
    (init-term-id, term-id and term-offset: a position asked for is never silently another)."""
    log = publication.log
    initial_term_id = log.mapped.initial_term_id
    for name, asked, actual in (
        ("session-id", channel.session_id, publication.session_id),
        ("term-length", channel.term_length, log.term_length),
        ("mtu", channel.mtu, log.mtu),
        ("init-term-id", channel.initial_term_id, initial_term_id),
    ):
        if asked is not None and asked != actual:
            raise AeronError(
                f"{name}={asked} differs from the existing publication's {name}={actual} "
                f"on stream {publication.stream_id}"
            )
    if channel.term_id is not None:  # with init-term-id and term-offset (ChannelUri)
        assert channel.term_offset is not None
        asked = _wrap_i32(channel.term_id - initial_term_id) * log.term_length
        asked += channel.term_offset
        start = publication.start_position
        if asked != start:
            raise AeronError(
                f"term-id={channel.term_id} term-offset={channel.term_offset} (position "
                f"{asked}) differ from where the existing publication started (position "
                f"{start}: term-id={_wrap_i32(initial_term_id + start // log.term_length)} "
                f"term-offset={start % log.term_length}) on stream {publication.stream_id}"
            )


def _wrap_i32(value: int) -> int:
    """`value` as an int32 wraps it (a term id)."""
    return (value + 2**31) % 2**32 - 2**31


def _check_publication_channel(channel: ChannelUri) -> None:
    if channel.is_spy:
        raise ChannelUriError(f"{channel}: a spy reads a publication; a publication is no spy")
    if channel.is_udp and channel.endpoint is None and channel.control is None:
        raise ChannelUriError(
            f"{channel}: a multi-destination-cast publication needs a control address "
            "(control=host:port) for its receivers' status messages"
        )
    if channel.is_udp and channel.endpoint is not None and channel.address("endpoint")[1] == 0:
        raise ChannelUriError(f"{channel}: endpoint port 0 names no receiver to publish to")
    if (
        channel.is_udp
        and channel.endpoint is not None
        and (channel.control_mode is not None or channel.control is not None)
    ):
        raise ChannelUriError(
            f"{channel}: control and control-mode are for multi-destination-cast publications, "
            "which have a control address and no endpoint"
        )


def _check_subscription_channel(channel: ChannelUri) -> None:
    receives = channel.is_udp and not channel.is_spy
    if receives and channel.control_mode == "manual":
        if channel.endpoint is not None or channel.control is not None:
            raise ChannelUriError(
                f"{channel}: a multi-destination subscription (control-mode=manual) takes no "
                "endpoint or control address: its endpoints are added with add_destination"
            )
    elif receives and channel.endpoint is None:
        raise ChannelUriError(
            f"{channel}: a udp subscription needs an endpoint to receive on "
            "(or control-mode=manual, for a multi-destination subscription)"
        )
    if channel.is_udp and channel.is_multicast and channel.control is not None:
        raise ChannelUriError(f"{channel}: a multicast subscription takes no control address")
    if channel.is_udp and channel.control is not None and channel.address("control")[1] == 0:
        raise ChannelUriError(f"{channel}: control port 0 names no publication to answer")
    if receives:
        _check_window_for_rcvbuf(channel)


def _check_window_for_rcvbuf(channel: ChannelUri) -> None:
    """A receiver's window (rcv-wnd, else Aeron's initial one) fits its socket's receive buffer
    (so-rcvbuf, else the OS default): a sender let past what the socket holds has its data
    dropped there. Aeron's driver refuses it too ("Initial window greater than SO_RCVBUF")."""
    window = channel.rcv_wnd or RECEIVER_INITIAL_WINDOW_LENGTH
    rcvbuf = channel.so_rcvbuf or os_default_socket_buffer_lengths()[1]
    if window > rcvbuf:
        whose = "so-rcvbuf" if channel.so_rcvbuf else "the OS default SO_RCVBUF"
        raise ChannelUriError(
            f"{channel}: rcv-wnd={window} is greater than {whose} ({rcvbuf}): the window must "
            "fit the socket's receive buffer (raise so-rcvbuf, or lower rcv-wnd)"
        )


def _destination_channel(text: str) -> ChannelUri:
    """The channel of a destination added to or removed from a publication or subscription."""
    destination = ChannelUri.parse(text)
    if not destination.is_udp or destination.endpoint is None or destination.is_spy:
        raise ChannelUriError(f"destination {text!r} must be aeron:udp?endpoint=host:port")
    return destination


def _publication_destination(text: str) -> ChannelUri:
    """The channel of a destination added to a multi-destination-cast publication: a receiver's
    unicast endpoint (its status messages come back to the control address)."""
    destination = _destination_channel(text)
    if destination.is_multicast:
        raise ChannelUriError(
            f"destination {text!r}: endpoint {destination.endpoint} is a multicast group, whose "
            "receivers answer its control group, not the control address: publish on "
            "the group as a channel of its own"
        )
    if destination.address("endpoint")[1] == 0:
        raise ChannelUriError(f"destination {text!r}: endpoint port 0 names no receiver")
    return destination


def _reads(link: SubscriptionLink, publication: DriverPublication) -> bool:
    """An IPC subscription reads IPC publications' logs; a spy (`aeron-spy:aeron:udp?...`)
    reads the logs of this driver's network publications to its endpoint."""
    session_id = link.channel.session_id
    return (
        link.reads_logs
        and publication.media_key == link.media_key
        and publication.stream_id == link.stream_id
        and (session_id is None or session_id == publication.session_id)
    )
