"""SETUP, Status Message, NAK and RTTM codecs and the datagram walker (`iter_frames`), against
frames captured from the reference Aeron 1.15.1 drivers (tests/data/wire-vectors, copied from
../shared/wire-vectors; index.json documents every field) and by property tests.

DATA/PAD/heartbeat header decoding is covered by test_wire_frames.py; here those vectors only
appear as datagrams for the walker and as seeds for the fuzzing.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from aeronio.errors import AeronError
from aeronio.protocol.frames import (
    CURRENT_VERSION,
    FRAME_ALIGNMENT,
    HDR_TYPE_DATA,
    HDR_TYPE_ERR,
    HDR_TYPE_EXT,
    HDR_TYPE_NAK,
    HDR_TYPE_PAD,
    HDR_TYPE_RTTM,
    HDR_TYPE_SETUP,
    HDR_TYPE_SM,
    RTTM_REPLY_FLAG,
    SM_SETUP_FLAG,
    DataHeader,
    ErrorFrame,
    FrameRef,
    MalformedFrameError,
    NakFrame,
    RttmFrame,
    SetupFrame,
    StatusMessage,
    data_header,
    decode_frame,
    error_frame,
    iter_frames,
    nak_frame,
    parse_datagram,
    rttm_frame,
    setup_frame,
    status_message,
)
from tests.support.wire import (
    DATA_HEADER_DTYPE,
    NAK_HEADER_DTYPE,
    RTTM_HEADER_DTYPE,
    SETUP_HEADER_DTYPE,
    STATUS_MESSAGE_DTYPE,
)

VECTORS = Path(__file__).parents[1] / "data" / "wire-vectors"
INDEX = {v["file"]: v for v in json.loads((VECTORS / "index.json").read_text())}


def vector(name: str) -> bytes:
    return (VECTORS / name).read_bytes()


def _files(type_code: int) -> list[str]:
    return sorted(
        f
        for f, v in INDEX.items()
        if isinstance(v["decoded"], dict) and v["decoded"]["type"] == type_code
    )


SETUP_FILES = _files(HDR_TYPE_SETUP)
SM_FILES = _files(HDR_TYPE_SM)
NAK_FILES = _files(HDR_TYPE_NAK)
RTTM_FILES = _files(HDR_TYPE_RTTM)
DATAGRAM_FILES = sorted(f for f, v in INDEX.items() if isinstance(v["decoded"], list))
ALL_BIN_FILES = sorted(p.name for p in VECTORS.glob("*.bin"))

# index.json names the RTTM timestamps with a unit suffix.
INDEX_FIELD_NAMES = {"echo_timestamp": "echo_timestamp_ns", "reception_delta": "reception_delta_ns"}

CODECS = {
    HDR_TYPE_SETUP: (SetupFrame, SETUP_HEADER_DTYPE, 40),
    HDR_TYPE_SM: (StatusMessage, STATUS_MESSAGE_DTYPE, 36),
    HDR_TYPE_NAK: (NakFrame, NAK_HEADER_DTYPE, 28),
    HDR_TYPE_RTTM: (RttmFrame, RTTM_HEADER_DTYPE, 40),
}


def documented(name: str, codec) -> dict:
    decoded = INDEX[name]["decoded"]
    fields = {k: decoded[INDEX_FIELD_NAMES.get(k, k)] for k in codec._fields if k != "feedback"}
    if codec is StatusMessage:
        fields["feedback"] = b""  # the reference sends no application-specific feedback
    return fields


def test_vectors_are_present():
    assert len(SETUP_FILES) == 3 and len(SM_FILES) == 5
    assert len(NAK_FILES) == 2 and len(RTTM_FILES) == 2 and len(DATAGRAM_FILES) == 4
    for name in [*SETUP_FILES, *SM_FILES, *NAK_FILES, *RTTM_FILES, *DATAGRAM_FILES]:
        assert len(vector(name)) == INDEX[name]["length"]


# --- captured control frames: decode and encode ------------------------------------------------


@pytest.mark.parametrize("name", SETUP_FILES + SM_FILES + NAK_FILES + RTTM_FILES)
def test_decode_matches_documented_fields(name):
    raw = vector(name)
    type_code = INDEX[name]["decoded"]["type"]
    codec, dtype, header_length = CODECS[type_code]
    frame = codec.decode(raw)
    assert type(frame) is codec
    assert frame._asdict() == documented(name, codec)
    assert decode_frame(raw) == frame
    assert len(raw) == header_length == dtype.itemsize
    array = np.frombuffer(raw, dtype=dtype)
    assert {k: int(array[k][0]) for k in dtype.names} == {
        k: v for k, v in documented(name, codec).items() if k != "feedback"
    }


@pytest.mark.parametrize("name", SETUP_FILES + SM_FILES + NAK_FILES + RTTM_FILES)
def test_encode_documented_fields_is_byte_identical(name):
    codec = CODECS[INDEX[name]["decoded"]["type"]][0]
    assert codec(**documented(name, codec)).encode() == vector(name)


@pytest.mark.parametrize("name", SETUP_FILES)
def test_setup_constructor_is_byte_identical(name):
    d = documented(name, SetupFrame)
    frame = setup_frame(
        session_id=d["session_id"],
        stream_id=d["stream_id"],
        initial_term_id=d["initial_term_id"],
        active_term_id=d["active_term_id"],
        term_offset=d["term_offset"],
        term_length=d["term_length"],
        mtu=d["mtu"],
    )
    assert frame.encode() == vector(name)


@pytest.mark.parametrize("name", SM_FILES)
def test_status_message_constructor_is_byte_identical(name):
    d = documented(name, StatusMessage)
    frame = status_message(
        session_id=d["session_id"],
        stream_id=d["stream_id"],
        consumption_term_id=d["consumption_term_id"],
        consumption_term_offset=d["consumption_term_offset"],
        receiver_window=d["receiver_window"],
        receiver_id=d["receiver_id"],
        flags=d["flags"],
    )
    assert frame.encode() == vector(name)
    assert frame.is_setup_eliciting == (INDEX[name]["decoded"]["kind"] == "SM-setup-eliciting")


@pytest.mark.parametrize("name", NAK_FILES)
def test_nak_constructor_is_byte_identical(name):
    d = documented(name, NakFrame)
    frame = nak_frame(
        session_id=d["session_id"],
        stream_id=d["stream_id"],
        term_id=d["term_id"],
        term_offset=d["term_offset"],
        length=d["length"],
    )
    assert frame.encode() == vector(name)


@pytest.mark.parametrize("name", RTTM_FILES)
def test_rttm_constructor_is_byte_identical(name):
    d = documented(name, RttmFrame)
    frame = rttm_frame(
        session_id=d["session_id"],
        stream_id=d["stream_id"],
        echo_timestamp=d["echo_timestamp"],
        reception_delta=d["reception_delta"],
        receiver_id=d["receiver_id"],
        flags=d["flags"],
    )
    assert frame.encode() == vector(name)
    assert frame.is_reply_requested == INDEX[name]["decoded"]["kind"].startswith("RTTM-request")


def test_flag_constants_match_the_wire():
    assert SM_SETUP_FLAG == SM_SETUP_FLAG == vector("sm-4.bin")[5] == 0x80
    assert RTTM_REPLY_FLAG == vector("rttm-1.bin")[5] == 0x80
    assert vector("rttm-2.bin")[5] == 0


def test_status_message_feedback_round_trips():
    sm = status_message(
        session_id=1,
        stream_id=2,
        consumption_term_id=3,
        consumption_term_offset=64,
        receiver_window=4096,
        receiver_id=-5,
        feedback=b"app feedback",
    )
    assert sm.frame_length == 36 + 12
    raw = sm.encode()
    assert len(raw) == 48 and raw[36:] == b"app feedback"
    assert StatusMessage.decode(raw) == sm
    assert StatusMessage.decode(b"\x00" * 8 + raw, 8) == sm
    assert list(iter_frames(raw)) == [(0, HDR_TYPE_SM, 48)]
    with pytest.raises(MalformedFrameError, match="runs past the end"):
        StatusMessage.decode(raw[:40])


@pytest.mark.parametrize(
    "codec", [DataHeader, SetupFrame, StatusMessage, NakFrame, RttmFrame], ids=lambda c: c.__name__
)
def test_decode_of_a_short_buffer_raises_malformed(codec):
    with pytest.raises(MalformedFrameError, match="header needs"):
        codec.decode(bytes(27))
    with pytest.raises(MalformedFrameError):
        codec.decode(bytes(64), 60)
    with pytest.raises(MalformedFrameError):
        codec.decode(bytes(64), -1)


def test_an_err_frame_is_aerons_bytes_and_back():
    """Aeron 1.53's ErrorFlyweight: session, stream, receiver id, group tag, error code, the
    message's length at 36, the message from 40 (the frame length counts it)."""
    frame = ErrorFrame.build(
        session_id=-7, stream_id=10, receiver_id=99, group_tag=5, error_code=13, error_length=3,
        error_message=b"bad",
    )  # fmt: skip
    data = struct.pack("<iBBHiiqqii", 43, 0, 0, HDR_TYPE_ERR, -7, 10, 99, 5, 13, 3) + b"bad"
    assert frame.encode() == data
    assert ErrorFrame.decode(data) == frame
    assert list(iter_frames(data)) == [FrameRef(0, HDR_TYPE_ERR, 43)]


