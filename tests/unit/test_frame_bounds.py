"""Hostile frame lengths against every loop of the Cython core that walks frames: a length
below a header, negative, past the term or buffer, or one that wraps when aligned in 32 bits
(0x7FFFFFE1..0x7FFFFFFF) is a clean stop or a reported error, never a crash and never a cut-short
message delivered as valid.

Each case that crashed the process before runs in a child process (`isolated`): a crash is a
failing exit status, not a dead test runner."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import tempfile
from types import SimpleNamespace

import numpy as np
import pytest

from aeronio import _core
from aeronio.errors import AeronError
from aeronio.logbuffer.log_buffers import LogBuffers
from tests.support.child import child_env
from tests.support.frame_fuzz import FRAME, INITIAL_TERM_ID, SESSION, STREAM, TERM, counter, new_log
from tests.support.procs import PATH

BEGIN, END, UNFRAGMENTED = 0x80, 0x40, 0xC0
PAD, DATA = 0, 1

# Lengths that wrap negative when aligned in 32 bits, and other lengths no writer writes: in a
# log, CORRUPT; in a recorded segment or a block, BAD (there a negative length is damage too,
# where in a log it is a frame being written).
WRAPPING = [0x7FFFFFE1, 0x7FFFFFF0, 0x7FFFFFFF]
CORRUPT = [*WRAPPING, 1, 31, 0x7FFFFFE0, 1 << 30, TERM + 32]
BAD_LENGTHS = [*CORRUPT, -32, -(2**31)]

REPORTED = """\
from aeronio._core import scan_whole_frames; import struct; b = bytearray(4096); \
struct.pack_into('<i', b, 0, 64); struct.pack_into('<i', b, 64, 0x7FFFFFF0); \
scan_whole_frames(bytes(b), 0, 4096)"""


def isolated(code: str) -> str:
    """Run `code` in a child Python (the repository importable); its stdout. A crash (a
    negative or non-zero exit status) fails the test with the child's stderr."""
    done = subprocess.run(
        [sys.executable, "-c", f"{PATH}\n{code}"],
        capture_output=True,
        text=True,
        timeout=120,
        env=child_env(),
    )
    assert done.returncode == 0, f"exit status {done.returncode}; stderr:\n{done.stderr[-3000:]}"
    return done.stdout


def call_isolated(function: str, *args) -> object:
    """`function(*args)` of this module in a child process; its result (JSON)."""
    return json.loads(
        isolated(
            "import json\n"
            f"from tests.unit.test_frame_bounds import {function}\n"
            f"print(json.dumps({function}(*{args!r})))"
        )
    )


def put_frame(term, offset: int, length: int, flags=UNFRAGMENTED, type=DATA, body=b"") -> None:
    """A frame header (and body) written straight into a term, whatever its length."""
    FRAME.pack_into(
        term, offset, length, 0, flags, type, offset, SESSION, STREAM, INITIAL_TERM_ID, 0
    )
    term[offset + 32 : offset + 32 + len(body)] = np.frombuffer(body, dtype=np.uint8)


# -- the reported crash: scan_whole_frames --------------------------------------------------------


def test_the_reported_snippet_exits_0():
    isolated(REPORTED)


def scan_after_two_frames(length: int) -> list[int]:
    """scan_whole_frames over a buffer of a 64-byte frame then one of `length`, from 0 to the
    end, to a short end, and from the bad frame."""
    buffer = bytearray(4096)
    struct.pack_into("<i", buffer, 0, 64)
    struct.pack_into("<i", buffer, 64, length)
    data = bytes(buffer)
    return [
        _core.scan_whole_frames(data, 0, 4096),
        _core.scan_whole_frames(data, 0, 100),
        _core.scan_whole_frames(data, 64, 4096),
    ]


@pytest.mark.parametrize("length", BAD_LENGTHS)
def test_scan_whole_frames_stops_before_a_bad_length(length):
    assert call_isolated("scan_after_two_frames", length) == [64, 64, 64]


def test_scan_whole_frames_takes_a_frame_ending_exactly_at_the_end():
    buffer = bytearray(256)
    struct.pack_into("<i", buffer, 0, 64)
    struct.pack_into("<i", buffer, 64, 192)
    assert _core.scan_whole_frames(buffer, 0, 256) == 256
    assert _core.scan_whole_frames(buffer, 0, 255) == 64


# -- try_offer_block (a replay's block from a damaged segment) ------------------------------------


