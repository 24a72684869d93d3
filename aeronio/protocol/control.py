"""Client <-> driver control messages: Aeron's command protocol (1.53).

Each message is a frozen msgspec Struct with the fields of Aeron's flyweight for it
(aeron_control_protocol.h, io.aeron.command.*Flyweight); `encode` gives Aeron's msg type id and
bytes for one, `decode_command` / `decode_response` read them back, refusing a malformed
payload with a `MalformedMessageError` (an `UnknownMessageTypeError` for a type id Aeron's
protocol does not have here). Integers are little-endian, structures packed on 4 bytes; a
channel, log file name, source identity or error message is an i32 length then its bytes; a
counter's key and label are each length-prefixed, the key padded to 4 bytes.

Commands go into cnc.dat's to-driver ring buffer, responses come on its to-clients broadcast
buffer (aeronio/cnc.py), whoever the client and driver are: aeronio's or Aeron's."""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Callable
from typing import Annotated, TypeVar

import msgspec

# The width of each integer field on the wire (what `encode` packs it into).
I32 = Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)]
I64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
U64 = Annotated[int, msgspec.Meta(ge=0, le=2**64 - 1)]
U16 = Annotated[int, msgspec.Meta(ge=0, le=2**16 - 1)]
NULL_VALUE = -1  # Aeron's "none" for an id
CHANNEL_STATUS_INDICATOR_NOT_ALLOCATED = -1
REMOVE_PUBLICATION_FLAG_REVOKE = 0x1

# Aeron's msg type ids (aeron_control_protocol.h).
ADD_PUBLICATION = 0x01
REMOVE_PUBLICATION = 0x02
ADD_EXCLUSIVE_PUBLICATION = 0x03
ADD_SUBSCRIPTION = 0x04
REMOVE_SUBSCRIPTION = 0x05
CLIENT_KEEPALIVE = 0x06
ADD_DESTINATION = 0x07
REMOVE_DESTINATION = 0x08
ADD_COUNTER = 0x09
REMOVE_COUNTER = 0x0A
CLIENT_CLOSE = 0x0B
ADD_RCV_DESTINATION = 0x0C
REMOVE_RCV_DESTINATION = 0x0D
TERMINATE_DRIVER = 0x0E
ADD_STATIC_COUNTER = 0x0F
REJECT_IMAGE = 0x10
REMOVE_DESTINATION_BY_ID = 0x11
GET_NEXT_AVAILABLE_SESSION_ID = 0x12
ON_ERROR = 0x0F01
ON_AVAILABLE_IMAGE = 0x0F02
ON_PUBLICATION_READY = 0x0F03
ON_OPERATION_SUCCESS = 0x0F04
ON_UNAVAILABLE_IMAGE = 0x0F05
ON_EXCLUSIVE_PUBLICATION_READY = 0x0F06
ON_SUBSCRIPTION_READY = 0x0F07
ON_COUNTER_READY = 0x0F08
ON_UNAVAILABLE_COUNTER = 0x0F09
ON_CLIENT_TIMEOUT = 0x0F0A
ON_STATIC_COUNTER = 0x0F0B
ON_PUBLICATION_ERROR = 0x0F0C
ON_NEXT_AVAILABLE_SESSION_ID = 0x0F0D

# Aeron's error codes (ErrorCode.java, aeron_client_error.h).
UNUSED = 0
INVALID_CHANNEL = 1
UNKNOWN_SUBSCRIPTION = 2
UNKNOWN_PUBLICATION = 3
CHANNEL_ENDPOINT_ERROR = 4
UNKNOWN_COUNTER = 5
UNKNOWN_COMMAND_TYPE_ID = 6
MALFORMED_COMMAND = 7
NOT_SUPPORTED = 8
UNKNOWN_HOST = 9
RESOURCE_TEMPORARILY_UNAVAILABLE = 10
GENERIC_ERROR = 11
STORAGE_SPACE = 12
IMAGE_REJECTED = 13
PUBLICATION_REVOKED = 14


