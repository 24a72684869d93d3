"""Log buffer layout and position arithmetic (Aeron's LogBufferDescriptor).

A log is 3 terms of equal length followed by a 4096-byte metadata section; all fields are
little-endian. Positions count bytes from the start of the stream across term rotations:
position = (termId - initialTermId) * termLength + termOffset, with the term-id difference taken
as a wrapping signed 32-bit integer.
"""

from __future__ import annotations

from collections.abc import Callable

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
from aeronio.errors import ConfigurationError

LOG_DEFAULT_FRAME_HEADER_MAX_LENGTH = 128
END_OF_STREAM_UNSET = 2**63 - 1

# -- Limits ----------------------------------------------------------------------------------
# Every limit on what enters aeronio, with one validator each. A validator raises `error` (the
# exception type of the kind of input: ConfigurationError for options and arguments,
# ChannelUriError for a channel URI, MalformedFrameError for a frame off the wire) with a message
# that names `name` and shows the value as `written` (by default, the value).

TERM_MIN_LENGTH = 64 * 1024
TERM_MAX_LENGTH = 1024 * 1024 * 1024
PAGE_MIN_SIZE = 4 * 1024
PAGE_MAX_SIZE = 1024 * 1024 * 1024
MTU_MIN_LENGTH = 2 * HEADER_LENGTH
MTU_MAX_LENGTH = 65504  # the largest multiple of 32 that a UDP datagram carries (65507)
MAX_MESSAGE_LENGTH_CAP = 16 * 1024 * 1024
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

Error = Callable[[str], Exception]


def _is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


def check_term_length(
    term_length: int,
    name: str = "term_length",
    error: Error = ConfigurationError,
    written: object = None,
) -> None:
    """A power of two in 64 KiB .. 1 GiB (Aeron's LogBufferDescriptor.checkTermLength)."""
    if not (TERM_MIN_LENGTH <= term_length <= TERM_MAX_LENGTH and _is_power_of_two(term_length)):
        raise error(
            f"{name} {written or term_length} must be a power of two between "
            f"{TERM_MIN_LENGTH} and {TERM_MAX_LENGTH}"
        )


def check_page_size(
    page_size: int, name: str = "page_size", error: Error = ConfigurationError
) -> None:
    """A power of two in 4 KiB .. 1 GiB."""
    if not (PAGE_MIN_SIZE <= page_size <= PAGE_MAX_SIZE and _is_power_of_two(page_size)):
        raise error(
            f"{name} {page_size} must be a power of two between {PAGE_MIN_SIZE} and {PAGE_MAX_SIZE}"
        )


def check_mtu(
    mtu: int, name: str = "mtu", error: Error = ConfigurationError, written: object = None
) -> None:
    """A multiple of the frame alignment in 64 .. 65504."""
    if not (MTU_MIN_LENGTH <= mtu <= MTU_MAX_LENGTH and mtu % FRAME_ALIGNMENT == 0):
        raise error(
            f"{name} {written or mtu} must be a multiple of {FRAME_ALIGNMENT} "
            f"between {MTU_MIN_LENGTH} and {MTU_MAX_LENGTH}"
        )


def check_int32(value: object, name: str, error: Error = ConfigurationError) -> None:
    """A signed 32-bit integer (an `int`, not a `bool`): stream ids, session ids, term ids."""
    if not isinstance(value, int) or isinstance(value, bool) or not INT32_MIN <= value <= INT32_MAX:
        raise error(f"{name} {value!r} must be a signed 32-bit integer")


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
