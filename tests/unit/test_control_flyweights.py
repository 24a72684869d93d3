"""Aeron's command protocol flyweights: each message to and from Aeron's bytes
(aeron_control_protocol.h, packed on 4 bytes, little-endian)."""

import struct
from pathlib import Path

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
    (
        p.AddStaticCounter(CORRELATION, CLIENT, 777, 1006, b"\x01\x02\x03\x04\x05", "label"),
        0x0F,
        HEAD + i64(777) + i32(1006) + text(b"\x01\x02\x03\x04\x05", pad=3) + text(b"label"),
    ),
    (
        # As Aeron's C client writes it: the reason, its NUL, the C struct's padding.
        p.RejectImage(CORRELATION, CLIENT, 5, 4096, "bad"),
        0x10,
        HEAD + i64(5) + i64(4096) + text(b"bad") + bytes(5),
    ),
    (p.RemoveDestinationById(CORRELATION, CLIENT, 4, 8), 0x11, HEAD + i64(4) + i64(8)),
    (p.GetNextAvailableSessionId(CORRELATION, CLIENT, 1001), 0x12, HEAD + i32(1001)),
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
    (p.StaticCounter(5, 9), 0x0F0B, i64(5) + i32(9)),
    (p.NextAvailableSessionId(5, -7), 0x0F0D, i64(5) + i32(-7)),
    (
        # aeron_publication_error_t: the address type (i16), port (u16), 16 address bytes (an
        # IPv4 one in the first 4), the error code, then the message at offset 64.
        p.PublicationError(5, -1, -7, 10, 99, -1, "127.0.0.1", 40123, p.IMAGE_REJECTED, "bad"),
        0x0F0C,
        i64(5)
        + i64(-1)
        + i32(-7)
        + i32(10)
        + i64(99)
        + i64(-1)
        + struct.pack("<hH", 1, 40123)
        + bytes([127, 0, 0, 1])
        + bytes(12)
        + i32(13)
        + text(b"bad"),
    ),  # fmt: skip
    (
        p.PublicationError(5, 8, -7, 10, 99, 3, "::1", 1, p.GENERIC_ERROR, ""),
        0x0F0C,
        i64(5)
        + i64(8)
        + i32(-7)
        + i32(10)
        + i64(99)
        + i64(3)
        + struct.pack("<hH", 2, 1)
        + bytes(15)
        + b"\x01"
        + i32(11)
        + text(b""),
    ),  # fmt: skip
]
RESPONSE_TYPE_IDS = set(range(0x0F01, 0x0F0E))


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
    assert sorted({type_id for _, type_id, _ in COMMANDS}) == list(range(0x01, 0x13))
    assert {type_id for _, type_id, _ in RESPONSES} == RESPONSE_TYPE_IDS


@pytest.mark.parametrize(
    ("message", "type_id", "data"),
    [command for command in COMMANDS if command[1] != p.REJECT_IMAGE],
    ids=lambda v: repr(v)[:30],
)
def test_a_cut_or_overlong_command_is_refused(message, type_id, data):
    data = DESTINATION if data is None else data
    for cut in range(len(data)):
        with pytest.raises(p.MalformedMessageError):
            p.decode_command(type_id, data[:cut])
    with pytest.raises(p.MalformedMessageError, match="1 bytes past its end"):
        p.decode_command(type_id, data + b"\0")


def test_what_follows_a_reject_images_reason_is_ignored_as_aerons_drivers_do():
    """Aeron's C client writes a NUL and the C struct's padding after the reason, the Java
    client nothing: both are the same command; a cut into the reason is refused."""
    command = p.RejectImage(CORRELATION, CLIENT, 5, 4096, "bad")
    fixed = HEAD + i64(5) + i64(4096) + text(b"bad")
    for tail in (b"", bytes(5), b"\0xyz"):
        assert p.decode_command(p.REJECT_IMAGE, fixed + tail) == command
    for cut in range(len(fixed)):
        with pytest.raises(p.MalformedMessageError):
            p.decode_command(p.REJECT_IMAGE, fixed[:cut])


