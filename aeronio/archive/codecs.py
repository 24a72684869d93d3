"""The Aeron Archive's SBE messages (schema 101, version 0, as in the reference 1.15.1 jar):
one table per message, from which its codec is made.

Layout rules (SBE, little-endian)
---------------------------------
- A control message is an 8-byte `MessageHeader` (block length, template id, schema id,
  version: four uint16) then the message's fixed block, then its var-data fields in order.
- The fixed block holds the fields at the offsets of the table. A decoder reads var data from
  the end of the block the *header* announces, so a longer block from a newer schema is read.
- A var-data field is a uint32 length then that many ASCII bytes (`varAsciiEncoding`).
- The catalog stores `CatalogHeader` and `RecordingDescriptorHeader` blocks and
  `RecordingDescriptor` bodies without a message header.

Every template id, block length and field offset here is checked against the jar's
`io.aeron.archive.codecs.*Encoder` classes by tests/interop/test_archive_codecs.py.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable
from typing import ClassVar, Self, TypeVar

import msgspec

from aeronio.errors import AeronError

SCHEMA_ID = 101
SCHEMA_VERSION = 0
HEADER = struct.Struct("<HHHH")  # block length, template id, schema id, version
HEADER_LENGTH = HEADER.size
VAR_LENGTH = struct.Struct("<I")
# Aeron's NULL_VALUE for a uint32/int64 field left unset.
NULL_POSITION = -1
NULL_TIMESTAMP = -1


class CodecError(AeronError, ValueError):
    """A buffer that is not a well-formed archive message; the message says what is wrong."""


class ControlResponseCode(enum.IntEnum):
    """The code of an archive's ControlResponse (Aeron's ControlResponseCode)."""

    OK = 0
    ERROR = 1
    RECORDING_UNKNOWN = 2


class SourceLocation(enum.IntEnum):
    """Where the recorded publication is: on the archive's driver (LOCAL, recorded through a
    spy subscription) or elsewhere (REMOTE, through a network subscription)."""

    LOCAL = 0
    REMOTE = 1


class ErrorCode(enum.IntEnum):
    """The `relevant_id` of an ERROR response (the reference's `ArchiveException` codes)."""

    GENERIC = 0
    ACTIVE_LISTING = 1
    ACTIVE_RECORDING = 2
    ACTIVE_SUBSCRIPTION = 3
    UNKNOWN_SUBSCRIPTION = 4
    UNKNOWN_RECORDING = 5
    UNKNOWN_REPLAY = 6
    MAX_REPLAYS = 7
    MAX_RECORDINGS = 8
    INVALID_EXTENSION = 9


class Message(msgspec.Struct, frozen=True):
    """Base of every archive message: the class attributes are its table."""

    TEMPLATE_ID: ClassVar[int]
    BLOCK_LENGTH: ClassVar[int]
    FIXED: ClassVar[struct.Struct]  # the fixed block, with pad bytes for any gap
    FIXED_FIELDS: ClassVar[tuple[str, ...]]
    FIXED_CODES: ClassVar[tuple[str, ...]]  # each fixed field's struct code
    VAR_FIELDS: ClassVar[tuple[str, ...]]

    def encode_block(self) -> bytes:
        """The fixed block and var data, without a message header; ValueError naming the
        field whose value does not fit (an integer out of its range, text that is not ASCII)."""
        values = [getattr(self, name) for name in self.FIXED_FIELDS]
        for name, code, value in zip(self.FIXED_FIELDS, self.FIXED_CODES, values, strict=True):
            low, high = _RANGES[code]
            if type(value) is not int and not isinstance(value, enum.IntEnum):
                raise ValueError(f"{name} must be an int, not {type(value).__name__}")
            if not low <= value <= high:
                raise ValueError(f"{name} {value} is outside {low}..{high}")
        parts = [self.FIXED.pack(*values)]
        for name in self.VAR_FIELDS:
            text = getattr(self, name)
            if not isinstance(text, str) or not text.isascii():
                raise ValueError(f"{name} must be ASCII text, not {text!r}")
            data = text.encode("ascii")
            parts.append(VAR_LENGTH.pack(len(data)))
            parts.append(data)
        return b"".join(parts)

    def encode(self) -> bytes:
        """The message with its SBE header."""
        header = HEADER.pack(self.BLOCK_LENGTH, self.TEMPLATE_ID, SCHEMA_ID, SCHEMA_VERSION)
        return header + self.encode_block()

    @classmethod
    def decode_block(
        cls, buffer: bytes | memoryview, offset: int = 0, block_length: int | None = None
    ) -> tuple[Self, int]:
        """Decode the fixed block at `offset` (`block_length` bytes long, by default ours) and
        the var data after it; returns (message, offset after it)."""
        block_length = cls.BLOCK_LENGTH if block_length is None else block_length
        end = len(buffer)
        if block_length < cls.BLOCK_LENGTH or offset + block_length > end:
            raise CodecError(
                f"{cls.__name__}: block of {block_length} bytes at {offset} does not fit "
                f"(needs {cls.BLOCK_LENGTH}, buffer {end})"
            )
        values = dict(zip(cls.FIXED_FIELDS, cls.FIXED.unpack_from(buffer, offset), strict=True))
        at = offset + block_length
        for name in cls.VAR_FIELDS:
            if at + VAR_LENGTH.size > end:
                raise CodecError(f"{cls.__name__}.{name}: length past the end at {at}")
            (length,) = VAR_LENGTH.unpack_from(buffer, at)
            at += VAR_LENGTH.size
            if length > end - at:
                raise CodecError(f"{cls.__name__}.{name}: length {length} past the end")
            try:
                values[name] = bytes(buffer[at : at + length]).decode("ascii")
            except UnicodeDecodeError:
                raise CodecError(f"{cls.__name__}.{name}: not ASCII") from None
            at += length
        try:
            return msgspec.convert(values, cls), at
        except msgspec.ValidationError as e:
            raise CodecError(f"{cls.__name__}: {e}") from None


_CODES = {"q": 8, "i": 4, "B": 1, "b": 1}
_RANGES = {"q": (-(2**63), 2**63 - 1), "i": (-(2**31), 2**31 - 1), "B": (0, 255), "b": (-128, 127)}


_M = TypeVar("_M", bound=Message)


def _table(
    template_id: int, block_length: int, *fields: str, var: tuple[str, ...] = ()
) -> Callable[[type[_M]], type[_M]]:
    """Class decorator: the message's fixed fields as `name:code[@offset]` (in order, each at
    the end of the one before unless an offset is given) and its var-data fields."""

    def apply(cls: type[_M]) -> type[_M]:
        fmt, names, codes, at = "<", [], [], 0
        for spec in fields:
            name, _, code = spec.partition(":")
            code, _, offset = code.partition("@")
            if offset:
                fmt += "x" * (int(offset) - at)
                at = int(offset)
            fmt += code
            at += _CODES[code]
            names.append(name)
            codes.append(code)
        fmt += "x" * (block_length - at)
        cls.TEMPLATE_ID, cls.BLOCK_LENGTH = template_id, block_length
        cls.FIXED, cls.FIXED_FIELDS, cls.VAR_FIELDS = struct.Struct(fmt), tuple(names), var
        cls.FIXED_CODES = tuple(codes)
        assert cls.FIXED.size == block_length, cls
        MESSAGES[template_id] = cls
        return cls

    return apply


class SessionMessage(Message, frozen=True):
    """A message of a control session that answers or awaits an answer: its first fields are
    the session's id and the request's correlation id."""

    control_session_id: int
    correlation_id: int


MESSAGES: dict[int, type[Message]] = {}
_SESSION = ("control_session_id:q", "correlation_id:q")

# -- Control requests (client -> archive) -----------------------------------------------------


@_table(2, 12, "correlation_id:q", "response_stream_id:i", var=("response_channel",))
class ConnectRequest(Message, frozen=True):
    correlation_id: int
    response_stream_id: int
    response_channel: str


@_table(3, 8, "control_session_id:q")
class CloseSessionRequest(Message, frozen=True):
    control_session_id: int


@_table(4, 21, *_SESSION, "stream_id:i", "source_location:B", var=("channel",))
class StartRecordingRequest(SessionMessage, frozen=True):
    stream_id: int
    source_location: int
    channel: str


@_table(5, 20, *_SESSION, "stream_id:i", var=("channel",))
class StopRecordingRequest(SessionMessage, frozen=True):
    stream_id: int
    channel: str


@_table(
    6, 44, *_SESSION, "recording_id:q", "position:q", "length:q", "replay_stream_id:i",
    var=("replay_channel",),
)  # fmt: skip
class ReplayRequest(SessionMessage, frozen=True):
    recording_id: int
    position: int
    length: int
    replay_stream_id: int
    replay_channel: str


@_table(7, 24, *_SESSION, "replay_session_id:q")
class StopReplayRequest(SessionMessage, frozen=True):
    replay_session_id: int


@_table(8, 28, *_SESSION, "from_recording_id:q", "record_count:i")
class ListRecordingsRequest(SessionMessage, frozen=True):
    from_recording_id: int
    record_count: int


@_table(9, 32, *_SESSION, "from_recording_id:q", "record_count:i", "stream_id:i", var=("channel",))
class ListRecordingsForUriRequest(SessionMessage, frozen=True):
    from_recording_id: int
    record_count: int
    stream_id: int
    channel: str


@_table(10, 24, *_SESSION, "recording_id:q")
class ListRecordingRequest(SessionMessage, frozen=True):
    recording_id: int


@_table(11, 29, *_SESSION, "recording_id:q", "stream_id:i", "source_location:B", var=("channel",))
class ExtendRecordingRequest(SessionMessage, frozen=True):
    recording_id: int
    stream_id: int
    source_location: int
    channel: str


@_table(12, 24, *_SESSION, "recording_id:q")
class RecordingPositionRequest(SessionMessage, frozen=True):
    recording_id: int


@_table(13, 32, *_SESSION, "recording_id:q", "position:q")
class TruncateRecordingRequest(SessionMessage, frozen=True):
    recording_id: int
    position: int


@_table(14, 24, *_SESSION, "subscription_id:q")
class StopRecordingSubscriptionRequest(SessionMessage, frozen=True):
    subscription_id: int


@_table(15, 24, *_SESSION, "recording_id:q")
class StopPositionRequest(SessionMessage, frozen=True):
    recording_id: int


@_table(16, 32, *_SESSION, "min_recording_id:q", "session_id:i", "stream_id:i", var=("channel",))
class FindLastMatchingRecordingRequest(SessionMessage, frozen=True):
    min_recording_id: int
    session_id: int
    stream_id: int
    channel: str


# What a client may send on the control stream: every message above; any other arriving there
# (a response, a descriptor, an event) is dropped unanswered.
CONTROL_REQUESTS: frozenset[type[Message]] = frozenset(MESSAGES.values())


# -- Control responses (archive -> client) ----------------------------------------------------


@_table(1, 28, *_SESSION, "relevant_id:q", "code:i", var=("error_message",))
class ControlResponse(SessionMessage, frozen=True):
    relevant_id: int
    code: int
    error_message: str = ""


@_table(
    22, 80, *_SESSION, "recording_id:q", "start_timestamp:q", "stop_timestamp:q",
    "start_position:q", "stop_position:q", "initial_term_id:i", "segment_file_length:i",
    "term_buffer_length:i", "mtu_length:i", "session_id:i", "stream_id:i",
    var=("stripped_channel", "original_channel", "source_identity"),
)  # fmt: skip
class RecordingDescriptor(SessionMessage, frozen=True):
    """One recording, as the catalog holds it and `list_recordings` returns it (the catalog
    stores control session and correlation ids of 0)."""

    recording_id: int
    start_timestamp: int
    stop_timestamp: int
    start_position: int
    stop_position: int
    initial_term_id: int
    segment_file_length: int
    term_buffer_length: int
    mtu_length: int
    session_id: int
    stream_id: int
    stripped_channel: str
    original_channel: str
    source_identity: str


# -- Recording events (archive -> events channel) ---------------------------------------------


@_table(
    101, 24, "recording_id:q", "start_position:q", "session_id:i", "stream_id:i",
    var=("channel", "source_identity"),
)  # fmt: skip
class RecordingStarted(Message, frozen=True):
    """A recording event: a recording began (the archive's recording-events stream)."""

    recording_id: int
    start_position: int
    session_id: int
    stream_id: int
    channel: str
    source_identity: str


@_table(102, 24, "recording_id:q", "start_position:q", "position:q")
class RecordingProgress(Message, frozen=True):
    """A recording event: a recording reached `position`."""

    recording_id: int
    start_position: int
    position: int


@_table(103, 24, "recording_id:q", "start_position:q", "stop_position:q")
class RecordingStopped(Message, frozen=True):
    """A recording event: a recording stopped at `stop_position`."""

    recording_id: int
    start_position: int
    stop_position: int


# -- The catalog's blocks (no message header) -------------------------------------------------


@_table(20, 8, "version:i", "entry_length:i")
class CatalogHeader(Message, frozen=True):
    version: int
    entry_length: int


@_table(21, 32, "length:i", "valid:b", "reserved:b@31")
class RecordingDescriptorHeader(Message, frozen=True):
    length: int
    valid: int
    reserved: int = 0


def decode(buffer: bytes | memoryview, offset: int = 0) -> Message:
    """The message (header, block, var data) at `offset`; CodecError when it is not one of
    schema 101's or does not fit."""
    if len(buffer) - offset < HEADER_LENGTH:
        raise CodecError(f"{len(buffer) - offset} bytes is shorter than a message header")
    block_length, template_id, schema_id, _version = HEADER.unpack_from(buffer, offset)
    if schema_id != SCHEMA_ID:
        raise CodecError(f"schema id {schema_id} is not the archive's ({SCHEMA_ID})")
    cls = MESSAGES.get(template_id)
    if cls is None:
        raise CodecError(f"unknown template id {template_id}")
    message, _ = cls.decode_block(buffer, offset + HEADER_LENGTH, block_length)
    return message
