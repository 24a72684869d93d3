"""Every Aeron 1.15.1 UDP frame type: one table of fields per frame, from which its codec is
made (a NamedTuple with `encode()`, `decode(buffer, offset=0)`, `build(**fields)` and the
precompiled little-endian `struct` they use), and the datagram walker that validates what
arrives from the network.

=========  ====  ==============  ======================================================
type       code  codec           builder (`Codec.build`: the table's defaults filled in)
=========  ====  ==============  ======================================================
PAD/DATA   0, 1  `DataHeader`    `data_header(...)` (flags UNFRAGMENTED, type DATA)
NAK        2     `NakFrame`      `nak_frame(...)`
SM         3     `StatusMessage` `status_message(...)` (frame length 36 + feedback)
SETUP      5     `SetupFrame`    `setup_frame(...)` (active term id = initial term id)
RTTM       6     `RttmFrame`     `rttm_frame(...)`
=========  ====  ==============  ======================================================

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
from collections import namedtuple
from collections.abc import Iterator
from functools import partial
from typing import Any, NamedTuple, Self

from aeronio._core import (  # the DATA/PAD layout, defined once in cython_core/frame.pxi
    BEGIN_FRAG_FLAG,
    END_FRAG_FLAG,
    EOS_FLAG,
    FRAME_ALIGNMENT,
    HDR_TYPE_DATA,
    HDR_TYPE_PAD,
    REVOKED_FLAG,
    UNFRAGMENTED,
)
from aeronio.errors import AeronError
from aeronio.protocol import limits

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
# DATA/PAD flags (REVOKED_FLAG: with EOS on a heartbeat, the publication was revoked)
__all__ = ["BEGIN_FRAG_FLAG", "END_FRAG_FLAG", "EOS_FLAG", "REVOKED_FLAG", "UNFRAGMENTED"]

# Status Message flags: the receiver asks the sender for a SETUP (setup-eliciting SM); the
# receiver's image of the stream ended, this is where it left it (Aeron 1.53's EOS-flagged SM).
SM_SETUP_FLAG = 0x80
SM_EOS_FLAG = 0x40
# RTT Measurement flag: a request, the other side should send a reply (which has flags 0).
RTTM_REPLY_FLAG = 0x80
CURRENT_VERSION = 0

# -- The tables ------------------------------------------------------------------------------
# (field, struct code, default for `build`); REQUIRED fields have none. Every frame starts with
# the 8-byte common header.

REQUIRED = object()
_COMMON = (("frame_length", "i", REQUIRED), ("version", "B", CURRENT_VERSION), ("flags", "B", 0))
_IDS = (("session_id", "i", REQUIRED), ("stream_id", "i", REQUIRED))

DATA_FIELDS = (
    *_COMMON[:2],
    ("flags", "B", UNFRAGMENTED),
    ("type", "H", HDR_TYPE_DATA),
    ("term_offset", "i", REQUIRED),
    *_IDS,
    ("term_id", "i", REQUIRED),
    ("reserved_value", "q", 0),
)
SETUP_FIELDS = (
    *_COMMON,
    ("type", "H", HDR_TYPE_SETUP),
    ("term_offset", "i", 0),
    *_IDS,
    ("initial_term_id", "i", REQUIRED),
    ("active_term_id", "i", REQUIRED),
    ("term_length", "i", REQUIRED),
    ("mtu", "i", REQUIRED),
    ("ttl", "i", 0),
)
SM_FIELDS = (  # application-specific feedback follows, up to frame_length
    *_COMMON,
    ("type", "H", HDR_TYPE_SM),
    *_IDS,
    ("consumption_term_id", "i", REQUIRED),
    ("consumption_term_offset", "i", REQUIRED),
    ("receiver_window", "i", REQUIRED),
    ("receiver_id", "q", REQUIRED),
)
NAK_FIELDS = (
    *_COMMON,
    ("type", "H", HDR_TYPE_NAK),
    *_IDS,
    ("term_id", "i", REQUIRED),
    ("term_offset", "i", REQUIRED),
    ("length", "i", REQUIRED),
)
RTTM_FIELDS = (
    *_COMMON,
    ("type", "H", HDR_TYPE_RTTM),
    *_IDS,
    ("echo_timestamp", "q", REQUIRED),
    ("reception_delta", "q", 0),
    ("receiver_id", "q", REQUIRED),
)
ERR_FIELDS = (  # the error message follows, `error_length` bytes (Aeron 1.53's ErrorFlyweight)
    *_COMMON,
    ("type", "H", HDR_TYPE_ERR),
    *_IDS,
    ("receiver_id", "q", REQUIRED),
    ("group_tag", "q", 0),
    ("error_code", "i", REQUIRED),
    ("error_length", "i", 0),
)

_FRAME_HEADER = struct.Struct("<iBBH")  # the common header, read before the type is known
FRAME_HEADER_LENGTH = _FRAME_HEADER.size


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


def _require(buffer: bytes | bytearray | memoryview, offset: int, length: int, what: str) -> None:
    if offset < 0:
        raise MalformedFrameError(f"negative offset {offset}", offset=offset)
    available = len(buffer) - offset
    if available < length:
        raise MalformedFrameError(
            f"a {what} header needs {length} bytes, got {max(available, 0)}", offset=offset
        )


def _codec(name: str, fields: tuple, extra: tuple[str, ...] = ()) -> type:
    """The NamedTuple base of a frame's codec, made from its table (`extra`: fields after the
    fixed header, not in the struct, empty by default). Made at import, it is a dynamic base
    to type checkers: the classes below say so (`type: ignore[misc]`), their fields are Any."""
    layout = struct.Struct("<" + "".join(code for _, code, _ in fields))
    names = [f for f, _, _ in fields] + list(extra)
    base: Any = namedtuple(name, names, defaults=(b"",) * len(extra))  # type: ignore[misc]
    # `build`, made from the table as namedtuple makes its __new__: keyword-only arguments with
    # the table's defaults, one tuple made. The frame length defaults to the header's plus the
    # extra (bytes) fields'.
    defaults = {f: default for f, _, default in fields} | dict.fromkeys(extra, b"")
    defaults["frame_length"] = None
    params = ", ".join(f if defaults[f] is REQUIRED else f"{f}=_d[{f!r}]" for f in names)
    lines = [f"def build(cls, *, {params}):"]
    lines += [f"    {f} = bytes({f})" for f in extra]
    lines += [
        "    if frame_length is None:",
        f"        frame_length = {' + '.join([str(layout.size)] + [f'len({f})' for f in extra])}",
        f"    return _new(cls, ({', '.join(names)},))",
    ]
    namespace: dict[str, Any] = {"_d": defaults, "_new": tuple.__new__}
    exec("\n".join(lines), namespace)  # noqa: S102  (the source is made from the table above)

    class Codec(base):
        __slots__ = ()
        STRUCT = layout
        LENGTH = layout.size
        FIELDS = fields
        build: Any = classmethod(namespace["build"])
        build.__doc__ = "A frame of this type: the table's defaults with the given fields."

        def encode(self) -> bytes:
            return self.STRUCT.pack(*self[: len(fields)])

        @classmethod
        def decode(cls, buffer: bytes | bytearray | memoryview, offset: int = 0) -> Self:
            _require(buffer, offset, cls.LENGTH, FRAME_TYPE_NAMES[fields[3][2]])
            return cls._make(cls.STRUCT.unpack_from(buffer, offset))

    Codec.__name__ = Codec.__qualname__ = f"{name}Codec"
    return Codec


class DataHeader(_codec("DataHeader", DATA_FIELDS)):  # type: ignore[misc]
    """A DATA or PAD frame header (a heartbeat is a DATA header, frame length 0)."""

    __slots__ = ()


class SetupFrame(_codec("SetupFrame", SETUP_FIELDS)):  # type: ignore[misc]
    """A SETUP frame (40 bytes): sender -> receiver, announces a stream and its term layout."""

    __slots__ = ()

    @classmethod
    def build(cls, **values: int) -> SetupFrame:
        values.setdefault("active_term_id", values.get("initial_term_id", 0))
        return super().build(**values)


class StatusMessage(_codec("StatusMessage", SM_FIELDS, ("feedback",))):  # type: ignore[misc]
    """A Status Message: 36 bytes plus `frame_length - 36` bytes of application feedback.

    `encode` writes the fields as given (it does not recompute `frame_length`); `decode` reads
    the feedback bytes that `frame_length` announces past the 36-byte header; `build` counts
    the feedback in the frame length.
    """

    __slots__ = ()

    @property
    def is_setup_eliciting(self) -> bool:
        return bool(self.flags & SM_SETUP_FLAG)

    @property
    def is_end_of_stream(self) -> bool:
        """The receiver's farewell: its image of the stream ended or closed."""
        return bool(self.flags & SM_EOS_FLAG)

    def encode(self) -> bytes:
        return self.STRUCT.pack(*self[:-1]) + bytes(self.feedback)

    @classmethod
    def decode(cls, buffer: bytes | bytearray | memoryview, offset: int = 0) -> StatusMessage:
        _require(buffer, offset, cls.LENGTH, "SM")
        header = cls.STRUCT.unpack_from(buffer, offset)
        frame_length = header[0]
        feedback = b""
        if frame_length > cls.LENGTH:
            if len(buffer) - offset < frame_length:
                raise MalformedFrameError(
                    f"SM frame_length {frame_length} runs past the end of the buffer "
                    f"({len(buffer) - offset} bytes)",
                    offset=offset,
                    frame_type=HDR_TYPE_SM,
                )
            feedback = bytes(buffer[offset + cls.LENGTH : offset + frame_length])
        return cls(*header, feedback)


