"""offer_recorded: a replay's run of recorded blocks into an exclusive publication with the GIL
released. Against the per-block path it replaces (try_offer_block over the reader's blocks),
byte for byte, across terms; at a shut window, waiting for a limit another thread moves; before
damage; and not at all for a closed or unconnected publication. Hostile segments: the frame
fuzz (tests/support/frame_fuzz.py, fuzz_offer_recorded)."""

from __future__ import annotations

import random
import struct
import threading
import time

import numpy as np
import pytest

import aeronio
from aeronio import _core
from aeronio.archive.segments import RecordingLayout, RecordingReader, SegmentError
from aeronio.logbuffer.log_buffers import LogBuffers
from tests.support.frame_fuzz import counter

TERM = 64 * 1024
INITIAL_TERM_ID = 100
BLOCK = 8192  # short blocks (longer than a term-ending PAD): many, and runs across terms
OPEN = 1 << 40


def new_log(path, session_id: int) -> LogBuffers:
    log = LogBuffers.create(
        path,
        term_length=TERM,
        initial_term_id=INITIAL_TERM_ID,
        session_id=session_id,
        stream_id=8,
        mtu=1408,
    )
    log.mapped.set_connected(True)
    return log


def appender_of(log: LogBuffers, limit: np.ndarray) -> _core.LogAppender:
    return _core.LogAppender(log.mapped, limit, 0, exclusive=True)


