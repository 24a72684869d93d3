"""Conformance: real Aeron 1.15.1 sessions (tests/data/pcap: tcpdump on loopback between two
Java media drivers, aeron:udp?endpoint=127.0.0.1:40456) replayed into the sans-IO receiver.

The UDP payloads that went to the receiver (port 40456: SETUP, DATA, PAD, heartbeats, RTTM
replies) are fed in capture order, with the capture timestamps as the clock, to a small receiver
harness built on `ReceiverStateMachine`; after each datagram the image does its duty cycle and is
polled for whole messages. What it rebuilds is compared with an expectation computed from the
pcap alone by an independent frame walker: all distinct DATA frames of the session (retransmits
repeat frames), ordered by stream position and reassembled by their B/E flags.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest

from aeronio import _core
from aeronio.counters import SystemCounters
from aeronio.driver.receiver_state import ReceiverStateMachine, receiver_window
from aeronio.protocol.frames import (
    HDR_TYPE_DATA,
    HDR_TYPE_NAK,
    HDR_TYPE_PAD,
    HDR_TYPE_RTTM,
    HDR_TYPE_SETUP,
    HDR_TYPE_SM,
    DataHeader,
    MalformedFrameError,
    NakFrame,
    SetupFrame,
    StatusMessage,
    iter_frames,
)
from tests.support.pcap import UdpPacket, read_udp
from tests.support.udp_harness import Slot, feed_frame, image_from_setup

PCAP_DIR = Path(__file__).parents[1] / "data" / "pcap"
DATA_PORT = 40456  # the receiver's data port in every capture
CAPTURES = ["basic", "pad", "nak", "rttm", "elicit", "full"]
RECEIVER_ID = 0x5EED_1234_ABCD

B_FLAG, E_FLAG, EOS = 0x80, 0x40, 0x20


# -- the capture ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Packet:
    index: int  # packet number in the capture (0-based, UDP packets only)
    now_ns: int  # capture time relative to the first packet
    to_receiver: bool
    payload: bytes


@cache
def load(name: str) -> tuple[Packet, ...]:
    udp: list[UdpPacket] = list(read_udp(PCAP_DIR / f"session-{name}.pcap"))
    t0 = udp[0].timestamp_s
    return tuple(
        Packet(i, round((p.timestamp_s - t0) * 1e6) * 1000, p.dst[1] == DATA_PORT, p.payload)
        for i, p in enumerate(udp)
    )


def to_receiver(name: str) -> list[Packet]:
    return [p for p in load(name) if p.to_receiver]


def from_receiver(name: str) -> list[Packet]:
    return [p for p in load(name) if not p.to_receiver]


@dataclass(frozen=True)
class WireFrame:
    """One frame as the independent walker sees it (DATA/PAD fields only where they apply)."""

    offset: int
    type: int
    flags: int
    frame_length: int
    raw: bytes  # the frame's bytes on the wire (DATA: aligned; PAD/heartbeat: 32-byte header)
    term_offset: int = 0
    session_id: int = 0
    stream_id: int = 0
    term_id: int = 0

    @property
    def is_heartbeat(self) -> bool:
        return self.type == HDR_TYPE_DATA and self.frame_length == 0


def aligned(length: int) -> int:
    return (length + 31) & ~31


def walk(payload: bytes) -> list[WireFrame]:
    """Split a datagram into frames with struct only (independent of aeronio's iter_frames)."""
    frames, offset = [], 0
    while offset + 8 <= len(payload):
        frame_length, _version, flags, frame_type = struct.unpack_from("<iBBH", payload, offset)
        if frame_type in (HDR_TYPE_DATA, HDR_TYPE_PAD):
            header_only = frame_type == HDR_TYPE_PAD or frame_length == 0
            step = 32 if header_only else aligned(frame_length)
            term_offset, session_id, stream_id, term_id = struct.unpack_from(
                "<iiii", payload, offset + 8
            )
            raw = payload[offset : offset + step]
            frames.append(
                WireFrame(
                    offset,
                    frame_type,
                    flags,
                    frame_length,
                    raw,
                    term_offset,
                    session_id,
                    stream_id,
                    term_id,
                )
            )
        else:
            step = aligned(frame_length)
            frames.append(
                WireFrame(offset, frame_type, flags, frame_length, payload[offset : offset + step])
            )
        offset += step
    # Frames sit on 32-byte boundaries; a lone SM/NAK/SETUP/RTTM is sent without its padding.
    assert offset == aligned(len(payload)), "the frames fill the datagram"
    return frames


def int32(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


@dataclass
class Expected:
    """What the capture says the session's stream is."""

    session_id: int
    stream_id: int
    initial_term_id: int
    term_length: int
    frames: dict[int, WireFrame]  # position -> distinct DATA frame
    pads: dict[int, WireFrame]  # position -> PAD header
    copies: int  # DATA/PAD frames in the capture, retransmissions included
    eos_position: int | None

    def position(self, term_id: int, term_offset: int) -> int:
        return int32(term_id - self.initial_term_id) * self.term_length + term_offset

    @property
    def end_position(self) -> int:
        ends = [p + aligned(f.frame_length) for p, f in self.frames.items()]
        ends += [p + f.frame_length for p, f in self.pads.items()]
        return max(ends)

    def messages(self, join_position: int = 0) -> list[tuple[bytes, int, int]]:
        """(payload, end position, fragment count) of every whole message from join_position."""
        out, parts = [], None
        for position in sorted(self.frames):
            frame = self.frames[position]
            if position < join_position:
                continue
            if frame.flags & B_FLAG:
                parts = []
            if parts is None:
                continue  # joined in the middle of a message
            parts.append(frame.raw[32 : frame.frame_length])
            if frame.flags & E_FLAG:
                end = position + aligned(frame.frame_length)
                out.append((b"".join(parts), end, len(parts)))
                parts = None
        return out


def expected(packets: list[Packet]) -> Expected:
    setups = [
        SetupFrame.decode(f.raw)
        for p in packets
        for f in walk(p.payload)
        if f.type == HDR_TYPE_SETUP
    ]
    assert setups, "the capture has a SETUP"
    assert len({(s.session_id, s.stream_id, s.initial_term_id, s.term_length) for s in setups}) == 1
    setup = setups[0]
    exp = Expected(
        setup.session_id, setup.stream_id, setup.initial_term_id, setup.term_length, {}, {}, 0, None
    )
    for packet in packets:
        for f in walk(packet.payload):
            if f.type not in (HDR_TYPE_DATA, HDR_TYPE_PAD):
                continue
            assert (f.session_id, f.stream_id) == (exp.session_id, exp.stream_id)
            position = exp.position(f.term_id, f.term_offset)
            if f.is_heartbeat:
                if f.flags & EOS:
                    assert exp.eos_position in (None, position)
                    exp.eos_position = position
                continue
            exp.copies += 1
            table = exp.pads if f.type == HDR_TYPE_PAD else exp.frames
            if position in table:
                assert table[position].raw == f.raw, "a retransmission is byte-identical"
            else:
                table[position] = f
    # The DATA and PAD frames tile the stream from its start without holes or overlaps.
    tiles = sorted(
        [(p, aligned(f.frame_length)) for p, f in exp.frames.items()]
        + [(p, f.frame_length) for p, f in exp.pads.items()]
    )
    for (p, length), (q, _) in zip(tiles, tiles[1:], strict=False):
        assert p + length == q, f"hole or overlap in the captured stream at {p + length}"
    return exp


# -- the receiver harness -----------------------------------------------------------------------


@dataclass
class Delivered:
    data: bytes
    position: int  # header.position: the stream position after the message's last fragment
    term_id: int


@dataclass
class ImageState:
    image: ReceiverStateMachine
    reader: _core.ImageReader
    subscriber_position: Slot
    setup: SetupFrame
    created_ns: int
    messages: list[Delivered] = field(default_factory=list)
    control: list[tuple[int, bytes]] = field(default_factory=list)  # (now, frame) from do_work
    inserted: int = 0  # frames insert() took as new
    ignored: int = 0  # frames insert() turned down (duplicates)

    def poll(self) -> None:
        while True:
            before = self.subscriber_position.get()
            out: list = []
            self.reader.poll_messages(out, 1 << 20)
            self.messages.extend(
                Delivered(m.data, m.header.position, m.header.term_id) for m in out
            )
            if self.subscriber_position.get() == before:
                return


class Receiver:
    """The receiving driver's data path for one channel: an image per session, made from the
    first SETUP of that session (later SETUPs are ignored while the image exists)."""

    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self.system = {c: Slot() for c in SystemCounters}
        self.images: dict[int, ImageState] = {}
        self.ignored_setups: list[SetupFrame] = []
        self.frames_without_image = 0
        self.other_frames: list[int] = []

    def on_datagram(self, payload: bytes, now_ns: int) -> None:
        for ref in iter_frames(payload):
            if ref.type == HDR_TYPE_SETUP:
                self._on_setup(SetupFrame.decode(payload, ref.offset), now_ns)
            elif ref.type in (HDR_TYPE_DATA, HDR_TYPE_PAD):
                header = DataHeader.decode(payload, ref.offset)
                state = self.images.get(header.session_id)
                if state is None or state.image.stream_id != header.stream_id:
                    self.frames_without_image += 1
                    continue
                taken = feed_frame(state.image, payload, ref, header, now_ns)
                if taken:
                    state.inserted += 1
                elif taken is not None:  # turned down (a heartbeat is neither)
                    state.ignored += 1
            else:
                self.other_frames.append(ref.type)

    def duty_cycle(self, now_ns: int) -> None:
        for state in self.images.values():
            state.control.extend((now_ns, bytes(f)) for f in state.image.do_work(now_ns))
            state.poll()

    def _on_setup(self, setup: SetupFrame, now_ns: int) -> None:
        if setup.session_id in self.images:
            self.ignored_setups.append(setup)
            return
        image, reader, subscriber_position = image_from_setup(
            self.tmp_path / f"image-{setup.session_id}.log",
            setup,
            receiver_id=RECEIVER_ID,
            system=self.system,
            now_ns=now_ns,
        )
        self.images[setup.session_id] = ImageState(
            image, reader, subscriber_position, setup, now_ns
        )


def replay(tmp_path: Path, packets: list[Packet], burst_ns: int = -1) -> Receiver:
    """Feed the datagrams in capture order, each followed by the images' duty cycle (do_work
    and poll) - or, given burst_ns, only after the last of datagrams that arrived less than
    burst_ns apart (as a receiver reads all that is waiting before it scans for gaps)."""
    receiver = Receiver(tmp_path)
    for i, packet in enumerate(packets):
        receiver.on_datagram(packet.payload, packet.now_ns)
        if i + 1 == len(packets) or packets[i + 1].now_ns - packet.now_ns > burst_ns:
            receiver.duty_cycle(packet.now_ns)
    return receiver


def only_image(receiver: Receiver, exp: Expected) -> ImageState:
    assert list(receiver.images) == [exp.session_id]
    return receiver.images[exp.session_id]


def check_delivery(state: ImageState, exp: Expected) -> None:
    """The image delivers exactly the captured messages from its join position, in order."""
    image = state.image
    want = exp.messages(image.join_position)
    got = [(m.data, m.position) for m in state.messages]
    assert len(got) == len(want)
    for i, ((data, position), (want_data, want_position, _)) in enumerate(
        zip(got, want, strict=True)
    ):
        assert position == want_position, f"message {i} ends at {position}, not {want_position}"
        assert data == want_data, f"message {i} ({len(data)} bytes) differs"
    end = exp.end_position
    assert image.rebuild_position.get() == end
    assert image.hwm_position.get() == end
    assert state.subscriber_position.get() == end


def check_control_frames(state: ImageState, exp: Expected) -> list[int]:
    """Every frame do_work returned is a well-formed SM (or NAK) for this session; SM consumption
    positions never go down. Returns the SM consumption positions."""
    image = state.image
    positions = []
    for _now, frame in state.control:
        (ref,) = list(iter_frames(frame))
        assert ref.type in (HDR_TYPE_SM, HDR_TYPE_NAK)
        if ref.type == HDR_TYPE_NAK:
            nak = NakFrame.decode(frame)
            assert len(frame) == nak.frame_length == 28
            assert (nak.version, nak.flags) == (0, 0)
            assert (nak.session_id, nak.stream_id) == (exp.session_id, exp.stream_id)
            assert nak.length > 0 and nak.length % 32 == 0 and nak.term_offset % 32 == 0
            assert nak.term_offset + nak.length <= exp.term_length
            continue
        sm = StatusMessage.decode(frame)
        assert len(frame) == sm.frame_length == 36
        assert (sm.version, sm.flags, sm.feedback) == (0, 0, b"")
        assert (sm.session_id, sm.stream_id) == (exp.session_id, exp.stream_id)
        assert sm.receiver_id == RECEIVER_ID
        assert sm.receiver_window == receiver_window(exp.term_length)
        assert 0 <= sm.consumption_term_offset < exp.term_length
        assert sm.consumption_term_offset % 32 == 0
        positions.append(exp.position(sm.consumption_term_id, sm.consumption_term_offset))
    assert positions, "the image sends status messages"
    assert positions == sorted(positions), "SM consumption positions never decrease"
    assert positions[0] == image.join_position, "the first SM is sent at once, from the join"
    assert state.control[0][0] == state.created_ns
    assert positions[-1] <= state.subscriber_position.get()
    return positions


def check_end_of_stream(state: ImageState, exp: Expected) -> None:
    assert exp.eos_position == exp.end_position
    assert state.image.end_of_stream_position == exp.eos_position
    assert state.image.log.end_of_stream_position == exp.eos_position
    assert state.reader.is_end_of_stream


def real_sm_windows(name: str) -> set[int]:
    return {
        StatusMessage.decode(f.raw).receiver_window
        for p in from_receiver(name)
        for f in walk(p.payload)
        if f.type == HDR_TYPE_SM and not f.flags
    }


# -- the tests ----------------------------------------------------------------------------------


def test_pcap_reader_keeps_only_ipv4_udp(tmp_path):
    def ipv4(proto: int, body: bytes, fragment: int = 0) -> bytes:
        header = struct.pack(
            "!BBHHHBBH4s4s", 0x45, 0, 20 + len(body), 1, fragment, 64, proto, 0,
            bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]),
        )  # fmt: skip
        return header + body

    def ether(ethertype: int, body: bytes, vlan: bool = False) -> bytes:
        tag = struct.pack("!HH", 0x8100, 7) if vlan else b""
        return b"\x02" * 6 + b"\x04" * 6 + tag + struct.pack("!H", ethertype) + body

    udp = struct.pack("!HHHH", 5000, 40456, 8 + 3, 0) + b"abc"
    frames = [
        ether(0x0806, b"\x00" * 28),  # ARP
        ether(0x86DD, b"\x60" + b"\x00" * 39),  # IPv6
        ether(0x0800, ipv4(6, b"\x00" * 20)),  # TCP
        ether(0x0800, ipv4(17, udp)),
        ether(0x0800, ipv4(17, udp) + b"\x00" * 6, vlan=True),  # Ethernet padding after IP
        ether(0x0800, ipv4(17, udp[:4], fragment=100)),  # a later IP fragment
    ]
    data = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    for i, frame in enumerate(frames):
        data += struct.pack("<IIII", 1_700_000_000 + i, 250_000, len(frame), len(frame)) + frame
    path = tmp_path / "x.pcap"
    path.write_bytes(data)
    packets = list(read_udp(path))
    assert [(p.src, p.dst, p.payload) for p in packets] == [
        (("10.0.0.1", 5000), ("10.0.0.2", 40456), b"abc")
    ] * 2
    assert packets[0].timestamp_s == pytest.approx(1_700_000_003.25)


