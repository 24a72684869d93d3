"""Unit tests of the log buffer core: descriptor rules, appender result codes, claims, readers,
scanners, the unblocker and header decoding. Expected values come from the reference
(../shared/reference/log-buffers.txt, DESIGN.md "The reference behaviour") and from real Aeron
1.15.1 frames (tests/data/wire-vectors, copied from ../shared/wire-vectors/)."""

from __future__ import annotations

import array
import struct
from pathlib import Path

import numpy as np
import pytest

from aeronio import ControlledPollAction, _core
from aeronio.errors import ClaimError, ConfigurationError, MessageTooLargeError
from aeronio.logbuffer.log_buffers import LogBuffers
from aeronio.protocol import limits

HEADER_LENGTH = 32
TERM_LENGTH = 64 * 1024
MTU = 1408
MAX_PAYLOAD = MTU - HEADER_LENGTH
SESSION_ID = 424242
STREAM_ID = 1001
INITIAL_TERM_ID = -17
FRAME = struct.Struct("<iBBHiiiiq")
HDR_TYPE_PAD = 0
HDR_TYPE_DATA = 1
UNFRAGMENTED = 0xC0
WIRE_VECTORS = Path(__file__).parents[1] / "data" / "wire-vectors"

both_kinds = pytest.mark.parametrize("exclusive", [False, True], ids=["concurrent", "exclusive"])


def int32(value: int) -> int:
    return ((value + 2**31) % 2**32) - 2**31


def align32(value: int) -> int:
    return (value + 31) // 32 * 32


def pack_tail(term_id: int, term_offset: int) -> int:
    return int32(term_id) * 2**32 + term_offset


def counter(value: int = 2**62) -> np.ndarray:
    buffer = np.zeros(16, dtype=np.uint8)
    _core.AtomicBuffer(buffer).put_int64_ordered(0, value)
    return buffer


def set_counter(buffer: np.ndarray, value: int) -> None:
    _core.AtomicBuffer(buffer).put_int64_ordered(0, value)


def frame_at(log: LogBuffers, index: int, offset: int) -> dict:
    fields = FRAME.unpack_from(bytes(log.term(index)[offset : offset + HEADER_LENGTH]))
    names = (
        "frame_length",
        "version",
        "flags",
        "type",
        "term_offset",
        "session_id",
        "stream_id",
        "term_id",
        "reserved_value",
    )
    return dict(zip(names, fields, strict=True))


@pytest.fixture
def make_log(tmp_path):
    logs = []

    def make(**kwargs) -> LogBuffers:
        options = dict(
            term_length=TERM_LENGTH,
            initial_term_id=INITIAL_TERM_ID,
            session_id=SESSION_ID,
            stream_id=STREAM_ID,
            mtu=MTU,
        )
        options.update(kwargs)
        log = LogBuffers.create(tmp_path / f"log-{len(logs)}", **options)
        logs.append(log)
        return log

    yield make
    for log in logs:
        if log.array is not None:
            log.close()


@pytest.fixture
def log(make_log) -> LogBuffers:
    return make_log()


def appender_for(log: LogBuffers, exclusive: bool = False, limit: int = 2**62):
    limit_buffer = counter(limit)
    return _core.LogAppender(log.mapped, limit_buffer, 0, exclusive=exclusive), limit_buffer


def reader_for(log: LogBuffers, position: int = 0) -> _core.ImageReader:
    return _core.ImageReader(log.mapped, counter(position), 0)


def test_a_closed_reader_keeps_its_position_and_never_touches_the_counter_again(log):
    """The driver frees an image's position counter once it went, and hands it to the next
    counter it makes. Before, a closed reader's position (and taken_position, and so
    is_end_of_stream) read whatever the counter's new owner wrote, and its setter wrote there."""
    appender, _ = appender_for(log)
    assert appender.try_offer(b"x" * 100) > 0
    position = counter(0)
    reader = _core.ImageReader(log.mapped, position, 0)
    assert reader.poll(lambda *_: None, 10) == 1
    reached = reader.position
    reader.close()
    reused = _core.AtomicBuffer(position)
    reused.put_int64_ordered(0, 7_000_000)  # the counter, someone else's now
    assert (reader.position, reader.taken_position) == (reached, reached)
    reader.position = 5
    assert reused.get_int64_volatile(0) == 7_000_000
    assert reader.position == 5


def collect(reader: _core.ImageReader, limit: int = 1000) -> list[tuple[bytes, int]]:
    out: list[tuple[bytes, int]] = []
    reader.poll(lambda buffer, header: out.append((bytes(buffer), header.position)), limit)
    return out


# -- descriptor ---------------------------------------------------------------------------------


@pytest.mark.parametrize("shift", range(16, 31))
def test_check_term_length_accepts_the_15_powers_of_two(shift):
    limits.check_term_length(1 << shift)