class MalformedMessageError(ValueError):
    """A payload that is not the message its type id says (short, or a length past its end)."""


class UnknownMessageTypeError(MalformedMessageError):
    """A msg type id that is no command (or no response) of the protocol."""


# -- commands (client -> driver); each starts with Aeron's client id and correlation id -------


class AddPublication(msgspec.Struct, tag=True, frozen=True):
    """ADD_PUBLICATION, or ADD_EXCLUSIVE_PUBLICATION when `exclusive`."""

    correlation_id: I64
    client_id: I64
    channel: str
    stream_id: I32
    exclusive: bool = False


class RemovePublication(msgspec.Struct, tag=True, frozen=True):
    correlation_id: I64
    client_id: I64
    registration_id: I64
    flags: U64 = 0  # REMOVE_PUBLICATION_FLAG_REVOKE


class AddSubscription(msgspec.Struct, tag=True, frozen=True):
    correlation_id: I64
    client_id: I64
    channel: str
    stream_id: I32
    registration_correlation_id: I64 = NULL_VALUE


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


class RemoveDestinationById(msgspec.Struct, tag=True, frozen=True):
    """Stop sending a manual multi-destination-cast publication's data to the destination that
    the AddDestination of correlation id `destination_registration_id` added."""

    correlation_id: I64
    client_id: I64
    resource_registration_id: I64  # the publication's
    destination_registration_id: I64


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


class AddCounter(msgspec.Struct, tag=True, frozen=True):
    """A counter the client owns (Aeron's ADD_COUNTER): freed when removed or the client ends."""

    correlation_id: I64
    client_id: I64
    type_id: I32
    key: bytes
    label: str


class AddStaticCounter(msgspec.Struct, tag=True, frozen=True):
    """A counter no client owns (Aeron's ADD_STATIC_COUNTER): it outlives the client that
    added it; there is one per (type id, registration id), which a second add is answered with."""

    correlation_id: I64
    client_id: I64
    registration_id: I64
    type_id: I32
    key: bytes
    label: str


class RemoveCounter(msgspec.Struct, tag=True, frozen=True):
    correlation_id: I64
    client_id: I64
    registration_id: I64


class ClientKeepalive(msgspec.Struct, tag=True, frozen=True):
    client_id: I64
    correlation_id: I64 = NULL_VALUE


class ClientClose(msgspec.Struct, tag=True, frozen=True):
    client_id: I64
    correlation_id: I64 = NULL_VALUE


class TerminateDriver(msgspec.Struct, tag=True, frozen=True):
    """Ask the driver to stop; its termination validator judges the token."""

    correlation_id: I64
    client_id: I64
    token: bytes = b""


class RejectImage(msgspec.Struct, tag=True, frozen=True):
    """Refuse an image (Aeron's REJECT_IMAGE): its publisher is sent an error frame."""

    correlation_id: I64
    client_id: I64
    image_correlation_id: I64
    position: I64
    reason: str


class GetNextAvailableSessionId(msgspec.Struct, tag=True, frozen=True):
    """The driver's next session id free on `stream_id` (for a publication's session-id=)."""

    correlation_id: I64
    client_id: I64
    stream_id: I32


# -- responses (driver -> clients) -----------------------------------------------------


class PublicationReady(msgspec.Struct, tag=True, frozen=True):
    """ON_PUBLICATION_READY, or ON_EXCLUSIVE_PUBLICATION_READY when `exclusive`."""

    correlation_id: I64
    registration_id: I64
    session_id: I32
    stream_id: I32
    position_limit_counter_id: I32
    channel_status_indicator_id: I32
    log_file: str
    exclusive: bool = False


class SubscriptionReady(msgspec.Struct, tag=True, frozen=True):
    correlation_id: I64
    channel_status_indicator_id: I32 = CHANNEL_STATUS_INDICATOR_NOT_ALLOCATED


class ImageReady(msgspec.Struct, tag=True, frozen=True):
    """ON_AVAILABLE_IMAGE: `correlation_id` is the image's; its join position is the value of
    the subscriber position counter, set before this is sent."""

    correlation_id: I64
    session_id: I32
    stream_id: I32
    subscription_registration_id: I64
    subscriber_position_id: I32
    log_file: str
    source_identity: str


