"""Batched UDP I/O with segmentation offload over real loopback sockets: DatagramSender with and
without GSO, DatagramReceiver with GRO, scan_datagrams, and the Cython receive path
(ImageRouter, ImageRebuilder), checked byte for byte against what was sent."""

import random
import select
import socket
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

import aeronio
from aeronio import _core
from aeronio.driver.receiver_state import SM_EARLY_NS, SM_TIMEOUT_NS
from aeronio.logbuffer import descriptor as d
from aeronio.logbuffer.log_buffers import LogBuffers
from aeronio.protocol.frames import (
    HDR_TYPE_DATA,
    HDR_TYPE_NAK,
    HDR_TYPE_PAD,
    HDR_TYPE_SM,
    data_header,
    nak_frame,
    setup_frame,
)
from tests.driver.test_udp_driver import connected, exchange, payload
from tests.support.driver_internals import udp_media
from tests.support.ports import free_port
from tests.support.procs import ROOT
from tests.support.udp_harness import Slot

SOL_UDP, UDP_SEGMENT, UDP_GRO = 17, 103, 104
LOCALHOST = "127.0.0.1"
TERM = 64 * 1024
MTU = 1408
SESSION, STREAM, INITIAL_TERM_ID = 5, 6, 1000


# -- sockets ---------------------------------------------------------------------------