def test_decode_frame_dispatches_on_type():
    assert type(decode_frame(vector("data-1.bin"))) is DataHeader
    assert type(decode_frame(vector("pad-1.bin"))) is DataHeader
    assert type(decode_frame(ERR)) is ErrorFrame
    ext = struct.pack("<iBBH", 8, 0, 0, HDR_TYPE_EXT)
    with pytest.raises(MalformedFrameError, match="no codec"):
        decode_frame(ext)
    with pytest.raises(MalformedFrameError):
        decode_frame(b"")


# --- captured datagrams: the walker -------------------------------------------------------------


@pytest.mark.parametrize("name", DATAGRAM_FILES)
def test_iter_frames_yields_the_documented_frames(name):
    raw = vector(name)
    expected = [
        (d["offset_in_datagram"], d["type"], d["frame_length"]) for d in INDEX[name]["decoded"]
    ]
    frames = list(iter_frames(raw))
    assert frames == expected
    assert all(type(f) is FrameRef for f in frames)
    assert parse_datagram(raw) == expected
    assert list(iter_frames(bytearray(raw))) == expected
    assert list(iter_frames(memoryview(raw))) == expected
    assert list(iter_frames(np.frombuffer(raw, dtype=np.uint8))) == expected
    # the frames end exactly at the datagram end: sum of aligned frame lengths (PAD: header only)
    last = INDEX[name]["decoded"][-1]
    assert last["offset_in_datagram"] + last["wire_bytes"] == len(raw)
    for ref, d in zip(frames, INDEX[name]["decoded"], strict=True):
        header = ref.decode(raw)
        assert header._asdict() == {k: d[k] for k in DataHeader._fields}
        assert ref.type_name == d["type_name"]


