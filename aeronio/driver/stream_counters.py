"""Every per-stream and per-client counter the driver allocates, with its label format (Aeron's
StreamCounter kinds: PublisherLimit, PublisherPos, SubscriberPos, SenderPos, ...). `aeronio stat`
and the tests read these labels and type ids, Aeron's StreamStat the stream counters' keys
(`stream_key`): they are part of the counters' format."""

from __future__ import annotations

import contextlib
import struct
import sys
from typing import NamedTuple

from aeronio.counters import (
    CLIENT_HEARTBEAT_TYPE_ID,
    DRIVER_DOORBELL_TYPE_ID,
    FLOW_CONTROL_RECEIVERS_TYPE_ID,
    LOCAL_SOCKADDR_KEY,
    LOCAL_SOCKADDR_TYPE_ID,
    MAX_KEY_LENGTH,
    MDC_DESTINATIONS_TYPE_ID,
    PUBLISHER_LIMIT_TYPE_ID,
    PUBLISHER_POS_TYPE_ID,
    RECEIVE_CHANNEL_STATUS_TYPE_ID,
    RECEIVER_HWM_TYPE_ID,
    RECEIVER_POS_TYPE_ID,
    SEND_CHANNEL_STATUS_TYPE_ID,
    SENDER_BPE_TYPE_ID,
    SENDER_LIMIT_TYPE_ID,
    SENDER_POSITION_TYPE_ID,
    SUBSCRIBER_POSITION_TYPE_ID,
    ChannelStatus,
    Counter,
    CountersManager,
)
from aeronio.protocol.control import NULL_VALUE


class _Spec(NamedTuple):
    label: str
    type_id: int
    key: bytes = b""
    registration_id: int = 0
    owner_id: int = 0


_STREAM_KEY = struct.Struct("<qiii")  # registration id, session id, stream id, channel length
# The channel's bytes a stream counter's key holds (Aeron's StreamCounter.MAX_CHANNEL_LENGTH).
MAX_KEY_CHANNEL_LENGTH = MAX_KEY_LENGTH - _STREAM_KEY.size


def stream_key(registration_id: int, session_id: int, stream_id: int, channel: object) -> bytes:
    """The key of a stream counter, Aeron's (StreamCounter): the registration id, session id
    and stream id, then the channel's length and its first MAX_KEY_CHANNEL_LENGTH bytes."""
    data = str(channel).encode()[:MAX_KEY_CHANNEL_LENGTH]
    return _STREAM_KEY.pack(registration_id, session_id, stream_id, len(data)) + data


_LENGTH = struct.Struct("<i")
# The channel's bytes a channel status key holds, and the address's a local socket address key
# holds (Aeron's C driver keeps a NUL after it): what is longer is cut there.
MAX_STATUS_CHANNEL_LENGTH = MAX_KEY_LENGTH - _LENGTH.size
MAX_SOCKADDR_LENGTH = MAX_KEY_LENGTH - LOCAL_SOCKADDR_KEY.size - 1


def channel_status_key(channel: str) -> bytes:
    """The key of a channel status counter, Aeron's: the channel's length, then its first
    MAX_STATUS_CHANNEL_LENGTH bytes."""
    data = channel.encode()[:MAX_STATUS_CHANNEL_LENGTH]
    return _LENGTH.pack(len(data)) + data


def local_sockaddr_key(status_id: int, address: str) -> bytes:
    """The key of a local socket address counter, Aeron's (LocalSocketAddressStatus): its
    channel status counter's id, the address's length, then its first MAX_SOCKADDR_LENGTH
    bytes."""
    data = address.encode()[:MAX_SOCKADDR_LENGTH]
    return LOCAL_SOCKADDR_KEY.pack(status_id, len(data)) + data


