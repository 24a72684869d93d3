"""Property tests of the log buffer data path (appender, readers, frame layout) against an
independent model of Aeron's log buffers.

Every expectation here (positions, term ids, frame offsets, flags, PAD lengths) is computed by
the test itself from the rules in the reference (../shared/reference/log-buffers.txt and
DESIGN.md "The reference behaviour"), never by calling the code under test.
"""

from __future__ import annotations

import math
import random
import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, example, given, note, settings
from hypothesis import strategies as st

from aeronio import _core
from aeronio.logbuffer.log_buffers import LogBuffers

HEADER_LENGTH = 32
TERM_LENGTH = 64 * 1024
MTU = 1408
MAX_PAYLOAD = MTU - HEADER_LENGTH  # 1376
MAX_MESSAGE = TERM_LENGTH // 8  # 8192
SESSION_ID = -123456789
STREAM_ID = 1001
HDR_TYPE_PAD = 0
HDR_TYPE_DATA = 1
FLAG_B = 0x80
FLAG_E = 0x40
UNFRAGMENTED = 0xC0
FRAME = struct.Struct("<iBBHiiiiq")

# 32 KiB of fixed pseudo-random bytes; payloads are slices of it.
POOL = random.Random(20240601).randbytes(32 * 1024)

# Initial term ids: negative ones, and ones near the signed 32-bit wrap.
NOTABLE_TERM_IDS = [0, 1, -1, 2**31 - 1, 2**31 - 2, 2**31 - 5, -(2**31), -(2**31) + 1, -7]
initial_term_ids = st.one_of(
    st.sampled_from(NOTABLE_TERM_IDS), st.integers(min_value=-(2**31), max_value=2**31 - 1)
)

SETTINGS = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# -- the reference model -------------------------------------------------------------------


def int32(value: int) -> int:
    return ((value + 2**31) % 2**32) - 2**31


def align32(value: int) -> int:
    return (value + 31) // 32 * 32


def ref_position(term_id: int, initial_term_id: int, term_offset: int, term_length: int) -> int:
    """position = ((termId - initialTermId) wrapped to int32) * termLength + termOffset."""
    return int32(term_id - initial_term_id) * term_length + term_offset


def fragment_lengths(length: int, max_payload: int) -> list[int]:
    """The payload length of each frame a message of `length` bytes is written as."""
    if length <= max_payload:
        return [length]
    full, rest = divmod(length, max_payload)
    return [max_payload] * full + ([rest] if rest else [])


def fragment_flags(count: int) -> list[int]:
    if count == 1:
        return [UNFRAGMENTED]
    return [FLAG_B] + [0] * (count - 2) + [FLAG_E]


def reserved_length(length: int, max_payload: int) -> int:
    """Bytes one message takes in the term: every frame 32-aligned, reserved as one block."""
    return sum(align32(n + HEADER_LENGTH) for n in fragment_lengths(length, max_payload))


def payload(index: int, length: int) -> bytes:
    start = (index * 7919) % (len(POOL) - length + 1)
    return POOL[start : start + length]


def new_log(directory: str, **kwargs) -> LogBuffers:
    options = dict(
        term_length=TERM_LENGTH,
        initial_term_id=0,
        session_id=SESSION_ID,
        stream_id=STREAM_ID,
        mtu=MTU,
    )
    options.update(kwargs)
    return LogBuffers.create(Path(directory) / "log", **options)


def new_counter(value: int = 2**62) -> np.ndarray:
    counter = np.zeros(16, dtype=np.uint8)
    _core.AtomicBuffer(counter).put_int64_ordered(0, value)
    return counter


def set_counter(counter: np.ndarray, value: int) -> None:
    _core.AtomicBuffer(counter).put_int64_ordered(0, value)


def read_frame(term: np.ndarray, offset: int) -> tuple:
    return FRAME.unpack_from(bytes(term[offset : offset + HEADER_LENGTH]))


# -- a publication and two subscribers driven through many rotations ------------------------


@dataclass
class Expected:
    data: bytes
    position: int
    term_id: int
    start_offset: int
    # (term_offset, flags, payload length) of each frame.
    frames: list[tuple[int, int, int]] = field(default_factory=list)