def kernel_refuses(option: int, value: int) -> str | None:
    """Why the kernel refuses this UDP socket option (None if it takes it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.setsockopt(SOL_UDP, option, value)
        except OSError as e:
            return f"the kernel refuses UDP option {option}: {e}"
    return None


def require(option: int, value: int) -> None:
    reason = kernel_refuses(option, value)
    if reason:
        print(reason)
        pytest.skip(reason)


@pytest.fixture
def udp():
    """Makes bound loopback sockets (with a large receive buffer, with UDP_GRO if asked)."""
    made = []

    def make(gro: bool = False) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        made.append(sock)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        sock.bind((LOCALHOST, 0))
        if gro:
            sock.setsockopt(SOL_UDP, UDP_GRO, 1)
        return sock

    yield make
    for sock in made:
        sock.close()


def split(buffer, segment: int) -> list[bytes]:
    """The datagrams of a received buffer: GRO runs cut at their segment size."""
    data = bytes(buffer)
    if not data:
        return [b""]
    return [data[i : i + segment] for i in range(0, len(data), segment)]


def wait_readable(sock: socket.socket, deadline: float, what: str) -> None:
    remaining = deadline - time.monotonic()
    assert remaining > 0 and select.select([sock], [], [], remaining)[0], what


def assert_nothing_more(sock: socket.socket) -> None:
    assert not select.select([sock], [], [], 0.05)[0], "more datagrams arrived than were sent"


def receive(sock: socket.socket, receiver, count: int) -> tuple[list[bytes], list]:
    """The next `count` datagrams (GRO runs cut apart) and, per buffer received,
    (length, segment size, source)."""
    datagrams, buffers = [], []
    deadline = time.monotonic() + 5
    while len(datagrams) < count:
        wait_readable(sock, deadline, f"{len(datagrams)} of {count} datagrams arrived")
        for i in range(receiver.recv(sock.fileno())):
            buffers.append((len(receiver.data(i)), receiver.segment_size(i), receiver.address(i)))
            datagrams.extend(split(receiver.data(i), receiver.segment_size(i)))
    assert_nothing_more(sock)
    return datagrams, buffers


# -- DatagramSender with and without GSO ------------------------------------------------


def offload_mix(rng: random.Random) -> list[list]:
    """Datagrams that test where a GSO run must end, grouped as a DatagramSender with gso must
    send them (each group one message): slices of one buffer in runs of equal, contiguous ones,
    ended by a shorter, longer, empty or non-contiguous one, by 64 datagrams or 65507 bytes."""
    memory = memoryview(bytearray(rng.randbytes(800_000)))
    elsewhere = memoryview(bytearray(rng.randbytes(10_000)))
    at = 0

    def take(n: int, times: int = 1, gap: int = 0) -> list:
        """`times` slices of n bytes, contiguous, `gap` bytes after the previous take."""
        nonlocal at
        at += gap
        out = [memory[at + k * n : at + (k + 1) * n] for k in range(times)]
        at += n * times
        return out

    def runs(n: int, sizes: list[int], gap: int = 1) -> list[list]:
        """Contiguous slices of n bytes, expected as groups of `sizes`."""
        slices = take(n, sum(sizes), gap)
        return [slices[sum(sizes[:k]) : sum(sizes[: k + 1])] for k in range(len(sizes))]

    return [
        take(1000, 10) + take(300),  # a shorter last one ends the run...
        take(300, 2),  # ...and what follows it, contiguous and as long, is a new run
        take(500, 5, gap=1),
        [elsewhere[:500]],  # as long, but not where the run continues
        take(500, 3),  # (contiguous with the five)
        take(400, 4, gap=1),
        take(600),  # contiguous but longer
        take(200, 3, gap=1),
        take(0),  # empty, between two contiguous runs of 200
        take(200, 3),
        take(0, gap=1),
        take(0),
        *runs(100, [64, 64, 22]),  # at most 64 datagrams per message
        *runs(50, [64, 64, 1]),
        *runs(2000, [32, 8]),  # at most 65507 bytes: 32 * 2000 = 64000
        take(9358, 7, gap=1) + take(1),  # exactly 65507 bytes
        take(9358, 7, gap=1),
        take(2) + take(1),  # would make 65508 bytes with the seven before
        take(1, 20),
        take(65507, gap=1),  # the largest UDP payload, alone
        [b"bytes"],
        [b"bytes"],  # the same object: not contiguous with itself
        [bytes(elsewhere[1000:1100])],
        [elsewhere[2000:2100], elsewhere[2100:2200], elsewhere[2200:2210]],
        [bytearray(b"a bytearray")],
    ]


def flat(groups: list[list]) -> list:
    return [datagram for group in groups for datagram in group]


def send(sock: socket.socket, datagrams: list, address: tuple, gso: bool) -> int:
    """Send `datagrams` from `sock` to `address` through a DatagramSender; the short sends it
    counted."""
    short_sends = Slot()
    sender = _core.DatagramSender(sock.fileno(), short_sends, gso)
    sender.set_destinations([(address, 65507)])
    sender.send(datagrams)
    return short_sends.get()


@pytest.mark.parametrize("gso", [True, False], ids=["gso", "no-gso"])
def test_datagram_sender_delivers_exactly_the_datagrams_given(udp, gso):
    if gso:
        require(UDP_SEGMENT, 0)
    datagrams = flat(offload_mix(random.Random(1)))
    sender, plain = udp(), udp()
    receiver = _core.DatagramReceiver(64, 65536)
    assert send(sender, datagrams, plain.getsockname(), gso) == 0
    got, buffers = receive(plain, receiver, len(datagrams))
    assert got == [bytes(datagram) for datagram in datagrams]
    assert len(buffers) == len(datagrams)
    for length, segment, source in buffers:
        assert segment == length  # no GRO: each buffer is one datagram
        assert source == sender.getsockname()


def test_gro_receiver_gets_gso_runs_as_one_buffer_and_segment_size_cuts_them(udp):
    require(UDP_SEGMENT, 0)
    require(UDP_GRO, 1)
    groups = offload_mix(random.Random(2))
    datagrams = flat(groups)
    sender, coalescing = udp(), udp(gro=True)
    receiver = _core.DatagramReceiver(64, 65536)
    assert send(sender, datagrams, coalescing.getsockname(), True) == 0
    got, buffers = receive(coalescing, receiver, len(datagrams))
    assert got == [bytes(datagram) for datagram in datagrams]
    # Each message arrives as one buffer, which shows what the sender made of the runs;
    # except that loopback cuts those over its gso_max_size (65536 bytes with the headers).
    shapes = [(length, segment) for length, segment, _ in buffers]
    i = 0
    for k, group in enumerate(groups):
        lengths = [len(datagram) for datagram in group]
        if shapes[i] == (sum(lengths), lengths[0]):
            i += 1
        else:
            assert sum(lengths) > 65000, f"group {k} {lengths[:3]}... not sent as one"
            assert shapes[i : i + len(group)] == [(n, n) for n in lengths], f"group {k}"
            i += len(group)
    assert i == len(shapes)
    assert all(source == sender.getsockname() for _, _, source in buffers)


# -- frames ------------------------------------------------------------------------------


def new_log(path, term_id: int, term_offset: int) -> LogBuffers:
    """A log of the test's session and stream, its tail at (term_id, term_offset)."""
    return LogBuffers.create(
        path,
        term_length=TERM,
        initial_term_id=INITIAL_TERM_ID,
        session_id=SESSION,
        stream_id=STREAM,
        mtu=MTU,
        term_id=term_id,
        term_offset=term_offset,
    )


def frame(
    term_offset: int,
    body: bytes = b"",
    *,
    frame_length: int | None = None,
    type: int = HDR_TYPE_DATA,
    term_id: int = INITIAL_TERM_ID,
    session_id: int = SESSION,
    stream_id: int = STREAM,
    aligned: bool = True,
) -> bytes:
    """A DATA (or PAD) frame as sent: header, body and, if `aligned`, zero padding."""
    header = data_header(
        frame_length=32 + len(body) if frame_length is None else frame_length,
        term_offset=term_offset,
        session_id=session_id,
        stream_id=stream_id,
        term_id=term_id,
        type=type,
    ).encode()
    data = header + body
    return data + bytes(d.align(len(data)) - len(data)) if aligned else data


