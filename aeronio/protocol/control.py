"""Client <-> driver control messages (typed msgspec structs, tagged for a wire encoding).

Commands flow from clients to the driver conductor; responses and image notifications flow back.
The embedded driver passes the structs in-process; other processes reach a driver through its
control socket (`layout.control_address`, served by driver/control_server.py), where every
message is msgpack-encoded in a frame with a 4-byte little-endian length prefix. A connection
starts with ClientHello / DriverHello; a client and driver of different protocol versions refuse
each other."""

from __future__ import annotations

import asyncio
import struct
from typing import Annotated

import msgspec

# Every integer on the wire is bounded, so a frame with an absurd value is refused at decoding.
I32 = Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)]
I64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]

PROTOCOL_VERSION = 3  # 2: AddRcvDestination, RemoveRcvDestination; 3: heartbeat_interval_ns
MAX_FRAME_LENGTH = 1024 * 1024


class ClientHello(msgspec.Struct, tag=True, frozen=True):
    version: I32
    client_id: I64
    pid: I64


class AddPublication(msgspec.Struct, tag=True, frozen=True):
    correlation_id: I64
    client_id: I64
    channel: str
    stream_id: I32
    exclusive: bool = False


class RemovePublication(msgspec.Struct, tag=True, frozen=True):
    correlation_id: I64
    client_id: I64
    registration_id: I64


class AddSubscription(msgspec.Struct, tag=True, frozen=True):
    correlation_id: I64
    client_id: I64
    channel: str
    stream_id: I32


class RemoveSubscription(msgspec.Struct, tag=True, frozen=True):
    correlation_id: I64
    client_id: I64
    registration_id: I64


class AddDestination(msgspec.Struct, tag=True, frozen=True):
    """Send a manual multi-destination-cast publication's data to one more endpoint too."""

    correlation_id: I64
    client_id: I64
    registration_id: I64
    channel: str


class RemoveDestination(msgspec.Struct, tag=True, frozen=True):
    correlation_id: I64
    client_id: I64
    registration_id: I64
    channel: str


class AddCounter(msgspec.Struct, tag=True, frozen=True):
    """A counter the client owns (Aeron's ADD_COUNTER): freed when removed or the client ends."""

    correlation_id: I64
    client_id: I64
    type_id: I32
    key: bytes
    label: str


class RemoveCounter(msgspec.Struct, tag=True, frozen=True):
    correlation_id: I64
    client_id: I64
    registration_id: I64


class AddRcvDestination(msgspec.Struct, tag=True, frozen=True):
    """Receive a multi-destination subscription's images on one more endpoint too (Aeron's
    ADD_RCV_DESTINATION); `registration_id` is the subscription's."""

    correlation_id: I64
    client_id: I64
    registration_id: I64
    channel: str


class RemoveRcvDestination(msgspec.Struct, tag=True, frozen=True):
    correlation_id: I64
    client_id: I64
    registration_id: I64
    channel: str


class ClientKeepalive(msgspec.Struct, tag=True, frozen=True):
    client_id: I64


class ClientClose(msgspec.Struct, tag=True, frozen=True):
    client_id: I64


class ClientTimeout(msgspec.Struct, tag=True, frozen=True):
    """The driver timed this client out: its resources are gone, its commands are refused."""

    client_id: I64


class DriverHello(msgspec.Struct, tag=True, frozen=True):
    version: I32
    driver_pid: I64
    client_liveness_timeout_ns: I64
    client_keepalive_interval_ns: I64
    wake_id: I64
    heartbeat_interval_ns: I64  # how often the driver's heartbeat is updated (its timer)


class PublicationReady(msgspec.Struct, tag=True, frozen=True):
    correlation_id: I64
    registration_id: I64
    session_id: I32
    stream_id: I32
    log_file: str
    position_limit_counter_id: I32
    position_counter_id: I32
    exclusive: bool


class SubscriptionReady(msgspec.Struct, tag=True, frozen=True):
    correlation_id: I64


class ImageReady(msgspec.Struct, tag=True, frozen=True):
    correlation_id: I64
    subscription_registration_id: I64
    session_id: I32
    stream_id: I32
    log_file: str
    subscriber_position_counter_id: I32
    source_identity: str
    join_position: I64


class ImageUnavailable(msgspec.Struct, tag=True, frozen=True):
    correlation_id: I64
    subscription_registration_id: I64
    session_id: I32
    stream_id: I32