class StreamCounters:
    """Allocates the driver's per-stream and per-client counters (each call all or none)."""

    def __init__(self, manager: CountersManager):
        self.manager = manager

    def _allocate(self, *specs: _Spec) -> list[Counter]:
        with contextlib.ExitStack() as undo:
            counters = []
            for spec in specs:
                counter = self.manager.counter(self.manager.allocate(*spec))
                undo.callback(self.manager.free, counter.id)
                counters.append(counter)
            undo.pop_all()
        return counters

    def free(self, *counters: Counter) -> None:
        for counter in counters:
            self.manager.free(counter.id)

    def client_heartbeat(self, client_id: int) -> Counter:
        """A client's heartbeat (epoch ms): key and registration id its client id, as Aeron's
        clients look for it."""
        label = f"client-heartbeat: {client_id}"
        key = client_id.to_bytes(8, "little", signed=True)
        return self._allocate(_Spec(label, CLIENT_HEARTBEAT_TYPE_ID, key, client_id, client_id))[0]

    def driver_doorbell(self, wake_id: int) -> Counter:
        """The driver's doorbell: key its process's wake id (8 bytes, native order)."""
        key = wake_id.to_bytes(8, sys.byteorder)
        return self._allocate(_Spec("aeronio driver doorbell", DRIVER_DOORBELL_TYPE_ID, key))[0]

    def client_counter(
        self, registration_id: int, client_id: int, type_id: int, key: bytes, label: str
    ) -> Counter:
        """A counter a client asked for (its type, key and label), owned by that client."""
        return self._allocate(_Spec(label, type_id, key, registration_id, client_id))[0]

    def static_counter(self, registration_id: int, type_id: int, key: bytes, label: str) -> Counter:
        """A counter a client asked for that no client owns (owner id Aeron's NULL_VALUE)."""
        return self._allocate(_Spec(label, type_id, key, registration_id, NULL_VALUE))[0]

    def publication(
        self, registration_id: int, session_id: int, stream_id: int, channel: str, owner_id: int
    ) -> list[Counter]:
        """pub-lmt and pub-pos (sampled) of a new publication."""
        label = f"{registration_id} {session_id} {stream_id} {channel}"
        key = stream_key(registration_id, session_id, stream_id, channel)
        return self._allocate(
            _Spec(f"pub-lmt: {label}", PUBLISHER_LIMIT_TYPE_ID, key, registration_id, owner_id),
            _Spec(
                f"pub-pos (sampled): {label}", PUBLISHER_POS_TYPE_ID, key, registration_id, owner_id
            ),
        )

    def subscriber_position(
        self,
        subscription_id: int,
        session_id: int,
        stream_id: int,
        channel: object,
        join_position: int,
        owner_id: int,
    ) -> Counter:
        """sub-pos of a subscription (on its channel) on an image or a publication's log, set
        to its join."""
        label = f"sub-pos: {subscription_id} {session_id} {stream_id} {channel} @{join_position}"
        key = stream_key(subscription_id, session_id, stream_id, channel)
        spec = _Spec(label, SUBSCRIBER_POSITION_TYPE_ID, key, subscription_id, owner_id)
        counter = self._allocate(spec)[0]
        counter.set(join_position)
        return counter

    def sender(
        self, registration_id: int, session_id: int, stream_id: int, channel: str, fc: bool
    ) -> list[Counter]:
        """snd-pos, snd-lmt, snd-bpe and, with `fc` (one-to-many), fc-receivers of a sender."""
        label = f"{registration_id} {session_id} {stream_id} {channel}"
        key = stream_key(registration_id, session_id, stream_id, channel)
        kinds = [
            ("snd-pos", SENDER_POSITION_TYPE_ID),
            ("snd-lmt", SENDER_LIMIT_TYPE_ID),
            ("snd-bpe", SENDER_BPE_TYPE_ID),
        ] + [("fc-receivers", FLOW_CONTROL_RECEIVERS_TYPE_ID)] * fc
        return self._allocate(
            *(_Spec(f"{name}: {label}", kind, key, registration_id) for name, kind in kinds)
        )

    def image(
        self, registration_id: int, session_id: int, stream_id: int, channel: str
    ) -> list[Counter]:
        """rcv-hwm and rcv-pos of an image, labelled with its receive endpoint's channel."""
        label = f"{registration_id} {session_id} {stream_id} {channel}"
        key = stream_key(registration_id, session_id, stream_id, channel)
        return self._allocate(
            _Spec(f"rcv-hwm: {label}", RECEIVER_HWM_TYPE_ID, key, registration_id),
            _Spec(f"rcv-pos: {label}", RECEIVER_POS_TYPE_ID, key, registration_id),
        )

    def channel_status(
        self, sending: bool, registration_id: int, channel: str, address: str
    ) -> Counter:
        """snd-channel (`sending`) or rcv-channel of an endpoint made by `registration_id`'s
        command on `channel`, its label ending in its (first) socket's bound `address`
        ("host:port", or empty); INITIALIZING until the caller sets it ACTIVE once its
        sockets' local socket address counters are there (a client then finds them all)."""
        name, type_id = (
            ("snd", SEND_CHANNEL_STATUS_TYPE_ID)
            if sending
            else ("rcv", RECEIVE_CHANNEL_STATUS_TYPE_ID)
        )
        label = f"{name}-channel: {channel} {address}"
        key = channel_status_key(channel)
        return self._allocate(_Spec(label, type_id, key, registration_id))[0]

    def local_sockaddr(
        self, sending: bool, registration_id: int, status: Counter, address: str
    ) -> Counter:
        """snd-local-sockaddr (`sending`) or rcv-local-sockaddr of a socket bound to `address`
        ("host:port") of the endpoint whose channel status is `status`; ACTIVE."""
        name = "snd" if sending else "rcv"
        label = f"{name}-local-sockaddr: {status.id} {address}"
        key = local_sockaddr_key(status.id, address)
        counter = self._allocate(_Spec(label, LOCAL_SOCKADDR_TYPE_ID, key, registration_id))[0]
        counter.set(ChannelStatus.ACTIVE)
        return counter

    def close_channel(self, *counters: Counter) -> None:
        """Free a channel's status or local socket address counters, CLOSING first (as Aeron's
        driver leaves them: a client reading one as it goes sees no ACTIVE endpoint)."""
        for counter in counters:
            counter.set(ChannelStatus.CLOSING)
        self.free(*counters)

    def mdc_destinations(self, registration_id: int, channel: object) -> Counter:
        label = f"mdc-num-dests: {registration_id} {channel}"
        return self._allocate(
            _Spec(label, MDC_DESTINATIONS_TYPE_ID, registration_id=registration_id)
        )[0]
