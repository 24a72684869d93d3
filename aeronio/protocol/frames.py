"""Frame layouts (little-endian) and codecs for every Aeron 1.15.1 UDP frame type.

Each frame type is a NamedTuple with `encode() -> bytes` and a `decode(buffer, offset=0)`
classmethod, plus a numpy structured dtype for its fixed header:

=========  ====  =================  =======================  =========================
type       code  codec              header dtype             constructor
=========  ====  =================  =======================  =========================
PAD/DATA   0, 1  `DataHeader`       `DATA_HEADER_DTYPE`      `data_header(...)`
NAK        2     `NakFrame`         `NAK_HEADER_DTYPE`       `nak_frame(...)`
SM         3     `StatusMessage`    `STATUS_MESSAGE_DTYPE`   `status_message(...)`
SETUP      5     `SetupFrame`       `SETUP_HEADER_DTYPE`     `setup_frame(...)`
RTTM       6     `RttmFrame`        `RTTM_HEADER_DTYPE`      `rttm_frame(...)`
=========  ====  =================  =======================  =========================

The 32-byte DATA header is shared by PAD frames and heartbeats (a DATA header with frame length
0). The codecs are faithful: they encode and decode any field values, valid or not, and only
raise `MalformedFrameError` when the buffer is too short. Validation of what arrives from the
network is done by `iter_frames` (or `parse_datagram`), which walks a UDP payload frame by frame.

How frames sit in a datagram (as captured from the reference 1.15.1 drivers, see
tests/data/wire-vectors): every frame starts on a 32-byte boundary of the datagram and is
zero-padded to the next one; `frame_length` is the unaligned length. A heartbeat (DATA, frame
length 0) takes 32 bytes, a PAD carries only its 32-byte header although its frame length
covers the rest of the term. SM, NAK, SETUP and RTTM are sent one per datagram.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from aeronio.errors import AeronError

HDR_TYPE_PAD = 0x00
HDR_TYPE_DATA = 0x01
HDR_TYPE_NAK = 0x02
HDR_TYPE_SM = 0x03
HDR_TYPE_ERR = 0x04
HDR_TYPE_SETUP = 0x05
HDR_TYPE_RTTM = 0x06
HDR_TYPE_EXT = 0xFFFF

FRAME_TYPE_NAMES = {
    HDR_TYPE_PAD: "PAD",
    HDR_TYPE_DATA: "DATA",
    HDR_TYPE_NAK: "NAK",
    HDR_TYPE_SM: "SM",
    HDR_TYPE_ERR: "ERR",
    HDR_TYPE_SETUP: "SETUP",
    HDR_TYPE_RTTM: "RTTM",
    HDR_TYPE_EXT: "EXT",
}

# DATA / PAD flags
BEGIN_FLAG = 0x80
END_FLAG = 0x40
EOS_FLAG = 0x20
UNFRAGMENTED = BEGIN_FLAG | END_FLAG

# Status Message flag: the receiver asks the sender for a SETUP (setup-eliciting SM).
SM_SETUP_FLAG = 0x80
SEND_SETUP_FLAG = SM_SETUP_FLAG
# RTT Measurement flag: a request, the other side should send a reply (which has flags 0).
RTTM_REPLY_FLAG = 0x80

FRAME_HEADER_LENGTH = 8  # frame_length i32, version u8, flags u8, type u16
DATA_HEADER_LENGTH = 32
SETUP_HEADER_LENGTH = 40
SM_HEADER_LENGTH = 36  # without application-specific feedback
NAK_HEADER_LENGTH = 28
RTTM_HEADER_LENGTH = 40
FRAME_ALIGNMENT = 32
CURRENT_VERSION = 0

# Limits a SETUP is checked against (those of the reference media driver).
TERM_MIN_LENGTH = 64 * 1024
TERM_MAX_LENGTH = 1024 * 1024 * 1024
MTU_MIN_LENGTH = 64
MTU_MAX_LENGTH = 65504  # max UDP payload, a multiple of 32

_FRAME_HEADER = struct.Struct("<iBBH")
_DATA_HEADER = struct.Struct("<iBBHiiiiq")
_SETUP_HEADER = struct.Struct("<iBBHiiiiiiii")
_SM_HEADER = struct.Struct("<iBBHiiiiiq")
_NAK_HEADER = struct.Struct("<iBBHiiiii")
_RTTM_HEADER = struct.Struct("<iBBHiiqqq")

_COMMON_FIELDS = [
    ("frame_length", "<i4"),
    ("version", "u1"),
    ("flags", "u1"),
    ("type", "<u2"),
]

DATA_HEADER_DTYPE = np.dtype(
    [
        *_COMMON_FIELDS,
        ("term_offset", "<i4"),
        ("session_id", "<i4"),
        ("stream_id", "<i4"),
        ("term_id", "<i4"),
        ("reserved_value", "<i8"),
    ]
)
SETUP_HEADER_DTYPE = np.dtype(
    [
        *_COMMON_FIELDS,
        ("term_offset", "<i4"),
        ("session_id", "<i4"),
        ("stream_id", "<i4"),
        ("initial_term_id", "<i4"),
        ("active_term_id", "<i4"),
        ("term_length", "<i4"),
        ("mtu", "<i4"),
        ("ttl", "<i4"),
    ]
)
# The fixed 36 bytes of a Status Message; application-specific feedback (if any) follows.
STATUS_MESSAGE_DTYPE = np.dtype(
    [
        *_COMMON_FIELDS,
        ("session_id", "<i4"),
        ("stream_id", "<i4"),
        ("consumption_term_id", "<i4"),
        ("consumption_term_offset", "<i4"),
        ("receiver_window", "<i4"),
        ("receiver_id", "<i8"),
    ]
)
NAK_HEADER_DTYPE = np.dtype(
    [
        *_COMMON_FIELDS,
        ("session_id", "<i4"),
        ("stream_id", "<i4"),
        ("term_id", "<i4"),
        ("term_offset", "<i4"),
        ("length", "<i4"),
    ]
)
RTTM_HEADER_DTYPE = np.dtype(
    [
        *_COMMON_FIELDS,
        ("session_id", "<i4"),
        ("stream_id", "<i4"),
        ("echo_timestamp", "<i8"),
        ("reception_delta", "<i8"),
        ("receiver_id", "<i8"),
    ]
)


class MalformedFrameError(AeronError, ValueError):
    """A frame (or datagram) that is not a valid Aeron frame; `reason` says what is wrong.

    `offset` is where the offending frame starts in the datagram, `frame_type` its type code
    (None when the common header could not be read).
    """

    def __init__(self, reason: str, *, offset: int = 0, frame_type: int | None = None):
        super().__init__(f"malformed frame at offset {offset}: {reason}")
        self.reason = reason
        self.offset = offset
        self.frame_type = frame_type


def _type_name(frame_type: int) -> str:
    name = FRAME_TYPE_NAMES.get(frame_type)
    return f"{name} (0x{frame_type:04x})" if name else f"0x{frame_type:04x}"


def _require(buffer, offset: int, length: int, what: str) -> None:
    if offset < 0:
        raise MalformedFrameError(f"negative offset {offset}", offset=offset)
    available = len(buffer) - offset
    if available < length:
        raise MalformedFrameError(
            f"a {what} header needs {length} bytes, got {max(available, 0)}", offset=offset
        )


class DataHeader(NamedTuple):
    """The fields of a DATA or PAD frame header (a heartbeat is a DATA header, frame length 0)."""

    frame_length: int
    version: int
    flags: int
    type: int
    term_offset: int
    session_id: int
    stream_id: int
    term_id: int
    reserved_value: int

    def encode(self) -> bytes:
        return _DATA_HEADER.pack(*self)

    @classmethod
    def decode(cls, buffer: bytes | bytearray | memoryview, offset: int = 0) -> DataHeader:
        _require(buffer, offset, DATA_HEADER_LENGTH, "DATA")
        return cls(*_DATA_HEADER.unpack_from(buffer, offset))


class SetupFrame(NamedTuple):
    """A SETUP frame (40 bytes): sender -> receiver, announces a stream and its term layout."""

    frame_length: int
    version: int
    flags: int
    type: int
    term_offset: int
    session_id: int
    stream_id: int
    initial_term_id: int
    active_term_id: int
    term_length: int
    mtu: int
    ttl: int

    def encode(self) -> bytes:
        return _SETUP_HEADER.pack(*self)

    @classmethod
    def decode(cls, buffer: bytes | bytearray | memoryview, offset: int = 0) -> SetupFrame:
        _require(buffer, offset, SETUP_HEADER_LENGTH, "SETUP")
        return cls(*_SETUP_HEADER.unpack_from(buffer, offset))


class StatusMessage(NamedTuple):
    """A Status Message: 36 bytes plus `frame_length - 36` bytes of application feedback.

    `encode` writes the fields as given (it does not recompute `frame_length`); `decode` reads
    the feedback bytes that `frame_length` announces past the 36-byte header.
    """

    frame_length: int
    version: int
    flags: int
    type: int
    session_id: int
    stream_id: int
    consumption_term_id: int
    consumption_term_offset: int
    receiver_window: int
    receiver_id: int
    feedback: bytes = b""

    @property
    def is_setup_eliciting(self) -> bool:
        return bool(self.flags & SM_SETUP_FLAG)

    def encode(self) -> bytes:
        return _SM_HEADER.pack(*self[:-1]) + bytes(self.feedback)

    @classmethod
    def decode(cls, buffer: bytes | bytearray | memoryview, offset: int = 0) -> StatusMessage:
        _require(buffer, offset, SM_HEADER_LENGTH, "SM")
        fields = _SM_HEADER.unpack_from(buffer, offset)
        frame_length = fields[0]
        feedback = b""
        if frame_length > SM_HEADER_LENGTH:
            if len(buffer) - offset < frame_length:
                raise MalformedFrameError(
                    f"SM frame_length {frame_length} runs past the end of the buffer "
                    f"({len(buffer) - offset} bytes)",
                    offset=offset,
                    frame_type=HDR_TYPE_SM,
                )
            feedback = bytes(buffer[offset + SM_HEADER_LENGTH : offset + frame_length])
        return cls(*fields, feedback)


class NakFrame(NamedTuple):
    """A NAK (28 bytes): receiver -> sender, asks for `length` bytes from term_id/term_offset."""

    frame_length: int
    version: int
    flags: int
    type: int
    session_id: int
    stream_id: int
    term_id: int
    term_offset: int
    length: int

    def encode(self) -> bytes:
        return _NAK_HEADER.pack(*self)

    @classmethod
    def decode(cls, buffer: bytes | bytearray | memoryview, offset: int = 0) -> NakFrame:
        _require(buffer, offset, NAK_HEADER_LENGTH, "NAK")
        return cls(*_NAK_HEADER.unpack_from(buffer, offset))


class RttmFrame(NamedTuple):
    """An RTT Measurement (40 bytes); flags `RTTM_REPLY_FLAG` on a request, 0 on the reply."""

    frame_length: int
    version: int
    flags: int
    type: int
    session_id: int
    stream_id: int
    echo_timestamp: int
    reception_delta: int
    receiver_id: int

    @property
    def is_reply_requested(self) -> bool:
        return bool(self.flags & RTTM_REPLY_FLAG)

    def encode(self) -> bytes:
        return _RTTM_HEADER.pack(*self)

    @classmethod
    def decode(cls, buffer: bytes | bytearray | memoryview, offset: int = 0) -> RttmFrame:
        _require(buffer, offset, RTTM_HEADER_LENGTH, "RTTM")
        return cls(*_RTTM_HEADER.unpack_from(buffer, offset))


Frame = DataHeader | SetupFrame | StatusMessage | NakFrame | RttmFrame

_CODECS: dict[int, type[Frame]] = {
    HDR_TYPE_PAD: DataHeader,
    HDR_TYPE_DATA: DataHeader,
    HDR_TYPE_NAK: NakFrame,
    HDR_TYPE_SM: StatusMessage,
    HDR_TYPE_SETUP: SetupFrame,
    HDR_TYPE_RTTM: RttmFrame,
}
_HEADER_LENGTHS = {
    HDR_TYPE_PAD: DATA_HEADER_LENGTH,
    HDR_TYPE_DATA: DATA_HEADER_LENGTH,
    HDR_TYPE_NAK: NAK_HEADER_LENGTH,
    HDR_TYPE_SM: SM_HEADER_LENGTH,
    HDR_TYPE_SETUP: SETUP_HEADER_LENGTH,
    HDR_TYPE_RTTM: RTTM_HEADER_LENGTH,
}


def data_header(
    *,
    frame_length: int,
    term_offset: int,
    session_id: int,
    stream_id: int,
    term_id: int,
    flags: int = UNFRAGMENTED,
    type: int = HDR_TYPE_DATA,
    reserved_value: int = 0,
) -> DataHeader:
    """A DATA (or PAD, with `type=HDR_TYPE_PAD`) header with version 0."""
    return DataHeader(
        frame_length,
        CURRENT_VERSION,
        flags,
        type,
        term_offset,
        session_id,
        stream_id,
        term_id,
        reserved_value,
    )


def setup_frame(
    *,
    session_id: int,
    stream_id: int,
    initial_term_id: int,
    term_length: int,
    mtu: int,
    active_term_id: int | None = None,
    term_offset: int = 0,
    ttl: int = 0,
    flags: int = 0,
) -> SetupFrame:
    """A 40-byte SETUP with version 0; `active_term_id` defaults to `initial_term_id`."""
    return SetupFrame(
        SETUP_HEADER_LENGTH,
        CURRENT_VERSION,
        flags,
        HDR_TYPE_SETUP,
        term_offset,
        session_id,
        stream_id,
        initial_term_id,
        initial_term_id if active_term_id is None else active_term_id,
        term_length,
        mtu,
        ttl,
    )


def status_message(
    *,
    session_id: int,
    stream_id: int,
    consumption_term_id: int,
    consumption_term_offset: int,
    receiver_window: int,
    receiver_id: int,
    flags: int = 0,
    feedback: bytes = b"",
) -> StatusMessage:
    """A Status Message with version 0 and frame length 36 + len(feedback).

    For a setup-eliciting SM pass `flags=SM_SETUP_FLAG` (the reference sends term id, offset and
    window 0 then).
    """
    feedback = bytes(feedback)
    return StatusMessage(
        SM_HEADER_LENGTH + len(feedback),
        CURRENT_VERSION,
        flags,
        HDR_TYPE_SM,
        session_id,
        stream_id,
        consumption_term_id,
        consumption_term_offset,
        receiver_window,
        receiver_id,
        feedback,
    )


def nak_frame(
    *,
    session_id: int,
    stream_id: int,
    term_id: int,
    term_offset: int,
    length: int,
    flags: int = 0,
) -> NakFrame:
    """A 28-byte NAK with version 0."""
    return NakFrame(
        NAK_HEADER_LENGTH,
        CURRENT_VERSION,
        flags,
        HDR_TYPE_NAK,
        session_id,
        stream_id,
        term_id,
        term_offset,
        length,
    )


def rttm_frame(
    *,
    session_id: int,
    stream_id: int,
    echo_timestamp: int,
    receiver_id: int,
    reception_delta: int = 0,
    flags: int = 0,
) -> RttmFrame:
    """A 40-byte RTT Measurement with version 0: `flags=RTTM_REPLY_FLAG` for a request."""
    return RttmFrame(
        RTTM_HEADER_LENGTH,
        CURRENT_VERSION,
        flags,
        HDR_TYPE_RTTM,
        session_id,
        stream_id,
        echo_timestamp,
        reception_delta,
        receiver_id,
    )


def decode_frame(buffer: bytes | bytearray | memoryview, offset: int = 0) -> Frame:
    """Decode the frame at `offset` with the codec for its type (no validation of the fields).

    Raises MalformedFrameError if the buffer is too short or the type has no codec.
    """
    _require(buffer, offset, FRAME_HEADER_LENGTH, "frame")
    frame_type = _FRAME_HEADER.unpack_from(buffer, offset)[3]
    codec = _CODECS.get(frame_type)
    if codec is None:
        raise MalformedFrameError(
            f"no codec for frame type {_type_name(frame_type)}",
            offset=offset,
            frame_type=frame_type,
        )
    return codec.decode(buffer, offset)


class FrameRef(NamedTuple):
    """Where a validated frame sits in a datagram, as yielded by `iter_frames`."""

    offset: int
    type: int
    frame_length: int

    @property
    def type_name(self) -> str:
        return FRAME_TYPE_NAMES[self.type]

    @property
    def is_heartbeat(self) -> bool:
        return self.type == HDR_TYPE_DATA and self.frame_length == 0

    def decode(self, datagram: bytes | bytearray | memoryview) -> Frame:
        return decode_frame(datagram, self.offset)


def _aligned(length: int) -> int:
    return (length + FRAME_ALIGNMENT - 1) & -FRAME_ALIGNMENT


def _check_setup(view: memoryview, offset: int) -> None:
    setup = SetupFrame.decode(view, offset)
    term_length = setup.term_length
    if not (
        TERM_MIN_LENGTH <= term_length <= TERM_MAX_LENGTH and term_length & (term_length - 1) == 0
    ):
        raise MalformedFrameError(
            f"SETUP term_length {term_length} is not a power of two in "
            f"{TERM_MIN_LENGTH}..{TERM_MAX_LENGTH}",
            offset=offset,
            frame_type=HDR_TYPE_SETUP,
        )
    mtu = setup.mtu
    if not (MTU_MIN_LENGTH <= mtu <= MTU_MAX_LENGTH and mtu % FRAME_ALIGNMENT == 0):
        raise MalformedFrameError(
            f"SETUP mtu {mtu} is not a multiple of {FRAME_ALIGNMENT} in "
            f"{MTU_MIN_LENGTH}..{MTU_MAX_LENGTH}",
            offset=offset,
            frame_type=HDR_TYPE_SETUP,
        )
    term_offset = setup.term_offset
    if term_offset % FRAME_ALIGNMENT != 0 or not 0 <= term_offset <= term_length:
        raise MalformedFrameError(
            f"SETUP term_offset {term_offset} is not a multiple of {FRAME_ALIGNMENT} "
            f"in 0..term_length {term_length}",
            offset=offset,
            frame_type=HDR_TYPE_SETUP,
        )


def iter_frames(datagram: bytes | bytearray | memoryview) -> Iterator[FrameRef]:
    """Walk a UDP payload and yield a `FrameRef(offset, type, frame_length)` per valid frame.

    Frames start at 32-byte boundaries: a DATA frame takes its frame length rounded up to 32
    (the alignment padding of the last frame may be missing), a heartbeat (DATA, frame length 0)
    and a PAD take 32 bytes, an SM/NAK/SETUP/RTTM its frame length rounded up to 32.

    The first invalid frame raises `MalformedFrameError` naming what is wrong (the frames
    before it have been yielded and are valid); nothing after it is looked at. On any bytes
    nothing else is raised, and at most one frame is yielded per 32 bytes of datagram.

    Checked: zero-length datagram; fewer than 8 bytes for a frame header; version != 0; unknown
    type (ERR and EXT included, the reference never sends them); fewer bytes left than the
    type's header; DATA frame_length other than 0 (heartbeat) below 32 or beyond the datagram;
    DATA/PAD term_offset not a non-negative multiple of 32; PAD frame_length not a multiple of
    32 of at least 32; SETUP frame_length < 40 or beyond the datagram, term_length not a power
    of two in 64 KiB..1 GiB, mtu not a multiple of 32 in 64..65504, term_offset not a multiple
    of 32 in 0..term_length; SM frame_length < 36 or beyond the datagram; NAK frame_length
    != 28 or length <= 0; RTTM frame_length < 40 or beyond the datagram.
    """
    with memoryview(datagram) as raw, raw.cast("B") as view:
        end = len(view)
        if end == 0:
            raise MalformedFrameError("zero-length datagram")
        offset = 0
        while offset < end:
            frame_type, frame_length, step = _check_frame(view, offset)
            yield FrameRef(offset, frame_type, frame_length)
            offset += step


def _check_frame(view: memoryview, offset: int) -> tuple[int, int, int]:
    """Validate the frame at `offset`: (type, frame_length, bytes it takes in the datagram)."""
    remaining = len(view) - offset
    if remaining < FRAME_HEADER_LENGTH:
        what = "datagram" if offset == 0 else "trailing data"
        raise MalformedFrameError(
            f"{what} of {remaining} bytes is shorter than the "
            f"{FRAME_HEADER_LENGTH}-byte frame header",
            offset=offset,
        )
    frame_length, version, _flags, frame_type = _FRAME_HEADER.unpack_from(view, offset)

    def malformed(reason: str) -> MalformedFrameError:
        return MalformedFrameError(reason, offset=offset, frame_type=frame_type)

    if version != CURRENT_VERSION:
        raise malformed(f"version {version}, expected {CURRENT_VERSION}")
    header_length = _HEADER_LENGTHS.get(frame_type)
    if header_length is None:
        raise malformed(f"unknown frame type {_type_name(frame_type)}")
    name = FRAME_TYPE_NAMES[frame_type]
    if remaining < header_length:
        raise malformed(
            f"{name} header needs {header_length} bytes, only {remaining} left in the datagram"
        )

    if frame_type == HDR_TYPE_DATA or frame_type == HDR_TYPE_PAD:
        term_offset = DataHeader.decode(view, offset).term_offset
        if term_offset < 0 or term_offset % FRAME_ALIGNMENT != 0:
            raise malformed(
                f"{name} term_offset {term_offset} is not a non-negative multiple of "
                f"{FRAME_ALIGNMENT}"
            )
        if frame_type == HDR_TYPE_PAD:
            if frame_length < DATA_HEADER_LENGTH or frame_length % FRAME_ALIGNMENT != 0:
                raise malformed(
                    f"PAD frame_length {frame_length} is not a multiple of "
                    f"{FRAME_ALIGNMENT} of at least {DATA_HEADER_LENGTH}"
                )
            return frame_type, frame_length, DATA_HEADER_LENGTH  # only the header is sent
        if frame_length == 0:
            return frame_type, frame_length, DATA_HEADER_LENGTH  # heartbeat
        if frame_length < DATA_HEADER_LENGTH:
            raise malformed(
                f"DATA frame_length {frame_length} is shorter than the "
                f"{DATA_HEADER_LENGTH}-byte header (and not 0, a heartbeat)"
            )
        if frame_length > remaining:
            raise malformed(
                f"DATA frame_length {frame_length} is longer than the {remaining} bytes "
                "left in the datagram"
            )
        return frame_type, frame_length, _aligned(frame_length)

    if frame_type == HDR_TYPE_NAK:
        if frame_length != NAK_HEADER_LENGTH:
            raise malformed(f"NAK frame_length {frame_length}, expected {NAK_HEADER_LENGTH}")
        length = NakFrame.decode(view, offset).length
        if length <= 0:
            raise malformed(f"NAK length {length} is not positive")
    else:
        if frame_length < header_length:
            raise malformed(
                f"{name} frame_length {frame_length} is shorter than the "
                f"{header_length}-byte header"
            )
        if frame_length > remaining:
            raise malformed(
                f"{name} frame_length {frame_length} is longer than the {remaining} "
                "bytes left in the datagram"
            )
        if frame_type == HDR_TYPE_SETUP:
            _check_setup(view, offset)
    return frame_type, frame_length, _aligned(frame_length)


def parse_datagram(
    datagram: bytes | bytearray | memoryview,
) -> list[FrameRef | MalformedFrameError]:
    """All frames `iter_frames` yields; if the datagram turns out malformed, the error (returned,
    not raised) is the last element of the list. Never raises on any bytes."""
    frames: list[FrameRef | MalformedFrameError] = []
    try:
        frames.extend(iter_frames(datagram))
    except MalformedFrameError as error:
        frames.append(error)
    return frames