def test_a_publication_errors_odd_address_or_text_is_kept_as_aerons_clients_keep_them():
    """Aeron's C driver leaves the address type 0 for a source it cannot say (no address then);
    the message is any receiver's text: bytes that are no UTF-8 are replaced, not refused. The
    message's length is at Aeron's offset 64; a cut is refused."""
    fields = i64(5) + i64(-1) + i32(-7) + i32(10) + i64(99) + i64(-1)
    odd = fields + struct.pack("<hH", 0, 9) + bytes(16) + i32(13) + text(b"bad \xff")
    assert p.decode_response(p.ON_PUBLICATION_ERROR, odd) == p.PublicationError(
        5, -1, -7, 10, 99, -1, "", 0, p.IMAGE_REJECTED, "bad \ufffd"
    )
    assert odd[64:68] == i32(5)
    for cut in range(68):
        with pytest.raises(p.MalformedMessageError):
            p.decode_response(p.ON_PUBLICATION_ERROR, odd[:cut])


def test_a_length_field_past_the_end_or_negative_is_refused_naming_it():
    data = HEAD + i32(1001) + i32(1 << 30) + b"aeron:ipc"
    with pytest.raises(p.MalformedMessageError, match="length field 1073741824 at offset 20"):
        p.decode_command(p.ADD_PUBLICATION, data)
    with pytest.raises(p.MalformedMessageError, match="length field -1 at offset 20"):
        p.decode_command(p.ADD_PUBLICATION, HEAD + i32(1001) + i32(-1))
    with pytest.raises(p.MalformedMessageError, match="offset 28"):  # the label's, after the key
        p.decode_command(p.ADD_COUNTER, HEAD + i32(1) + text(b"k", pad=3) + i32(2) + b"x")


def test_an_unknown_type_id_or_bad_text_is_refused():
    with pytest.raises(p.UnknownMessageTypeError, match="unknown command msg type id 0x13"):
        p.decode_command(0x13, HEAD)
    with pytest.raises(p.UnknownMessageTypeError, match="unknown response msg type id 0x1"):
        p.decode_response(p.ADD_PUBLICATION, HEAD)
    with pytest.raises(p.UnknownMessageTypeError, match="command msg type id 0xf01"):
        p.decode_command(p.ON_ERROR, HEAD)
    with pytest.raises(p.MalformedMessageError, match="the text at offset 20"):
        p.decode_command(p.ADD_PUBLICATION, HEAD + i32(1) + text(b"\xff"))
    assert issubclass(p.MalformedMessageError, ValueError)


def test_aerons_error_codes():
    codes = (p.GENERIC_ERROR, p.STORAGE_SPACE, p.UNKNOWN_COMMAND_TYPE_ID, p.MALFORMED_COMMAND)
    assert codes == (11, 12, 6, 7)


# -- against the bytes of Aeron's C client and C driver ------------------------------------
# Captured by tests/data/aeron_c/capture_control.py: the to-driver ring buffer's records as the
# C client wrote them, the to-clients broadcast buffer's as the C driver did.

CAPTURES = Path(__file__).parent.parent / "data" / "aeron_c"


def records(name: str) -> list[tuple[int, bytes]]:
    """The (msg type id, payload) of each record (length i32, type i32, payload, 8-aligned)."""
    data, found, at = (CAPTURES / name).read_bytes(), [], 0
    while at < len(data):
        length, type_id = struct.unpack_from("<ii", data, at)
        found.append((type_id, data[at + 8 : at + length]))
        at += (length + 7) & ~7
    return found


def _type_ids(value: int | bytes) -> str:
    return hex(value) if isinstance(value, int) else "payload"


C_COMMANDS = records("control_commands.bin")
C_RESPONSES = records("control_responses.bin")


@pytest.mark.parametrize(("type_id", "data"), C_COMMANDS, ids=_type_ids)
def test_a_c_clients_command_decodes_and_encodes_to_its_bytes(type_id, data):
    assert p.encode(p.decode_command(type_id, data)) == (type_id, data)


@pytest.mark.parametrize(("type_id", "data"), C_RESPONSES, ids=_type_ids)
def test_a_c_drivers_response_decodes_and_encodes_to_its_bytes(type_id, data):
    assert p.encode(p.decode_response(type_id, data)) == (type_id, data)