@pytest.mark.parametrize(
    "term_length",
    [0, 1, -65536, 32 * 1024, 65535, 65537, 96 * 1024, 100_000, 3 << 20, 2**31, 2**32],
)
def test_check_term_length_rejects_and_names_the_value(term_length):
    with pytest.raises(ConfigurationError) as raised:
        limits.check_term_length(term_length)
    assert str(term_length) in str(raised.value).split()


def test_log_buffers_create_rejects_a_bad_term_length(tmp_path):
    with pytest.raises(ConfigurationError, match="100000"):
        LogBuffers.create(
            tmp_path / "bad",
            term_length=100_000,
            initial_term_id=0,
            session_id=1,
            stream_id=1,
            mtu=MTU,
        )


@pytest.mark.parametrize(
    ("term_length", "expected"),
    [
        (64 * 1024, 8 * 1024),
        (128 * 1024, 16 * 1024),
        (1 << 20, 128 * 1024),
        (16 << 20, 2 << 20),
        (128 << 20, 16 << 20),
        (256 << 20, 16 << 20),
        (1 << 30, 16 << 20),
    ],
)
def test_max_message_length_is_an_eighth_of_the_term_up_to_16_mib(term_length, expected):
    assert limits.max_message_length(term_length) == expected


@pytest.mark.parametrize(
    ("term_length", "expected"), [(64 * 1024, 8192), (1 << 20, 131072), (1 << 30, 16 << 20)]
)
def test_appender_max_lengths(make_log, term_length, expected):
    log = make_log(term_length=term_length)  # sparse file: a 1 GiB term costs nothing
    appender, _ = appender_for(log)
    assert appender.max_message_length == expected
    assert appender.max_payload_length == MTU - HEADER_LENGTH


def test_a_log_file_is_mapped_once_per_process(tmp_path):
    """An embedded driver's log and its clients' share one mapping (not populated again); a new
    file at the same path is a new mapping."""
    path = tmp_path / "log"
    options = dict(
        term_length=TERM_LENGTH, initial_term_id=INITIAL_TERM_ID, stream_id=STREAM_ID, mtu=MTU
    )
    created = LogBuffers.create(path, session_id=SESSION_ID, **options)
    opened = LogBuffers.open(path)
    assert opened.array.ctypes.data == created.array.ctypes.data
    assert opened.session_id == SESSION_ID

    path.unlink()  # the first file stays mapped, as a log its driver freed while a client reads
    second = LogBuffers.create(path, session_id=SESSION_ID + 1, **options)
    reopened = LogBuffers.open(path)
    assert reopened.array.ctypes.data == second.array.ctypes.data != created.array.ctypes.data
    assert (reopened.session_id, opened.session_id) == (SESSION_ID + 1, SESSION_ID)
    for log in (created, opened, second, reopened):
        log.close()


def test_log_with_a_page_size_above_4k_maps_its_metadata(make_log):
    """The metadata sits at the end of the page-aligned file (where LogBuffers writes it):
    the core's MappedLog must read the same initial term id, MTU and tails."""
    log = make_log(page_size=64 * 1024, initial_term_id=77)
    assert len(log.array) == 4 * 64 * 1024
    assert log.initial_term_id == 77 and log.mtu == MTU
    assert log.mapped.initial_term_id == 77
    assert log.mapped.mtu_length == MTU
    appender, _ = appender_for(log)
    assert appender.max_payload_length == MAX_PAYLOAD
    assert appender.try_offer(b"hello") == 64
    assert log.raw_tail(0) == pack_tail(77, 64)
    assert log.producer_position == 64
    assert frame_at(log, 0, 0)["session_id"] == SESSION_ID


# -- offers: too large, claims, result codes ------------------------------------------------------


@both_kinds
def test_try_offer_over_max_message_length_raises_naming_the_length(log, exclusive):
    appender, _ = appender_for(log, exclusive)
    with pytest.raises(MessageTooLargeError, match="8193"):
        appender.try_offer(bytes(8193))
    with pytest.raises(MessageTooLargeError, match="9000"):
        appender.try_offer(bytes(10_000), 0, 9000)
    assert log.raw_tail(0) == pack_tail(INITIAL_TERM_ID, 0)
    assert appender.try_offer(bytes(8192)) == 8192 // MAX_PAYLOAD * MTU + align32(
        8192 % MAX_PAYLOAD + HEADER_LENGTH
    )


@both_kinds
def test_try_claim_over_max_payload_raises(log, exclusive):
    appender, _ = appender_for(log, exclusive)
    with pytest.raises(MessageTooLargeError, match=str(MAX_PAYLOAD)):
        appender.try_claim(MAX_PAYLOAD + 1)
    with pytest.raises(MessageTooLargeError):
        appender.try_claim(-1)