class ImageUnavailable(msgspec.Struct, tag=True, frozen=True):
    """ON_UNAVAILABLE_IMAGE: the image of `correlation_id` went; `channel` is the
    subscription's."""

    correlation_id: I64
    subscription_registration_id: I64
    stream_id: I32
    channel: str


class CounterReady(msgspec.Struct, tag=True, frozen=True):
    correlation_id: I64
    counter_id: I32


class UnavailableCounter(msgspec.Struct, tag=True, frozen=True):
    """ON_UNAVAILABLE_COUNTER: `correlation_id` is the counter's registration id."""

    correlation_id: I64
    counter_id: I32


class StaticCounter(msgspec.Struct, tag=True, frozen=True):
    """ON_STATIC_COUNTER: the counter of an AddStaticCounter (made then, or found)."""

    correlation_id: I64
    counter_id: I32


class NextAvailableSessionId(msgspec.Struct, tag=True, frozen=True):
    correlation_id: I64
    next_session_id: I32


class OperationSuccess(msgspec.Struct, tag=True, frozen=True):
    correlation_id: I64


class ErrorResponse(msgspec.Struct, tag=True, frozen=True):
    """ON_ERROR: Aeron's offending command correlation id, error code and error message."""

    correlation_id: I64
    code: I32
    message: str


class PublicationError(msgspec.Struct, tag=True, frozen=True):
    """ON_PUBLICATION_ERROR: a receiver's error frame for the publication of `registration_id`
    (IMAGE_REJECTED when a subscriber rejected its image), told to every client; each tells the
    users of its own publications. `source_address` is the receiver's host (IPv4 or IPv6 text,
    "" when the driver knew none), `source_port` its port."""

    registration_id: I64
    destination_registration_id: I64  # a manual multi-destination-cast destination's, or none
    session_id: I32
    stream_id: I32
    receiver_id: I64
    group_tag: I64
    source_address: str
    source_port: U16
    error_code: I32
    error_message: str


class ClientTimeout(msgspec.Struct, tag=True, frozen=True):
    """The driver timed this client out: its resources are gone, its commands are refused."""

    client_id: I64


Command = (
    AddPublication
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
    | TerminateDriver
    | AddStaticCounter
    | RejectImage
    | RemoveDestinationById
    | GetNextAvailableSessionId
)
Response = (
    ClientTimeout
    | PublicationReady
    | SubscriptionReady
    | ImageReady
    | ImageUnavailable
    | CounterReady
    | UnavailableCounter
    | OperationSuccess
    | ErrorResponse
    | StaticCounter
    | NextAvailableSessionId
    | PublicationError
)

# -- Aeron's binary codec ------------------------------------------------------------------


