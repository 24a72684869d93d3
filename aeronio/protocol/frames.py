"""Frame header layouts (little-endian) and the DATA/PAD header codec.

The 32-byte DATA header is shared by PAD frames and heartbeats (a DATA header with frame length
0); `DATA_HEADER_DTYPE` views a run of headers as a numpy structured array.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np

HDR_TYPE_PAD = 0x00
HDR_TYPE_DATA = 0x01
HDR_TYPE_NAK = 0x02
HDR_TYPE_SM = 0x03
HDR_TYPE_ERR = 0x04
HDR_TYPE_SETUP = 0x05
HDR_TYPE_RTTM = 0x06
HDR_TYPE_EXT = 0xFFFF

BEGIN_FLAG = 0x80
END_FLAG = 0x40
EOS_FLAG = 0x20
UNFRAGMENTED = BEGIN_FLAG | END_FLAG

DATA_HEADER_LENGTH = 32
FRAME_ALIGNMENT = 32
CURRENT_VERSION = 0

_DATA_HEADER = struct.Struct("<iBBHiiiiq")

DATA_HEADER_DTYPE = np.dtype(
    [
        ("frame_length", "<i4"),
        ("version", "u1"),
        ("flags", "u1"),
        ("type", "<u2"),
        ("term_offset", "<i4"),
        ("session_id", "<i4"),
        ("stream_id", "<i4"),
        ("term_id", "<i4"),
        ("reserved_value", "<i8"),
    ]
)


class DataHeader(NamedTuple):
    """The fields of a DATA or PAD frame header."""

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
        if len(buffer) - offset < DATA_HEADER_LENGTH:
            raise ValueError(
                f"a DATA header needs {DATA_HEADER_LENGTH} bytes, got {len(buffer) - offset}"
            )
        return cls(*_DATA_HEADER.unpack_from(buffer, offset))


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