def packet(term_offset: int, bodies: list[bytes], *, last_aligned: bool = True, **fields) -> bytes:
    """DATA frames one after the other from term_offset, each naming its own term offset."""
    out = b""
    for i, body in enumerate(bodies):
        last = i == len(bodies) - 1
        out += frame(term_offset + len(out), body, aligned=last_aligned or not last, **fields)
    return out


def patch(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


class Image:
    """A network image's log (joined at term_offset of term_id: by default the start of the
    initial term), its rebuilder and a router that knows it, every position and counter in
    memory."""

    def __init__(
        self,
        path,
        limit_position: int = TERM,
        term_id: int = INITIAL_TERM_ID,
        term_offset: int = 0,
    ):
        self.log = new_log(path, term_id, term_offset)
        join = d.compute_position(term_id, term_offset, TERM, INITIAL_TERM_ID)
        self.hwm, self.rebuild, self.over_runs = Slot(join), Slot(join), Slot()
        self.bytes_received, self.invalid, self.heartbeats = Slot(), Slot(), Slot()
        self.sms_sent = Slot()
        self.rebuilder = _core.ImageRebuilder(
            self.log.mapped,
            SESSION,
            STREAM,
            self.hwm,
            self.rebuild,
            self.over_runs,
            self.sms_sent,
            limit_position,
            SM_TIMEOUT_NS,
            SM_EARLY_NS,
            0,
        )
        self.router = _core.ImageRouter(self.bytes_received, self.invalid, self.heartbeats)
        self.router.add(self.rebuilder)

    def snapshot(self) -> tuple:
        return (
            self.log.array.copy(),
            self.hwm.get(),
            self.rebuild.get(),
            self.over_runs.get(),
            self.invalid.get(),
        )

    def term(self, index: int = 0) -> bytes:
        return bytes(self.log.term(index))


def assert_unchanged(image: Image, before: tuple) -> None:
    after = image.snapshot()
    assert np.array_equal(after[0], before[0]), "the image's log changed"
    assert after[1:] == before[1:], "(hwm, rebuild, over-runs, invalid) changed"


T = 4096  # where the test packets go in the term
VALID = packet(T, [b"A" * 40, b"B" * 10, b"C" * 32])  # frames of 96, 64 and 64 bytes
SECOND, THIRD = 96, 160  # where the 2nd and 3rd frames start in VALID
assert len(VALID) == 224


def at(term_offset: int, bodies: list[bytes] = (b"A" * 40, b"B" * 10, b"C" * 32)) -> bytes:
    return packet(term_offset, list(bodies))


MALFORMED = {
    "version 1 in the 2nd frame": patch(VALID, SECOND + 4, "<B", 1),
    "2nd frame's term offset 32 on": patch(VALID, SECOND + 8, "<i", T + SECOND + 32),
    "2nd frame's term offset 32 back": patch(VALID, SECOND + 8, "<i", T + SECOND - 32),
    "truncated last frame": VALID[:-16],
    "last frame longer than the bytes left": patch(VALID, THIRD, "<i", 96),
    "PAD as the 2nd frame": patch(VALID, SECOND + 6, "<H", HDR_TYPE_PAD),
    "PAD header in the middle": VALID[:SECOND]
    + frame(T + SECOND, frame_length=64, type=HDR_TYPE_PAD)
    + frame(T + SECOND + 32, b"C" * 32),
    "frame length 31 in the 1st frame": patch(VALID, 0, "<i", 31),
    "frame length 31 in the 2nd frame": patch(VALID, SECOND, "<i", 31),
    "negative frame length in the 1st frame": patch(VALID, 0, "<i", -96),
    "heartbeat as the 2nd frame": VALID[:SECOND] + frame(T + SECOND, frame_length=0),
    "SM type as the 2nd frame": patch(VALID, SECOND + 6, "<H", HDR_TYPE_SM),
    "trailing bytes after the last frame": VALID + bytes(16),
    "unaligned term offset": packet(T + 8, [b"A" * 40, b"B" * 10, b"C" * 32]),
    "negative term offset": at(-224),
    "extent past the term end": at(TERM - 192),
    "unaligned last frame past the term end": frame(TERM - 32, b"x" * 8, aligned=False),
    "PAD running past the term end": frame(TERM - 64, frame_length=96, type=HDR_TYPE_PAD),
    "PAD of frame length 2^30 + 32": frame(0, frame_length=(1 << 30) + 32, type=HDR_TYPE_PAD),
    "PAD with a body": frame(T, b"p" * 32, type=HDR_TYPE_PAD),
    "33 bytes of a 96-byte frame": VALID[:33],
    "last frame sent neither unaligned nor aligned": frame(T, b"x" * 8, aligned=False) + bytes(10),
    "33 bytes: an empty DATA frame and a stray byte": frame(T) + b"x",
}


@pytest.mark.parametrize("variant", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_packet_for_a_known_image_is_counted_and_changes_nothing(tmp_path, variant):
    image = Image(tmp_path / "image.log")
    before = image.snapshot()
    assert image.router.route(variant, 1) is True  # handled: not for the Python dispatcher
    assert image.invalid.get() == before[4] + 1
    image.invalid.set(before[4])
    assert_unchanged(image, before)
    assert image.rebuilder.insert(variant, 2) is False
    assert_unchanged(image, before)
    # the same image takes the well-formed packet
    assert image.router.route(VALID, 3) is True
    assert image.term()[T : T + 224] == VALID
    assert image.hwm.get() == T + 224 and image.invalid.get() == before[4]


UNALIGNED_END = [b"A" * 40, b"B" * 10, b"C" * 10]  # the last frame: 42 bytes, 64 aligned
DATA_THEN_PAD = frame(T, b"A" * 40) + frame(T + 96, frame_length=128, type=HDR_TYPE_PAD)
DATA_THEN_SHORT_PAD = frame(TERM - 96, b"A" * 30) + frame(TERM - 32, type=HDR_TYPE_PAD)
PAD_TO_TERM_END = frame(TERM - 256, frame_length=256, type=HDR_TYPE_PAD)
ACCEPTED = {  # (term offset, datagram, what it puts in the term, extent)
    "three frames": (T, VALID, VALID, 224),
    "last frame sent unaligned": (
        T,
        packet(T, UNALIGNED_END, last_aligned=False),
        packet(T, UNALIGNED_END),
        224,
    ),
    "one unaligned 33-byte frame": (T, frame(T, b"x", aligned=False), frame(T, b"x"), 64),
    "an empty DATA frame": (T, frame(T), frame(T), 32),
    "a PAD header": (T, frame(T, frame_length=1000, type=HDR_TYPE_PAD), None, 1024),
    "DATA then a PAD header": (T, DATA_THEN_PAD, DATA_THEN_PAD, 96 + 128),
    "a PAD header to the term end": (TERM - 256, PAD_TO_TERM_END, PAD_TO_TERM_END, 256),
    "frames to the term end": (TERM - 224, at(TERM - 224), at(TERM - 224), 224),
    "DATA then a 32-byte PAD to the term end": (TERM - 96, DATA_THEN_SHORT_PAD, None, 96),
}


@pytest.mark.parametrize("case", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_well_formed_packet_goes_whole_to_its_term_offset(tmp_path, case):
    term_offset, datagram, written, extent = case
    written = datagram if written is None else written
    image = Image(tmp_path / "image.log")
    before = image.term()
    assert image.router.route(datagram, 42) is True
    assert image.invalid.get() == 0 and image.over_runs.get() == 0
    assert image.bytes_received.get() == len(datagram)
    assert image.hwm.get() == term_offset + extent
    assert image.rebuilder.time_of_last_packet_ns == 42
    expected = before[:term_offset] + written + before[term_offset + len(written) :]
    assert image.term() == expected
    snapshot = image.snapshot()
    assert image.rebuilder.insert(datagram, 43) is False  # a duplicate
    assert image.router.route(datagram, 44) is True
    assert_unchanged(image, snapshot)


NOT_ROUTED = {
    "unknown session": packet(T, [b"A" * 40], session_id=SESSION + 1),
    "unknown stream": packet(T, [b"A" * 40], stream_id=STREAM + 1),
    "malformed, unknown session": patch(packet(T, [b"A"], session_id=9), 0, "<i", 31),
    "heartbeat": frame(T, frame_length=0),
    "SETUP": setup_frame(
        session_id=SESSION,
        stream_id=STREAM,
        initial_term_id=INITIAL_TERM_ID,
        term_length=TERM,
        mtu=MTU,
    ).encode(),
    "SM type": patch(VALID, 6, "<H", HDR_TYPE_SM),
    "NAK": nak_frame(
        session_id=SESSION, stream_id=STREAM, term_id=INITIAL_TERM_ID, term_offset=0, length=64
    ).encode(),
    "NAK type on a DATA header": patch(VALID, 6, "<H", HDR_TYPE_NAK),
    "empty": b"",
    "shorter than a header": VALID[:31],
}


@pytest.mark.parametrize("datagram", NOT_ROUTED.values(), ids=NOT_ROUTED.keys())
def test_what_is_not_a_data_packet_for_a_known_image_is_left_to_python(tmp_path, datagram):
    image = Image(tmp_path / "image.log")
    before = image.snapshot()
    assert image.router.route(datagram, 1) is False
    assert_unchanged(image, before)
    assert image.bytes_received.get() == 0


def test_removed_image_no_longer_takes_its_packets(tmp_path):
    image = Image(tmp_path / "image.log")
    image.router.remove(SESSION, STREAM + 1)  # another stream: no effect
    image.router.remove(SESSION, STREAM)
    image.router.remove(SESSION, STREAM)
    before = image.snapshot()
    assert image.router.route(VALID, 1) is False
    assert_unchanged(image, before)
    image.router.add(image.rebuilder)
    assert image.router.route(VALID, 1) is True and image.hwm.get() == T + 224


# -- the window ---------------------------------------------------------------------------


def test_packet_past_the_limit_is_an_over_run_and_is_not_inserted(tmp_path):
    image = Image(tmp_path / "image.log", limit_position=8192)
    before = image.snapshot()
    late = at(8192 - 224 + 32)  # ends 32 bytes past the limit
    assert image.rebuilder.insert(late, 1) is False
    assert image.over_runs.get() == 1
    image.over_runs.set(0)
    assert_unchanged(image, before)
    assert image.router.route(at(T, [b"x"]), 1) is True  # one frame, ends at T + 64 < limit
    snapshot = image.snapshot()
    assert image.router.route(late, 2) is True  # handled (dropped), not left to Python
    assert image.router.route(packet(T, [b"n"], term_id=INITIAL_TERM_ID + 1), 3) is True
    assert image.over_runs.get() == 2
    image.over_runs.set(0)
    assert_unchanged(image, snapshot)
    assert image.invalid.get() == 0
    image.rebuilder.limit_position = 8192 + 32  # a consumer moved on: the same packet fits
    assert image.rebuilder.insert(late, 4) is True
    assert image.hwm.get() == 8192 + 32 and image.over_runs.get() == 0


def test_packet_ending_exactly_at_the_limit_is_inserted(tmp_path):
    image = Image(tmp_path / "image.log", limit_position=8192)
    assert image.rebuilder.insert(at(8192 - 224), 1) is True
    assert image.hwm.get() == 8192 and image.over_runs.get() == 0


def test_packet_behind_the_rebuild_position_is_dropped_without_an_over_run(tmp_path):
    image = Image(tmp_path / "image.log")
    image.rebuild.set(T)
    image.hwm.set(T)
    before = image.snapshot()
    assert image.rebuilder.insert(at(1024), 1) is False
    assert image.rebuilder.insert(at(T - 224), 2) is False  # ends exactly at the rebuild position
    assert image.router.route(at(0), 3) is True
    before_join = packet(TERM - 224, [b"A" * 40, b"B" * 10, b"C" * 32], term_id=INITIAL_TERM_ID - 1)
    assert image.router.route(before_join, 4) is True
    assert_unchanged(image, before)
    assert image.rebuilder.insert(at(T), 5) is True  # starts at it
    assert image.hwm.get() == T + 224 and image.over_runs.get() == 0


def test_is_within_window(tmp_path):
    image = Image(tmp_path / "image.log", limit_position=8192)
    image.rebuild.set(T)
    assert image.rebuilder.is_within_window(T - 64, 64) is False
    assert image.rebuilder.is_within_window(T - 64, 96) is False  # reaches past it: dropped too
    assert image.rebuilder.is_within_window(T, 32) is True
    assert image.rebuilder.is_within_window(8192 - 32, 32) is True
    assert image.over_runs.get() == 0
    assert image.rebuilder.is_within_window(8192 - 32, 64) is False
    assert image.over_runs.get() == 1


# -- a publication's log through GSO, GRO and the router -----------------------------------


def fill_publication(path, rng: random.Random, term_id: int, term_offset: int):
    """A publication log starting at (term_id, term_offset), filled with random-size messages
    until the publisher limit 2.5 terms on (three partitions, none used twice)."""
    log = new_log(path, term_id, term_offset)
    start = log.producer_position
    appender = _core.LogAppender(log.mapped, Slot(start + 5 * TERM // 2).array, 0, False)
    sizes = [0, 1, 31, 32, 100, 500, 1344, 1376, 1377, 2000, 4000, 8000]
    while True:
        message = rng.randbytes(rng.choice(sizes) if rng.random() < 0.6 else rng.randrange(300))
        result = appender.try_offer(message)
        if result == _core.ADMIN_ACTION:
            continue
        if result < 0:
            break
    return log, start, log.producer_position


def route_arrivals(sock, receiver, router, count: int, now_ns: int) -> tuple[list, int]:
    """Receive `count` datagrams and route them; (what the router left over, GRO runs seen)."""
    rest, got, runs = [], 0, 0
    deadline = time.monotonic() + 5
    while got < count:
        wait_readable(sock, deadline, f"{got} of {count} datagrams arrived")
        for i in range(receiver.recv(sock.fileno())):
            length, segment = len(receiver.data(i)), receiver.segment_size(i)
            got += -(-length // segment) if length else 1
            runs += length > segment
        rest += [(bytes(view), source) for view, source in router.route_received(receiver, now_ns)]
    assert got == count
    return rest, runs


def datagram_position(datagram) -> int:
    term_offset, _, _, term_id = struct.unpack_from("<iiii", datagram, 8)
    return d.compute_position(term_id, term_offset, TERM, INITIAL_TERM_ID)


def datagram_extent(datagram) -> tuple[int, bool]:
    """The term bytes a sent datagram covers (a PAD header: its whole frame), whether it ends
    with a PAD; it must be whole frames."""
    offset = 0
    while offset < len(datagram):
        frame_length, frame_type = struct.unpack_from("<i2xH", datagram, offset)
        if frame_type == HDR_TYPE_PAD:
            assert offset + 32 == len(datagram), "a PAD is sent as its header, last"
            return offset + d.align(frame_length), True
        assert frame_type == HDR_TYPE_DATA and frame_length >= 32
        offset += d.align(frame_length)
    assert offset == len(datagram), "a datagram of whole frames"
    return offset, False


def test_publication_log_sent_with_gso_is_rebuilt_byte_for_byte_by_the_router(tmp_path, udp):
    require(UDP_SEGMENT, 0)
    require(UDP_GRO, 1)
    term_id, term_offset = INITIAL_TERM_ID + 1, 4096
    pub, start, end = fill_publication(tmp_path / "pub.log", random.Random(3), term_id, term_offset)
    assert end - start > 2 * TERM - 8192  # two term rotations
    image = Image(tmp_path / "image.log", end, term_id, term_offset)
    image_log, hwm, router = image.log, image.hwm, image.router

    sender, coalescing = udp(), udp(gro=True)
    receiver = _core.DatagramReceiver(64, 65536)
    terms = [memoryview(pub.term(i)) for i in range(d.PARTITION_COUNT)]
    batches, position, pads, runs = [], start, 0, 0
    while position < end:
        out = []
        term = terms[d.index_by_position(position, TERM)]
        covered, count = _core.scan_datagrams(
            term, position & (TERM - 1), end - position, MTU, 64, out
        )
        assert 0 < count == len(out) <= 64
        # whole frames from where the last batch stopped; a PAD header ends the last one
        cursor = position
        for k, datagram in enumerate(out):
            assert datagram_position(datagram) == cursor and 32 <= len(datagram) <= MTU
            extent, ends_with_pad = datagram_extent(datagram)
            assert not ends_with_pad or k == len(out) - 1
            pads += ends_with_pad
            cursor += extent
        assert covered == cursor - position
        assert send(sender, out, coalescing.getsockname(), True) == 0
        rest, batch_runs = route_arrivals(coalescing, receiver, router, count, 7)
        assert rest == []
        runs += batch_runs
        batches.append(out)
        position += covered
    assert position == end and pads >= 2 and runs > 0
    for index in range(d.PARTITION_COUNT):
        assert bytes(image_log.term(index)) == bytes(pub.term(index)), f"term {index} differs"
        assert any(pub.term(index))
    assert hwm.get() == end and image.rebuild.get() == start
    assert image.invalid.get() == 0 and image.over_runs.get() == 0
    total = sum(len(datagram) for out in batches for datagram in out)
    assert image.bytes_received.get() == total

    # Everything again: duplicates, none written. (A byte flipped after each packet's length
    # word shows whether any was written again.)
    for out in batches:
        for datagram in out:
            position = datagram_position(datagram)
            term = image_log.term(d.index_by_position(position, TERM))
            term[(position & (TERM - 1)) + 8] ^= 0xFF
    marked = image_log.array.copy()
    for out in batches:
        assert send(sender, out, coalescing.getsockname(), True) == 0
        rest, _ = route_arrivals(coalescing, receiver, router, len(out), 8)
        assert rest == []
    assert_nothing_more(coalescing)
    assert np.array_equal(image_log.array, marked), "a duplicate was written again"
    assert hwm.get() == end and image.invalid.get() == 0 and image.over_runs.get() == 0
    assert image.bytes_received.get() == 2 * total
    assert not any(image.rebuilder.insert(datagram, 9) for out in batches for datagram in out)
    assert np.array_equal(image_log.array, marked)


@pytest.mark.parametrize("offload", [True, False], ids=["gso-gro", "plain"])
def test_route_received_returns_the_other_datagrams_with_their_source(tmp_path, udp, offload):
    """Data packets and others in one GSO run (one buffer with GRO) and alone: the router takes
    the data packets (a malformed one counted) and the image's heartbeats, and returns the
    rest, in order, from the sender."""
    if offload:
        require(UDP_SEGMENT, 0)
        require(UDP_GRO, 1)
    image = Image(tmp_path / "image.log")
    sender, receiving = udp(), udp(gro=offload)
    unknown = packet(T, [b"A" * 40, b"B" * 10, b"C" * 32], session_id=SESSION + 1)
    heartbeat = NOT_ROUTED["heartbeat"]
    malformed = patch(at(T + 448), SECOND + 4, "<B", 1)
    run = memoryview(bytearray(VALID + unknown + at(T + 224) + malformed + heartbeat))
    run_datagrams = [run[k : k + 224] for k in range(0, 4 * 224, 224)] + [run[4 * 224 :]]
    setup, empty = NOT_ROUTED["SETUP"], NOT_ROUTED["empty"]
    mix = [*run_datagrams, setup, empty, heartbeat]
    assert send(sender, mix, receiving.getsockname(), offload) == 0
    receiver = _core.DatagramReceiver(64, 65536)
    rest, runs = route_arrivals(receiving, receiver, image.router, len(mix), 5)
    assert runs == (1 if offload else 0)
    source = sender.getsockname()
    expected = [unknown, setup, empty]
    assert rest == [(datagram, source) for datagram in expected]
    assert image.term()[T : T + 448] == VALID + at(T + 224)
    assert not any(image.term()[T + 448 :])
    assert image.hwm.get() == T + 448 and image.invalid.get() == 1
    assert image.heartbeats.get() == 2 and image.router.routed == 3  # heartbeats: not routed
    assert image.bytes_received.get() == 3 * 224 + 2 * 32


def test_hwm_only_rises(tmp_path):
    image = Image(tmp_path / "image.log")
    assert image.rebuilder.insert(at(8192), 1) is True
    assert image.rebuilder.insert(at(T), 2) is True
    assert image.hwm.get() == 8192 + 224
    assert image.term()[T : T + 224] == VALID


# -- the driver with and without offload ---------------------------------------------------


@pytest.mark.parametrize("offload", [True, False], ids=["offload", "no-offload"])
async def test_driver_delivers_with_and_without_udp_offload(offload):
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=64k"
    async with (
        aeronio.connect(udp_offload=offload) as a,
        aeronio.connect(udp_offload=offload) as b,
    ):
        sub = await b.add_subscription(channel, 21)
        pub = await a.add_publication(channel, 21)
        await connected(pub, sub)
        (send_endpoint,) = udp_media(a).send_endpoints.values()
        assert send_endpoint.sender.gso is (offload and kernel_refuses(UDP_SEGMENT, 0) is None)
        (receive_endpoint,) = udp_media(b).receive_endpoints.values()
        (destination,) = receive_endpoint.destinations.values()
        gro = destination.socket.getsockopt(SOL_UDP, UDP_GRO)
        assert gro == (offload and kernel_refuses(UDP_GRO, 1) is None)
        sizes = [4, 100, 1376, 1377, 4000, 8000, 37]
        expected = [payload(i, sizes[i % len(sizes)]) for i in range(2500)]
        assert await exchange(pub, sub, expected, 30) == expected
        assert pub.position > 10 * TERM


MTU_PROBE = """
import asyncio, subprocess, sys
sys.path.insert(0, {root!r})
subprocess.run(["ip", "link", "set", "lo", "mtu", "1500", "up"], check=True)
import aeronio
from tests.driver.test_udp_driver import connected
from tests.support.ports import free_port

async def main():
    channel = f"aeron:udp?endpoint=127.0.0.1:{{free_port()}}|term-length=256k|mtu=8192"
    async with aeronio.connect() as a, aeronio.connect() as b:
        sub = await b.add_subscription(channel, 1)
        pub = await a.add_publication(channel, 1)
        await connected(pub, sub)
        sent = bytes(range(256)) * 80
        await pub.offer(sent, timeout=5)
        async with asyncio.timeout(5):
            async for message in sub:
                assert message.data == sent
                print("delivered", len(message.data))
                return

asyncio.run(main())
"""


def in_fresh_netns(script: str) -> str:
    """What `script` (formatted with `root`, the repository) prints, run by Python in a fresh
    network namespace (skips, saying why, without the privilege to make one)."""
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0:
        print("skipped: no privilege to make a network namespace (unshare -n)")
        pytest.skip("needs unshare -n (a network namespace)")
    done = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", script.format(root=ROOT)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_datagrams_larger_than_the_path_mtu_are_sent_without_gso():
    """Channel MTU 8192 over a link of MTU 1500 (a fresh network namespace): the kernel would
    refuse GSO segments it cannot IP-fragment, so the endpoint groups only what the path MTU
    carries and the 8 KiB datagrams go out plain, fragmented by IP."""
    assert in_fresh_netns(MTU_PROBE).strip() == "delivered 20480"


def test_a_refused_send_is_a_short_send_and_never_raises(udp):
    """What the kernel refuses (here EACCES: broadcast from a socket without SO_BROADCAST, a GSO
    run and a lone datagram) is counted as a short send per destination, repaired by NAKs like
    loss; the destinations after it still get the datagrams, and GSO stays on (the refusal is
    not the path's)."""
    require(UDP_SEGMENT, 0)
    short_sends = Slot()
    sock, plain = udp(), udp()
    sender = _core.DatagramSender(sock.fileno(), short_sends, True)
    sender.set_destinations([(("255.255.255.255", 9), 1472), (plain.getsockname(), 65507)])
    run = memoryview(b"x" * 64 + b"y" * 64)
    sender.send([run[:64], run[64:]])  # one after the other in memory: one GSO message
    sender.send([b"z" * 64])
    assert short_sends.get() == 2
    assert sender.gso is True
    receiver = _core.DatagramReceiver(64, 65536)
    got, _ = receive(plain, receiver, 3)
    assert got == [b"x" * 64, b"y" * 64, b"z" * 64]
    with pytest.raises(ValueError, match="not an IPv4 address"):
        sender.set_destinations([(("::1", 9), 1472)])


GSO_REFUSED = """
import socket, subprocess, sys, time
sys.path.insert(0, {root!r})
subprocess.run(["ip", "link", "set", "lo", "mtu", "1500", "up"], check=True)
from tests.support.udp_harness import Slot
from aeronio import _core

sock, into = (socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(2))
sock.bind(("127.0.0.1", 0))
into.bind(("127.0.0.1", 0))
short_sends = Slot()
sender = _core.DatagramSender(sock.fileno(), short_sends, True)
sender.set_destinations([(into.getsockname(), 65507)])  # a path MTU the link does not have
run = memoryview(bytes(range(250)) * 16)
sender.send([run[:2000], run[2000:]])  # one GSO message of 2000-byte segments: refused
print(short_sends.get(), sender.gso)
sender.send([run[:2000], run[2000:]])  # plain now, fragmented by IP
into.settimeout(5)
got = [into.recv(65536) == bytes(run[k : k + 2000]) for k in (0, 2000)]
print(short_sends.get(), sender.gso, got)
"""


def test_a_path_that_cannot_segment_turns_gso_off():
    """GSO segments larger than the path's MTU are refused by the kernel (a link of MTU 1500 in
    a fresh network namespace): a short send, then GSO off and the same datagrams delivered."""
    require(UDP_SEGMENT, 0)
    assert in_fresh_netns(GSO_REFUSED).split("\n")[:2] == ["1 False", "1 False [True, True]"]


def heartbeat(term_offset: int, *, eos: bool = False, **fields) -> bytes:
    """A heartbeat as a publication sends it: a DATA header of length 0 (EOS-flagged at the
    end of its stream)."""
    header = bytearray(frame(term_offset, frame_length=0, **fields))
    header[5] = 0xC0 | (0x20 if eos else 0)
    return bytes(header)


def test_the_router_takes_a_known_images_heartbeats_and_leaves_the_rest(tmp_path, udp):
    """A heartbeat without EOS of a known image is taken in C: counted (received, and its
    bytes), heard (for the early status message), a sign of life, its position the high-water
    mark if ahead (a lost tail), its sender a new source of the image. One with EOS, of an
    unknown session, or with a term offset no frame could have (unaligned, negative, past the
    term) is left to Python; one beyond the window counts, but shows no life."""
    image = Image(tmp_path / "image.log")
    sender, receiving = udp(), udp()
    receiver, source = _core.DatagramReceiver(64, 65536), sender.getsockname()
    ahead = heartbeat(T + 256)
    eos, unknown = heartbeat(T + 256, eos=True), heartbeat(T, session_id=SESSION + 1)
    odd = [heartbeat(T + 8), patch(heartbeat(0), 8, "<i", -32), heartbeat(TERM)]
    datagrams = [ahead, eos, unknown, *odd]
    assert send(sender, datagrams, receiving.getsockname(), False) == 0
    rest, _ = route_arrivals(receiving, receiver, image.router, len(datagrams), 77)
    assert rest == [(datagram, source) for datagram in datagrams[1:]]
    assert image.hwm.get() == T + 256 and image.rebuild.get() == 0
    assert image.rebuilder.time_of_last_packet_ns == 77 and image.rebuilder.heartbeat_heard
    assert (image.heartbeats.get(), image.router.routed, image.bytes_received.get()) == (1, 0, 32)
    assert image.router.sources_changed
    assert image.rebuilder.take_new_sources() == [(receiver, source)]
    assert not any(image.term())  # a heartbeat writes nothing
    beyond = heartbeat(64, term_id=INITIAL_TERM_ID + 1)  # past the slowest consumer's term
    assert send(sender, [beyond], receiving.getsockname(), False) == 0
    assert route_arrivals(receiving, receiver, image.router, 1, 99)[0] == []
    assert image.rebuilder.time_of_last_packet_ns == 77 and image.hwm.get() == T + 256
    assert image.heartbeats.get() == 2 and image.over_runs.get() == 1
