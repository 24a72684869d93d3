"""Fuzz the Cython core's compiled entry points that parse frames with hypothesis, for a given
time, checking each against a Python model of the frame rules: scan_whole_frames, the term
scanners (term_block_scan, term_scan_for_availability, scan_datagrams), every ImageReader read
(poll, controlled_poll, block_poll, batch_poll, poll_messages, messages(copy=False)),
LogAppender.try_offer_block, offer_recorded (a replay's run over a damaged segment, against
the segment reader's own rules), ImageRebuilder.insert/advance, unblock_log and Header.decode.

Run as a child process (a crash must be a failing exit status, not a dead test runner):
`python -m tests.support.frame_fuzz SECONDS [SEED]`. Before each hypothesis run it prints the
target and seed (so a crash names what to replay); at the end one JSON line:
{"calls": ..., "examples": ..., "seconds": ..., "failures": 0}. A model mismatch raises (the
falsifying example printed by hypothesis, exit status 1).
"""

from __future__ import annotations

import json
import struct
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from aeronio import _core
from aeronio.archive.segments import frame_problem, scan_frames
from aeronio.errors import AeronError
from aeronio.logbuffer.log_buffers import LogBuffers

TERM = 64 * 1024
SESSION, STREAM, INITIAL_TERM_ID = 7, 8, 100
FRAME = struct.Struct("<iBBHiiiiq")
INT32 = st.integers(-(2**31), 2**31 - 1)
# Lengths at every edge: not written, below a header, around the term and the int32 wrap.
EDGES = [0, -1, -32, -(2**31), 1, 31, 32, 33, 63, 64, 1024, TERM - 32, TERM, TERM + 32]
EDGES += [1 << 29, 1 << 30, 0x7FFFFFDF, 0x7FFFFFE0, 0x7FFFFFE1, 0x7FFFFFF0, 0x7FFFFFFF]
LENGTHS = st.one_of(st.sampled_from(EDGES), st.integers(32, 2048), INT32)
# Flags: BEGIN, middle, END and whole as often as any other byte, so messages of fragments form.
FLAGS = st.one_of(st.sampled_from([0x80, 0x00, 0x40, 0xC0]), st.integers(0, 255))
FRAMES = st.lists(
    st.tuples(LENGTHS, FLAGS, st.sampled_from([0, 1, 1, 1, 2, 0xFFFF])),
    max_size=24,
)
# Well-formed frames of fragmented messages (some PAD, the lengths sound): messages across a
# fragment limit, broken off or dropped for want of a BEGIN.
MESSAGE_FRAMES = st.lists(
    st.tuples(
        st.integers(32, 256),
        st.sampled_from([0x80, 0x00, 0x40, 0xC0]),
        st.sampled_from([1, 1, 1, 1, 0]),
    ),
    max_size=24,
)
# Frames a recording holds (DATA and PAD, lengths that fit): a run over them goes on.
SOUND_FRAMES = st.lists(
    st.tuples(st.integers(32, 2048), st.integers(0, 255), st.sampled_from([0, 1, 1, 1])),
    max_size=24,
)
CALLS = [0]


def align(length: int) -> int:
    return (length + 31) & ~31


def extent(length: int, offset: int, end: int) -> int:
    """The model of frame_extent: aligned length, 0 (not written) or -1 (corrupt)."""
    if length <= 0:
        return 0
    if length < 32 or align(length) > end - offset:
        return -1
    return align(length)


