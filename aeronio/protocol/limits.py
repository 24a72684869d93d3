"""Every limit on what enters aeronio (Aeron's LogBufferDescriptor and Configuration checks),
with one validator each: term length, page size, MTU (alone and against the term length),
segment file length, message length, 32-bit ids. The term and message limits are the compiled
core's (cython_core/frame.pxi), so the core and Python check the same numbers.

A validator raises `error`, the exception type of the kind of input (ConfigurationError for
options and arguments, ChannelUriError for a channel URI, MalformedFrameError for a frame off the
wire), with a message that names `name` and shows the value as `written` (by default, the value).
"""

from __future__ import annotations

from collections.abc import Callable

from aeronio._core import (
    FRAME_ALIGNMENT,
    HEADER_LENGTH,
    MAX_MESSAGE_LENGTH,
    TERM_MAX_LENGTH,
    TERM_MIN_LENGTH,
)
from aeronio.errors import ConfigurationError

PAGE_MIN_SIZE = 4 * 1024
PAGE_MAX_SIZE = 1024 * 1024 * 1024
MTU_MIN_LENGTH = 2 * HEADER_LENGTH
MTU_MAX_LENGTH = 65504  # the largest multiple of 32 that a UDP datagram carries (65507)
SEGMENT_MAX_LENGTH = TERM_MAX_LENGTH  # a segment file holds at least one whole term
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
# The longest error text in bytes: an ERR frame's message, and the reason a REJECT_IMAGE gives
# for it (Aeron's ErrorFlyweight.MAX_ERROR_MESSAGE_LENGTH, AERON_ERROR_MAX_TEXT_LENGTH).
MAX_ERROR_MESSAGE_LENGTH = 1023

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


def check_mtu_for_term_length(
    mtu: int, term_length: int, name: str = "mtu", error: Error = ConfigurationError
) -> None:
    """A frame of `mtu` bytes carries no more payload than the longest message of a term of
    `term_length` bytes (Aeron's validateMtuForMaxMessage)."""
    if mtu - HEADER_LENGTH > max_message_length(term_length):
        raise error(f"{name} {mtu} is too large for the term length {term_length}")


def check_segment_length(
    segment_length: int,
    term_length: int = 1,
    name: str = "segment_length",
    error: Error = ConfigurationError,
) -> None:
    """A power of two from `term_length` (a recording's; 1 for an option, which the archive
    raises to the term length of each recording) to 1 GiB: Aeron's segment file length."""
    if not (
        term_length <= segment_length <= SEGMENT_MAX_LENGTH and _is_power_of_two(segment_length)
    ):
        raise error(
            f"{name} {segment_length} must be a power of two between {term_length} and "
            f"{SEGMENT_MAX_LENGTH}"
        )


def check_int32(value: object, name: str, error: Error = ConfigurationError) -> None:
    """A signed 32-bit integer (an `int`, not a `bool`): stream ids, session ids, term ids."""
    _check_signed(value, name, 32, error)


def check_int64(value: object, name: str, error: Error = ConfigurationError) -> None:
    """A signed 64-bit integer (an `int`, not a `bool`): registration ids."""
    _check_signed(value, name, 64, error)


def _check_signed(value: object, name: str, bits: int, error: Error) -> None:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise error(f"{name} {value!r} must be a signed {bits}-bit integer")


def max_message_length(term_length: int) -> int:
    """The longest message a term of `term_length` bytes takes (Aeron's computeMaxMessageLength)."""
    return min(term_length // 8, MAX_MESSAGE_LENGTH)