@pytest.mark.parametrize("name", CAPTURES)
def test_every_captured_datagram_parses(name):
    """iter_frames accepts every real datagram (both directions) and splits it like the
    independent walker; the one zero-length datagram (1.15.1's RTTM bug) is refused."""
    empty = 0
    for packet in load(name):
        if not packet.payload:
            empty += 1
            with pytest.raises(MalformedFrameError):
                list(iter_frames(packet.payload))
            continue
        refs = list(iter_frames(packet.payload))
        frames = walk(packet.payload)
        assert [(r.offset, r.type, r.frame_length) for r in refs] == [
            (f.offset, f.type, f.frame_length) for f in frames
        ]
    assert empty == (1 if name in ("rttm", "full") else 0)


@pytest.mark.parametrize("name", CAPTURES)
def test_replay_rebuilds_the_captured_stream(tmp_path, name):
    packets = to_receiver(name)
    exp = expected(packets)
    receiver = replay(tmp_path, packets)
    state = only_image(receiver, exp)
    assert state.image.join_position == 0
    check_delivery(state, exp)
    check_control_frames(state, exp)
    # Retransmissions (and nothing else) are turned down; the PAD is taken like a frame.
    assert state.inserted == len(exp.frames) + len(exp.pads)
    assert state.ignored == exp.copies - state.inserted
    assert receiver.frames_without_image == 0
    assert set(receiver.other_frames) <= {HDR_TYPE_RTTM}
    assert receiver.system[SystemCounters.FLOW_CONTROL_OVER_RUNS].get() == 0
    if exp.eos_position is not None:
        check_end_of_stream(state, exp)
    # Nothing was lost on the way to the receiver (the capture point is before any drop).
    assert all(frame[6] == HDR_TYPE_SM for _, frame in state.control)


