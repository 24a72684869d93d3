"""A tiny reader for classic libpcap capture files (not pcapng): Ethernet II / IPv4 / UDP.

`read_udp(path)` yields one `UdpPacket(timestamp_s, src, dst, payload)` per UDP datagram in the
capture, in capture order, with `src`/`dst` as (dotted-quad ip, port). Anything that is not
IPv4/UDP over Ethernet II (ARP, IPv6, TCP, ...) and fragments other than the first are skipped;
802.1Q VLAN tags and Linux "cooked" (SLL) captures are understood too. Truncated records or
packets (snaplen) raise ValueError rather than yield short payloads.
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Iterator
from typing import NamedTuple

LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LINUX_SLL = 113

_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1e-6),  # little-endian, microseconds
    b"\xa1\xb2\xc3\xd4": (">", 1e-6),
    b"\x4d\x3c\xb2\xa1": ("<", 1e-9),  # little-endian, nanoseconds
    b"\xa1\xb2\x3c\x4d": (">", 1e-9),
}
ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_VLAN = (0x8100, 0x88A8)
IPPROTO_UDP = 17


class UdpPacket(NamedTuple):
    timestamp_s: float
    src: tuple[str, int]
    dst: tuple[str, int]
    payload: bytes


def _ip_packet(link_type: int, frame: bytes) -> bytes | None:
    """The IPv4 packet inside a link-layer frame, or None if it holds something else."""
    if link_type == LINKTYPE_RAW:
        return frame
    if link_type == LINKTYPE_ETHERNET:
        offset, ethertype_at = 14, 12
    elif link_type == LINKTYPE_LINUX_SLL:
        offset, ethertype_at = 16, 14
    else:
        raise ValueError(f"unsupported pcap link type {link_type}")
    if len(frame) < offset:
        return None
    (ethertype,) = struct.unpack_from("!H", frame, ethertype_at)
    while ethertype in ETHERTYPE_VLAN and len(frame) >= offset + 4:
        (ethertype,) = struct.unpack_from("!H", frame, offset + 2)
        offset += 4
    return frame[offset:] if ethertype == ETHERTYPE_IPV4 else None


def _udp(packet: bytes) -> tuple[str, str, int, int, bytes] | None:
    if len(packet) < 20 or packet[0] >> 4 != 4:
        return None
    header_length = (packet[0] & 0x0F) * 4
    (total_length,) = struct.unpack_from("!H", packet, 2)
    (fragment,) = struct.unpack_from("!H", packet, 6)
    if packet[9] != IPPROTO_UDP or fragment & 0x1FFF or header_length < 20:
        return None  # not UDP, or a non-first IP fragment
    if fragment & 0x2000:
        raise ValueError("fragmented IPv4 datagram (reassembly is not supported)")
    if total_length > len(packet):
        raise ValueError(f"IPv4 packet truncated: {len(packet)} of {total_length} bytes")
    src_ip, dst_ip = socket.inet_ntoa(packet[12:16]), socket.inet_ntoa(packet[16:20])
    udp = packet[header_length:total_length]
    if len(udp) < 8:
        raise ValueError("UDP header truncated")
    src_port, dst_port, udp_length = struct.unpack_from("!HHH", udp)
    if not 8 <= udp_length <= len(udp):
        raise ValueError(f"UDP length {udp_length} does not fit the {len(udp)}-byte IP payload")
    return src_ip, dst_ip, src_port, dst_port, bytes(udp[8:udp_length])


def read_udp(path: str | os.PathLike) -> Iterator[UdpPacket]:
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24 or data[:4] not in _MAGICS:
        raise ValueError(f"{path}: not a classic pcap file")
    endian, tick = _MAGICS[data[:4]]
    link_type = struct.unpack_from(endian + "I", data, 20)[0] & 0x0FFFFFFF
    record = struct.Struct(endian + "IIII")
    offset = 24
    while offset < len(data):
        if offset + record.size > len(data):
            raise ValueError(f"{path}: truncated record header at byte {offset}")
        seconds, fraction, captured, original = record.unpack_from(data, offset)
        offset += record.size
        if captured != original:
            raise ValueError(f"{path}: packet at byte {offset} cut to {captured} of {original}")
        if offset + captured > len(data):
            raise ValueError(f"{path}: truncated packet at byte {offset}")
        frame = data[offset : offset + captured]
        offset += captured
        packet = _ip_packet(link_type, frame)
        udp = None if packet is None else _udp(packet)
        if udp is not None:
            src_ip, dst_ip, src_port, dst_port, payload = udp
            yield UdpPacket(
                seconds + fraction * tick, (src_ip, src_port), (dst_ip, dst_port), payload
            )
