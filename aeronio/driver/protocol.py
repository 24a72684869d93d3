"""Client <-> driver control messages (typed msgspec structs, tagged for a wire encoding).

Commands flow from clients to the driver conductor; responses and image notifications flow back.
The embedded driver passes the structs in-process; a standalone driver will carry the same
structs msgpack-encoded (see `encode` / `decode`).
"""

from __future__ import annotations

import msgspec

PROTOCOL_VERSION = 1


class AddPublication(msgspec.Struct, tag=True, frozen=True):
    correlation_id: int
    client_id: int
    channel: str
    stream_id: int
    exclusive: bool = False


class RemovePublication(msgspec.Struct, tag=True, frozen=True):
    correlation_id: int
    client_id: int
    registration_id: int


class AddSubscription(msgspec.Struct, tag=True, frozen=True):
    correlation_id: int
    client_id: int
    channel: str
    stream_id: int


class RemoveSubscription(msgspec.Struct, tag=True, frozen=True):
    correlation_id: int
    client_id: int
    registration_id: int


class ClientKeepalive(msgspec.Struct, tag=True, frozen=True):
    client_id: int


class ClientClose(msgspec.Struct, tag=True, frozen=True):
    client_id: int


class PublicationReady(msgspec.Struct, tag=True, frozen=True):
    correlation_id: int
    registration_id: int
    session_id: int
    stream_id: int
    log_file: str
    position_limit_counter_id: int
    position_counter_id: int
    exclusive: bool


class SubscriptionReady(msgspec.Struct, tag=True, frozen=True):
    correlation_id: int


class ImageReady(msgspec.Struct, tag=True, frozen=True):
    correlation_id: int
    subscription_registration_id: int
    session_id: int
    stream_id: int
    log_file: str
    subscriber_position_counter_id: int
    source_identity: str
    join_position: int


class ImageUnavailable(msgspec.Struct, tag=True, frozen=True):
    correlation_id: int
    subscription_registration_id: int
    session_id: int
    stream_id: int


class OperationSuccess(msgspec.Struct, tag=True, frozen=True):
    correlation_id: int


class ErrorResponse(msgspec.Struct, tag=True, frozen=True):
    correlation_id: int
    code: int
    message: str


Command = (
    AddPublication
    | RemovePublication
    | AddSubscription
    | RemoveSubscription
    | ClientKeepalive
    | ClientClose
)
Response = (
    PublicationReady
    | SubscriptionReady
    | ImageReady
    | ImageUnavailable
    | OperationSuccess
    | ErrorResponse
)

# Error codes (Aeron's ErrorCode values where they exist).
GENERIC_ERROR = 0
INVALID_CHANNEL = 1
UNKNOWN_SUBSCRIPTION = 2
UNKNOWN_PUBLICATION = 3
CHANNEL_ENDPOINT_ERROR = 4
UNKNOWN_COUNTER = 5

_encoder = msgspec.msgpack.Encoder()
_command_decoder = msgspec.msgpack.Decoder(Command)
_response_decoder = msgspec.msgpack.Decoder(Response)


def encode(message: Command | Response) -> bytes:
    return _encoder.encode(message)


def decode_command(data: bytes) -> Command:
    return _command_decoder.decode(data)


def decode_response(data: bytes) -> Response:
    return _response_decoder.decode(data)