def test_basic_session(tmp_path):
    packets = to_receiver("basic")
    exp = expected(packets)
    messages = exp.messages()
    sizes = [len(data) for data, _, _ in messages]
    fragments = {len(data): count for data, _, count in messages}
    assert 3000 in sizes and fragments[3000] == 3  # 1376 + 1376 + 248 payload bytes
    assert 0 in sizes and 1376 in sizes and fragments[1376] == 1
    assert sum(1 for data, _, _ in messages if data.startswith(b"Batch ")) == 8
    assert exp.eos_position is not None and exp.pads == {} and exp.copies == len(exp.frames)

    state = only_image(replay(tmp_path, packets), exp)
    check_delivery(state, exp)
    got = [m.data for m in state.messages]
    assert [len(m) for m in got] == sizes
    assert b"" in got  # the 0-byte message is delivered, heartbeats (frame length 0) are not
    check_end_of_stream(state, exp)
    assert real_sm_windows("basic") == {receiver_window(exp.term_length)} == {131072}


def test_pad_session_crosses_a_term_boundary(tmp_path):
    packets = to_receiver("pad")
    exp = expected(packets)
    assert exp.term_length == 65536
    ((pad_position, pad),) = exp.pads.items()
    assert pad_position < exp.term_length == pad_position + pad.frame_length
    assert len(pad.raw) == 32  # only the header is on the wire

    state = only_image(replay(tmp_path, packets), exp)
    check_delivery(state, exp)
    image = state.image
    assert image.rebuild_position.get() > exp.term_length
    assert [len(m.data) for m in state.messages] == [1200] * 60  # the PAD is not delivered
    assert {m.term_id - exp.initial_term_id for m in state.messages} == {0, 1}
    before = [m for m in state.messages if m.position <= pad_position]
    assert before and before[-1].position == pad_position
    assert state.messages[len(before)].term_id == exp.initial_term_id + 1
    assert real_sm_windows("pad") == {receiver_window(exp.term_length)} == {32768}
    check_control_frames(state, exp)