class NakFrame(_codec("NakFrame", NAK_FIELDS)):  # type: ignore[misc]
    """A NAK (28 bytes): receiver -> sender, asks for `length` bytes from term_id/term_offset."""

    __slots__ = ()


class RttmFrame(_codec("RttmFrame", RTTM_FIELDS)):  # type: ignore[misc]
    """An RTT Measurement (40 bytes); flags `RTTM_REPLY_FLAG` on a request, 0 on the reply."""

    __slots__ = ()

    @property
    def is_reply_requested(self) -> bool:
        return bool(self.flags & RTTM_REPLY_FLAG)


class ErrorFrame(_codec("ErrorFrame", ERR_FIELDS, ("error_message",))):  # type: ignore[misc]
    """An ERR frame (Aeron 1.53): receiver -> sender, its image of the stream refused (an
    IMAGE_REJECTED error code); 40 bytes, then `error_length` bytes of message."""

    __slots__ = ()

    def encode(self) -> bytes:
        return self.STRUCT.pack(*self[:-1]) + bytes(self.error_message)

    @classmethod
    def decode(cls, buffer: bytes | bytearray | memoryview, offset: int = 0) -> ErrorFrame:
        """The frame at `offset`, which `iter_frames` checked (its message within it)."""
        _require(buffer, offset, cls.LENGTH, "ERR")
        header = cls.STRUCT.unpack_from(buffer, offset)
        start = offset + cls.LENGTH
        return cls(*header, bytes(buffer[start : start + max(header[-1], 0)]))


