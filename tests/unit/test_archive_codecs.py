"""The archive's SBE codecs against real messages of the reference client and archive."""

from pathlib import Path

import pytest

from aeronio.archive import codecs

EXCHANGE = Path(__file__).parents[1] / "data" / "archive" / "java-exchange.txt"


def _captured() -> list[tuple[str, bytes]]:
    lines = EXCHANGE.read_text().splitlines()
    return [
        (kind, bytes.fromhex(data))
        for kind, _, data in (line.partition(" ") for line in lines)
        if kind in ("request", "response", "event")
    ]


def test_the_capture_holds_every_kind_of_message():
    kinds = {type(codecs.decode(data)).__name__ for _, data in _captured()}
    assert kinds == {
        "ConnectRequest", "StartRecordingRequest", "FindLastMatchingRecordingRequest",
        "RecordingPositionRequest", "ListRecordingsRequest", "ListRecordingsForUriRequest",
        "ListRecordingRequest", "ReplayRequest", "StopRecordingRequest", "StopPositionRequest",
        "StopReplayRequest", "ExtendRecordingRequest", "StopRecordingSubscriptionRequest",
        "TruncateRecordingRequest", "CloseSessionRequest", "ControlResponse",
        "RecordingDescriptor", "RecordingStarted", "RecordingProgress", "RecordingStopped",
    }  # fmt: skip


@pytest.mark.parametrize("kind,data", _captured(), ids=lambda v: v if isinstance(v, str) else "")
def test_reference_messages_decode_and_encode_byte_for_byte(kind, data):
    message = codecs.decode(data)
    encoded = message.encode()
    if isinstance(message, codecs.StopReplayRequest):
        # The 1.15.1 client sends StopReplay with the tail of the ReplayRequest before it still
        # in its buffer (its offer length is the longer message's): the message is the prefix.
        assert len(data) > len(encoded)
        data = data[: len(encoded)]
    assert encoded == data


def test_decoded_fields_are_the_references():
    by_type = {}
    for _, data in _captured():
        message = codecs.decode(data)
        by_type.setdefault(type(message), message)
    connect = by_type[codecs.ConnectRequest]
    assert connect.response_stream_id == 20
    assert connect.response_channel == "aeron:udp?endpoint=localhost:8020"
    start = by_type[codecs.StartRecordingRequest]
    assert (start.stream_id, start.source_location) == (1001, codecs.SourceLocation.REMOTE)
    assert start.channel == "aeron:udp?endpoint=localhost:14123"
    descriptor = by_type[codecs.RecordingDescriptor]
    assert (descriptor.recording_id, descriptor.start_position, descriptor.stop_position) == (
        0, 0, -1,
    )  # fmt: skip
    assert (descriptor.term_buffer_length, descriptor.mtu_length) == (65536, 1408)
    assert descriptor.source_identity.startswith("127.0.0.1:")
    progress = by_type[codecs.RecordingProgress]
    assert (progress.recording_id, progress.position) == (0, 480)


def test_a_longer_block_from_a_newer_schema_is_read():
    request = codecs.StopPositionRequest(1, 2, 3)
    data = bytearray(request.encode())
    data[0:2] = (request.BLOCK_LENGTH + 8).to_bytes(2, "little")
    data += bytes(8)
    assert codecs.decode(bytes(data)) == request


@pytest.mark.parametrize(
    "data,error",
    [
        (b"\x18\x00\x0f\x00", "shorter than a message header"),
        (codecs.StopPositionRequest(1, 2, 3).encode()[:-1], "does not fit"),
        (b"\x08\x00\x63\x00\x65\x00\x00\x00" + bytes(8), "unknown template id 99"),
        (b"\x08\x00\x03\x00\x66\x00\x00\x00" + bytes(8), "schema id 102"),
        (b"\x04\x00\x03\x00\x65\x00\x00\x00" + bytes(8), "block of 4 bytes"),
        (codecs.ConnectRequest(1, 2, "aeron:ipc").encode()[:-1], "past the end"),
        (
            codecs.ConnectRequest(1, 2, "").encode()[:-4] + (2**32 - 1).to_bytes(4, "little"),
            "length 4294967295 past the end",
        ),
        (codecs.ConnectRequest(1, 2, "x").encode()[:-1] + b"\xff", "not ASCII"),
    ],
)
def test_malformed_messages_raise_codec_error(data, error):
    with pytest.raises(codecs.CodecError, match=error):
        codecs.decode(data)


def test_every_message_round_trips():
    for cls in codecs.MESSAGES.values():
        values = {}
        for name in cls.__struct_fields__:
            values[name] = f"{name}-value" if name in cls.VAR_FIELDS else 7
        message = cls(**values)
        block = message.encode_block()
        decoded, end = cls.decode_block(block)
        assert decoded == message and end == len(block)


def test_control_requests_are_what_the_reference_client_sends():
    """The archive answers these only; what else arrives on its control stream is dropped."""
    kinds = {
        (kind, type(codecs.decode(data)) in codecs.CONTROL_REQUESTS) for kind, data in _captured()
    }
    assert kinds == {("request", True), ("response", False), ("event", False)}
    sent = {type(codecs.decode(data)) for kind, data in _captured() if kind == "request"}
    assert sent == codecs.CONTROL_REQUESTS


def test_a_message_of_a_control_session_is_a_session_message():
    """Every message whose block starts with the session's id and a correlation id is a
    `SessionMessage` (what the archive and its client answer and match on), and no other."""
    session = ("control_session_id", "correlation_id")
    for cls in codecs.MESSAGES.values():
        assert issubclass(cls, codecs.SessionMessage) == (cls.FIXED_FIELDS[:2] == session), cls
    assert codecs.ControlResponse(1, 2, 3, 0).correlation_id == 2  # positional order kept
