"""UDP channel endpoints: the sockets of network publications and subscriptions.

A SendChannelEndpoint (one per publication channel endpoint) sends its publications' datagrams to
the endpoint and receives their status messages, NAKs and RTT measurements. A
ReceiveChannelEndpoint (one per subscribed endpoint) is bound to the endpoint, hands what arrives
to its DataDispatcher and sends the images' control frames back to each sender. Both drain their
socket with recvmmsg in one call.
"""

from __future__ import annotations

import contextlib
import errno
import socket

from aeronio._core import DatagramReceiver, send_datagrams
from aeronio.counters import SystemCounters
from aeronio.driver.data_dispatcher import DataDispatcher
from aeronio.driver.network_publication import NetworkPublication, Position
from aeronio.errors import AeronError
from aeronio.protocol.channel import ChannelUri
from aeronio.protocol.frames import (
    HDR_TYPE_NAK,
    HDR_TYPE_RTTM,
    HDR_TYPE_SM,
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


def resolve(endpoint: str) -> Address:
    """`host:port` as an IPv4 (address, port)."""
    host, _, port = endpoint.rpartition(":")
    try:
        return socket.gethostbyname(host.strip("[]")), int(port)
    except (OSError, ValueError) as e:
        raise AeronError(f"cannot resolve endpoint {endpoint!r}: {e}") from None


def _udp_socket(channel: ChannelUri, bind: Address) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        if channel.so_sndbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, channel.so_sndbuf)
        if channel.so_rcvbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, channel.so_rcvbuf)
        sock.bind(bind)
    except OSError as e:
        sock.close()
        raise AeronError(f"cannot bind {bind[0]}:{bind[1]} for {channel}: {e.strerror}") from None
    sock.setblocking(False)
    return sock


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
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
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

    def __init__(self, sock: socket.socket, receiver: DatagramReceiver):
        self.socket = sock
        self.fd = sock.fileno()
        self._receiver = receiver

    def _receive(self) -> int:
        return self._receiver.recv(self.fd)

    def close(self) -> None:
        self.socket.close()


class SendChannelEndpoint(_Endpoint):
    def __init__(
        self, channel: ChannelUri, system: dict[SystemCounters, Position], offload: bool = True
    ):
        self.key = channel.endpoint
        self.destination = resolve(channel.endpoint)
        interface = resolve(channel.interface)[0] if channel.interface else "0.0.0.0"
        super().__init__(_udp_socket(channel, (interface, 0)), DatagramReceiver(32, 2048))
        self.gso = offload and _supports_gso(self.socket)
        self.max_segment = _max_segment(self.destination)
        self.system = system
        self.publications: dict[tuple[int, int], NetworkPublication] = {}

    def poll(self, now_ns: int) -> int:
        """Handle the control frames that arrived; returns how many datagrams were read."""
        count = self._receive()
        for i in range(count):
            datagram = self._receiver.data(i)
            try:
                for ref in iter_frames(datagram):
                    self._on_control(datagram, ref, self._receiver.address(i), now_ns)
            except MalformedFrameError:
                self.system[SystemCounters.INVALID_PACKETS].increment()
        return count

    def _on_control(self, datagram, ref, source: Address, now_ns: int) -> None:
        if ref.type == HDR_TYPE_SM:
            sm = StatusMessage.decode(datagram, ref.offset)
            publication = self.publications.get((sm.session_id, sm.stream_id))
            if publication is not None:
                publication.on_status_message(sm, now_ns)
        elif ref.type == HDR_TYPE_NAK:
            nak = NakFrame.decode(datagram, ref.offset)
            publication = self.publications.get((nak.session_id, nak.stream_id))
            if publication is not None:
                publication.on_nak(nak, now_ns)
        elif ref.type == HDR_TYPE_RTTM:
            rttm = RttmFrame.decode(datagram, ref.offset)
            publication = self.publications.get((rttm.session_id, rttm.stream_id))
            reply = publication.on_rttm(rttm, now_ns) if publication is not None else None
            if reply is not None:
                try:
                    self.socket.sendto(reply, source)
                except OSError:
                    self.system[SystemCounters.SHORT_SENDS].increment()

    def send(self, datagrams: list) -> None:
        """Send the datagrams; what the kernel refuses (would block, unreachable, dropped by a
        firewall) is a short send, repaired by NAKs like any loss."""
        try:
            sent = send_datagrams(
                self.socket.fileno(), datagrams, self.destination, self.gso, self.max_segment
            )
        except OSError as e:
            if self.gso and e.errno in (errno.EIO, errno.EINVAL):
                self.gso = False  # segmentation offload refused on this path: send plainly
            sent = 0
        if sent < len(datagrams):
            self.system[SystemCounters.SHORT_SENDS].increment()


class ReceiveChannelEndpoint(_Endpoint):
    def __init__(self, channel: ChannelUri, dispatcher_factory, offload: bool = True):
        self.key = channel.endpoint
        self.address = resolve(channel.endpoint)
        super().__init__(_udp_socket(channel, self.address), DatagramReceiver(64, 65536))
        if offload:
            _enable_gro(self.socket)
        self.dispatcher: DataDispatcher = dispatcher_factory(self)

    def poll(self, now_ns: int) -> int:
        count = self._receive()
        if count:
            self.dispatcher.on_received(self._receiver, now_ns)
        return count

    def send_control(self, frame: bytes, destination: Address) -> None:
        try:
            self.socket.sendto(frame, destination)
        except OSError:
            self.dispatcher.system[SystemCounters.SHORT_SENDS].increment()