def encode(message: Command | Response) -> tuple[int, bytes]:
    """Aeron's msg type id and flyweight bytes for `message`."""
    m = message
    match m:
        case AddPublication():
            kind = ADD_EXCLUSIVE_PUBLICATION if m.exclusive else ADD_PUBLICATION
            return kind, _head(m, "i", m.stream_id) + _var(m.channel)
        case RemovePublication():
            return REMOVE_PUBLICATION, _head(m, "qQ", m.registration_id, m.flags)
        case AddSubscription():
            body = _head(m, "qi", m.registration_correlation_id, m.stream_id)
            return ADD_SUBSCRIPTION, body + _var(m.channel)
        case RemoveSubscription():
            return REMOVE_SUBSCRIPTION, _head(m, "q", m.registration_id)
        case AddDestination() | RemoveDestination() | AddRcvDestination() | RemoveRcvDestination():
            body = _head(m, "q", m.registration_id) + _var(m.channel)
            return _DESTINATION_TYPE_IDS[type(m)], body
        case AddCounter():
            body = _head(m, "i", m.type_id) + _var(m.key, align=True)
            return ADD_COUNTER, body + _var(m.label)
        case AddStaticCounter():
            body = _head(m, "qi", m.registration_id, m.type_id) + _var(m.key, align=True)
            return ADD_STATIC_COUNTER, body + _var(m.label)
        case RemoveCounter():
            return REMOVE_COUNTER, _head(m, "q", m.registration_id)
        case ClientKeepalive():
            return CLIENT_KEEPALIVE, _head(m, "")
        case ClientClose():
            return CLIENT_CLOSE, _head(m, "")
        case TerminateDriver():
            return TERMINATE_DRIVER, _head(m, "") + _var(m.token)
        case RejectImage():
            body = _head(m, "qq", m.image_correlation_id, m.position) + _var(m.reason)
            return REJECT_IMAGE, body + _REJECT_IMAGE_TAIL
        case RemoveDestinationById():
            fields: tuple[int, ...] = (m.resource_registration_id, m.destination_registration_id)
            return REMOVE_DESTINATION_BY_ID, _head(m, "qq", *fields)
        case GetNextAvailableSessionId():
            return GET_NEXT_AVAILABLE_SESSION_ID, _head(m, "i", m.stream_id)
        case PublicationReady():
            kind = ON_EXCLUSIVE_PUBLICATION_READY if m.exclusive else ON_PUBLICATION_READY
            fields = (m.correlation_id, m.registration_id, m.session_id, m.stream_id)
            fields += (m.position_limit_counter_id, m.channel_status_indicator_id)
            return kind, struct.pack("<qqiiii", *fields) + _var(m.log_file)
        case SubscriptionReady():
            body = struct.pack("<qi", m.correlation_id, m.channel_status_indicator_id)
            return ON_SUBSCRIPTION_READY, body
        case ImageReady():
            fields = (m.correlation_id, m.session_id, m.stream_id, m.subscription_registration_id)
            body = struct.pack("<qiiqi", *fields, m.subscriber_position_id)
            return ON_AVAILABLE_IMAGE, body + _var(m.log_file, align=True) + _var(m.source_identity)
        case ImageUnavailable():
            fields = (m.correlation_id, m.subscription_registration_id, m.stream_id)
            return ON_UNAVAILABLE_IMAGE, struct.pack("<qqi", *fields) + _var(m.channel)
        case CounterReady():
            return ON_COUNTER_READY, struct.pack("<qi", m.correlation_id, m.counter_id)
        case UnavailableCounter():
            return ON_UNAVAILABLE_COUNTER, struct.pack("<qi", m.correlation_id, m.counter_id)
        case OperationSuccess():
            return ON_OPERATION_SUCCESS, struct.pack("<q", m.correlation_id)
        case ErrorResponse():
            return ON_ERROR, struct.pack("<qi", m.correlation_id, m.code) + _var(m.message)
        case ClientTimeout():
            return ON_CLIENT_TIMEOUT, struct.pack("<q", m.client_id)
        case StaticCounter():
            return ON_STATIC_COUNTER, struct.pack("<qi", m.correlation_id, m.counter_id)
        case NextAvailableSessionId():
            fields = (m.correlation_id, m.next_session_id)
            return ON_NEXT_AVAILABLE_SESSION_ID, struct.pack("<qi", *fields)
        case PublicationError():
            fields = (m.registration_id, m.destination_registration_id, m.session_id, m.stream_id)
            fields += (m.receiver_id, m.group_tag)
            address_type, address = _source_address(m.source_address)
            body = struct.pack("<qqiiqqhH", *fields, address_type, m.source_port) + address
            return ON_PUBLICATION_ERROR, body + struct.pack("<i", m.error_code) + _var(
                m.error_message
            )
    raise TypeError(f"{type(message).__name__} is no message of Aeron's command protocol")


def decode_command(msg_type_id: int, payload: bytes | memoryview) -> Command:
    """The command of Aeron's `msg_type_id` in `payload` (exactly its bytes)."""
    return _decode(_COMMAND_DECODERS, "command", msg_type_id, payload)