data_header = DataHeader.build
setup_frame = SetupFrame.build
status_message = StatusMessage.build
nak_frame = NakFrame.build
rttm_frame = RttmFrame.build
error_frame = ErrorFrame.build

Frame = DataHeader | SetupFrame | StatusMessage | NakFrame | RttmFrame | ErrorFrame

_CODECS: dict[int, type[Frame]] = {
    HDR_TYPE_PAD: DataHeader,
    HDR_TYPE_DATA: DataHeader,
    HDR_TYPE_NAK: NakFrame,
    HDR_TYPE_SM: StatusMessage,
    HDR_TYPE_SETUP: SetupFrame,
    HDR_TYPE_RTTM: RttmFrame,
    HDR_TYPE_ERR: ErrorFrame,
}
_HEADER_LENGTHS = {frame_type: codec.LENGTH for frame_type, codec in _CODECS.items()}
DATA_HEADER_LENGTH = DataHeader.LENGTH
SETUP_HEADER_LENGTH = SetupFrame.LENGTH
SM_HEADER_LENGTH = StatusMessage.LENGTH
NAK_HEADER_LENGTH = NakFrame.LENGTH
RTTM_HEADER_LENGTH = RttmFrame.LENGTH
ERR_HEADER_LENGTH = ErrorFrame.LENGTH


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
    malformed = partial(MalformedFrameError, offset=offset, frame_type=HDR_TYPE_SETUP)
    limits.check_term_length(term_length, "SETUP term_length", malformed)
    limits.check_mtu(setup.mtu, "SETUP mtu", malformed)
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
    type (EXT included, the reference never sends it); fewer bytes left than the
    type's header; DATA frame_length other than 0 (heartbeat) below 32 or beyond the datagram;
    DATA/PAD term_offset not a non-negative multiple of 32; PAD frame_length not a multiple of
    32 of at least 32; SETUP frame_length < 40 or beyond the datagram, term_length not a power
    of two in 64 KiB..1 GiB, mtu not a multiple of 32 in 64..65504, term_offset not a multiple
    of 32 in 0..term_length; SM frame_length < 36 or beyond the datagram; NAK frame_length
    != 28, length <= 0 or term_offset not a non-negative multiple of 32; RTTM frame_length < 40
    or beyond the datagram; ERR frame_length < 40 or beyond the datagram, its error message's
    length not in 0..1023 within the frame.
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
        nak = NakFrame.decode(view, offset)
        if nak.length <= 0:
            raise malformed(f"NAK length {nak.length} is not positive")
        # A gap starts at a frame boundary: no receiver NAKs from anywhere else.
        if nak.term_offset < 0 or nak.term_offset % FRAME_ALIGNMENT != 0:
            raise malformed(
                f"NAK term_offset {nak.term_offset} is not a non-negative multiple of "
                f"{FRAME_ALIGNMENT}"
            )
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
        elif frame_type == HDR_TYPE_ERR:
            error_length = ErrorFrame.STRUCT.unpack_from(view, offset)[-1]
            longest = limits.MAX_ERROR_MESSAGE_LENGTH
            if not 0 <= error_length <= min(longest, frame_length - header_length):
                raise malformed(
                    f"ERR error_length {error_length} is not in 0..{longest} "
                    f"within its frame_length {frame_length}"
                )
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