@both_kinds
def test_try_claim_commit_publishes_and_a_second_commit_raises(log, exclusive):
    appender, _ = appender_for(log, exclusive)
    reader = reader_for(log)
    claim = appender.try_claim(100)
    assert isinstance(claim, _core.BufferClaim)
    assert claim.length == 100 and claim.position == 160
    assert frame_at(log, 0, 0)["frame_length"] == -132  # reserved, not yet committed
    assert reader.poll(lambda b, h: None, 10) == 0 and reader.position == 0
    claim.buffer[:] = bytes(range(100))
    claim.commit()
    assert claim.is_done
    assert collect(reader) == [(bytes(range(100)), 160)]
    with pytest.raises(ClaimError):
        claim.commit()
    with pytest.raises(ClaimError):
        claim.abort()
    with pytest.raises(ClaimError):
        _ = claim.buffer


@both_kinds
def test_try_claim_abort_leaves_a_pad_the_reader_skips(log, exclusive):
    appender, _ = appender_for(log, exclusive)
    reader = reader_for(log)
    claim = appender.try_claim(50)
    claim.buffer[:5] = b"never"
    claim.abort()
    frame = frame_at(log, 0, 0)
    assert frame["type"] == HDR_TYPE_PAD and frame["frame_length"] == 82
    assert appender.try_offer(b"after") == 96 + 64
    assert collect(reader) == [(b"after", 160)]
    assert reader.position == 160
    with pytest.raises(ClaimError):
        claim.abort()
    with pytest.raises(ClaimError):
        claim.commit()


@both_kinds
def test_back_pressured_when_connected_else_not_connected_at_the_limit(log, exclusive):
    appender, limit = appender_for(log, exclusive, limit=0)
    rows = np.zeros((3, 8), dtype=np.uint8)
    assert not log.is_connected
    assert appender.try_offer(b"x") == _core.NOT_CONNECTED
    assert appender.try_claim(1) == _core.NOT_CONNECTED
    assert appender.offer_batch([b"x"]) == _core.NOT_CONNECTED
    assert appender.offer_batch(rows) == _core.NOT_CONNECTED
    log.mapped.set_connected(True)
    assert appender.try_offer(b"x") == _core.BACK_PRESSURED
    assert appender.try_claim(1) == _core.BACK_PRESSURED
    assert appender.offer_batch([b"x"]) == _core.BACK_PRESSURED
    assert appender.offer_batch(rows) == _core.BACK_PRESSURED
    assert log.raw_tail(0) == pack_tail(INITIAL_TERM_ID, 0)  # nothing reserved
    assert appender.position == 0
    # Below the limit a message is appended whole, even when it ends past the limit.
    set_counter(limit, 1)
    assert appender.position_limit == 1
    assert appender.try_offer(bytes(1000)) == 1056
    assert appender.try_offer(b"x") == _core.BACK_PRESSURED
    log.mapped.set_connected(False)
    assert appender.try_offer(b"x") == _core.NOT_CONNECTED
    assert appender.position == 1056


@both_kinds
def test_closed_after_close(log, exclusive):
    appender, _ = appender_for(log, exclusive)
    assert appender.try_offer(b"a") == 64
    appender.close()
    assert appender.is_closed
    assert appender.try_offer(b"b") == _core.CLOSED
    assert appender.try_claim(4) == _core.CLOSED
    assert appender.offer_batch([b"c"]) == _core.CLOSED
    assert appender.offer_batch(np.zeros((2, 4), dtype=np.uint8)) == _core.CLOSED
    assert log.producer_position == 64


@both_kinds
@pytest.mark.parametrize("initial_term_id", [0, -5, 12345, 2**31 - 1, -(2**31)])
def test_max_position_exceeded_in_the_last_term(make_log, exclusive, initial_term_id):
    last_term_id = int32(initial_term_id + 2**31 - 1)
    log = make_log(initial_term_id=initial_term_id, term_id=last_term_id)
    max_position = TERM_LENGTH * 2**31
    term_begin = (2**31 - 1) * TERM_LENGTH
    assert log.active_term_count == 2**31 - 1
    assert log.producer_position == term_begin
    appender, _ = appender_for(log, exclusive)
    assert appender.position == term_begin
    size = 8 * 1024
    step = 5 * MTU + align32(size - 5 * MAX_PAYLOAD + HEADER_LENGTH)
    expected = term_begin
    while expected + step <= max_position:
        expected += step
        assert appender.try_offer(bytes(size)) == expected
    assert appender.try_offer(bytes(size)) == _core.MAX_POSITION_EXCEEDED
    assert appender.try_offer(bytes(size)) == _core.MAX_POSITION_EXCEEDED
    if not exclusive:
        # The tail is past the padded term end: nothing fits any more.
        assert appender.try_offer(b"") == _core.MAX_POSITION_EXCEEDED
        assert appender.try_claim(0) == _core.MAX_POSITION_EXCEEDED
    assert log.active_term_count == 2**31 - 1  # never rotated
    index = (2**31 - 1) % 3
    pad = frame_at(log, index, expected - term_begin)
    assert pad["type"] == HDR_TYPE_PAD and pad["term_id"] == last_term_id
    assert pad["frame_length"] == max_position - expected
    reader = reader_for(log, term_begin)
    while reader.poll(lambda b, h: None, 1000):
        pass
    reader.poll(lambda b, h: None, 1000)
    assert reader.position == max_position