def fill(term: np.ndarray, start: int, frames, noise: bytes = b"") -> None:
    """Zero `term`, then lay `frames` (length, flags, type) from `start`, each next one where the
    last one's length says (if that is in the term), the bodies patterned."""
    term[:] = 0
    term[start : start + len(noise)] = np.frombuffer(noise, dtype=np.uint8)[: TERM - start]
    offset = start
    for length, flags, type_ in frames:
        if offset + 32 > TERM:
            break
        FRAME.pack_into(term, offset, length, 0, flags, type_, offset, SESSION, STREAM, 0, 0)
        step = align(length) if 32 <= length <= TERM else 32 * (1 + (length & 7))
        body = min(step, TERM - offset) - 32
        if body > 0:
            term[offset + 32 : offset + 32 + body] = (offset // 32) & 0xFF
        offset += step


def model_walk(term: bytes, start: int, end: int, limit: int = 1 << 40) -> tuple[list, str]:
    """The whole frames from `start` as (offset, length, aligned), and why the walk stopped:
    "end", "absent" or "corrupt"."""
    frames, offset = [], start
    while offset < end and len(frames) < limit:
        length = struct.unpack_from("<i", term, offset)[0]
        aligned = extent(length, offset, end)
        if aligned <= 0:
            return frames, "absent" if aligned == 0 else "corrupt"
        frames.append((offset, length, aligned))
        offset += aligned
    return frames, "end"


def is_pad(term: bytes, offset: int) -> bool:
    return struct.unpack_from("<H", term, offset + 6)[0] == 0


def model_whole_messages(data: bytes, start: int, limit: int) -> tuple[list, int, int]:
    """The model of poll_messages from a new reader: (payloads, fragments counted, position
    after). Up to `limit` fragments are consumed; a message is handed out once its END is read
    right after the rest of it (its first fragments wait in the assembly until then); one that
    lost a fragment (a PAD or a missing frame between), or is cut by a term's start, is dropped,
    as are fragments without a BEGIN."""
    walk, _ = model_walk(data, start, TERM)
    out, fragments, position, parts = [], 0, start, None
    for offset, length, aligned in walk:
        if fragments >= limit:
            break
        position = offset + aligned
        if is_pad(data, offset):
            continue
        fragments += 1
        flags, payload = data[offset + 5], data[offset + 32 : offset + length]
        if flags & 0xC0 == 0xC0:
            out.append(payload)
        elif flags & 0x80:
            parts, follows_from = [payload], position
        elif parts is not None and offset != 0 and offset == follows_from:
            parts.append(payload)
            follows_from = position
            if flags & 0x40:
                out.append(b"".join(parts))
                parts = None
        else:
            parts = None
    return out, fragments, position


def new_log(directory: str) -> LogBuffers:
    """A log of TERM-long terms in `directory`."""
    return LogBuffers.create(
        Path(directory, "log"),
        term_length=TERM,
        initial_term_id=INITIAL_TERM_ID,
        session_id=SESSION,
        stream_id=STREAM,
        mtu=1408,
    )


def counter(value: int = 0) -> np.ndarray:
    """A position (8 bytes) holding `value`."""
    buffer = np.zeros(8, dtype=np.uint8)
    _core.AtomicBuffer(buffer).put_int64_ordered(0, value)
    return buffer


class Fixture:
    """One log (its term 0 fuzzed), reused by every example."""

    def __init__(self, directory: str):
        self.log = new_log(directory)
        self.term = self.log.term(0)
        self.meta = _core.AtomicBuffer(self.log.array[-4096:])

    def reset_tail(self, term_offset: int = 0) -> None:
        self.meta.put_int64_ordered(0, INITIAL_TERM_ID * 2**32 + term_offset)
        self.meta.put_int32_ordered(24, 0)

    def close(self) -> None:
        self.log.close()


FIXTURE: Fixture
SETTINGS = settings(
    max_examples=150,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


def call(function, *args):
    CALLS[0] += 1
    return function(*args)


# -- targets --------------------------------------------------------------------------------------


@SETTINGS
@given(
    frames=FRAMES,
    start=st.integers(0, 4096),
    end=st.one_of(st.integers(-64, 8192), st.just(TERM)),
    noise=st.binary(max_size=64),
)
def fuzz_scan_whole_frames(frames, start, end, noise):
    fill(FIXTURE.term, start, frames, noise)
    data = bytes(FIXTURE.term)
    got = call(_core.scan_whole_frames, data, start, end)
    offset, stop = start, min(end, TERM)
    while offset + 32 <= stop:
        aligned = extent(struct.unpack_from("<i", data, offset)[0], offset, stop)
        if aligned <= 0:
            break
        offset += aligned
    assert got == offset, (got, offset)


@SETTINGS
@given(frames=FRAMES, start=st.integers(0, 64).map(lambda i: i * 32), limit=st.integers(0, TERM))
def fuzz_term_scanners(frames, start, limit):
    fill(FIXTURE.term, start, frames)
    term, data = FIXTURE.term, bytes(FIXTURE.term)
    limit_offset = min(TERM, start + limit)
    scanned = call(_core.term_block_scan, term, start, limit_offset)
    walk, _ = model_walk(data, start, TERM)
    expected = start
    for offset, _, aligned in walk:
        if is_pad(data, offset):
            expected = offset + aligned if offset == start else expected
            break
        if offset + aligned > limit_offset:
            break
        expected = offset + aligned
    if limit_offset <= start:
        expected = start
    assert scanned == expected, (scanned, expected)
    available, padding = call(_core.term_scan_for_availability, term, start, limit)
    assert 0 <= available <= min(limit, TERM - start) and available % 32 == 0
    assert padding >= 0 and start + available + padding <= TERM
    out = []
    covered, count = call(_core.scan_datagrams, term, start, limit, 1408, 8, out)
    assert len(out) == count and start + covered <= TERM
    for datagram in map(bytes, out):  # whole frames, or a PAD's header last
        inner, why = model_walk(datagram, 0, len(datagram))
        if why != "end":
            pad = inner[-1][0] + inner[-1][2] if inner else 0
            assert pad == len(datagram) - 32 and is_pad(datagram, pad), "a bad frame sent"


@SETTINGS
@given(
    frames=st.one_of(FRAMES, MESSAGE_FRAMES),
    start=st.integers(0, 16).map(lambda i: i * 32),
    limit=st.integers(1, 40),
)
def fuzz_image_reader(frames, start, limit):
    fill(FIXTURE.term, start, frames)
    data = bytes(FIXTURE.term)
    walk, why = model_walk(data, start, TERM)
    messages = [(o, n) for o, n, _ in walk if not is_pad(data, o)]

    def reader():
        return _core.ImageReader(FIXTURE.log.mapped, counter(start), 0)

    def read(method: str, *args):
        """A new reader's `method(*args)` and its position after; None for the result when it
        raised (only when the first frame is corrupt)."""
        image = reader()
        try:
            result = call(getattr(image, method), *args)
        except AeronError as e:
            assert why == "corrupt" and not walk, (e, walk, why)
            assert "corrupt frame length" in str(e)
            return None, image.position
        return result, image.position

    for method in ("poll", "controlled_poll"):
        got = []
        count, position = read(
            method,
            lambda buffer, header, got=got: got.append((header.term_offset, bytes(buffer))),
            limit,
        )
        if count is not None:
            assert count == len(got) == min(limit, len(messages))
            expected = [(o, data[o + 32 : o + n]) for o, n in messages][:count]
            assert got == expected
            assert start <= position <= TERM
    blocks = []
    length, position = read(
        "block_poll", lambda block, session, term_id: blocks.append(bytes(block)), limit * 64
    )
    if length:
        assert blocks == [data[start : start + length]] and position == start + length
        inner, stop = model_walk(blocks[0], 0, length)
        assert stop == "end"
    batches = []
    count, position = read("batch_poll", lambda batch: batches.append(batch.messages()), limit)
    if count:
        assert [bytes(m) for m in batches[0]] == [data[o + 32 : o + n] for o, n in messages][:count]
    out = []
    count, position = read("poll_messages", out, limit)
    if count is not None:
        expected = model_whole_messages(data, start, limit)
        assert ([m.data for m in out], count, position) == expected
    for message in out:
        assert 32 <= message.frame_length <= TERM and len(message.data) >= 0
    image = reader()
    subscription = _core.SubscriptionBase()
    subscription._set_images([SimpleNamespace(_reader=image)])
    views = subscription.messages(copy=False)
    for _ in range(4):
        try:
            if not call(views.ready):
                break
            message = views.take()
            assert 32 <= message.frame_length and message.term_offset + 32 <= TERM
        except AeronError:
            break
    assert start <= image.position <= TERM


@SETTINGS
@given(frames=FRAMES, size=st.integers(1, 64).map(lambda i: i * 32), tail=st.integers(0, 8))
def fuzz_try_offer_block(frames, size, tail):
    fill(FIXTURE.term, 0, [])
    block = np.zeros(size, dtype=np.uint8)
    offset = 0
    for length, flags, type_ in frames:
        if offset + 32 > size:
            break
        FRAME.pack_into(block, offset, length, 0, flags, type_, tail * 32 + offset, 1, 2, 3, 0)
        offset += align(length) if 32 <= length <= size else 32
    FIXTURE.reset_tail(tail * 32)
    appender = _core.LogAppender(FIXTURE.log.mapped, counter(1 << 40), 0, exclusive=True)
    walk, why = model_walk(bytes(block), 0, size)
    try:
        result = call(appender.try_offer_block, block)
    except ValueError:
        assert why != "end" or struct.unpack_from("<i", block, 8)[0] != tail * 32
        assert not FIXTURE.term[tail * 32 : tail * 32 + size].any(), "appended though refused"
        return
    assert why == "end", (walk, why)
    assert result == tail * 32 + size
    copied = bytes(FIXTURE.term[tail * 32 : tail * 32 + size])
    for frame_offset, _, _ in walk:  # everything but the ids as in the block
        assert copied[frame_offset : frame_offset + 12] == bytes(block[frame_offset:][:12])


@SETTINGS
@given(
    frames=st.one_of(FRAMES, SOUND_FRAMES),
    tail=st.integers(0, 64),
    limit=st.integers(-64, 8192),
    stop=st.one_of(st.none(), st.integers(-64, 8192)),
    window=st.integers(-64, 8192),
    block=st.integers(1, 256).map(lambda i: i * 32),
    max_length=st.integers(1, 8192),
    misplaced=st.one_of(st.none(), st.integers(0, 255).map(lambda i: i * 32)),
)
def fuzz_offer_recorded(frames, tail, limit, stop, window, block, max_length, misplaced):
    """A run over a segment whose frames are fuzzed (their term offsets those of their
    positions or not) offers exactly the blocks the segment reader's checks
    (segments.frame_problem, scan_frames) pass, copied with the publication's ids."""
    start = tail * 32
    segment = np.zeros(TERM, dtype=np.uint8)
    fill(segment, start, frames)
    walk, _ = model_walk(bytes(segment), start, TERM)
    laid = walk[-1][0] + walk[-1][2] if walk else start  # None: recorded to the last frame
    limit, stop = start + limit, laid if stop is None else start + stop
    if misplaced is not None:  # a header there (if one is) with another frame's term offset
        struct.pack_into("<i", segment, start + misplaced + 8, start + misplaced + 32)
    data = bytes(segment)
    fill(FIXTURE.term, 0, [])
    FIXTURE.reset_tail(start)
    FIXTURE.meta.put_int32_ordered(136, 1)  # connected
    appender = _core.LogAppender(FIXTURE.log.mapped, counter(start + window), 0, exclusive=True)
    got = call(_core.offer_recorded, appender, data, 0, limit, stop, block, max_length, 0)
    position = start  # the model: the per-block path's checks, block after block
    while position < limit and position - start < max_length:
        length = min(block, limit - position, TERM - position, start + window - position)
        if length < 32 or frame_problem(data, position, position, TERM, stop) is not None:
            break
        end = scan_frames(data, position, position + length)
        if end == position or (
            end < min(stop, TERM) and frame_problem(data, end, end, TERM, stop) is not None
        ):
            break
        position = end
    assert got == position == appender.position, (got, position)
    copied = bytes(FIXTURE.term[start:position])
    assert not FIXTURE.term[position:].any(), "appended past the run"
    offset = start
    while offset < position:  # each frame as recorded, with the publication's ids
        length = struct.unpack_from("<i", copied, offset - start)[0]
        assert copied[offset - start : offset - start + 12] == data[offset : offset + 12]
        assert struct.unpack_from("<iii", copied, offset - start + 12) == (
            SESSION,
            STREAM,
            INITIAL_TERM_ID,
        )
        assert (
            copied[offset - start + 24 : offset - start + align(length)]
            == data[offset + 24 : offset + align(length)]
        )
        offset += align(length)
    assert offset == position


@SETTINGS
@given(
    packets=st.lists(
        st.tuples(st.integers(0, 64).map(lambda i: i * 32), FRAMES, st.binary(max_size=96)),
        max_size=8,
    )
)
def fuzz_rebuilder(packets):
    from tests.driver.test_udp_batch_io import INITIAL_TERM_ID as TERM_ID
    from tests.driver.test_udp_batch_io import Image  # the receive path's test fixture

    with tempfile.TemporaryDirectory() as directory:
        image = Image(Path(directory, "image.log"))
        try:
            for term_offset, frames, tail in packets:
                packet = np.zeros(2048, dtype=np.uint8)
                offset = 0
                for length, flags, type_ in frames:
                    if offset + 32 > 2048:
                        break
                    FRAME.pack_into(
                        packet,
                        offset,
                        length,
                        0,
                        flags,
                        type_,
                        term_offset + offset,
                        image.rebuilder.session_id,
                        image.rebuilder.stream_id,
                        TERM_ID,
                        0,
                    )
                    offset += align(length) if 32 <= length <= 1024 else 32
                call(image.rebuilder.insert, bytes(packet[:offset]) + tail, 1)
                call(image.router.route, bytes(packet[: max(offset, 32)]), 2)
            call(image.rebuilder.advance)
            assert 0 <= image.rebuild.get() <= TERM  # the packets are all of the first term
            reader = _core.ImageReader(image.log.mapped, counter(0), 0)
            got = []
            try:
                call(reader.poll, lambda buffer, header: got.append(header.frame_length), 1000)
            except AeronError:
                pass
            assert all(32 <= length <= TERM for length in got)
        finally:
            image.log.close()


@SETTINGS
@given(frames=FRAMES, blocked=st.integers(0, 64).map(lambda i: i * 32), tail=st.integers(0, 70))
def fuzz_unblock(frames, blocked, tail):
    fill(FIXTURE.term, blocked, frames)
    FIXTURE.reset_tail(min(tail * 32, TERM))
    before = struct.unpack_from("<i", FIXTURE.term, blocked)[0]
    call(_core.unblock_log, FIXTURE.log.mapped, blocked)
    after = struct.unpack_from("<i", FIXTURE.term, blocked)[0]
    if after != before:  # a PAD of a whole frame within the term
        assert extent(after, blocked, TERM) > 0 and is_pad(bytes(FIXTURE.term), blocked)


@SETTINGS
@given(header=st.binary(min_size=32, max_size=40), initial=INT32, shift=st.integers(16, 30))
def fuzz_header_decode(header, initial, shift):
    decoded = call(_core.Header.decode, header, initial, shift)
    length, _, _, _, term_offset, _, _, term_id, _ = FRAME.unpack_from(header)
    term_count = ((term_id - initial + 2**31) % 2**32) - 2**31
    assert decoded.position == (term_count << shift) + term_offset + align(length)
    assert decoded.to_bytes() == header[:32]
    repr(decoded)


TARGETS = [
    fuzz_scan_whole_frames,
    fuzz_term_scanners,
    fuzz_image_reader,
    fuzz_try_offer_block,
    fuzz_offer_recorded,
    fuzz_rebuilder,
    fuzz_unblock,
    fuzz_header_decode,
]


def main(seconds: float, seed: int) -> dict:
    global FIXTURE
    started = time.monotonic()
    rounds = 0
    with tempfile.TemporaryDirectory() as directory:
        FIXTURE = Fixture(directory)
        try:
            while rounds == 0 or time.monotonic() - started < seconds:
                for target in TARGETS:
                    print(f"{target.__name__} seed {seed + rounds}", flush=True)
                    hypothesis_seed(seed + rounds)(target)()
                rounds += 1
        finally:
            FIXTURE.close()
    return {
        "calls": CALLS[0],
        "rounds": rounds,
        "targets": len(TARGETS),
        "seconds": round(time.monotonic() - started, 1),
        "failures": 0,
    }


if __name__ == "__main__":
    import faulthandler

    faulthandler.enable()
    arguments = sys.argv[1:]
    figures = main(float(arguments[0]), int(arguments[1]) if len(arguments) > 1 else 0)
    print(json.dumps(figures), flush=True)