class Stream:
    """One log, its appender(s), a poll+FragmentAssembler reader and a poll_messages reader.

    The model (term_id, term_offset) is advanced by the test from the reference rules only.
    The publisher limit is kept at min(reader positions) + term_length / 2 like the driver does,
    and consumed data is cleaned one term behind the slowest reader.
    """

    def __init__(
        self,
        directory: str,
        initial_term_id: int,
        exclusive: bool,
        appenders: int,
        poll_limits: tuple[int, int],
        mtu: int = MTU,
        term_length: int = TERM_LENGTH,
    ):
        self.log = new_log(
            directory, initial_term_id=initial_term_id, mtu=mtu, term_length=term_length
        )
        self.log.mapped.set_connected(True)
        self.initial_term_id = initial_term_id
        self.term_length = term_length
        self.max_payload = mtu - HEADER_LENGTH
        self.limit = new_counter(0)
        self.appenders = [
            _core.LogAppender(self.log.mapped, self.limit, 0, exclusive=exclusive)
            for _ in range(appenders)
        ]
        self.positions = np.zeros(32, dtype=np.uint8)
        self.fragment_reader = _core.ImageReader(self.log.mapped, self.positions, 0)
        self.message_reader = _core.ImageReader(self.log.mapped, self.positions, 8)
        self.poll_limits = poll_limits
        self.assembler = _core.FragmentAssembler(self._on_message)
        self.term_id = initial_term_id
        self.term_offset = 0
        self.rotations = 0
        self.cleaned = 0
        self.sent: list[Expected] = []
        self.assembled: list[tuple[bytes, int, int]] = []
        self.messages: list = []
        self.fragment_cursor = (0, 0)  # (message index, frame index) the next fragment must be

    @property
    def model_position(self) -> int:
        return ref_position(self.term_id, self.initial_term_id, self.term_offset, self.term_length)

    def offer(self, data: bytes, appender: _core.LogAppender) -> int:
        required = reserved_length(len(data), self.max_payload)
        for _ in range(10_000):
            limit = min(self.fragment_reader.position, self.message_reader.position)
            limit += self.term_length // 2
            set_counter(self.limit, limit)
            before = self.model_position
            result = appender.try_offer(data)
            if result == _core.BACK_PRESSURED:
                assert before >= limit, f"back pressured at {before} below the limit {limit}"
                self.pump()
                continue
            assert before < limit, f"offer at {before} passed the limit {limit}: {result}"
            if self.term_offset + required > self.term_length:
                # The message does not fit: PAD to the term end, rotate, ADMIN_ACTION.
                assert result == _core.ADMIN_ACTION, (
                    f"expected ADMIN_ACTION at term offset {self.term_offset} for {required}"
                    f" bytes, got {result}"
                )
                self.term_id = int32(self.term_id + 1)
                self.term_offset = 0
                self.rotations += 1
                assert self.log.active_term_count == int32(self.term_id - self.initial_term_id)
                continue
            start = self.term_offset
            self.term_offset += required
            expected = self.model_position
            assert result == expected, f"offer returned {result}, reference says {expected}"
            assert appender.position == expected
            assert self.log.producer_position == expected
            lengths = fragment_lengths(len(data), self.max_payload)
            frames, offset = [], start
            for length, flags in zip(lengths, fragment_flags(len(lengths)), strict=True):
                frames.append((offset, flags, length))
                offset += align32(length + HEADER_LENGTH)
            assert offset == self.term_offset
            self.sent.append(Expected(data, result, self.term_id, start, frames))
            return result
        raise AssertionError("the publication made no progress")

    # -- consumers --------------------------------------------------------------------------

    def _on_fragment(self, buffer: memoryview, header: _core.Header) -> None:
        index, frame_index = self.fragment_cursor
        expected = self.sent[index]
        term_offset, flags, length = expected.frames[frame_index]
        assert header.type == HDR_TYPE_DATA
        assert header.version == 0
        assert header.reserved_value == 0
        assert header.session_id == SESSION_ID and header.stream_id == STREAM_ID
        assert header.term_id == expected.term_id
        assert header.term_offset == term_offset
        assert header.flags == flags
        assert header.frame_length == HEADER_LENGTH + length == HEADER_LENGTH + len(buffer)
        assert header.position == ref_position(
            expected.term_id,
            self.initial_term_id,
            term_offset + align32(header.frame_length),
            self.term_length,
        )
        if frame_index + 1 == len(expected.frames):
            self.fragment_cursor = (index + 1, 0)
        else:
            self.fragment_cursor = (index, frame_index + 1)
        self.assembler(buffer, header)

    def _on_message(self, buffer: memoryview, header: _core.Header) -> None:
        self.assembled.append((bytes(buffer), header.position, header.term_id))

    def pump(self) -> None:
        self.fragment_reader.poll(self._on_fragment, self.poll_limits[0])
        self.message_reader.poll_messages(self.messages, self.poll_limits[1])
        self._clean()

    def _clean(self) -> None:
        slowest = min(self.fragment_reader.position, self.message_reader.position)
        target = slowest - self.term_length
        while self.cleaned < target:
            self.cleaned += self.log.mapped.clean(self.cleaned, target)

    def drain(self) -> None:
        end = self.model_position
        for _ in range(100_000):
            if self.fragment_reader.position == self.message_reader.position == end:
                return
            self.pump()
        raise AssertionError("the readers never reached the end of the stream")

    def check_delivery(self) -> None:
        count = len(self.sent)
        assert len(self.assembled) == count, f"{len(self.assembled)} of {count} via poll"
        assert len(self.messages) == count, f"{len(self.messages)} of {count} via poll_messages"
        for i, expected in enumerate(self.sent):
            data, position, term_id = self.assembled[i]
            assert data == expected.data, f"message {i} differs (poll)"
            assert position == expected.position, f"message {i} position (poll)"
            assert term_id == expected.term_id
            message = self.messages[i]
            assert message.data == expected.data, f"message {i} differs (poll_messages)"
            assert message.position == expected.position, f"message {i} (poll_messages)"
            assert message.header.term_id == expected.term_id
            assert message.header.session_id == SESSION_ID