@both_kinds
def test_max_position_exceeded_wins_over_back_pressure(make_log, exclusive):
    log = make_log(term_id=int32(INITIAL_TERM_ID + 2**31 - 1), term_offset=TERM_LENGTH - 64)
    max_position = TERM_LENGTH * 2**31
    appender, _ = appender_for(log, exclusive, limit=0)
    assert appender.position == max_position - 64
    assert appender.try_offer(bytes(31)) == _core.NOT_CONNECTED
    assert appender.try_offer(bytes(64)) == _core.MAX_POSITION_EXCEEDED


@both_kinds
@pytest.mark.parametrize("initial_term_id", [-100, 2**31 - 3])
def test_log_started_at_a_chosen_term_id_and_offset(make_log, exclusive, initial_term_id):
    term_id = int32(initial_term_id + 5)
    log = make_log(initial_term_id=initial_term_id, term_id=term_id, term_offset=4096)
    start = 5 * TERM_LENGTH + 4096
    assert log.active_term_count == 5
    assert log.raw_tail(5 % 3) == pack_tail(term_id, 4096)
    assert log.producer_position == start
    appender, _ = appender_for(log, exclusive)
    assert appender.position == start
    assert appender.try_offer(b"first") == start + 64
    frame = frame_at(log, 5 % 3, 4096)
    assert (frame["term_id"], frame["term_offset"], frame["frame_length"]) == (term_id, 4096, 37)
    reader = reader_for(log, start)
    headers = []
    reader.poll(lambda b, h: headers.append((bytes(b), h.copy())), 10)
    assert [data for data, _ in headers] == [b"first"]
    header = headers[0][1]
    assert (header.term_id, header.term_offset, header.position) == (term_id, 4096, start + 64)


def test_log_start_position_is_validated(make_log):
    with pytest.raises(ConfigurationError, match="100"):
        make_log(term_offset=100)
    with pytest.raises(ConfigurationError):
        make_log(term_id=INITIAL_TERM_ID - 1)


# -- scanners ---------------------------------------------------------------------------------


def fill_first_term(appender, size: int) -> int:
    """Offer `size`-byte messages until the first term is full; returns where its PAD starts."""
    position = 0
    while True:
        result = appender.try_offer(bytes(size))
        if result == _core.ADMIN_ACTION:
            return position
        position = result


def test_block_poll_never_crosses_a_term_and_a_leading_pad_is_a_block_alone(log):
    appender, _ = appender_for(log)
    pad_offset = fill_first_term(appender, 1000)  # aligned 1056: leaves a PAD
    assert pad_offset == TERM_LENGTH // 1056 * 1056
    for _ in range(3):
        assert appender.try_offer(bytes(1000)) > TERM_LENGTH
    reader = reader_for(log)
    blocks = []

    def handler(block, session_id, term_id):
        blocks.append((bytes(block), session_id, term_id))

    assert reader.block_poll(handler, 3 * TERM_LENGTH) == pad_offset
    assert blocks[-1] == (bytes(log.term(0)[:pad_offset]), SESSION_ID, INITIAL_TERM_ID)
    assert reader.position == pad_offset
    assert reader.block_poll(handler, 3 * TERM_LENGTH) == TERM_LENGTH - pad_offset
    assert len(blocks[-1][0]) == TERM_LENGTH - pad_offset
    assert FRAME.unpack_from(blocks[-1][0])[3] == HDR_TYPE_PAD
    assert blocks[-1][2] == INITIAL_TERM_ID
    assert reader.position == TERM_LENGTH
    # Whole frames only: a limit inside the second frame gives just the first.
    assert reader.block_poll(handler, 1056 + 100) == 1056
    assert blocks[-1][2] == INITIAL_TERM_ID + 1
    assert reader.block_poll(handler, 100) == 0  # smaller than one frame
    assert reader.block_poll(handler, 3 * TERM_LENGTH) == 2 * 1056
    assert reader.block_poll(handler, 3 * TERM_LENGTH) == 0
    assert reader.position == TERM_LENGTH + 3 * 1056
    term = log.term(0)
    assert _core.term_block_scan(term, 0, TERM_LENGTH) == pad_offset
    assert _core.term_block_scan(term, pad_offset, TERM_LENGTH) == TERM_LENGTH
    assert _core.term_block_scan(term, 0, 3000) == 2 * 1056