def test_the_captures_hold_every_message_but_the_keepalive():
    """The C client sends no CLIENT_KEEPALIVE: it keeps its heartbeat counter instead."""
    commands = {type_id for type_id, _ in C_COMMANDS}
    assert commands == set(range(0x01, 0x13)) - {p.CLIENT_KEEPALIVE}
    # ON_PUBLICATION_ERROR needs an error frame or a rejected image: not captured.
    assert {type_id for type_id, _ in C_RESPONSES} == RESPONSE_TYPE_IDS - {p.ON_PUBLICATION_ERROR}


def test_the_c_messages_carry_what_the_capture_did():
    commands = [p.decode_command(*record) for record in C_COMMANDS]
    assert p.AddCounter(5, 1, 1001, b"\x01\x02\x03\x04\x05", "captured counter") in commands
    assert p.TerminateDriver(22, 21, b"token") in commands
    assert p.ClientClose(1) in commands
    assert p.RemovePublication(14, 1, 2) in commands
    assert p.AddRcvDestination(10, 1, 9, "aeron:udp?endpoint=localhost:24327") in commands
    # The C client leaves the subscription's registration correlation id 0.
    assert p.AddSubscription(4, 1, "aeron:ipc", 1001, registration_correlation_id=0) in commands
    responses = [p.decode_response(*record) for record in C_RESPONSES]
    assert p.ImageUnavailable(2, 4, 1001, "aeron:ipc") in responses
    assert p.UnavailableCounter(5, 58) in responses
    assert p.ClientTimeout(19) in responses
    error = next(r for r in responses if isinstance(r, p.ErrorResponse))
    assert (error.correlation_id, error.code) == (12, p.INVALID_CHANNEL)
    assert "aeron:bogus" in error.message
    image = next(r for r in responses if isinstance(r, p.ImageReady))
    assert_the_commands_of_1_53(commands, responses)
    assert (image.correlation_id, image.subscription_registration_id) == (2, 4)
    assert (image.source_identity, image.log_file.endswith("/publications/2.logbuffer")) == (
        "aeron:ipc",
        True,
    )


def assert_the_commands_of_1_53(commands: list, responses: list) -> None:
    """The third client's (capture_control.commands_of_1_53)."""
    static = p.AddStaticCounter(24, 23, 777, 1006, b"\x01\x02\x03\x04\x05", "captured counter")
    assert static in commands
    # A second add of that type and registration id: the first's counter.
    (first, second) = [r for r in responses if isinstance(r, p.StaticCounter)]
    assert (first.correlation_id, second.correlation_id) == (24, 25)
    assert first.counter_id == second.counter_id
    # Where a client owns the counter (ADD_COUNTER 26): GENERIC_ERROR.
    assert p.AddStaticCounter(27, 23, 26, 1007, static.key, static.label) in commands
    refused = next(r for r in responses if getattr(r, "correlation_id", None) == 27)
    assert refused.code == p.GENERIC_ERROR and "non-static counter exists" in refused.message
    # The next session id is the next of the driver's sequence, which publications take too.
    assert p.GetNextAvailableSessionId(28, 23, 1001) in commands
    session = next(r for r in responses if isinstance(r, p.NextAvailableSessionId))
    after = next(r for r in responses if isinstance(r, p.PublicationReady) and r.stream_id == 1008)
    assert after.session_id == session.next_session_id + 1
    # The C client (1.53.0-SNAPSHOT) puts the publication's registration id where the
    # destination's goes; the C driver removes nothing then and answers success.
    assert p.RemoveDestinationById(31, 23, 29, 29) in commands
    assert p.OperationSuccess(31) in responses
    # The C client's REJECT_IMAGE carries neither client id nor correlation id (0, 0); a reason
    # over 1023 bytes is refused with GENERIC_ERROR.
    assert p.RejectImage(0, 0, 32, 0, "x" * 1100) in commands
    rejected = next(
        r for r in responses if isinstance(r, p.ErrorResponse) and r.correlation_id == 0
    )
    assert rejected.code == p.GENERIC_ERROR