def make_sizes(rng: random.Random, count: int, big_fraction: float) -> list[int]:
    sizes = []
    for _ in range(count):
        roll = rng.random()
        if roll < big_fraction:
            sizes.append(rng.randint(MAX_PAYLOAD + 1, MAX_MESSAGE))
        elif roll < big_fraction + 0.15:
            sizes.append(rng.randint(0, MAX_PAYLOAD))
        else:
            sizes.append(rng.randint(0, 100))
    return sizes


def run_stream(
    initial_term_id: int,
    exclusive: bool,
    appenders: int,
    sizes: list[int],
    poll_every: int,
    poll_limits: tuple[int, int],
    seed: int,
) -> Stream:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as directory:
        stream = Stream(directory, initial_term_id, exclusive, appenders, poll_limits)
        for i, size in enumerate(sizes):
            stream.offer(payload(i, size), rng.choice(stream.appenders))
            if i % poll_every == poll_every - 1:
                stream.pump()
        stream.drain()
        stream.check_delivery()
        assert stream.log.producer_position == stream.model_position
        stream.log.close()
    return stream


notable_sizes = st.sampled_from(
    [
        0,
        1,
        31,
        32,
        33,
        MAX_PAYLOAD - 1,
        MAX_PAYLOAD,
        MAX_PAYLOAD + 1,
        2 * MAX_PAYLOAD,
        2 * MAX_PAYLOAD + 1,
        MAX_MESSAGE - 1,
        MAX_MESSAGE,
    ]
)
message_sizes = st.one_of(
    notable_sizes,
    st.integers(0, 64),
    st.integers(0, MAX_PAYLOAD),
    st.integers(MAX_PAYLOAD + 1, MAX_MESSAGE),
)


@st.composite
def workloads(draw):
    exclusive = draw(st.booleans())
    appenders = 1 if exclusive else draw(st.integers(1, 3))
    explicit = draw(st.lists(message_sizes, max_size=30))
    seed = draw(st.integers(0, 2**32 - 1))
    bulk = draw(st.one_of(st.integers(0, 300), st.integers(1500, 3000)))
    big_fraction = draw(st.sampled_from([0.0, 0.05, 0.2, 0.5]))
    sizes = explicit + make_sizes(random.Random(seed), bulk, big_fraction)
    draw(st.randoms(use_true_random=False)).shuffle(sizes)
    return dict(
        initial_term_id=draw(initial_term_ids),
        exclusive=exclusive,
        appenders=appenders,
        sizes=sizes,
        poll_every=draw(st.integers(1, 64)),
        poll_limits=(draw(st.integers(1, 40)), draw(st.integers(1, 40))),
        seed=seed,
    )


@pytest.mark.slow
@settings(SETTINGS, max_examples=120)
@given(workloads())
def test_every_message_arrives_once_in_order_with_reference_positions(workload):
    stream = run_stream(**workload)
    note(f"{len(workload['sizes'])} messages, {stream.rotations} rotations")
    event(f"rotations >= 10: {stream.rotations >= 10}")


def test_many_rotations_across_the_int32_term_id_wrap():
    """>= 10 rotations starting 2 terms before the term id wraps from 2**31-1 to -2**31,
    with concurrent and exclusive appenders."""
    for exclusive in (False, True):
        sizes = make_sizes(random.Random(99), 1400, 0.1) + [MAX_MESSAGE] * 20
        stream = run_stream(2**31 - 2, exclusive, 1 if exclusive else 2, sizes, 7, (5, 9), 3)
        assert stream.rotations >= 10, stream.rotations
        assert stream.term_id < 0  # crossed the wrap
        assert stream.sent[-1].position > 10 * TERM_LENGTH