def test_block_poll_stops_at_the_end_of_an_exactly_full_term(log):
    appender, _ = appender_for(log)
    assert fill_first_term(appender, 1024 - HEADER_LENGTH) == TERM_LENGTH  # no PAD needed
    assert appender.try_offer(b"next term") == TERM_LENGTH + 64
    reader = reader_for(log)
    seen = []
    assert reader.block_poll(lambda b, s, t: seen.append(t), 10 * TERM_LENGTH) == TERM_LENGTH
    assert reader.block_poll(lambda b, s, t: seen.append(t), 10 * TERM_LENGTH) == 64
    assert seen == [INITIAL_TERM_ID, INITIAL_TERM_ID + 1]


def write_frame(term: np.ndarray, offset: int, frame_length: int, frame_type: int) -> None:
    FRAME.pack_into(term, offset, frame_length, 0, UNFRAGMENTED, frame_type, offset, 1, 2, 3, 0)


def test_term_scan_for_availability_counts_a_pad_as_its_header():
    term = np.zeros(TERM_LENGTH, dtype=np.uint8)
    write_frame(term, 0, 132, HDR_TYPE_DATA)  # aligned 160
    write_frame(term, 160, 46, HDR_TYPE_DATA)  # aligned 64
    write_frame(term, 224, TERM_LENGTH - 224, HDR_TYPE_PAD)
    rest = TERM_LENGTH - 224 - HEADER_LENGTH
    assert _core.term_scan_for_availability(term, 0, TERM_LENGTH) == (256, rest)
    assert _core.term_scan_for_availability(term, 0, 10 * TERM_LENGTH) == (256, rest)
    assert _core.term_scan_for_availability(term, 0, 256) == (256, rest)
    assert _core.term_scan_for_availability(term, 0, 240) == (224, 0)  # PAD header cut off
    assert _core.term_scan_for_availability(term, 0, 200) == (160, 0)
    assert _core.term_scan_for_availability(term, 0, 100) == (0, 0)
    assert _core.term_scan_for_availability(term, 160, 4096) == (96, rest)
    assert _core.term_scan_for_availability(term, 224, 4096) == (32, rest)


def test_term_scan_for_availability_on_an_appended_term(log):
    appender, _ = appender_for(log)
    pad_offset = fill_first_term(appender, 1000)
    term = log.term(0)
    available, padding = _core.term_scan_for_availability(term, 0, TERM_LENGTH)
    assert (available, padding) == (pad_offset + 32, TERM_LENGTH - pad_offset - 32)
    assert _core.term_scan_for_availability(term, 1056, 1408) == (1056, 0)
    assert _core.term_scan_for_availability(log.term(1), 0, TERM_LENGTH) == (0, 0)


# -- unblocking ---------------------------------------------------------------------------------


def test_unblock_a_negative_length_frame_turns_it_into_a_pad(log):
    appender, _ = appender_for(log)
    reader = reader_for(log)
    assert appender.try_offer(b"one") == 64
    claim = appender.try_claim(100)  # never committed: frame length stays -132
    assert appender.try_offer(b"two") == 64 + 160 + 64
    assert collect(reader) == [(b"one", 64)]
    assert reader.position == 64
    assert not _core.unblock_log(log.mapped, 0)  # a committed frame needs no unblocking
    assert _core.unblock_log(log.mapped, 64)
    pad = frame_at(log, 0, 64)
    assert pad["type"] == HDR_TYPE_PAD and pad["frame_length"] == 132
    assert (pad["term_offset"], pad["term_id"], pad["flags"]) == (64, INITIAL_TERM_ID, UNFRAGMENTED)
    assert not _core.unblock_log(log.mapped, 64)
    assert collect(reader) == [(b"two", 288)]
    assert claim.position == 224


def test_unblock_a_zeroed_gap_before_a_later_frame(log):
    appender, _ = appender_for(log)
    reader = reader_for(log)
    assert appender.try_offer(b"one") == 64
    assert not _core.unblock_log(log.mapped, 64)  # nothing reserved past the tail yet
    log.metadata.get_and_add_int64(0, 256)  # a writer reserved 256 bytes and died
    assert appender.try_offer(b"two") == 64 + 256 + 64
    assert collect(reader) == [(b"one", 64)]
    assert reader.poll(lambda b, h: None, 10) == 0 and reader.position == 64
    assert _core.unblock_log(log.mapped, 64)
    pad = frame_at(log, 0, 64)
    assert (pad["type"], pad["frame_length"], pad["term_offset"]) == (HDR_TYPE_PAD, 256, 64)
    assert collect(reader) == [(b"two", 384)]


