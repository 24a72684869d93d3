"""Log buffer layout and position arithmetic (Aeron's LogBufferDescriptor).

A log is 3 terms of equal length followed by a 4096-byte metadata section laid out as Aeron
1.53's aeron_logbuffer_metadata_t (all fields little-endian): the tails and the state the
publishers, subscribers and driver share, then what the driver made the log with (its shape, the
default frame header and the LogParams). Positions count bytes from the start of the stream
across term rotations: position = (termId - initialTermId) * termLength + termOffset, with the
term-id difference taken as a wrapping signed 32-bit integer.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

import msgspec

from aeronio._core import (  # noqa: F401  the layout, defined once in cython_core/frame.pxi
    FRAME_ALIGNMENT,
    HEADER_LENGTH,
    LOG_ACTIVE_TERM_COUNT_OFFSET,
    LOG_ACTIVE_TRANSPORT_COUNT_OFFSET,
    LOG_CONDUCTOR_WAKE_ID_OFFSET,
    LOG_CORRELATION_ID_OFFSET,
    LOG_DEFAULT_FRAME_HEADER_LENGTH_OFFSET,
    LOG_DEFAULT_FRAME_HEADER_OFFSET,
    LOG_END_OF_STREAM_POSITION_OFFSET,
    LOG_ENTITY_TAG_OFFSET,
    LOG_GROUP_OFFSET,
    LOG_INITIAL_TERM_ID_OFFSET,
    LOG_IS_CONNECTED_OFFSET,
    LOG_IS_PUBLICATION_REVOKED_OFFSET,
    LOG_IS_RESPONSE_OFFSET,
    LOG_LIMIT_WANTED_OFFSET,
    LOG_LINGER_TIMEOUT_NS_OFFSET,
    LOG_MAX_RESEND_OFFSET,
    LOG_META_DATA_LENGTH,
    LOG_MTU_LENGTH_OFFSET,
    LOG_OS_DEFAULT_SOCKET_RCVBUF_LENGTH_OFFSET,
    LOG_OS_DEFAULT_SOCKET_SNDBUF_LENGTH_OFFSET,
    LOG_OS_MAX_SOCKET_RCVBUF_LENGTH_OFFSET,
    LOG_OS_MAX_SOCKET_SNDBUF_LENGTH_OFFSET,
    LOG_PAGE_SIZE_OFFSET,
    LOG_PUBLICATION_WINDOW_LENGTH_OFFSET,
    LOG_RECEIVER_WINDOW_LENGTH_OFFSET,
    LOG_REJOIN_OFFSET,
    LOG_RELIABLE_OFFSET,
    LOG_RESPONSE_CORRELATION_ID_OFFSET,
    LOG_SIGNAL_EOS_OFFSET,
    LOG_SOCKET_RCVBUF_LENGTH_OFFSET,
    LOG_SOCKET_SNDBUF_LENGTH_OFFSET,
    LOG_SPARSE_OFFSET,
    LOG_SPIES_SIMULATE_CONNECTION_OFFSET,
    LOG_TERM_LENGTH_OFFSET,
    LOG_TETHER_OFFSET,
    LOG_TYPE_OFFSET,
    LOG_UNTETHERED_LINGER_TIMEOUT_NS_OFFSET,
    LOG_UNTETHERED_RESTING_TIMEOUT_NS_OFFSET,
    LOG_UNTETHERED_WINDOW_LIMIT_TIMEOUT_NS_OFFSET,
    LOG_WAKE_SLOT_COUNT,
    LOG_WAKE_SLOTS_OFFSET,
    LOG_WAKE_SPACE_BIT,
    PARTITION_COUNT,
    TERM_TAIL_COUNTERS_OFFSET,
)

if TYPE_CHECKING:
    import numpy as np
    from typing_extensions import Buffer

LOG_DEFAULT_FRAME_HEADER_MAX_LENGTH = 128
END_OF_STREAM_UNSET = 2**63 - 1
# The kinds of log (the metadata's type byte).
LOG_TYPE_CONCURRENT_PUBLICATION = 0
LOG_TYPE_EXCLUSIVE_PUBLICATION = 1
LOG_TYPE_PUBLICATION_IMAGE = 2
NULL_VALUE = -1  # Aeron's "not set" (an entity tag, a response correlation id)


class LogParams(msgspec.Struct, frozen=True, kw_only=True):
    """What the driver made a log with beyond its shape, as Aeron 1.53 records it in the
    metadata: the kind of log, its windows and socket buffer lengths (0: not set on the
    channel; the OS maxima are 0 as Aeron's C driver leaves them), timeouts in ns, flags."""

    type: int = LOG_TYPE_CONCURRENT_PUBLICATION
    publication_window_length: int = 0
    receiver_window_length: int = 0
    socket_sndbuf_length: int = 0
    os_default_socket_sndbuf_length: int = 0
    os_max_socket_sndbuf_length: int = 0
    socket_rcvbuf_length: int = 0
    os_default_socket_rcvbuf_length: int = 0
    os_max_socket_rcvbuf_length: int = 0
    max_resend: int = 0
    entity_tag: int = 0
    response_correlation_id: int = 0
    linger_timeout_ns: int = 0
    untethered_window_limit_timeout_ns: int = 0
    untethered_resting_timeout_ns: int = 0
    untethered_linger_timeout_ns: int = 0
    group: bool = False
    is_response: bool = False
    rejoin: bool = False
    reliable: bool = False
    sparse: bool = False
    signal_eos: bool = False
    spies_simulate_connection: bool = False
    tether: bool = False


# LogParams in the metadata: (offset, struct format) of each field, in declaration order.
_PARAM_FIELDS = (
    (LOG_TYPE_OFFSET, "B"),
    (LOG_PUBLICATION_WINDOW_LENGTH_OFFSET, "i"),
    (LOG_RECEIVER_WINDOW_LENGTH_OFFSET, "i"),
    (LOG_SOCKET_SNDBUF_LENGTH_OFFSET, "i"),
    (LOG_OS_DEFAULT_SOCKET_SNDBUF_LENGTH_OFFSET, "i"),
    (LOG_OS_MAX_SOCKET_SNDBUF_LENGTH_OFFSET, "i"),
    (LOG_SOCKET_RCVBUF_LENGTH_OFFSET, "i"),
    (LOG_OS_DEFAULT_SOCKET_RCVBUF_LENGTH_OFFSET, "i"),
    (LOG_OS_MAX_SOCKET_RCVBUF_LENGTH_OFFSET, "i"),
    (LOG_MAX_RESEND_OFFSET, "i"),
    (LOG_ENTITY_TAG_OFFSET, "q"),
    (LOG_RESPONSE_CORRELATION_ID_OFFSET, "q"),
    (LOG_LINGER_TIMEOUT_NS_OFFSET, "q"),
    (LOG_UNTETHERED_WINDOW_LIMIT_TIMEOUT_NS_OFFSET, "q"),
    (LOG_UNTETHERED_RESTING_TIMEOUT_NS_OFFSET, "q"),
    (LOG_UNTETHERED_LINGER_TIMEOUT_NS_OFFSET, "q"),
    (LOG_GROUP_OFFSET, "?"),
    (LOG_IS_RESPONSE_OFFSET, "?"),
    (LOG_REJOIN_OFFSET, "?"),
    (LOG_RELIABLE_OFFSET, "?"),
    (LOG_SPARSE_OFFSET, "?"),
    (LOG_SIGNAL_EOS_OFFSET, "?"),
    (LOG_SPIES_SIMULATE_CONNECTION_OFFSET, "?"),
    (LOG_TETHER_OFFSET, "?"),
)


def write_log_params(metadata: Buffer, params: LogParams) -> None:
    """Write `params` into a log's metadata section (a writable buffer), before the log is
    handed to anyone: these fields never change after."""
    for (offset, fmt), value in zip(_PARAM_FIELDS, msgspec.structs.astuple(params), strict=True):
        struct.pack_into("<" + fmt, metadata, offset, value)


def read_log_params(metadata: Buffer | np.ndarray) -> LogParams:
    """The LogParams of a log's metadata section (any buffer of its bytes)."""
    # numpy's stubs make an ndarray a Buffer only from Python 3.12 on (it is one at run time).
    values = (
        struct.unpack_from("<" + fmt, metadata, offset)[0]  # type: ignore[arg-type]
        for offset, fmt in _PARAM_FIELDS
    )
    return LogParams(**dict(zip(LogParams.__struct_fields__, values, strict=True)))


def position_bits_to_shift(term_length: int) -> int:
    return term_length.bit_length() - 1


def _int32(value: int) -> int:
    return ((value + 2**31) % 2**32) - 2**31


def compute_position(term_id: int, term_offset: int, term_length: int, initial_term_id: int) -> int:
    term_count = _int32(term_id - initial_term_id)
    return (term_count << position_bits_to_shift(term_length)) + term_offset


def compute_term_id_from_position(position: int, term_length: int, initial_term_id: int) -> int:
    return _int32((position >> position_bits_to_shift(term_length)) + initial_term_id)


def index_by_position(position: int, term_length: int) -> int:
    return (position >> position_bits_to_shift(term_length)) % PARTITION_COUNT


def index_by_term_count(term_count: int) -> int:
    return term_count % PARTITION_COUNT


def pack_tail(term_id: int, term_offset: int) -> int:
    """The signed 64-bit raw tail: term id in the high 32 bits, offset in the low 32."""
    raw = ((term_id & 0xFFFFFFFF) << 32) | (term_offset & 0xFFFFFFFF)
    return raw - 2**64 if raw >= 2**63 else raw


def compute_log_length(term_length: int, page_size: int) -> int:
    length = PARTITION_COUNT * term_length + LOG_META_DATA_LENGTH
    return (length + page_size - 1) // page_size * page_size


def align(value: int, alignment: int = 32) -> int:
    return (value + alignment - 1) & ~(alignment - 1)