def test_many_rotations_with_negative_initial_term_id():
    sizes = [MAX_MESSAGE, 0, MAX_PAYLOAD + 1, 17] * 120
    for exclusive in (False, True):
        stream = run_stream(-1_000_003, exclusive, 1, sizes, 3, (16, 16), 5)
        assert stream.rotations >= 10, stream.rotations


# -- raw frame layout of a filled term ---------------------------------------------------------


def check_data_frames(
    term: np.ndarray, start: int, data: bytes, term_id: int, max_payload: int
) -> int:
    """Check the frames of one message written at `start`; returns the offset after them."""
    lengths = fragment_lengths(len(data), max_payload)
    offset, consumed = start, 0
    for length, flags in zip(lengths, fragment_flags(len(lengths)), strict=True):
        assert offset % 32 == 0, f"frame at {offset} is not 32-aligned"
        (
            frame_length,
            version,
            frame_flags,
            frame_type,
            term_offset,
            session,
            stream,
            tid,
            reserved,
        ) = read_frame(term, offset)
        assert frame_length == HEADER_LENGTH + length, (offset, frame_length, length)
        assert version == 0
        assert frame_flags == flags, f"flags 0x{frame_flags:02x} at {offset}, want 0x{flags:02x}"
        assert frame_type == HDR_TYPE_DATA
        assert term_offset == offset
        assert session == SESSION_ID and stream == STREAM_ID
        assert tid == term_id
        assert reserved == 0
        body = bytes(term[offset + HEADER_LENGTH : offset + frame_length])
        assert body == data[consumed : consumed + length]
        aligned_end = offset + align32(frame_length)
        assert not term[offset + frame_length : aligned_end].any(), "alignment bytes not zero"
        consumed += length
        offset = aligned_end
    assert consumed == len(data)
    return offset


@settings(SETTINGS, max_examples=200)
@given(
    initial_term_id=initial_term_ids,
    sizes=st.lists(message_sizes, min_size=1, max_size=40),
    exclusive=st.booleans(),
)
@example(initial_term_id=2**31 - 1, sizes=[1024 - HEADER_LENGTH], exclusive=False)  # exact fit
@example(initial_term_id=-5, sizes=[1024 - HEADER_LENGTH], exclusive=True)  # exact fit
@example(initial_term_id=3, sizes=[MAX_MESSAGE, 100], exclusive=False)
def test_filled_term_frames_alignment_and_pad(initial_term_id, sizes, exclusive):
    with tempfile.TemporaryDirectory() as directory:
        log = new_log(directory, initial_term_id=initial_term_id)
        limit = new_counter()
        appender = _core.LogAppender(log.mapped, limit, 0, exclusive=exclusive)
        written: list[tuple[int, bytes]] = []
        offset, i = 0, 0
        while True:
            data = payload(i, sizes[i % len(sizes)])
            result = appender.try_offer(data)
            required = reserved_length(len(data), MAX_PAYLOAD)
            if offset + required > TERM_LENGTH:
                assert result == _core.ADMIN_ACTION, result
                break
            assert result == ref_position(
                initial_term_id, initial_term_id, offset + required, TERM_LENGTH
            )
            written.append((offset, data))
            offset += required
            i += 1

        term = log.term(0)
        position = 0
        for start, data in written:
            assert start == position
            position = check_data_frames(term, start, data, initial_term_id, MAX_PAYLOAD)
        assert position == offset
        if offset < TERM_LENGTH:
            (
                frame_length,
                version,
                flags,
                frame_type,
                term_offset,
                session,
                stream,
                tid,
                reserved,
            ) = read_frame(term, offset)
            assert frame_type == HDR_TYPE_PAD
            assert flags == UNFRAGMENTED
            assert frame_length == TERM_LENGTH - offset
            assert term_offset == offset
            assert (version, session, stream, tid, reserved) == (
                0,
                SESSION_ID,
                STREAM_ID,
                initial_term_id,
                0,
            )
            assert not term[offset + HEADER_LENGTH :].any(), "PAD body must stay untouched zeros"
        assert log.active_term_count == 1
        assert log.raw_tail(1) >> 32 == int32(initial_term_id + 1)

        # The message that did not fit goes, whole, to offset 0 of the next term (term_id + 1).
        retry = appender.try_offer(data)
        next_term_id = int32(initial_term_id + 1)
        assert retry == TERM_LENGTH + reserved_length(len(data), MAX_PAYLOAD)
        end = check_data_frames(log.term(1), 0, data, next_term_id, MAX_PAYLOAD)
        assert end == reserved_length(len(data), MAX_PAYLOAD)
        assert read_frame(log.term(1), 0)[7] == next_term_id
        assert read_frame(log.term(1), 0)[4] == 0

        # A reader sees every message of the first term, skips the PAD, then the retried one.
        reader = _core.ImageReader(log.mapped, new_counter(0), 0)
        received = []
        assembler = _core.FragmentAssembler(lambda b, h: received.append((bytes(b), h.position)))
        for _ in range(10):
            reader.poll(assembler, 1000)
        assert reader.position == retry
        assert [d for d, _ in received] == [d for _, d in written] + [data]
        assert received[-1][1] == retry
        log.close()