@pytest.mark.parametrize(
    "name", [f for f in ALL_BIN_FILES if f in INDEX and f not in DATAGRAM_FILES]
)
def test_iter_frames_on_single_frame_datagrams(name):
    decoded = INDEX[name]["decoded"]
    raw = vector(name)
    if decoded is None:  # udp-empty-1.bin
        assert raw == b""
        return
    assert list(iter_frames(raw)) == [(0, decoded["type"], decoded["frame_length"])]
    assert list(iter_frames(raw))[0].is_heartbeat == decoded["kind"].startswith("HEARTBEAT")


def test_zero_length_datagram_is_malformed():
    raw = vector("udp-empty-1.bin")
    assert raw == b"" and INDEX["udp-empty-1.bin"]["length"] == 0
    with pytest.raises(MalformedFrameError, match="zero-length datagram") as info:
        list(iter_frames(raw))
    assert isinstance(info.value, AeronError)
    assert info.value.offset == 0 and info.value.frame_type is None
    [error] = parse_datagram(raw)
    assert isinstance(error, MalformedFrameError)


def test_frames_before_a_malformed_one_are_yielded():
    raw = vector("datagram-1.bin") + b"\x07" * 5
    walker = iter_frames(raw)
    assert [next(walker) for _ in range(3)] == [(0, 1, 39), (64, 1, 39), (128, 1, 39)]
    with pytest.raises(MalformedFrameError, match="trailing data of 5 bytes") as info:
        next(walker)
    assert info.value.offset == 192
    result = parse_datagram(raw)
    assert result[:3] == [(0, 1, 39), (64, 1, 39), (128, 1, 39)]
    assert isinstance(result[3], MalformedFrameError) and len(result) == 4