def test_nak_session_ignores_retransmitted_duplicates(tmp_path):
    packets = to_receiver("nak")
    exp = expected(packets)
    duplicates = exp.copies - len(exp.frames) - len(exp.pads)
    assert duplicates > 0
    state = only_image(replay(tmp_path, packets), exp)
    check_delivery(state, exp)
    assert state.ignored == duplicates
    data = [m.data for m in state.messages]
    assert len(set(data)) == len(data), "every message once"
    assert real_sm_windows("nak") == {receiver_window(exp.term_length)}


def receiver_side_losses(name: str) -> tuple[set[int], list[tuple[int, int, int]]]:
    """The datagrams the real receiver lost (they were dropped after the capture point): those
    with a DATA frame inside a range that the receiver NAKs later in the capture. Also the
    receiver's NAKs as (term_id, term_offset, length)."""
    naks = []
    for p in from_receiver(name):
        for f in walk(p.payload):
            if f.type == HDR_TYPE_NAK:
                nak = NakFrame.decode(f.raw)
                naks.append((p.index, nak.term_id, nak.term_offset, nak.length))
    lost = set()
    for p in to_receiver(name):
        for f in walk(p.payload):
            if (
                f.type == HDR_TYPE_DATA
                and f.frame_length
                and any(
                    index > p.index and term_id == f.term_id and start <= f.term_offset < start + n
                    for index, term_id, start, n in naks
                )
            ):
                lost.add(p.index)
    return lost, [nak[1:] for nak in naks]


