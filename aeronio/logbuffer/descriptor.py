"""Log buffer layout and position arithmetic (Aeron's LogBufferDescriptor).

A log is 3 terms of equal length followed by a 4096-byte metadata section; all fields are
little-endian. Positions count bytes from the start of the stream across term rotations:
position = (termId - initialTermId) * termLength + termOffset, with the term-id difference taken
as a wrapping signed 32-bit integer.
"""

from __future__ import annotations

from aeronio.errors import ConfigurationError

PARTITION_COUNT = 3
TERM_MIN_LENGTH = 64 * 1024
TERM_MAX_LENGTH = 1024 * 1024 * 1024
PAGE_MIN_SIZE = 4 * 1024
PAGE_MAX_SIZE = 1024 * 1024 * 1024
MAX_MESSAGE_LENGTH_CAP = 16 * 1024 * 1024

TERM_TAIL_COUNTERS_OFFSET = 0
LOG_ACTIVE_TERM_COUNT_OFFSET = 24
LOG_END_OF_STREAM_POSITION_OFFSET = 128
LOG_IS_CONNECTED_OFFSET = 136
LOG_ACTIVE_TRANSPORT_COUNT_OFFSET = 140
LOG_CORRELATION_ID_OFFSET = 256
LOG_INITIAL_TERM_ID_OFFSET = 264
LOG_DEFAULT_FRAME_HEADER_LENGTH_OFFSET = 268
LOG_MTU_LENGTH_OFFSET = 272
LOG_TERM_LENGTH_OFFSET = 276
LOG_PAGE_SIZE_OFFSET = 280
LOG_DEFAULT_FRAME_HEADER_OFFSET = 320
LOG_DEFAULT_FRAME_HEADER_MAX_LENGTH = 128
LOG_META_DATA_LENGTH = 4096

END_OF_STREAM_UNSET = 2**63 - 1


def check_term_length(term_length: int) -> None:
    """Raise ConfigurationError unless term_length is a power of two in 64 KiB .. 1 GiB."""
    if not (TERM_MIN_LENGTH <= term_length <= TERM_MAX_LENGTH) or term_length & (term_length - 1):
        raise ConfigurationError(
            f"term_length {term_length} must be a power of two between "
            f"{TERM_MIN_LENGTH} and {TERM_MAX_LENGTH}"
        )


def check_page_size(page_size: int) -> None:
    if not (PAGE_MIN_SIZE <= page_size <= PAGE_MAX_SIZE) or page_size & (page_size - 1):
        raise ConfigurationError(
            f"page_size {page_size} must be a power of two between {PAGE_MIN_SIZE} "
            f"and {PAGE_MAX_SIZE}"
        )


def check_mtu(mtu: int) -> None:
    if not (64 <= mtu <= 65504) or mtu % 32:
        raise ConfigurationError(f"mtu {mtu} must be a multiple of 32 between 64 and 65504")


def max_message_length(term_length: int) -> int:
    return min(term_length // 8, MAX_MESSAGE_LENGTH_CAP)


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


def compute_log_length(term_length: int, page_size: int = PAGE_MIN_SIZE) -> int:
    length = PARTITION_COUNT * term_length + LOG_META_DATA_LENGTH
    return (length + page_size - 1) // page_size * page_size


def align(value: int, alignment: int = 32) -> int:
    return (value + alignment - 1) & ~(alignment - 1)
