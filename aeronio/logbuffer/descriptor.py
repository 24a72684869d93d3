"""Log buffer layout and position arithmetic (Aeron's LogBufferDescriptor).

A log is 3 terms of equal length followed by a 4096-byte metadata section; all fields are
little-endian. Positions count bytes from the start of the stream across term rotations:
position = (termId - initialTermId) * termLength + termOffset, with the term-id difference taken
as a wrapping signed 32-bit integer.
"""

from __future__ import annotations

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
    LOG_INITIAL_TERM_ID_OFFSET,
    LOG_IS_CONNECTED_OFFSET,
    LOG_META_DATA_LENGTH,
    LOG_MTU_LENGTH_OFFSET,
    LOG_PAGE_SIZE_OFFSET,
    LOG_TERM_LENGTH_OFFSET,
    LOG_WAKE_SLOT_COUNT,
    LOG_WAKE_SLOTS_OFFSET,
    LOG_WAKE_SPACE_BIT,
    PARTITION_COUNT,
    TERM_TAIL_COUNTERS_OFFSET,
)

LOG_DEFAULT_FRAME_HEADER_MAX_LENGTH = 128
END_OF_STREAM_UNSET = 2**63 - 1


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