@pytest.mark.parametrize("name", ["nak", "full"])
def test_replay_with_the_real_receivers_losses_naks_like_it(tmp_path, name):
    """Drop what the real receiver lost: the image NAKs the same gaps the reference receiver
    NAKed, and the retransmissions in the capture fill them."""
    packets = to_receiver(name)
    exp = expected(packets)
    lost, real_naks = receiver_side_losses(name)
    assert lost and real_naks
    # The sender answers a NAK with a burst of datagrams (within ~10 us on loopback); the gap
    # is scanned once the burst is in, or each retransmitted datagram would move the gap start.
    receiver = replay(tmp_path, [p for p in packets if p.index not in lost], burst_ns=100_000)
    state = only_image(receiver, exp)
    check_delivery(state, exp)
    check_control_frames(state, exp)
    naks = [NakFrame.decode(f) for _, f in state.control if f[6] == HDR_TYPE_NAK]
    ours = {(n.term_id, n.term_offset, n.length) for n in naks}
    assert ours == set(real_naks)
    assert receiver.system[SystemCounters.NAK_MESSAGES_SENT].get() == len(naks)


def test_rttm_session(tmp_path):
    packets = to_receiver("rttm")
    exp = expected(packets)
    receiver = replay(tmp_path, packets)
    state = only_image(receiver, exp)
    check_delivery(state, exp)
    assert receiver.other_frames == [HDR_TYPE_RTTM]  # the sender's reply, ignored
    assert len(state.messages) == len(exp.messages()) > 0


