"""What Aeron's ring and broadcast buffers share: the 8-byte record header (length i32, message
type id i32), 8-byte alignment, the padding type id and the check of a message to write."""

from __future__ import annotations

HEADER_LENGTH = 8
ALIGNMENT = 8
PADDING_MSG_TYPE_ID = -1


def align(length: int) -> int:
    """length rounded up to ALIGNMENT."""
    return (length + ALIGNMENT - 1) & ~(ALIGNMENT - 1)


def check_message(msg_type_id: int, length: int, max_msg_length: int) -> None:
    """Raise ValueError for a msg_type_id below 1 or a payload over max_msg_length."""
    if msg_type_id < 1:
        raise ValueError(f"msg_type_id must be >= 1, got {msg_type_id}")
    if length > max_msg_length:
        raise ValueError(f"payload of {length} bytes exceeds max_msg_length {max_msg_length}")