def test_unblock_a_zeroed_region_to_the_term_end_pads_and_rotates(log):
    appender, _ = appender_for(log)
    reader = reader_for(log)
    assert appender.try_offer(b"one") == 64
    log.metadata.get_and_add_int64(0, TERM_LENGTH - 64)  # reserved to the end, never written
    assert collect(reader) == [(b"one", 64)]
    assert log.active_term_count == 0
    assert _core.unblock_log(log.mapped, 64)
    pad = frame_at(log, 0, 64)
    assert (pad["type"], pad["frame_length"]) == (HDR_TYPE_PAD, TERM_LENGTH - 64)
    assert log.active_term_count == 1
    assert log.raw_tail(1) == pack_tail(INITIAL_TERM_ID + 1, 0)
    assert appender.try_offer(b"two") == TERM_LENGTH + 64
    headers = []
    for _ in range(2):
        reader.poll(lambda b, h: headers.append((bytes(b), h.term_id, h.position)), 10)
    assert headers == [(b"two", INITIAL_TERM_ID + 1, TERM_LENGTH + 64)]


def test_unblock_rotates_a_padded_term_its_writer_never_rotated(log):
    appender, _ = appender_for(log)
    assert appender.try_offer(b"one") == 64
    term = log.term(0)
    FRAME.pack_into(
        term,
        64,
        TERM_LENGTH - 64,
        0,
        UNFRAGMENTED,
        HDR_TYPE_PAD,
        64,
        SESSION_ID,
        STREAM_ID,
        INITIAL_TERM_ID,
        0,
    )
    log.metadata.put_int64_ordered(0, pack_tail(INITIAL_TERM_ID, TERM_LENGTH))
    reader = reader_for(log)
    reader.poll(lambda b, h: None, 10)
    assert reader.position == TERM_LENGTH
    assert log.active_term_count == 0
    assert _core.unblock_log(log.mapped, TERM_LENGTH)
    assert log.active_term_count == 1
    assert appender.try_offer(b"two") == TERM_LENGTH + 64


# -- readers ---------------------------------------------------------------------------------------


@pytest.fixture
def five(log):
    """Five 10-byte messages at positions 64, 128, ..., 320."""
    appender, _ = appender_for(log)
    for i in range(5):
        assert appender.try_offer(bytes([i]) * 10) == 64 * (i + 1)
    return log


def test_controlled_poll_abort_leaves_the_fragment_unconsumed(five):
    reader = reader_for(five)
    seen = []

    def handler(buffer, header):
        seen.append((buffer[0], reader.position))
        return ControlledPollAction.ABORT if buffer[0] == 2 else ControlledPollAction.CONTINUE

    assert reader.controlled_poll(handler, 10) == 2
    assert seen == [(0, 0), (1, 0), (2, 0)]  # CONTINUE does not move the position yet
    assert reader.position == 128
    seen.clear()
    assert reader.controlled_poll(handler, 10) == 0  # the aborted fragment comes back first
    assert seen == [(2, 128)]
    assert reader.position == 128


def test_controlled_poll_break_consumes_the_fragment_and_stops(five):
    reader = reader_for(five)
    seen = []

    def handler(buffer, header):
        seen.append(buffer[0])
        return ControlledPollAction.BREAK if buffer[0] == 1 else None  # None = CONTINUE

    assert reader.controlled_poll(handler, 10) == 2
    assert reader.position == 128
    assert reader.controlled_poll(handler, 10) == 3
    assert seen == [0, 1, 2, 3, 4]
    assert reader.position == 320


def test_controlled_poll_commit_moves_the_position_at_once(five):
    reader = reader_for(five)
    seen = []

    def handler(buffer, header):
        seen.append(reader.position)
        return ControlledPollAction.COMMIT

    assert reader.controlled_poll(handler, 10) == 5
    assert seen == [0, 64, 128, 192, 256]
    assert reader.position == 320


def test_controlled_poll_fragment_limit_and_bad_action(five):
    """A result that is not an action (an unknown number, a string, a bool: True is 1, ABORT,
    and held the reader at that fragment forever) is a ValueError naming it, and its fragment
    stays unconsumed, as ABORT leaves it: it used to be consumed, or a TypeError."""
    reader = reader_for(five)
    assert reader.controlled_poll(lambda b, h: ControlledPollAction.CONTINUE, 2) == 2
    assert reader.position == 128
    seen = []

    def returning(result):
        def handler(buffer, header):
            seen.append(buffer[0])
            return result

        return handler

    for bad in (99, 0, "x", True, 4.0):
        with pytest.raises(ValueError, match=f"returned {bad!r}, not a ControlledPollAction"):
            reader.controlled_poll(returning(bad), 10)
        assert reader.position == 128
    assert seen == [2] * 5
    seen.clear()
    assert reader.controlled_poll(returning(ControlledPollAction.COMMIT), 1) == 1
    assert (seen, reader.position) == ([2], 192)