def test_elicit_session_whole_capture(tmp_path):
    """The image is made from the first SETUP; the SETUP the sender later sends to the new
    receiver (term_offset 960) is ignored while the image exists."""
    packets = to_receiver("elicit")
    exp = expected(packets)
    receiver = replay(tmp_path, packets)
    state = only_image(receiver, exp)
    assert state.setup.term_offset == 0 and state.image.join_position == 0
    assert any(s.term_offset == 960 for s in receiver.ignored_setups)
    check_delivery(state, exp)
    check_control_frames(state, exp)


def test_elicit_session_new_receiver_joins_mid_stream(tmp_path):
    """What the fresh receiver saw: from its setup-eliciting SM on, DATA for a session it has
    no image for (dropped) until the SETUP with term_offset 960, then the stream from there."""
    eliciting = [
        p
        for p in from_receiver("elicit")
        if any(f.type == HDR_TYPE_SM and f.flags & 0x80 for f in walk(p.payload))
    ]
    assert eliciting
    all_packets = to_receiver("elicit")
    exp = expected(all_packets)
    # The new receiver elicits a SETUP when DATA for an unknown session arrives: it saw the
    # last datagram before its eliciting SM.
    start = max(p.index for p in all_packets if p.index < eliciting[0].index)
    tail = [p for p in all_packets if p.index >= start]
    receiver = replay(tmp_path, tail)
    state = only_image(receiver, exp)
    assert (state.setup.active_term_id, state.setup.term_offset) == (exp.initial_term_id, 960)
    assert state.image.join_position == 960
    assert receiver.frames_without_image > 0  # DATA/heartbeats before the SETUP
    check_delivery(state, exp)
    check_control_frames(state, exp)
    late = exp.messages(960)
    assert late and late == exp.messages()[-len(late) :]
    assert len(late) < len(exp.messages())
    if exp.eos_position is not None:
        check_end_of_stream(state, exp)