class CounterReady(msgspec.Struct, tag=True, frozen=True):
    correlation_id: I64
    counter_id: I32


class OperationSuccess(msgspec.Struct, tag=True, frozen=True):
    correlation_id: I64


class ErrorResponse(msgspec.Struct, tag=True, frozen=True):
    correlation_id: I64
    code: I32
    message: str


Command = (
    ClientHello
    | AddPublication
    | RemovePublication
    | AddSubscription
    | RemoveSubscription
    | AddDestination
    | RemoveDestination
    | AddCounter
    | RemoveCounter
    | AddRcvDestination
    | RemoveRcvDestination
    | ClientKeepalive
    | ClientClose
)
Response = (
    DriverHello
    | ClientTimeout
    | PublicationReady
    | SubscriptionReady
    | ImageReady
    | ImageUnavailable
    | CounterReady
    | OperationSuccess
    | ErrorResponse
)

# Error codes (Aeron's ErrorCode values where they exist).
GENERIC_ERROR = 0
INVALID_CHANNEL = 1
UNKNOWN_SUBSCRIPTION = 2
UNKNOWN_PUBLICATION = 3
CHANNEL_ENDPOINT_ERROR = 4
VERSION_MISMATCH = 6
CLIENT_TIMEOUT = 7
UNKNOWN_COUNTER = 5
STORAGE_SPACE = 11  # as Aeron's later ErrorCode.STORAGE_SPACE

_encoder = msgspec.msgpack.Encoder()
_command_decoder = msgspec.msgpack.Decoder(Command)
_response_decoder = msgspec.msgpack.Decoder(Response)


def encode(message: Command | Response) -> bytes:
    return _encoder.encode(message)


def decode_command(data: bytes) -> Command:
    return _command_decoder.decode(data)


def decode_response(data: bytes) -> Response:
    return _response_decoder.decode(data)


def head_fields(data: bytes) -> dict[str, str | int]:
    """The leading string and integer fields of an encoded message, read without decoding the
    whole (which may be malformed or cut short): a tagged message starts with its `type`, then
    its `correlation_id` if it has one, so a refusal can answer the request it refuses."""
    fields: dict[str, str | int] = {}
    view = memoryview(data)
    if not view or not 0x80 <= view[0] <= 0x8F:  # a fixmap: every message has < 16 fields
        return fields
    at = 1
    for _ in range(view[0] & 0x0F):
        key, at = _str_or_int(view, at)
        value, at = _str_or_int(view, at) if isinstance(key, str) else (None, at)
        if value is None:
            break
        fields[key] = value
    return fields


_INT_FORMATS = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h"}
_INT_FORMATS |= {0xD2: ">i", 0xD3: ">q"}


def _str_or_int(view: memoryview, at: int) -> tuple[str | int | None, int]:
    """The msgpack string or integer at `at` and the offset after it; None for anything else
    (or for one cut short)."""
    if at >= len(view):
        return None, at
    marker = view[at]
    if marker <= 0x7F or marker >= 0xE0:  # positive or negative fixint
        return (marker if marker <= 0x7F else marker - 0x100), at + 1
    if 0xA0 <= marker <= 0xBF or marker == 0xD9:  # fixstr, str8
        length, at = (marker & 0x1F, at + 1) if marker != 0xD9 else (view[at + 1], at + 2)
        if at + length > len(view):
            return None, at
        try:
            return str(view[at : at + length], "utf-8"), at + length
        except UnicodeDecodeError:
            return None, at
    if marker in _INT_FORMATS:
        size = struct.calcsize(_INT_FORMATS[marker])
        if at + 1 + size > len(view):
            return None, at
        return struct.unpack_from(_INT_FORMATS[marker], view, at + 1)[0], at + 1 + size
    return None, at


def frame(message: Command | Response) -> bytes:
    """A message as a length-prefixed frame for the control socket."""
    data = _encoder.encode(message)
    return len(data).to_bytes(4, "little") + data


async def read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """The next frame's payload, or None at end of stream; ValueError for an absurd length."""
    try:
        prefix = await reader.readexactly(4)
    except asyncio.IncompleteReadError:
        return None
    length = int.from_bytes(prefix, "little")
    if length > MAX_FRAME_LENGTH:
        raise ValueError(f"control frame of {length} bytes exceeds {MAX_FRAME_LENGTH}")
    try:
        return await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        return None