def offer_block_with(length: int) -> str:
    """try_offer_block of a 64-byte frame then a frame of `length` in a 256-byte block: the
    error (nothing appended) or the position."""
    with tempfile.TemporaryDirectory() as directory:
        log = new_log(directory)
        try:
            appender = _core.LogAppender(log.mapped, counter(1 << 40), 0, exclusive=True)
            block = np.zeros(256, dtype=np.uint8)
            put_frame(block, 0, 64)
            put_frame(block, 64, length)
            try:
                return str(appender.try_offer_block(block))
            except ValueError as e:
                assert int(log.term(0)[:4].view(np.int32)[0]) == 0, "something was appended"
                return str(e)
        finally:
            log.close()


@pytest.mark.parametrize("length", BAD_LENGTHS)
def test_try_offer_block_refuses_a_bad_length_naming_it(length):
    assert call_isolated("offer_block_with", length) == (
        f"frame at block offset 64 has length {length}: not a whole frame within the block of 256"
    )


def test_try_offer_block_takes_frames_tiling_the_block():
    assert call_isolated("offer_block_with", 192) == "256"


# -- the image reader ---------------------------------------------------------------------------


def view_fragmented_message(end_length: int) -> list:
    """subscription.messages(copy=False) over a BEGIN fragment then an END fragment of
    `end_length` (then nothing): what each of two steps finds (False: no message; or the
    error)."""
    with tempfile.TemporaryDirectory() as directory:
        log = new_log(directory)
        try:
            term = log.term(0)
            put_frame(term, 0, 64, flags=BEGIN, body=b"b" * 32)
            put_frame(term, 64, end_length, flags=END, body=b"e" * 32)
            reader = _core.ImageReader(log.mapped, counter(), 0)
            subscription = _core.SubscriptionBase()
            subscription._set_images([SimpleNamespace(_reader=reader)])
            views = subscription.messages(copy=False)
            found = []
            for _ in range(2):
                try:
                    found.append(views.ready() and bytes(views.take().data).decode())
                except AeronError as e:
                    found.append(str(e))
            found.append(reader.position)
            return found
        finally:
            log.close()


@pytest.mark.parametrize("length", CORRUPT)
def test_a_fragmented_message_with_a_bad_end_fragment_is_never_lent(length):
    """The BEGIN is dropped (its message broken off: never delivered cut short); the reader
    stops at the bad fragment and raises there."""
    error = (
        f"corrupt frame length {length} at term offset 64 of session {SESSION}, stream {STREAM}: "
        "the image cannot be read past it"
    )
    assert call_isolated("view_fragmented_message", length) == [False, error, 64]


def test_a_fragmented_message_is_lent_whole():
    assert call_isolated("view_fragmented_message", 64) == ["b" * 32 + "e" * 32, False, 128]


@pytest.fixture
def log(tmp_path):
    log = new_log(tmp_path)
    yield log
    log.close()


def two_frames_then(log: LogBuffers, length: int) -> None:
    """Two 64-byte messages ("a"*32, "b"*32), then a frame of `length` at term offset 128."""
    term = log.term(0)
    put_frame(term, 0, 64, body=b"a" * 32)
    put_frame(term, 64, 64, body=b"b" * 32)
    put_frame(term, 128, length, body=b"c" * 32)


def corrupt_at_128(length: int) -> str:
    return (
        f"corrupt frame length {length} at term offset 128 of session {SESSION}, "
        f"stream {STREAM}: the image cannot be read past it"
    )


@pytest.mark.parametrize("method", ["poll", "controlled_poll"])
@pytest.mark.parametrize("length", CORRUPT)
def test_poll_delivers_the_frames_before_a_bad_one_then_raises_there(log, length, method):
    """Before: the same poll delivered them and raised, the count lost."""
    two_frames_then(log, length)
    poll = getattr(_core.ImageReader(log.mapped, counter(), 0), method)
    got = []
    assert poll(lambda buffer, header: got.append(bytes(buffer)), 10) == 2
    assert got == [b"a" * 32, b"b" * 32] and poll.__self__.position == 128
    with pytest.raises(AeronError) as info:
        poll(lambda buffer, header: got.append(bytes(buffer)), 10)
    assert str(info.value) == corrupt_at_128(length)
    assert len(got) == 2 and poll.__self__.position == 128


@pytest.mark.parametrize("length", CORRUPT)
def test_poll_messages_returns_the_messages_before_a_bad_frame_once(log, length):
    two_frames_then(log, length)
    reader = _core.ImageReader(log.mapped, counter(), 0)
    out = []
    assert reader.poll_messages(out, 10) == 2
    assert [message.data for message in out] == [b"a" * 32, b"b" * 32]
    assert reader.position == 128
    with pytest.raises(AeronError, match="corrupt frame length"):
        reader.poll_messages(out, 10)
    assert len(out) == 2