def test_full_session(tmp_path):
    packets = to_receiver("full")
    exp = expected(packets)
    kinds = {f.type for p in load("full") for f in walk(p.payload)}
    assert kinds == {
        HDR_TYPE_PAD,
        HDR_TYPE_DATA,
        HDR_TYPE_NAK,
        HDR_TYPE_SM,
        HDR_TYPE_SETUP,
        HDR_TYPE_RTTM,
    }
    messages = exp.messages()
    assert any(count > 1 for _, _, count in messages), "fragmented messages"
    assert any(len(walk(p.payload)) > 1 for p in packets), "batched frames"
    assert exp.copies > len(exp.frames) + len(exp.pads), "retransmissions"
    assert len(exp.pads) == 1 and exp.eos_position is not None

    receiver = replay(tmp_path, packets)
    state = only_image(receiver, exp)
    check_delivery(state, exp)
    check_control_frames(state, exp)
    check_end_of_stream(state, exp)
    assert state.ignored == exp.copies - len(exp.frames) - len(exp.pads)
    assert state.image.rebuild_position.get() > exp.term_length
    assert HDR_TYPE_RTTM in receiver.other_frames


def test_image_is_done_once_the_stream_ended(tmp_path):
    """After Publication.close() the sender sends EOS heartbeats for its 5 s linger. The
    reference receiver stops sending SMs as soon as it has seen EOS (in every capture; in
    session-full one SM left in the same duty cycle, 36 us later): its Receiver keeps an image
    only while `hasActivityAndNotEndOfStream(now)`, i.e. packets within the liveness timeout
    and not (EOS seen and rebuild position >= high-water mark). `is_alive` is that check here:
    once the stream ended and is rebuilt, the image is no longer alive although packets (the
    EOS heartbeats) keep coming."""
    for name in CAPTURES:
        eos = [
            p.now_ns
            for p in to_receiver(name)
            if any(f.is_heartbeat and f.flags & EOS for f in walk(p.payload))
        ]
        sms = [
            p.now_ns
            for p in from_receiver(name)
            if any(f.type == HDR_TYPE_SM for f in walk(p.payload))
        ]
        assert eos and sms
        assert all(t <= eos[0] + 1_000_000 for t in sms), f"{name}: an SM after EOS"

    packets = to_receiver("basic")
    exp = expected(packets)
    receiver = Receiver(tmp_path)
    alive_after_end = []
    for packet in packets:
        receiver.on_datagram(packet.payload, packet.now_ns)
        receiver.duty_cycle(packet.now_ns)
        state = receiver.images.get(exp.session_id)
        if state is not None and state.image.end_of_stream_position is not None:
            assert state.image.rebuild_position.get() == state.image.hwm_position.get()
            alive_after_end.append(state.image.is_alive(packet.now_ns))
    assert len(alive_after_end) > 50  # ~5.5 s of EOS heartbeats
    check_end_of_stream(state, exp)
    assert not any(alive_after_end), (
        f"is_alive() is True at {sum(alive_after_end)} of {len(alive_after_end)} EOS heartbeats "
        "after the stream ended and was rebuilt (the reference: EOS && rebuild >= hwm)"
    )