def test_last_frame_may_lack_its_alignment_padding():
    raw = vector("datagram-1.bin")[: 128 + 39]
    assert list(iter_frames(raw)) == [(0, 1, 39), (64, 1, 39), (128, 1, 39)]


def test_pad_frame_length_may_cover_more_than_the_datagram():
    raw = vector("pad-1.bin")
    assert len(raw) == 32 and DataHeader.decode(raw).frame_length == 640
    assert list(iter_frames(raw)) == [(0, HDR_TYPE_PAD, 640)]
    assert list(iter_frames(vector("data-1.bin") + raw)) == [(0, 1, 46), (64, 0, 640)]


# --- malformed frames: each check names what is wrong -------------------------------------------


def _setup(**fields) -> bytes:
    base = dict(
        session_id=7,
        stream_id=1001,
        initial_term_id=100,
        term_length=65536,
        mtu=1408,
        term_offset=0,
    )
    base.update(fields)
    return setup_frame(**base).encode()


def _with(raw: bytes, fmt: str, offset: int, value: int) -> bytes:
    buffer = bytearray(raw)
    struct.pack_into(fmt, buffer, offset, value)
    return bytes(buffer)


SM = vector("sm-1.bin")
NAK = vector("nak-1.bin")
RTTM = vector("rttm-1.bin")
DATA = vector("data-1.bin")
PAD = vector("pad-1.bin")
ERR = error_frame(
    session_id=-7, stream_id=10, receiver_id=99, error_code=13, error_length=3, error_message=b"bad"
).encode()