def test_a_handler_that_cannot_be_called_consumes_nothing(five):
    """Every poll refuses a handler that is not callable, naming it, before it reads: the first
    fragment was consumed and lost."""
    reader = reader_for(five)
    for poll in (reader.poll, reader.controlled_poll, reader.batch_poll, reader.block_poll):
        with pytest.raises(TypeError, match="handler must be callable, not NoneType"):
            poll(None, 10)
    assert reader.position == 0
    seen = []
    assert reader.poll(lambda buffer, header: seen.append(buffer[0]), 10) == 5
    assert seen == [0, 1, 2, 3, 4]


RECORD = np.dtype(
    [("id", "<i8"), ("price", "<f8"), ("qty", "<i4"), ("side", "u1"), ("pad", "u1", (3,))]
)


def make_records(count: int) -> np.ndarray:
    records = np.zeros(count, dtype=RECORD)
    records["id"] = np.arange(count) * 1000 + 7
    records["price"] = np.arange(count) * 0.25 - 3
    records["qty"] = -np.arange(count)
    records["side"] = np.arange(count) % 2
    return records


@both_kinds
def test_batch_poll_records_is_a_view_over_the_term(log, exclusive):
    appender, _ = appender_for(log, exclusive)
    records = make_records(100)
    rows = records.view(np.uint8).reshape(100, RECORD.itemsize)
    stride = align32(RECORD.itemsize + HEADER_LENGTH)
    assert appender.offer_batch(rows) == 100
    assert appender.position == 100 * stride
    reader = reader_for(log)
    checked = []

    def handler(batch):
        assert len(batch) == 100
        assert (batch.session_id, batch.term_id, batch.position) == (SESSION_ID, INITIAL_TERM_ID, 0)
        assert batch.offsets.tolist() == [i * stride + HEADER_LENGTH for i in range(100)]
        assert (batch.lengths == RECORD.itemsize).all()
        assert (batch.flags == UNFRAGMENTED).all()
        view = batch.records(RECORD)
        assert np.shares_memory(view, log.array)
        assert not view.flags.writeable
        assert view.dtype == RECORD and view.shape == (100,)
        assert (view == records).all()
        messages = batch.messages()
        assert [bytes(m) for m in messages] == [row.tobytes() for row in rows]
        with pytest.raises(ValueError):
            batch.records(np.dtype("<i8"))
        checked.append(True)

    assert reader.batch_poll(handler, 1000) == 100
    assert checked == [True]
    assert reader.position == 100 * stride


def test_batch_poll_variable_messages_and_one_term_per_batch(log):
    appender, _ = appender_for(log)
    pad_offset = fill_first_term(appender, 1000)  # aligned 1056: a 64-byte PAD at the end
    assert appender.try_offer(b"later") == TERM_LENGTH + 64
    reader = reader_for(log, pad_offset - 2 * 1056)
    batches = []
    reader.batch_poll(lambda batch: batches.append([bytes(m) for m in batch.messages()]), 100)
    assert batches == [[bytes(1000), bytes(1000)]]
    assert reader.position == TERM_LENGTH  # past the PAD, not into the next term
    reader.batch_poll(lambda batch: batches.append([bytes(m) for m in batch.messages()]), 100)
    assert batches[-1] == [b"later"]


# -- offer_batch -------------------------------------------------------------------------------


@both_kinds
def test_offer_batch_of_a_2d_array_and_of_a_list(log, exclusive):
    appender, _ = appender_for(log, exclusive)
    rows = np.arange(40 * 24, dtype=np.uint32).astype(np.uint8).reshape(40, 24)
    assert appender.offer_batch(rows, start=30) == 10
    assert appender.position == 10 * 64
    assert appender.offer_batch(rows) == 40
    assert appender.position == 50 * 64
    messages = [b"", b"a" * 31, b"b" * 33, bytes(range(200)), b"c" * MAX_PAYLOAD]
    assert appender.offer_batch(messages) == 5
    lengths = [align32(len(m) + HEADER_LENGTH) for m in messages]
    assert appender.position == 50 * 64 + sum(lengths)
    assert appender.offer_batch(messages, start=3) == 2
    reader = reader_for(log)
    got = []
    reader.poll(lambda b, h: got.append((bytes(b), h.position)), 1000)
    expected_data = [r.tobytes() for r in rows[30:]] + [r.tobytes() for r in rows]
    expected_data += messages + messages[3:]
    assert [data for data, _ in got] == expected_data
    positions = [p for _, p in got]
    steps = [64] * 50 + lengths + lengths[3:]
    assert positions == list(np.cumsum(steps))  # continuous: no gap between positions