# -- fragmentation ----------------------------------------------------------------------------


@settings(SETTINGS, max_examples=300)
@given(
    mtu=st.sampled_from([64, 96, 128, 480, 1408, 4096]),
    term_length=st.sampled_from([64 * 1024, 128 * 1024]),
    prefill=st.lists(st.integers(0, 600), max_size=120),
    extra=st.integers(1, 2**20),
    initial_term_id=initial_term_ids,
    exclusive=st.booleans(),
)
def test_fragmented_message_is_one_contiguous_block_in_one_term(
    mtu, term_length, prefill, extra, initial_term_id, exclusive
):
    max_payload = mtu - HEADER_LENGTH
    max_message = term_length // 8
    if max_payload >= max_message:
        mtu = 1408
        max_payload = mtu - HEADER_LENGTH
    length = max_payload + 1 + (extra % (max_message - max_payload))
    data = payload(1, length)
    frames = math.ceil(length / max_payload)
    required = reserved_length(length, max_payload)
    with tempfile.TemporaryDirectory() as directory:
        log = new_log(directory, initial_term_id=initial_term_id, mtu=mtu, term_length=term_length)
        limit = new_counter()
        appender = _core.LogAppender(log.mapped, limit, 0, exclusive=exclusive)
        other = _core.LogAppender(log.mapped, limit, 0, exclusive=False)
        assert appender.max_payload_length == max_payload
        assert appender.max_message_length == max_message
        offset = 0
        for i, size in enumerate(prefill):
            need = reserved_length(size, max_payload)
            if offset + need > term_length:
                break
            assert appender.try_offer(payload(i, size)) == offset + need
            offset += need
        term_id, index, term_begin = initial_term_id, 0, 0
        tail_before = log.raw_tail(0)
        assert tail_before == (int32(term_id) << 32) + offset
        result = appender.try_offer(data)
        if offset + required > term_length:
            assert result == _core.ADMIN_ACTION
            assert read_frame(log.term(0), offset)[3] == HDR_TYPE_PAD
            term_id, index, term_begin, offset = int32(initial_term_id + 1), 1, term_length, 0
            tail_before = log.raw_tail(1)
            result = appender.try_offer(data)
        # One reservation of every fragment's aligned length: the tail jumps by it at once.
        assert result == term_begin + offset + required
        assert log.raw_tail(index) - tail_before == required
        assert offset + required <= term_length, "fragments must never span terms"
        term = log.term(index)
        end = check_data_frames(term, offset, data, term_id, max_payload)
        assert end == offset + required
        assert len(fragment_lengths(length, max_payload)) == frames
        # Contiguous: every full fragment is exactly one MTU long (mtu is 32-aligned).
        starts = [offset + k * mtu for k in range(frames)]
        assert [read_frame(term, s)[4] for s in starts] == starts
        # Nothing was written after the block; the next message goes right behind it.
        if end < term_length:
            assert read_frame(term, end)[0] == 0
        if end + 64 <= term_length:
            assert other.try_offer(b"next") == term_begin + end + 64
            assert read_frame(term, end)[4] == end

        # A reader starting at the message sees exactly its fragments, then the whole message.
        reader = _core.ImageReader(log.mapped, new_counter(term_begin + offset), 0)
        fragments, messages = [], []
        assembler = _core.FragmentAssembler(lambda b, h: messages.append((bytes(b), h.position)))

        def on_fragment(buffer, header):
            fragments.append((header.term_offset, header.flags, len(buffer)))
            assembler(buffer, header)

        for _ in range(frames + 2):
            reader.poll(on_fragment, 7)
        block = fragments[:frames]
        assert [f[0] for f in block] == starts
        assert [f[1] for f in block] == fragment_flags(frames)
        assert [f[2] for f in block] == fragment_lengths(length, max_payload)
        assert messages[0] == (data, result)
        log.close()