@pytest.mark.parametrize("length", CORRUPT)
def test_batch_poll_delivers_the_fragments_before_a_bad_frame(log, length):
    two_frames_then(log, length)
    reader = _core.ImageReader(log.mapped, counter(), 0)
    batches = []
    assert reader.batch_poll(lambda batch: batches.append(batch.messages()), 10) == 2
    assert [[bytes(m) for m in batch] for batch in batches] == [[b"a" * 32, b"b" * 32]]
    with pytest.raises(AeronError, match="corrupt frame length"):
        reader.batch_poll(lambda batch: batches.append(batch), 10)
    assert len(batches) == 1 and reader.position == 128


@pytest.mark.parametrize("length", CORRUPT)
def test_block_poll_stops_before_a_bad_frame_then_raises_there(log, length):
    """Before: lengths past the term stalled block_poll silently (0 bytes, no error) and
    lengths 1..31 went out as 32-byte frames."""
    two_frames_then(log, length)
    reader = _core.ImageReader(log.mapped, counter(), 0)
    blocks = []
    assert (
        reader.block_poll(lambda block, session, term_id: blocks.append(bytes(block)), TERM) == 128
    )
    assert blocks == [bytes(log.term(0)[:128])]
    with pytest.raises(AeronError) as info:
        reader.block_poll(lambda block, session, term_id: blocks.append(bytes(block)), TERM)
    assert str(info.value) == corrupt_at_128(length)
    assert len(blocks) == 1 and reader.position == 128


@pytest.mark.parametrize("length", [-64, -(2**31)])
def test_every_read_waits_at_a_frame_being_written(log, length):
    two_frames_then(log, length)
    reader = _core.ImageReader(log.mapped, counter(128), 0)
    for _ in range(2):
        assert reader.poll(lambda *args: None, 10) == 0
        assert reader.controlled_poll(lambda *args: None, 10) == 0
        assert reader.poll_messages([], 10) == 0
        assert reader.batch_poll(lambda *args: None, 10) == 0
        assert reader.block_poll(lambda *args: None, TERM) == 0
    assert reader.position == 128


def test_block_poll_under_a_frame_longer_than_its_limit_is_no_error(log):
    two_frames_then(log, 1024)
    reader = _core.ImageReader(log.mapped, counter(128), 0)
    assert reader.block_poll(lambda *args: None, 512) == 0
    assert reader.block_poll(lambda *args: None, 1024) == 1024


@pytest.mark.parametrize("length", CORRUPT)
def test_term_scanners_stop_before_a_bad_frame(log, length):
    two_frames_then(log, length)
    term = log.term(0)
    assert _core.term_block_scan(term, 0, TERM) == 128
    assert _core.term_scan_for_availability(term, 0, TERM) == (128, 0)
    out = []
    assert _core.scan_datagrams(term, 0, TERM, 1408, 10, out) == (128, 1)
    assert [bytes(datagram) for datagram in out] == [bytes(term[:128])]


@pytest.mark.parametrize("term_offset", [-32, 8, TERM + 32])
def test_term_scanners_refuse_an_offset_off_a_frame_boundary(term_offset):
    term = np.zeros(TERM, dtype=np.uint8)
    with pytest.raises(ValueError, match=f"term_offset {term_offset} is not a frame boundary"):
        _core.term_scan_for_availability(term, term_offset, TERM)
    with pytest.raises(ValueError, match=f"term_offset {term_offset} is not a frame boundary"):
        _core.scan_datagrams(term, term_offset, TERM, 1408, 1, [])


def test_header_position_of_a_wrapping_length_is_64_bit():
    header = FRAME.pack(0x7FFFFFF0, 0, UNFRAGMENTED, DATA, 1 << 30, SESSION, STREAM, 0, 0)
    decoded = _core.Header.decode(header, initial_term_id=0, position_bits_to_shift=30)
    assert decoded.position == (1 << 30) + 0x80000000


# -- the unblocker ------------------------------------------------------------------------------


@pytest.mark.parametrize("length", [-(2**31), -(TERM + 32), -1, -31])
def test_unblock_leaves_a_negative_length_no_writer_reserved(log, length):
    """Before: it became a PAD of that length (past the term) or, for -2^31, "unblocked"
    every time while staying blocked."""
    two_frames_then(log, length)
    before = bytes(log.term(0))
    assert _core.unblock_log(log.mapped, 128) is False
    assert bytes(log.term(0)) == before