@both_kinds
def test_offer_batch_checks_every_message_by_its_bytes_before_appending_any(log, exclusive):
    """A message of 4-byte items, or of rows, is as long as its bytes, not its items or rows;
    one whose bytes are not one block (a strided view) is refused by name. Nothing goes in."""
    appender, _ = appender_for(log, exclusive)
    items = array.array("i", range(2049))  # 2049 items, 8196 bytes: over 8192
    rows = np.zeros((2, 4097), dtype=np.uint8)  # 2 rows, 8194 bytes
    with pytest.raises(MessageTooLargeError, match=r"^message 1 of 8196 bytes .*nothing was"):
        appender.offer_batch([b"first", items])
    with pytest.raises(MessageTooLargeError, match=r"^message 2 of 8194 bytes .*nothing was"):
        appender.offer_batch([b"first", b"second", rows])
    with pytest.raises(BufferError, match=r"^message 1 \(memoryview\) is not C-contiguous"):
        appender.offer_batch([b"first", memoryview(bytes(64))[::2]])
    with pytest.raises(BufferError, match=r"^message 2 \(ndarray\) is not C-contiguous"):
        appender.offer_batch([b"first", b"second", np.zeros((8, 8), dtype=np.uint8).T])
    assert log.raw_tail(0) == pack_tail(INITIAL_TERM_ID, 0)  # nothing appended
    fits = array.array("i", range(2048))  # 8192 bytes: the largest message
    assert appender.offer_batch([b"first", fits, np.full((2, 3), 7, dtype=np.uint8)]) == 3
    lengths = [64, 8192 // MAX_PAYLOAD * MTU + align32(8192 % MAX_PAYLOAD + HEADER_LENGTH), 64]
    assert appender.position == sum(lengths)
    got = []
    reader_for(log).poll(_core.FragmentAssembler(lambda b, h: got.append(bytes(b))), 100)
    assert got == [b"first", fits.tobytes(), bytes([7]) * 6]


@both_kinds
@pytest.mark.parametrize("kind", ["array", "list"])
def test_offer_batch_at_the_term_end_and_at_the_limit(log, exclusive, kind):
    appender, limit = appender_for(log, exclusive)
    rows = np.full((70, 1024 - HEADER_LENGTH), 9, dtype=np.uint8)
    batch = rows if kind == "array" else [row.tobytes() for row in rows]
    assert appender.offer_batch(batch) == 64  # exactly fills the term
    assert appender.position == TERM_LENGTH
    if kind == "array":
        # One reservation per call, cut at the term end; the next call rotates.
        assert log.active_term_count == 0
        assert appender.offer_batch(batch, start=64) == _core.ADMIN_ACTION
    # (A list is offered one message at a time: its 65th offer already rotated the term.)
    assert log.active_term_count == 1
    set_counter(limit, TERM_LENGTH + 1000)
    assert appender.offer_batch(batch, start=64) == 1  # starts below the limit
    assert appender.offer_batch(batch, start=65) == _core.NOT_CONNECTED
    set_counter(limit, 2**62)
    assert appender.offer_batch(batch, start=65) == 5
    assert appender.position == TERM_LENGTH + 6 * 1024
    assert log.active_term_count == 1


# -- header decoding --------------------------------------------------------------------------

# data-1.bin from session-basic.pcap (Aeron 1.15.1): 'Hello World! 0', first frame of the stream.
DATA_1 = (
    bytes.fromhex("2e00000000c00100000000004c3133bce90300003a1ba97d0000000000000000")
    + b"Hello World! 0"
    + bytes(18)
)
# pad-1.bin from session-pad.pcap: PAD at the end of a 64 KiB term.
PAD_1 = bytes.fromhex("8002000000c0000080fd0000728b0347ea030000b6830a0c0000000000000000")


def test_embedded_vectors_match_the_captured_files():
    for name, data in (("data-1.bin", DATA_1), ("pad-1.bin", PAD_1)):
        assert (WIRE_VECTORS / name).read_bytes() == data, name


def test_header_decode_of_a_captured_data_frame():
    assert len(DATA_1) == 64
    header = _core.Header.decode(DATA_1, 2108234554, 24)  # 16 MiB term
    assert header.frame_length == 46
    assert header.version == 0
    assert header.flags == 0xC0
    assert header.type == HDR_TYPE_DATA
    assert header.term_offset == 0
    assert header.session_id == -1137495732
    assert header.stream_id == 1001
    assert header.term_id == 2108234554
    assert header.reserved_value == 0
    assert header.position == 64
    assert header.to_bytes() == DATA_1[:32]
    assert header.copy().to_bytes() == DATA_1[:32]
    assert DATA_1[32:46] == b"Hello World! 0"


def test_header_decode_of_a_captured_pad_frame():
    header = _core.Header.decode(PAD_1, 202015670, 16)  # 64 KiB term
    assert (header.frame_length, header.flags, header.type) == (640, 0xC0, HDR_TYPE_PAD)
    assert (header.term_offset, header.session_id, header.stream_id, header.term_id) == (
        64896,
        1191414642,
        1002,
        202015670,
    )
    assert header.position == 65536  # the PAD covers the rest of the term


def test_header_decode_needs_32_bytes():
    with pytest.raises(ValueError, match="32"):
        _core.Header.decode(DATA_1[:31])