def decode_response(msg_type_id: int, payload: bytes | memoryview) -> Response:
    """The response of Aeron's `msg_type_id` in `payload` (exactly its bytes)."""
    return _decode(_RESPONSE_DECODERS, "response", msg_type_id, payload)


_T = TypeVar("_T")


def _decode(
    decoders: dict[int, Callable[[_Reader], _T]],
    kind: str,
    msg_type_id: int,
    payload: bytes | memoryview,
) -> _T:
    decoder = decoders.get(msg_type_id)
    if decoder is None:
        raise UnknownMessageTypeError(f"unknown {kind} msg type id {msg_type_id:#x}")
    reader = _Reader(msg_type_id, payload)
    message = decoder(reader)
    reader.end()
    return message


def _head(command: Command, fmt: str, *fields: int) -> bytes:
    """A command's bytes up to its variable part: client id, correlation id, then `fields`
    (struct format `fmt`)."""
    return struct.pack("<qq" + fmt, command.client_id, command.correlation_id, *fields)


def _var(data: str | bytes, *, align: bool = False) -> bytes:
    """A variable-length field: i32 length then the bytes, padded to 4 bytes when `align`."""
    raw = data.encode() if isinstance(data, str) else bytes(data)
    return struct.pack("<i", len(raw)) + raw + (bytes(-len(raw) % 4) if align else b"")


class _Reader:
    """Reads a payload field by field: MalformedMessageError for one that runs past its end."""

    def __init__(self, msg_type_id: int, payload: bytes | memoryview):
        self._view = memoryview(payload).cast("B")
        self._at = 0
        self._what = f"msg type id {msg_type_id:#x} of {len(self._view)} bytes"

    def ints(self, fmt: str) -> tuple[int, ...]:
        size = struct.calcsize(fmt)
        if self._at + size > len(self._view):
            raise MalformedMessageError(
                f"{self._what} too short: {size} bytes of fields at offset {self._at}"
            )
        values = struct.unpack_from(fmt, self._view, self._at)
        self._at += size
        return values

    def raw(self, size: int) -> bytes:
        if self._at + size > len(self._view):
            raise MalformedMessageError(
                f"{self._what} too short: {size} bytes at offset {self._at}"
            )
        self._at += size
        return bytes(self._view[self._at - size : self._at])

    def var(self, *, align: bool = False) -> bytes:
        at = self._at
        (length,) = self.ints("<i")
        padded = length + (-length % 4 if align else 0)
        if not 0 <= length <= padded <= len(self._view) - self._at:
            raise MalformedMessageError(
                f"{self._what}: length field {length} at offset {at} runs past its end"
            )
        data = bytes(self._view[self._at : self._at + length])
        self._at += padded
        return data

    def text(self, *, align: bool = False) -> str:
        at = self._at
        try:
            return self.var(align=align).decode()
        except UnicodeDecodeError as e:
            raise MalformedMessageError(f"{self._what}: the text at offset {at}: {e}") from None

    def skip_rest(self) -> None:
        self._at = len(self._view)

    def end(self) -> None:
        if self._at != len(self._view):
            raise MalformedMessageError(
                f"{self._what}: {len(self._view) - self._at} bytes past its end at {self._at}"
            )


def _head_of(r: _Reader) -> dict[str, int]:
    client_id, correlation_id = r.ints("<qq")
    return {"client_id": client_id, "correlation_id": correlation_id}


def _publication(exclusive: bool) -> Callable[[_Reader], AddPublication]:
    def decode(r: _Reader) -> AddPublication:
        head = _head_of(r)
        (stream_id,) = r.ints("<i")
        return AddPublication(**head, channel=r.text(), stream_id=stream_id, exclusive=exclusive)

    return decode


def _remove_publication(r: _Reader) -> RemovePublication:
    head = _head_of(r)
    registration_id, flags = r.ints("<qQ")
    return RemovePublication(**head, registration_id=registration_id, flags=flags)


def _add_subscription(r: _Reader) -> AddSubscription:
    head = _head_of(r)
    registration_correlation_id, stream_id = r.ints("<qi")
    return AddSubscription(
        **head,
        channel=r.text(),
        stream_id=stream_id,
        registration_correlation_id=registration_correlation_id,
    )