# -- the receiver's gap scanner -------------------------------------------------------------------


def test_overlapping_packets_never_move_the_receiver_position_past_the_term(tmp_path):
    """Packet B lands inside packet A's (zero) payload, so a length word of B's payload sits at
    the end of A's frame: the gap scanner reads it as a frame length. Before, a length below
    2^30 moved the receiver position past the term."""
    from tests.driver.test_udp_batch_io import INITIAL_TERM_ID as TERM_ID
    from tests.driver.test_udp_batch_io import Image, frame

    image = Image(tmp_path / "image.log")
    assert image.rebuilder.insert(frame(0, bytes(32)), 1) is True
    assert image.rebuilder.insert(frame(32, struct.pack("<i", 1 << 29) + bytes(28)), 2) is True
    assert image.hwm.get() == 96
    assert image.rebuilder.advance() == (TERM_ID, 64, 32)
    assert image.rebuild.get() == 64


# -- views lent across images, a corrupt image among others ------------------------------------


def view_after_its_image_went() -> str:
    """messages(copy=False) over two images: a message of B, then one of A, whose image then
    goes (its log unmapped). The message's view must still be readable: it keeps A's mapping
    alive (before, B's view re-pointed into A kept only B's: a segfault)."""
    import gc

    with tempfile.TemporaryDirectory() as a_dir, tempfile.TemporaryDirectory() as b_dir:
        log_a, log_b = new_log(a_dir), new_log(b_dir)
        put_frame(log_b.term(0), 0, 64, body=b"from-B".ljust(32, b"."))
        reader_a = _core.ImageReader(log_a.mapped, counter(), 0)
        reader_b = _core.ImageReader(log_b.mapped, counter(), 0)
        subscription = _core.SubscriptionBase()
        subscription._set_images(
            [SimpleNamespace(_reader=reader_b), SimpleNamespace(_reader=reader_a)]
        )
        views = subscription.messages(copy=False)
        assert views.ready()
        message = views.take()
        assert bytes(message.data) == b"from-B".ljust(32, b".")
        put_frame(log_a.term(0), 0, 64, body=b"from-A".ljust(32, b"."))
        assert views.ready()
        message = views.take()
        subscription._set_images([SimpleNamespace(_reader=reader_b)])
        del reader_a
        log_a.close()
        del log_a
        gc.collect()
        got = bytes(message.data).decode()
        del message, views, subscription, reader_b
        log_b.close()
        return got


def test_a_view_lent_from_an_image_that_went_stays_readable():
    assert call_isolated("view_after_its_image_went") == "from-A".ljust(32, ".")


def test_a_corrupt_image_holds_no_other_back_from_views(log, tmp_path):
    """messages(copy=False) over a corrupt image and a sound one: the corrupt one raises at its
    turn, and the sound one's message comes at the next read (before, every read started at the
    corrupt image again: its error for ever, the other never read)."""
    put_frame(log.term(0), 0, 0x7FFFFFF0)
    (tmp_path / "sound").mkdir()
    sound = new_log(tmp_path / "sound")
    try:
        put_frame(sound.term(0), 0, 64, body=b"sound".ljust(32, b"."))
        subscription = _core.SubscriptionBase()
        readers = [_core.ImageReader(each.mapped, counter(), 0) for each in (log, sound)]
        subscription._set_images([SimpleNamespace(_reader=reader) for reader in readers])
        views = subscription.messages(copy=False)
        with pytest.raises(AeronError, match="corrupt frame length 2147483632 at term offset 0"):
            views.ready()
        assert views.ready()
        assert bytes(views.take().data) == b"sound".ljust(32, b".")
        del views, subscription, readers
    finally:
        sound.close()


# -- the unblocker at a position off a frame boundary -------------------------------------------


@pytest.mark.parametrize("blocked", [40, 2 * TERM + TERM - 4], ids=["in a message", "term end"])
def test_unblock_at_a_position_off_a_frame_boundary_writes_nothing(log, blocked):
    """The consumers' position is shared memory: off a frame boundary no frame starts there.
    Before: a PAD header inside a committed message's payload, or 28 bytes of one past the last
    term, over the log's metadata (the tail counters)."""
    appender = _core.LogAppender(log.mapped, counter(1 << 20), 0, False)
    assert appender.try_offer(bytes(96)) == 128  # zeros where an unblocker looks for a frame
    assert appender.try_offer(b"x" * 32) == 192
    before = bytes(log.array)
    assert _core.unblock_log(log.mapped, blocked) is False
    assert bytes(log.array) == before