@pytest.fixture
def recording(tmp_path):
    """A recorded stream of varied messages (fragmented ones and PADs at the terms' ends) over
    two and a half terms, as its segment holds it: (segment bytes, end position)."""
    source = new_log(tmp_path / "source", session_id=7)
    try:
        appender = appender_of(source, counter(OPEN))
        rng = random.Random(3)
        segment = bytearray()
        while appender.position < 2 * TERM + TERM // 2:
            result = appender.try_offer(rng.randbytes(rng.choice([20, 100, 700, 3000])))
            if result == aeronio.ADMIN_ACTION:  # a term is full: it goes into the segment
                segment += bytes(source.term((appender.position // TERM - 1) % 3))
                continue
            assert result > 0
        end = appender.position
        assert len(segment) == end - end % TERM
        segment += bytes(source.term((end // TERM) % 3)[: end % TERM])
    finally:
        source.close()
    segment += bytes(4 * TERM - len(segment))  # a segment file is a whole segment long
    return bytes(segment), end


def by_blocks(log: LogBuffers, segment: bytes, end: int, tmp_path) -> None:
    """The per-block path: the reader's blocks offered with try_offer_block."""
    (tmp_path / "1-0.rec").write_bytes(segment)
    layout = RecordingLayout(1, 0, TERM, 4 * TERM)
    appender = appender_of(log, counter(OPEN))
    with RecordingReader(tmp_path, layout, 0, end) as reader:
        while (block := reader.peek(BLOCK)) is not None:
            result = appender.try_offer_block(block.data)
            if result == aeronio.ADMIN_ACTION:
                result = appender.try_offer_block(block.data)
            assert result == block.position + len(block.data)
            reader.advance(block)
    assert appender.position == end


def test_a_run_offers_what_the_per_block_path_does_byte_for_byte(recording, tmp_path):
    segment, end = recording
    runs, blocks = new_log(tmp_path / "runs", 9), new_log(tmp_path / "blocks", 9)
    try:
        appender = appender_of(runs, counter(OPEN))
        position = _core.offer_recorded(appender, segment, 0, end, end, BLOCK, 1 << 30, 0)
        assert position == appender.position == end
        by_blocks(blocks, segment, end, tmp_path)
        assert bytes(runs.array) == bytes(blocks.array)
        first = runs.term(0)
        assert struct.unpack_from("<i", first, 12)[0] == 9  # the publication's session id
        assert bytes(first[32:64]) == segment[32:64]
    finally:
        runs.close()
        blocks.close()


def test_a_run_ends_at_the_limit_and_after_about_max_length(recording, tmp_path):
    segment, end = recording
    log = new_log(tmp_path / "log", 9)
    try:
        appender = appender_of(log, counter(OPEN))
        boundaries, offset = [], 0
        while offset < end:
            offset += (struct.unpack_from("<i", segment, offset)[0] + 31) & ~31
            boundaries.append(offset)
        wanted = TERM + 5000
        limit = _core.offer_recorded(appender, segment, 0, wanted, end, BLOCK, 1 << 30, 0)
        assert limit == max(b for b in boundaries if b <= wanted)  # whole frames, not past it
        position = _core.offer_recorded(appender, segment, 0, end, end, BLOCK, 3 * BLOCK, 0)
        assert limit + 3 * BLOCK <= position < limit + 4 * BLOCK
    finally:
        log.close()


def test_a_shut_window_ends_the_run_or_is_waited_for(recording, tmp_path):
    """With no wait the run ends at the window; with one it goes on once another thread moves
    the limit (that thread runs once the run has released the GIL)."""
    segment, end = recording
    window = TERM // 2
    log = new_log(tmp_path / "log", 9)
    try:
        limit = counter(window)
        appender = appender_of(log, limit)
        assert _core.offer_recorded(appender, segment, 0, end, end, BLOCK, 1 << 30, 0) <= window
        assert appender.position > window - 1408  # not a whole frame of the MTU is left
        running = threading.Event()
        mover = threading.Thread(
            target=lambda: running.wait(60) and _core.AtomicBuffer(limit).put_int64_ordered(0, OPEN)
        )
        mover.start()
        try:
            running.set()
            position = _core.offer_recorded(
                appender, segment, 0, end, end, BLOCK, 1 << 30, 60_000_000_000
            )
        finally:
            mover.join()
        assert position == end
    finally:
        log.close()


def test_a_run_waits_for_no_more_window_than_it_has_left_to_offer(recording, tmp_path):
    """The last frames before the limit, in a window that holds them but not a frame of the
    MTU, go at once: the wait is for what is left to offer."""
    segment, end = recording
    boundaries, offset = [], 0
    while offset < end:
        offset += (struct.unpack_from("<i", segment, offset)[0] + 31) & ~31
        boundaries.append(offset)
    near, last = next(
        (a, b) for a, b in zip(boundaries, boundaries[1:], strict=False) if b - a < 1408
    )
    log = new_log(tmp_path / "log", 9)
    try:
        appender = appender_of(log, counter(last))
        assert _core.offer_recorded(appender, segment, 0, near, end, BLOCK, 1 << 30, 0) == near
        started = time.monotonic()
        position = _core.offer_recorded(
            appender, segment, 0, last, end, BLOCK, 1 << 30, 60_000_000_000
        )
        assert position == last
        assert time.monotonic() - started < 30  # not the 60 s wait for a window of the MTU
    finally:
        log.close()


def test_a_run_ends_before_damage_which_the_reader_reports(recording, tmp_path):
    segment, end = recording
    damaged = bytearray(segment)
    struct.pack_into("<i", damaged, TERM + 8, 12345)  # the term offset of a frame in term 1
    log = new_log(tmp_path / "log", 9)
    try:
        appender = appender_of(log, counter(OPEN))
        position = _core.offer_recorded(appender, bytes(damaged), 0, end, end, BLOCK, 1 << 30, 0)
        assert TERM - BLOCK <= position <= TERM
        (tmp_path / "1-0.rec").write_bytes(bytes(damaged))
        layout = RecordingLayout(1, 0, TERM, 4 * TERM)
        with RecordingReader(tmp_path, layout, position, end) as reader:
            with pytest.raises(SegmentError, match=f"damaged at position {TERM}"):
                while (block := reader.peek(BLOCK)) is not None:
                    reader.advance(block)
    finally:
        log.close()


def test_a_run_ends_where_a_segment_cut_short_ends(recording, tmp_path):
    """A segment file shorter than the recording's stop (cut off by a crash) ends the run at its
    end, mid-block. Before: the block's frames were walked past it, bytes beyond the segment
    offered (a segfault where the next page was not mapped)."""
    segment, _ = recording
    cut = 0
    while cut < BLOCK // 2:  # a frame boundary inside the first block
        cut += (struct.unpack_from("<i", segment, cut)[0] + 31) & ~31
    stop = cut + ((struct.unpack_from("<i", segment, cut)[0] + 31) & ~31)  # a frame past it
    log = new_log(tmp_path / "log", 9)
    try:
        appender = appender_of(log, counter(OPEN))
        short = memoryview(segment)[:cut]  # the bytes after it are there, outside the view
        position = _core.offer_recorded(appender, short, 0, stop, stop, BLOCK, 1 << 30, 0)
        assert position <= cut  # the rest is the per-block path's, which stops at the end
        assert bytes(log.term(0)[:position]) == segment[:position]
        assert not log.term(0)[position:].any()
    finally:
        log.close()


@pytest.mark.parametrize("how", ["closed", "not connected"])
def test_nothing_is_offered_to_a_closed_or_unconnected_publication(recording, tmp_path, how):
    segment, end = recording
    log = new_log(tmp_path / "log", 9)
    try:
        appender = appender_of(log, counter(OPEN))
        if how == "closed":
            appender.close()
        else:
            log.mapped.set_connected(False)
        assert _core.offer_recorded(appender, segment, 0, end, end, BLOCK, 1 << 30, 10**9) == 0
        assert not log.term(0).any()
    finally:
        log.close()
