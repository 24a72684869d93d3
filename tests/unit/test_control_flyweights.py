"""Aeron's command protocol flyweights: each message to and from Aeron's bytes
(aeron_control_protocol.h, packed on 4 bytes, little-endian)."""

import pytest

from aeronio.protocol import control as p


def i32(value: int) -> bytes:
    return value.to_bytes(4, "little", signed=True)


def i64(value: int) -> bytes:
    return value.to_bytes(8, "little", signed=True)


def text(value: bytes, pad: int = 0) -> bytes:
    return i32(len(value)) + value + bytes(pad)


CLIENT, CORRELATION = 0x0102030405060708, -2
HEAD = i64(CLIENT) + i64(CORRELATION)

COMMANDS = [
    (
        p.AddPublication(CORRELATION, CLIENT, "aeron:ipc", 1001),
        0x01,
        HEAD + i32(1001) + text(b"aeron:ipc"),
    ),
    (
        p.AddPublication(CORRELATION, CLIENT, "aeron:ipc", 7, exclusive=True),
        0x03,
        HEAD + i32(7) + text(b"aeron:ipc"),
    ),
    (
        p.RemovePublication(CORRELATION, CLIENT, 55, flags=p.REMOVE_PUBLICATION_FLAG_REVOKE),
        0x02,
        HEAD + i64(55) + (1).to_bytes(8, "little"),
    ),
    (
        p.AddSubscription(CORRELATION, CLIENT, "aeron:udp?endpoint=a:1", 3),
        0x04,
        HEAD + i64(-1) + i32(3) + text(b"aeron:udp?endpoint=a:1"),
    ),
    (p.RemoveSubscription(CORRELATION, CLIENT, 9), 0x05, HEAD + i64(9)),
    (p.ClientKeepalive(CLIENT), 0x06, i64(CLIENT) + i64(-1)),
    (p.AddDestination(CORRELATION, CLIENT, 4, "aeron:udp?endpoint=b:2"), 0x07, None),
    (p.RemoveDestination(CORRELATION, CLIENT, 4, "aeron:udp?endpoint=b:2"), 0x08, None),
    (
        p.AddCounter(CORRELATION, CLIENT, 1001, b"\x01\x02\x03\x04\x05", "label"),
        0x09,
        HEAD + i32(1001) + text(b"\x01\x02\x03\x04\x05", pad=3) + text(b"label"),
    ),
    (p.RemoveCounter(CORRELATION, CLIENT, 12), 0x0A, HEAD + i64(12)),
    (p.ClientClose(CLIENT), 0x0B, i64(CLIENT) + i64(-1)),
    (p.AddRcvDestination(CORRELATION, CLIENT, 4, "aeron:udp?endpoint=b:2"), 0x0C, None),
    (p.RemoveRcvDestination(CORRELATION, CLIENT, 4, "aeron:udp?endpoint=b:2"), 0x0D, None),
    (p.TerminateDriver(CORRELATION, CLIENT, b"tok"), 0x0E, HEAD + text(b"tok")),
]
DESTINATION = HEAD + i64(4) + text(b"aeron:udp?endpoint=b:2")

RESPONSES = [
    (
        p.ErrorResponse(CORRELATION, p.INVALID_CHANNEL, "bad"),
        0x0F01,
        i64(CORRELATION) + i32(1) + text(b"bad"),
    ),
    (
        p.ImageReady(
            correlation_id=5,
            session_id=-7,
            stream_id=10,
            subscription_registration_id=6,
            subscriber_position_id=3,
            log_file="/d/images/5.logbuffer",
            source_identity="127.0.0.1:4000",
        ),
        0x0F02,
        i64(5)
        + i32(-7)
        + i32(10)
        + i64(6)
        + i32(3)
        + text(b"/d/images/5.logbuffer", pad=3)
        + text(b"127.0.0.1:4000"),
    ),
    (
        p.PublicationReady(5, 6, -7, 10, 2, -1, "/d/publications/6.logbuffer"),
        0x0F03,
        i64(5)
        + i64(6)
        + i32(-7)
        + i32(10)
        + i32(2)
        + i32(-1)
        + text(b"/d/publications/6.logbuffer"),
    ),
    (p.OperationSuccess(CORRELATION), 0x0F04, i64(CORRELATION)),
    (
        p.ImageUnavailable(5, 6, 10, "aeron:ipc"),
        0x0F05,
        i64(5) + i64(6) + i32(10) + text(b"aeron:ipc"),
    ),
    (
        p.PublicationReady(5, 6, -7, 10, 2, 4, "/d/p.logbuffer", exclusive=True),
        0x0F06,
        i64(5) + i64(6) + i32(-7) + i32(10) + i32(2) + i32(4) + text(b"/d/p.logbuffer"),
    ),
    (p.SubscriptionReady(5), 0x0F07, i64(5) + i32(-1)),
    (p.CounterReady(5, 9), 0x0F08, i64(5) + i32(9)),
    (p.UnavailableCounter(5, 9), 0x0F09, i64(5) + i32(9)),
    (p.ClientTimeout(CLIENT), 0x0F0A, i64(CLIENT)),
]