MALFORMED = {
    "short datagram": (SM[:7], "datagram of 7 bytes is shorter than the 8-byte frame header"),
    "one byte": (b"\x00", "datagram of 1 bytes"),
    "unknown type": (_with(SM, "<H", 6, 0x0042), "unknown frame type 0x0042"),
    "err truncated": (ERR[:39], "ERR header needs 40 bytes, only 39 left"),
    "err frame_length 39": (_with(ERR, "<i", 0, 39), "ERR frame_length 39 is shorter"),
    "err beyond datagram": (_with(ERR, "<i", 0, 44), "ERR frame_length 44 is longer than"),
    "err message past its frame": (_with(ERR, "<i", 36, 4), "ERR error_length 4 is not in"),
    "err message negative": (_with(ERR, "<i", 36, -1), "ERR error_length -1 is not in"),
    "err message over 1023": (
        _with(_with(ERR + bytes(1021), "<i", 0, 1064), "<i", 36, 1024),
        "ERR error_length 1024 is not in 0..1023",
    ),
    "EXT type": (_with(SM, "<H", 6, HDR_TYPE_EXT), "unknown frame type EXT"),
    "version 1": (_with(SM, "<B", 4, 1), "version 1, expected 0"),
    "data version": (_with(DATA, "<B", 4, 255), "version 255"),
    "data header truncated": (DATA[:31], "DATA header needs 32 bytes, only 31 left"),
    "data frame_length 31": (_with(DATA, "<i", 0, 31), "DATA frame_length 31 is shorter"),
    "data frame_length -1": (_with(DATA, "<i", 0, -1), "DATA frame_length -1 is shorter"),
    "data beyond datagram": (_with(DATA, "<i", 0, 65), "DATA frame_length 65 is longer than"),
    "data truncated": (DATA[:40], "DATA frame_length 46 is longer than the 40 bytes"),
    "data term_offset unaligned": (_with(DATA, "<i", 8, 33), "term_offset 33"),
    "data term_offset negative": (_with(DATA, "<i", 8, -32), "term_offset -32"),
    "pad frame_length 0": (_with(PAD, "<i", 0, 0), "PAD frame_length 0"),
    "pad frame_length unaligned": (_with(PAD, "<i", 0, 48), "PAD frame_length 48"),
    "setup frame_length 39": (_with(_setup(), "<i", 0, 39), "SETUP frame_length 39 is shorter"),
    "setup frame_length 44": (_with(_setup(), "<i", 0, 44), "SETUP frame_length 44 is longer"),
    "setup truncated": (_setup()[:39], "SETUP header needs 40 bytes, only 39"),
    "setup term_length 3": (_setup(term_length=3), "SETUP term_length 3 must be a power of two"),
    "setup term_length 32K": (_setup(term_length=32768), "term_length 32768"),
    "setup term_length 2G": (_setup(term_length=-(2**31)), "term_length -2147483648"),
    "setup term_length 96K": (_setup(term_length=98304), "term_length 98304"),
    "setup mtu unaligned": (_setup(mtu=1400), "SETUP mtu 1400 must be a multiple of 32"),
    "setup mtu 32": (_setup(mtu=32), "mtu 32"),
    "setup mtu 65536": (_setup(mtu=65536), "mtu 65536"),
    "setup term_offset unaligned": (_setup(term_offset=40), "term_offset 40 is not a multiple"),
    "setup term_offset past term": (_setup(term_offset=65568), "term_offset 65568"),
    "setup term_offset negative": (_setup(term_offset=-32), "term_offset -32"),
    "sm frame_length 35": (_with(SM, "<i", 0, 35), "SM frame_length 35 is shorter than the 36"),
    "sm frame_length 28": (_with(SM, "<i", 0, 28), "SM frame_length 28"),
    "sm truncated": (SM[:35], "SM header needs 36 bytes, only 35"),
    "sm feedback missing": (_with(SM, "<i", 0, 40), "SM frame_length 40 is longer than the 36"),
    "nak frame_length 32": (_with(NAK + bytes(4), "<i", 0, 32), "NAK frame_length 32, expected 28"),
    "nak frame_length 27": (_with(NAK, "<i", 0, 27), "NAK frame_length 27"),
    "nak length 0": (_with(NAK, "<i", 24, 0), "NAK length 0 is not positive"),
    "nak length negative": (_with(NAK, "<i", 24, -256), "NAK length -256"),
    "nak term_offset unaligned": (_with(NAK, "<i", 20, 8), "NAK term_offset 8 is not a"),
    "nak term_offset negative": (_with(NAK, "<i", 20, -32), "NAK term_offset -32"),
    "nak truncated": (NAK[:27], "NAK header needs 28 bytes, only 27"),
    "rttm frame_length 39": (_with(RTTM, "<i", 0, 39), "RTTM frame_length 39 is shorter"),
    "rttm truncated": (RTTM[:39], "RTTM header needs 40 bytes"),
    "rttm beyond datagram": (_with(RTTM, "<i", 0, 48), "RTTM frame_length 48 is longer"),
    "zero-length": (b"", "zero-length datagram"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_frames_are_named(case):
    raw, message = MALFORMED[case]
    with pytest.raises(MalformedFrameError) as info:
        list(iter_frames(raw))
    assert message in str(info.value)
    assert message in info.value.reason or message.startswith("datagram")
    result = parse_datagram(raw)
    assert isinstance(result[-1], MalformedFrameError) and str(result[-1]) == str(info.value)


def test_setup_limits_that_are_valid():
    for term_length in (65536, 1 << 20, 1 << 30):
        for mtu in (64, 1408, 65504):
            for term_offset in (0, 32, term_length - 32, term_length):
                raw = _setup(term_length=term_length, mtu=mtu, term_offset=term_offset)
                assert list(iter_frames(raw)) == [(0, HDR_TYPE_SETUP, 40)]


def test_malformed_frame_error_fields():
    raw = vector("datagram-4.bin")
    bad = _with(raw, "<B", 64 + 4, 3)
    with pytest.raises(MalformedFrameError) as info:
        list(iter_frames(bad))
    assert info.value.offset == 64 and info.value.frame_type == HDR_TYPE_DATA
    assert str(info.value) == "malformed frame at offset 64: version 3, expected 0"
    assert isinstance(info.value, AeronError) and isinstance(info.value, ValueError)


# --- round trips over the full field ranges ----------------------------------------------------

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
u8 = st.integers(0, 255)
u16 = st.integers(0, 0xFFFF)


def _check_round_trip(frame, codec, dtype):
    raw = frame.encode()
    assert codec.decode(raw) == frame
    assert codec.decode(b"\xaa" * 13 + raw, 13) == frame
    array = np.frombuffer(raw[: dtype.itemsize], dtype=dtype)
    assert tuple(int(array[k][0]) for k in dtype.names) == tuple(frame)[: len(dtype.names)]


@given(st.builds(DataHeader, i32, u8, u8, u16, i32, i32, i32, i32, i64))
def test_data_header_round_trip(frame):

    _check_round_trip(frame, DataHeader, DATA_HEADER_DTYPE)


@given(st.builds(SetupFrame, i32, u8, u8, u16, i32, i32, i32, i32, i32, i32, i32, i32))
def test_setup_round_trip(frame):
    _check_round_trip(frame, SetupFrame, SETUP_HEADER_DTYPE)
    assert len(frame.encode()) == 40


@given(st.builds(NakFrame, i32, u8, u8, u16, i32, i32, i32, i32, i32))
def test_nak_round_trip(frame):
    _check_round_trip(frame, NakFrame, NAK_HEADER_DTYPE)
    assert len(frame.encode()) == 28


@given(st.builds(RttmFrame, i32, u8, u8, u16, i32, i32, i64, i64, i64))
def test_rttm_round_trip(frame):
    _check_round_trip(frame, RttmFrame, RTTM_HEADER_DTYPE)
    assert len(frame.encode()) == 40


@given(st.tuples(u8, u8, u16, i32, i32, i32, i32, i32, i64), st.binary(max_size=300))
def test_status_message_round_trip_with_feedback(fields, feedback):
    frame = StatusMessage(36 + len(feedback), *fields, feedback)
    _check_round_trip(frame, StatusMessage, STATUS_MESSAGE_DTYPE)
    assert len(frame.encode()) == frame.frame_length


@given(st.tuples(st.integers(-(2**31), 36), u8, u8, u16, i32, i32, i32, i32, i32, i64))
def test_status_message_round_trip_any_short_frame_length(fields):
    frame = StatusMessage(*fields)
    assert frame.feedback == b""
    _check_round_trip(frame, StatusMessage, STATUS_MESSAGE_DTYPE)


@given(i32, i32, i32, i32, i32, i64, u8, st.binary(max_size=64))
def test_status_message_constructor(session, stream, term_id, offset, window, rid, flags, fb):
    frame = status_message(
        session_id=session,
        stream_id=stream,
        consumption_term_id=term_id,
        consumption_term_offset=offset,
        receiver_window=window,
        receiver_id=rid,
        flags=flags,
        feedback=fb,
    )
    assert frame.version == CURRENT_VERSION and frame.type == HDR_TYPE_SM
    assert StatusMessage.decode(frame.encode()) == frame


@given(i32, i32, i32, i32, i64, u8)
def test_other_constructors(session, stream, term_id, offset, big, flags):
    frames = [
        setup_frame(
            session_id=session,
            stream_id=stream,
            initial_term_id=term_id,
            term_length=offset,
            mtu=offset,
            flags=flags,
        ),
        nak_frame(
            session_id=session, stream_id=stream, term_id=term_id, term_offset=offset, length=offset
        ),
        rttm_frame(
            session_id=session, stream_id=stream, echo_timestamp=big, receiver_id=big, flags=flags
        ),
        data_header(
            frame_length=offset,
            term_offset=offset,
            session_id=session,
            stream_id=stream,
            term_id=term_id,
        ),
    ]
    for frame in frames:
        assert frame.version == 0
        assert decode_frame(frame.encode()) == frame
    assert frames[0].active_term_id == term_id
    assert (frames[0].frame_length, frames[1].frame_length, frames[2].frame_length) == (40, 28, 40)


# --- fuzzing the walker -------------------------------------------------------------------------


def check_walk(datagram: bytes) -> list:
    """The walker's contract on any bytes: only MalformedFrameError, bounded, offsets inside the
    datagram, increasing and 32-aligned, and every yielded frame decodes with its codec."""
    frames = []
    try:
        for count, ref in enumerate(iter_frames(datagram)):
            assert count <= len(datagram) // FRAME_ALIGNMENT, "more frames than 32-byte slots"
            frames.append(ref)
    except MalformedFrameError as error:
        assert 0 <= error.offset < max(len(datagram), 1)
        assert not frames or error.offset > frames[-1].offset
        assert error.reason
    offsets = [f.offset for f in frames]
    assert offsets == sorted(set(offsets))
    for ref in frames:
        assert 0 <= ref.offset < len(datagram) and ref.offset % FRAME_ALIGNMENT == 0
        decoded = ref.decode(datagram)
        assert (decoded.type, decoded.frame_length, decoded.version) == (
            ref.type,
            ref.frame_length,
            0,
        )
        if ref.type not in (HDR_TYPE_PAD,) and ref.frame_length:
            assert ref.offset + ref.frame_length <= len(datagram)
    result = parse_datagram(datagram)
    assert result[: len(frames)] == frames
    assert len(result) in (len(frames), len(frames) + 1)
    return frames


FUZZ = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.binary(max_size=2048))
@example(b"")
@example(b"\x00" * 8)
@example(b"\x00" * 32)
@example(b"\x00" * 4096)
def test_walker_on_arbitrary_bytes(datagram):
    check_walk(datagram)


TYPES = st.sampled_from(
    [HDR_TYPE_PAD, HDR_TYPE_DATA, HDR_TYPE_NAK, HDR_TYPE_SM, HDR_TYPE_SETUP, HDR_TYPE_RTTM]
)
INTERESTING_LENGTHS = st.one_of(
    st.sampled_from([0, 1, 7, 8, 27, 28, 29, 31, 32, 33, 35, 36, 39, 40, 41, 64, 640, 1408]),
    i32,
)


@st.composite
def plausible_frames(draw) -> bytes:
    """A frame with version 0 and a real type, so the walker gets past the common header."""
    frame_type = draw(TYPES)
    frame_length = draw(INTERESTING_LENGTHS)
    body = draw(st.binary(max_size=96))
    frame = struct.pack("<iBBH", frame_length, 0, draw(u8), frame_type) + body
    if draw(st.booleans()):  # pad to the 32-byte alignment like the reference
        frame += bytes(-len(frame) % FRAME_ALIGNMENT)
    return frame


@pytest.mark.slow
@FUZZ
@given(st.lists(plausible_frames(), min_size=1, max_size=6).map(b"".join))
def test_walker_on_plausible_frames(datagram):
    check_walk(datagram)


@FUZZ
@given(
    st.builds(
        lambda *f: setup_frame(
            session_id=f[0],
            stream_id=f[1],
            initial_term_id=f[2],
            term_length=f[3],
            mtu=f[4],
            term_offset=f[5],
        ).encode(),
        i32,
        i32,
        i32,
        st.one_of(i32, st.sampled_from([1 << n for n in range(31)])),
        st.one_of(i32, st.integers(0, 2100).map(lambda n: n * 32)),
        st.one_of(i32, st.integers(-4, 1 << 15).map(lambda n: n * 32)),
    )
)
def test_walker_on_setup_fields(datagram):
    frames = check_walk(datagram)
    if frames:
        setup = SetupFrame.decode(datagram)
        assert setup.term_length & (setup.term_length - 1) == 0
        assert 1 << 16 <= setup.term_length <= 1 << 30
        assert 64 <= setup.mtu <= 65504 and setup.mtu % 32 == 0
        assert 0 <= setup.term_offset <= setup.term_length and setup.term_offset % 32 == 0


REAL = [vector(f) for f in ALL_BIN_FILES]


@st.composite
def mutated_vectors(draw) -> bytes:
    raw = bytearray(draw(st.sampled_from(REAL)))
    if draw(st.booleans()):
        raw += draw(st.sampled_from(REAL))  # two datagrams glued together
    for _ in range(draw(st.integers(1, 4))):
        mutation = draw(
            st.sampled_from(["truncate", "flip", "frame_length", "type", "version", "word", "tail"])
        )
        # the start of some frame (or any 32-byte slot) of the datagram, where headers sit
        slot = draw(st.integers(0, max(len(raw) - 1, 0) // FRAME_ALIGNMENT)) * FRAME_ALIGNMENT
        if mutation == "truncate":
            raw = raw[: draw(st.integers(0, len(raw)))]
        elif mutation == "flip" and raw:
            i = draw(st.integers(0, len(raw) - 1))
            raw[i] ^= draw(st.integers(1, 255))
        elif mutation == "frame_length" and len(raw) >= slot + 4:
            struct.pack_into("<i", raw, slot, draw(INTERESTING_LENGTHS))
        elif mutation == "type" and len(raw) >= slot + 8:
            struct.pack_into("<H", raw, slot + 6, draw(st.one_of(TYPES, u16)))
        elif mutation == "version" and len(raw) >= slot + 8:
            raw[slot + 4] = draw(u8)
        elif mutation == "word" and len(raw) >= 4:
            i = draw(st.integers(0, len(raw) - 4))
            struct.pack_into("<i", raw, i, draw(INTERESTING_LENGTHS))
        elif mutation == "tail":
            raw += draw(st.binary(max_size=64))
    return bytes(raw)


@FUZZ
@given(mutated_vectors())
def test_walker_on_mutated_real_vectors(datagram):
    check_walk(datagram)


@pytest.mark.parametrize("name", ALL_BIN_FILES)
def test_walker_on_every_truncation_and_byte_flip_of_the_vectors(name):
    raw = vector(name)
    for n in range(len(raw) + 1):
        check_walk(raw[:n])
    if len(raw) <= 256:
        for i in range(len(raw)):
            for value in (0x00, 0xFF, raw[i] ^ 0x80, raw[i] ^ 0x01):
                mutated = bytearray(raw)
                mutated[i] = value
                check_walk(bytes(mutated))
