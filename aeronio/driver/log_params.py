"""The LogParams the driver writes into each log it makes, as Aeron 1.53's C driver fills them:
the values this driver uses, and Aeron's defaults where a concept is not aeronio's (untethered
subscriptions, response channels, a resend limit), so that an Aeron client mapping the log
finds what Aeron's driver would have written."""

from __future__ import annotations

import functools
import socket
from typing import TypedDict

from aeronio.logbuffer import descriptor as d
from aeronio.protocol.channel import ChannelUri

# Aeron's driver defaults for what aeronio has no concept of.
UNTETHERED_WINDOW_LIMIT_TIMEOUT_NS = 5_000_000_000
UNTETHERED_RESTING_TIMEOUT_NS = 10_000_000_000
# What Aeron's receiver records as its initial window unless rcv-wnd says otherwise.
RECEIVER_INITIAL_WINDOW_LENGTH = 128 * 1024


@functools.cache
def os_default_socket_buffer_lengths() -> tuple[int, int]:
    """(SO_SNDBUF, SO_RCVBUF) of a fresh UDP socket, probed once as Aeron's driver does."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        return (
            sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
            sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
        )


def entity_tag(channel: ChannelUri) -> int:
    """The entity tag of `tags=<channel tag>,<entity tag>` (checked by ChannelUri), or
    NULL_VALUE without one."""
    tags = channel.get("tags")
    text = tags.partition(",")[2] if tags else ""
    return int(text) if text else d.NULL_VALUE


class _Common(TypedDict):
    socket_sndbuf_length: int
    socket_rcvbuf_length: int
    os_default_socket_sndbuf_length: int
    os_default_socket_rcvbuf_length: int
    untethered_window_limit_timeout_ns: int
    untethered_resting_timeout_ns: int
    untethered_linger_timeout_ns: int


def _common(channel: ChannelUri) -> _Common:
    """What every log's params hold alike: socket buffers and untethered timeouts."""
    sndbuf, rcvbuf = os_default_socket_buffer_lengths()
    return _Common(
        socket_sndbuf_length=(channel.so_sndbuf or 0) if channel.is_udp else 0,
        socket_rcvbuf_length=(channel.so_rcvbuf or 0) if channel.is_udp else 0,
        os_default_socket_sndbuf_length=sndbuf,
        os_default_socket_rcvbuf_length=rcvbuf,
        untethered_window_limit_timeout_ns=UNTETHERED_WINDOW_LIMIT_TIMEOUT_NS,
        untethered_resting_timeout_ns=UNTETHERED_RESTING_TIMEOUT_NS,
        untethered_linger_timeout_ns=UNTETHERED_WINDOW_LIMIT_TIMEOUT_NS,
    )


def publication_log_params(
    channel: ChannelUri,
    *,
    exclusive: bool,
    window_length: int,
    linger_ns: int,
    sparse: bool,
) -> d.LogParams:
    """A publication's log (IPC or UDP): its window, linger and sparseness as this driver uses
    them; group semantics on a multicast or multi-destination channel; end of stream always
    signalled (aeronio's publications do)."""
    return d.LogParams(
        type=d.LOG_TYPE_EXCLUSIVE_PUBLICATION if exclusive else d.LOG_TYPE_CONCURRENT_PUBLICATION,
        publication_window_length=window_length,
        entity_tag=entity_tag(channel),
        response_correlation_id=d.NULL_VALUE,
        linger_timeout_ns=linger_ns,
        group=channel.is_udp and (channel.is_multicast or channel.is_multi_destination),
        sparse=sparse,
        signal_eos=True,
        spies_simulate_connection=bool(channel.spies_simulate_connection),
        **_common(channel),
    )


def image_log_params(
    channel: ChannelUri,
    *,
    receiver_window_length: int | None,
    reliable: bool,
    multicast: bool,
    sparse: bool,
) -> d.LogParams:
    """An image's log on the receive endpoint of `channel` (the subscription's): the receiver
    window configured (rcv-wnd, else Aeron's initial one), reliability, group semantics
    (a multicast endpoint unless `group=` says otherwise) and sparseness as this driver uses
    them; tethered and rejoining unless the channel says otherwise (Aeron's defaults)."""
    group = channel.get("group")
    tether = channel.get("tether")
    return d.LogParams(
        type=d.LOG_TYPE_PUBLICATION_IMAGE,
        receiver_window_length=receiver_window_length or RECEIVER_INITIAL_WINDOW_LENGTH,
        group=multicast if group is None else group == "true",
        rejoin=True,
        reliable=reliable,
        sparse=sparse,
        tether=tether != "false",
        **_common(channel),
    )