@pytest.mark.parametrize(("message", "type_id", "data"), COMMANDS, ids=lambda v: repr(v)[:30])
def test_a_command_is_aerons_bytes_and_back(message, type_id, data):
    data = DESTINATION if data is None else data
    assert p.encode(message) == (type_id, data)
    assert p.decode_command(type_id, data) == message
    assert p.decode_command(type_id, memoryview(bytearray(data))) == message


@pytest.mark.parametrize(("message", "type_id", "data"), RESPONSES, ids=lambda v: repr(v)[:30])
def test_a_response_is_aerons_bytes_and_back(message, type_id, data):
    assert p.encode(message) == (type_id, data)
    assert p.decode_response(type_id, data) == message


def test_every_aeron_message_type_id_has_its_test():
    assert sorted({type_id for _, type_id, _ in COMMANDS}) == list(range(0x01, 0x0F))
    assert sorted({type_id for _, type_id, _ in RESPONSES}) == list(range(0x0F01, 0x0F0B))


@pytest.mark.parametrize(("message", "type_id", "data"), COMMANDS, ids=lambda v: repr(v)[:30])
def test_a_cut_or_overlong_command_is_refused(message, type_id, data):
    data = DESTINATION if data is None else data
    for cut in range(len(data)):
        with pytest.raises(p.MalformedMessageError):
            p.decode_command(type_id, data[:cut])
    with pytest.raises(p.MalformedMessageError, match="1 bytes past its end"):
        p.decode_command(type_id, data + b"\0")


def test_a_length_field_past_the_end_or_negative_is_refused_naming_it():
    data = HEAD + i32(1001) + i32(1 << 30) + b"aeron:ipc"
    with pytest.raises(p.MalformedMessageError, match="length field 1073741824 at offset 20"):
        p.decode_command(p.ADD_PUBLICATION, data)
    with pytest.raises(p.MalformedMessageError, match="length field -1 at offset 20"):
        p.decode_command(p.ADD_PUBLICATION, HEAD + i32(1001) + i32(-1))
    with pytest.raises(p.MalformedMessageError, match="offset 28"):  # the label's, after the key
        p.decode_command(p.ADD_COUNTER, HEAD + i32(1) + text(b"k", pad=3) + i32(2) + b"x")


def test_an_unknown_type_id_or_bad_text_is_refused():
    with pytest.raises(p.UnknownMessageTypeError, match="unknown command msg type id 0x11"):
        p.decode_command(0x11, HEAD)
    with pytest.raises(p.UnknownMessageTypeError, match="unknown response msg type id 0x1"):
        p.decode_response(p.ADD_PUBLICATION, HEAD)
    with pytest.raises(p.UnknownMessageTypeError, match="command msg type id 0xf01"):
        p.decode_command(p.ON_ERROR, HEAD)
    with pytest.raises(p.MalformedMessageError, match="the text at offset 20"):
        p.decode_command(p.ADD_PUBLICATION, HEAD + i32(1) + text(b"\xff"))
    assert issubclass(p.MalformedMessageError, ValueError)


def test_the_handshake_is_no_aeron_message():
    with pytest.raises(TypeError, match="ClientHello is no message"):
        p.encode(p.ClientHello(p.PROTOCOL_VERSION, 1, 2))


def test_aerons_error_codes():
    codes = (p.GENERIC_ERROR, p.STORAGE_SPACE, p.UNKNOWN_COMMAND_TYPE_ID, p.MALFORMED_COMMAND)
    assert codes == (11, 12, 6, 7)
