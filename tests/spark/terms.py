"""Terms as Aeron's appender lays them out, built in Python: the reference the frame scanner
and the readers are checked against (no driver needed)."""

from __future__ import annotations

import struct

HEADER = struct.Struct("<iBBHiiiiq")


def align(n: int) -> int:
    return (n + 31) & ~31


def frame_lengths(length: int, mtu: int) -> list[int]:
    """The frame lengths (unaligned) of a message of `length` bytes."""
    payload = mtu - 32
    if length <= payload:
        return [32 + length]
    sizes = []
    left = length
    while left > 0:
        take = min(left, payload)
        sizes.append(32 + take)
        left -= take
    return sizes


class TermWriter:
    """Appends messages like a publication: fragments over `mtu`, a PAD at a term's end."""

    def __init__(
        self, term_length=64 * 1024, mtu=1408, initial_term_id=7, session_id=5, stream_id=9,
        start_position=0,
    ):  # fmt: skip
        self.term_length, self.mtu = term_length, mtu
        self.initial_term_id, self.session_id, self.stream_id = (
            initial_term_id,
            session_id,
            stream_id,
        )
        self.base = start_position - start_position % term_length
        self.data = bytearray(start_position - self.base)
        self.messages: list[tuple[int, bytes, int]] = []  # (position, payload, reserved)
        self.ends: list[int] = []  # the position after each message

    @property
    def position(self) -> int:
        return self.base + len(self.data)

    def _header(self, length, flags, kind, reserved=0) -> bytes:
        position = self.position
        term_id = self.initial_term_id + position // self.term_length
        term_id = (term_id + 2**31) % 2**32 - 2**31
        return HEADER.pack(
            length, 0, flags, kind, position % self.term_length, self.session_id,
            self.stream_id, term_id, reserved,
        )  # fmt: skip

    def append(self, payload: bytes, reserved: int = 0) -> int:
        sizes = frame_lengths(len(payload), self.mtu)
        needed = sum(align(s) for s in sizes)
        offset = self.position % self.term_length
        if offset + needed > self.term_length:
            self.pad()
        start = self.position
        at = 0
        for i, size in enumerate(sizes):
            flags = (0x80 if i == 0 else 0) | (0x40 if i == len(sizes) - 1 else 0)
            chunk = payload[at : at + size - 32]
            at += size - 32
            self.data += self._header(size, flags, 1, reserved) + chunk
            self.data += bytes(align(size) - size)
        self.messages.append((start, bytes(payload), reserved))
        self.ends.append(self.position)
        return self.position

    def pad(self) -> None:
        left = self.term_length - self.position % self.term_length
        if left < self.term_length:
            self.data += self._header(left, 0xC0, 0) + bytes(left - 32)

    def fill_to(self, size: int) -> bytes:
        """The log's bytes from the start term's base, zero-padded to `size`."""
        return bytes(self.data) + bytes(size - len(self.data))
