"""A readable dump of a log buffer: metadata fields, then each term's frames."""

from __future__ import annotations

from typing import TextIO

import msgspec

from aeronio.logbuffer import descriptor as d
from aeronio.logbuffer.log_buffers import LogBuffers
from aeronio.protocol.frames import DataHeader

FRAME_TYPES = {0: "PAD", 1: "DATA", 2: "NAK", 3: "SM", 4: "ERR", 5: "SETUP", 6: "RTTM"}
LOG_TYPES = {
    d.LOG_TYPE_CONCURRENT_PUBLICATION: "concurrent publication",
    d.LOG_TYPE_EXCLUSIVE_PUBLICATION: "exclusive publication",
    d.LOG_TYPE_PUBLICATION_IMAGE: "publication image",
}


def dump_log(log: LogBuffers, max_frames: int, out: TextIO, data_bytes: int = 0) -> None:
    """Metadata, then up to `max_frames` frames a term; with `data_bytes`, the first so many
    bytes of each DATA frame's payload as a hex dump (offsets, hex, printable text)."""
    meta = log.metadata
    term_length = log.term_length
    print(f"log file: {log.path} ({len(log.array)} bytes)", file=out)
    for i in range(d.PARTITION_COUNT):
        raw = log.raw_tail(i)
        print(f"tail counter {i}: term id {raw >> 32}, term offset {raw & 0xFFFFFFFF}", file=out)
    print(f"active term count: {log.active_term_count}", file=out)
    print(f"end of stream position: {log.end_of_stream_position}", file=out)
    print(f"is connected: {meta.get_int32_volatile(d.LOG_IS_CONNECTED_OFFSET)}", file=out)
    print(f"active transport count: {log.active_transport_count}", file=out)
    print(f"correlation id: {log.correlation_id}", file=out)
    print(f"initial term id: {log.initial_term_id}", file=out)
    print(
        f"default frame header length: {meta.get_int32(d.LOG_DEFAULT_FRAME_HEADER_LENGTH_OFFSET)}",
        file=out,
    )
    print(f"mtu length: {log.mtu}", file=out)
    print(f"term length: {term_length}", file=out)
    print(f"page size: {log.page_size}", file=out)
    params = log.params
    for name, value in msgspec.structs.asdict(params).items():
        shown = LOG_TYPES.get(value, f"unknown ({value})") if name == "type" else value
        print(f"{name.replace('_', ' ')}: {shown}", file=out)
    print(f"default frame header: {log.default_frame_header.hex(' ')}", file=out)
    print(f"producer position: {log.producer_position}", file=out)
    for index in range(d.PARTITION_COUNT):
        term = log.term(index)
        print(f"--- term {index} ---", file=out)
        offset = shown = 0
        while offset < term_length:
            length, _, flags, ftype, term_offset, session, stream, term_id, reserved = (
                DataHeader.decode(term, offset)
            )
            if length == 0:
                offset += 32
                continue
            if shown == max_frames:
                print("  ... (more frames)", file=out)
                break
            kind = FRAME_TYPES.get(ftype, f"type {ftype}")
            print(
                f"  @{offset}: {kind} length {length} flags 0x{flags:02x} "
                f"term offset {term_offset} "
                f"session {session} stream {stream} term id {term_id} reserved {reserved}",
                file=out,
            )
            shown += 1
            if data_bytes and ftype == 1 and length > 32:
                payload = bytes(term[offset + 32 : offset + min(length, 32 + data_bytes)])
                for line in hexdump(payload):
                    print(f"    {line}", file=out)
                if length - 32 > data_bytes:
                    print(f"    ... ({length - 32 - data_bytes} more bytes)", file=out)
            offset += d.align(abs(length)) if length else 32


def hexdump(data: bytes, width: int = 16) -> list[str]:
    """`hexdump -C`-style lines: offset, hex bytes, printable ASCII (others as '.')."""
    lines = []
    for start in range(0, len(data), width):
        chunk = data[start : start + width]
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{start:04x}  {chunk.hex(' '):<{width * 3 - 1}}  |{text}|")
    return lines