def _registration(cls: type) -> Callable[[_Reader], Command]:
    """A command of the correlated head and a registration id (RemoveSubscription, ...)."""

    def decode(r: _Reader) -> Command:
        head = _head_of(r)
        return cls(**head, registration_id=r.ints("<q")[0])

    return decode


def _destination(cls: type) -> Callable[[_Reader], Command]:
    def decode(r: _Reader) -> Command:
        head = _head_of(r)
        return cls(**head, registration_id=r.ints("<q")[0], channel=r.text())

    return decode


def _add_counter(r: _Reader) -> AddCounter:
    head = _head_of(r)
    (type_id,) = r.ints("<i")
    return AddCounter(**head, type_id=type_id, key=r.var(align=True), label=r.text())


def _terminate_driver(r: _Reader) -> TerminateDriver:
    return TerminateDriver(**_head_of(r), token=r.var())


def _add_static_counter(r: _Reader) -> AddStaticCounter:
    head = _head_of(r)
    registration_id, type_id = r.ints("<qi")
    key = r.var(align=True)
    return AddStaticCounter(
        **head, registration_id=registration_id, type_id=type_id, key=key, label=r.text()
    )


# What Aeron's C client writes after the reason: its NUL and the rest of the C struct's size
# (aeron_reject_image_command_t ends in reason_text[1]); the C driver wants at least that much.
_REJECT_IMAGE_TAIL = bytes(5)


def _reject_image(r: _Reader) -> RejectImage:
    """The reason's length field counts its bytes; what follows (_REJECT_IMAGE_TAIL from Aeron's
    C client, nothing from the Java one) is ignored, as Aeron's drivers do."""
    head = _head_of(r)
    image_correlation_id, position = r.ints("<qq")
    reason = r.text()
    r.skip_rest()
    return RejectImage(
        **head, image_correlation_id=image_correlation_id, position=position, reason=reason
    )


def _remove_destination_by_id(r: _Reader) -> RemoveDestinationById:
    head = _head_of(r)
    resource_registration_id, destination_registration_id = r.ints("<qq")
    return RemoveDestinationById(
        **head,
        resource_registration_id=resource_registration_id,
        destination_registration_id=destination_registration_id,
    )


_DESTINATION_TYPE_IDS = {
    AddDestination: ADD_DESTINATION,
    RemoveDestination: REMOVE_DESTINATION,
    AddRcvDestination: ADD_RCV_DESTINATION,
    RemoveRcvDestination: REMOVE_RCV_DESTINATION,
}
_COMMAND_DECODERS: dict[int, Callable[[_Reader], Command]] = {
    ADD_PUBLICATION: _publication(exclusive=False),
    ADD_EXCLUSIVE_PUBLICATION: _publication(exclusive=True),
    REMOVE_PUBLICATION: _remove_publication,
    ADD_SUBSCRIPTION: _add_subscription,
    REMOVE_SUBSCRIPTION: _registration(RemoveSubscription),
    ADD_COUNTER: _add_counter,
    REMOVE_COUNTER: _registration(RemoveCounter),
    CLIENT_KEEPALIVE: lambda r: ClientKeepalive(**_head_of(r)),
    CLIENT_CLOSE: lambda r: ClientClose(**_head_of(r)),
    TERMINATE_DRIVER: _terminate_driver,
    ADD_STATIC_COUNTER: _add_static_counter,
    REJECT_IMAGE: _reject_image,
    REMOVE_DESTINATION_BY_ID: _remove_destination_by_id,
    GET_NEXT_AVAILABLE_SESSION_ID: lambda r: GetNextAvailableSessionId(
        **_head_of(r), stream_id=r.ints("<i")[0]
    ),
}
_COMMAND_DECODERS |= {type_id: _destination(cls) for cls, type_id in _DESTINATION_TYPE_IDS.items()}


