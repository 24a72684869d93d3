"""OwnStreams: the archive's own control and recording-events streams, and whether a channel
and stream id a client names reaches one of them. Answering a ConnectRequest there would make
the archive answer itself for ever; replaying or recording there would feed it its own output.

Channels are compared as the driver delivers them, not as strings: the same stream id and
media, and for UDP the same endpoint address once resolved (`localhost:8010` is
`127.0.0.1:8010`; a wildcard `0.0.0.0` endpoint is reached through any address of this host).
Every IPC channel with the same stream id is the same stream, whatever its parameters.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import NamedTuple

from aeronio.archive.context import ArchiveContext
from aeronio.errors import AeronError
from aeronio.protocol.channel import ChannelUri

WILDCARD = "0.0.0.0"


class OwnStream(NamedTuple):
    name: str  # "control" or "recording events"
    ipc: bool
    address: tuple[str, int] | None  # a UDP endpoint's (IPv4 address, port)
    stream_id: int


class OwnStreams:
    def __init__(self, streams: list[OwnStream]):
        self.streams = streams

    @classmethod
    async def resolve(cls, ctx: ArchiveContext) -> OwnStreams:
        """The archive's streams of `ctx`, their UDP endpoints resolved."""
        named = [
            ("control", ctx.control_channel, ctx.control_stream_id),
            ("control", ctx.local_control_channel, ctx.local_control_stream_id),
            ("recording events", ctx.recording_events_channel, ctx.recording_events_stream_id),
        ]
        streams = []
        for name, channel, stream_id in named:
            if channel:
                uri = ChannelUri.parse(channel)
                address = await _udp_address(uri)
                if uri.is_ipc or address is not None:
                    streams.append(OwnStream(name, uri.is_ipc, address, stream_id))
        return cls(streams)

    async def find(self, channel: str, stream_id: int) -> str | None:
        """The name of the archive's own stream `channel`/`stream_id` reaches, else None (also
        for a channel that does not parse: it reaches nothing)."""
        candidates = [s for s in self.streams if s.stream_id == stream_id]
        if not candidates:
            return None
        try:
            uri = ChannelUri.parse(channel)
        except AeronError:
            return None
        if uri.is_ipc:
            return next((s.name for s in candidates if s.ipc), None)
        port = _port(uri)
        if not uri.is_udp or not any(s.address and s.address[1] == port for s in candidates):
            return None  # resolves nothing when no port could match
        address = await _udp_address(uri)
        if address is None:
            return None
        for s in candidates:
            if s.address == address or (
                s.address is not None
                and s.address[0] == WILDCARD
                and s.address[1] == address[1]
                and _is_local(address[0])
            ):
                return s.name
        return None


def _port(uri: ChannelUri) -> int | None:
    return None if uri.endpoint is None else uri.address("endpoint")[1]


async def _udp_address(uri: ChannelUri) -> tuple[str, int] | None:
    """A UDP channel's endpoint as an IPv4 (address, port), resolved off the event loop as the
    driver resolves it; None without one or when it does not resolve."""
    port, endpoint = _port(uri), uri.endpoint
    if not uri.is_udp or port is None or endpoint is None:
        return None
    host = uri.address("endpoint")[0]
    try:
        return str(ipaddress.IPv4Address(host)), port
    except ValueError:
        pass
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, port, family=socket.AF_INET, type=socket.SOCK_DGRAM
        )
    except (OSError, UnicodeError):
        return None
    return (str(infos[0][4][0]), port) if infos else None


def _is_local(address: str) -> bool:
    """An address of this host: loopback, or one a socket can bind to."""
    if ipaddress.IPv4Address(address).is_loopback:
        return True
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.bind((address, 0))
        except OSError:
            return False
    return True