def _publication_ready(exclusive: bool) -> Callable[[_Reader], PublicationReady]:
    def decode(r: _Reader) -> PublicationReady:  # the fields in their order on the wire
        correlation_id, registration_id, session_id, stream_id, limit_id, status_id = r.ints(
            "<qqiiii"
        )
        return PublicationReady(
            correlation_id, registration_id, session_id, stream_id, limit_id, status_id, r.text(),
            exclusive,
        )  # fmt: skip

    return decode


def _image_ready(r: _Reader) -> ImageReady:  # the fields in their order on the wire
    correlation_id, session_id, stream_id, subscription_id, position_id = r.ints("<qiiqi")
    return ImageReady(
        correlation_id, session_id, stream_id, subscription_id, position_id,
        r.text(align=True), r.text(),
    )  # fmt: skip


def _image_unavailable(r: _Reader) -> ImageUnavailable:
    correlation_id, subscription_id, stream_id = r.ints("<qqi")
    return ImageUnavailable(correlation_id, subscription_id, stream_id, r.text())


def _error(r: _Reader) -> ErrorResponse:
    correlation_id, code = r.ints("<qi")
    return ErrorResponse(correlation_id, code, r.text())


# A publication error's source address type (aeronc.h's AERON_RESPONSE_ADDRESS_TYPE_*): its
# address field is 16 bytes, an IPv4 address in the first 4 (the rest zero).
ADDRESS_TYPE_IPV4 = 1
ADDRESS_TYPE_IPV6 = 2


def _source_address(host: str) -> tuple[int, bytes]:
    """A publication error's address type and 16 address bytes for `host` ("": none, 0)."""
    if not host:
        return 0, bytes(16)
    address = ipaddress.ip_address(host)
    kind = ADDRESS_TYPE_IPV4 if address.version == 4 else ADDRESS_TYPE_IPV6
    return kind, address.packed.ljust(16, b"\0")


def _publication_error(r: _Reader) -> PublicationError:
    """As Aeron's clients: an address of an unknown type is none; the message, ASCII from
    Aeron's drivers, is any receiver's text: bytes that are no UTF-8 are replaced, not refused."""
    registration_id, destination_id, session_id, stream_id, receiver_id, group_tag = r.ints(
        "<qqiiqq"
    )
    address_type, port = r.ints("<hH")
    address = r.raw(16)
    (error_code,) = r.ints("<i")
    if address_type == ADDRESS_TYPE_IPV4:
        host = str(ipaddress.IPv4Address(address[:4]))
    elif address_type == ADDRESS_TYPE_IPV6:
        host = str(ipaddress.IPv6Address(address))
    else:
        host, port = "", 0
    return PublicationError(
        registration_id, destination_id, session_id, stream_id, receiver_id, group_tag, host,
        port, error_code, r.var().decode(errors="replace"),
    )  # fmt: skip


_RESPONSE_DECODERS: dict[int, Callable[[_Reader], Response]] = {
    ON_ERROR: _error,
    ON_AVAILABLE_IMAGE: _image_ready,
    ON_PUBLICATION_READY: _publication_ready(exclusive=False),
    ON_EXCLUSIVE_PUBLICATION_READY: _publication_ready(exclusive=True),
    ON_OPERATION_SUCCESS: lambda r: OperationSuccess(*r.ints("<q")),
    ON_UNAVAILABLE_IMAGE: _image_unavailable,
    ON_SUBSCRIPTION_READY: lambda r: SubscriptionReady(*r.ints("<qi")),
    ON_COUNTER_READY: lambda r: CounterReady(*r.ints("<qi")),
    ON_UNAVAILABLE_COUNTER: lambda r: UnavailableCounter(*r.ints("<qi")),
    ON_CLIENT_TIMEOUT: lambda r: ClientTimeout(*r.ints("<q")),
    ON_STATIC_COUNTER: lambda r: StaticCounter(*r.ints("<qi")),
    ON_NEXT_AVAILABLE_SESSION_ID: lambda r: NextAvailableSessionId(*r.ints("<qi")),
    ON_PUBLICATION_ERROR: _publication_error,
}
