"""The vectorised frame scanner and message assembly against a one-header-at-a-time walk, on
terms laid out as Aeron's appender lays them (no Spark, no driver)."""

import random
import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("pyarrow", reason='needs pyarrow: pip install -e ".[spark]"')
pytest.importorskip("pyspark.sql.datasource", reason='needs PySpark: pip install -e ".[spark]"')

from aeronio.archive.segments import HEADER_LENGTH  # noqa: E402
from aeronio.spark import frames as fr  # noqa: E402
from aeronio.spark.decode import payload_array  # noqa: E402
from tests.spark.terms import HEADER, TermWriter  # noqa: E402

TERM = 64 * 1024


def log_of(writer: TermWriter, extra: int = 0) -> np.ndarray:
    return np.frombuffer(writer.fill_to(len(writer.data) + extra), np.uint8).copy()


def check(buffer: np.ndarray, writer: TermWriter, start: int, end: int | None = None):
    """scan == walk from `start`; returns the frames."""
    position = writer.base + start
    frames = fr.scan(buffer, position, writer.term_length, writer.initial_term_id, start, end)
    walked = fr.walk(buffer, position, writer.term_length, writer.initial_term_id, start, end)
    got = list(
        zip(
            frames.offset.tolist(), frames.length.tolist(), frames.flags.tolist(),
            frames.type.tolist(), frames.reserved_value.tolist(), strict=True,
        )
    )  # fmt: skip
    assert got == walked
    last = walked[-1] if walked else None
    assert frames.end == (last[0] + ((last[1] + 31) & ~31) if last else start)
    return frames


sizes = st.lists(
    st.one_of(st.integers(0, 120), st.integers(1300, 1400), st.integers(2000, 9000)),
    min_size=1,
    max_size=120,
)


@given(sizes=sizes, start_offset=st.integers(0, 3 * TERM // 32).map(lambda s: s * 32))
def test_scan_and_assemble_match_the_appender(sizes, start_offset):
    writer = TermWriter(term_length=TERM, mtu=1408, start_position=start_offset)
    for i, size in enumerate(sizes):
        writer.append(bytes([i % 251]) * size, reserved=i)
    buffer = log_of(writer, 4096)  # zeros after: nothing written there
    start = writer.messages[0][0] - writer.base if writer.messages else 0
    start = min(start, start_offset % TERM)
    frames = check(buffer, writer, start)
    assert frames.end == len(writer.data)
    messages = fr.assemble(frames)
    assert (messages.offset + writer.base).tolist() == [p for p, _, _ in writer.messages]
    assert messages.length.tolist() == [len(d) for _, d, _ in writer.messages]
    assert messages.reserved_value.tolist() == [r for *_, r in writer.messages]
    assert payload_array(buffer, frames, messages).to_pylist() == [d for _, d, _ in writer.messages]
    assert fr.broken(frames, writer.base, TERM, lead=False, whole=True).tolist() == []


def test_payloads_that_look_like_headers_are_skipped():
    """A payload holding what a header at its own slot would hold (the same term offset and
    term id): a candidate the chain must jump over."""
    writer = TermWriter(term_length=TERM, mtu=1408)
    rng = random.Random(3)
    for i in range(300):
        at = writer.position + 64  # the payload's second slot (of a 32-byte header frame)
        fake = HEADER.pack(
            rng.choice([32, 64, 96, 4000]), 0, 0xC0, 1, at % TERM, writer.session_id,
            writer.stream_id, writer.initial_term_id + at // TERM, 0,
        )  # fmt: skip
        writer.append(bytes(32) + fake + rng.randbytes(rng.choice([0, 40, 500])), reserved=i)
    buffer = log_of(writer)
    frames = check(buffer, writer, 0)
    messages = fr.assemble(frames)
    assert len(messages) == 300
    assert payload_array(buffer, frames, messages).to_pylist() == [d for _, d, _ in writer.messages]


def test_a_torn_block_ends_the_frames():
    """A block whose first length word is not written yet (the archive writes it last): the
    frames behind it, whole as they are, are not read."""
    writer = TermWriter(term_length=TERM, mtu=1408)
    for i in range(50):
        writer.append(bytes(100), reserved=i)
    cut = writer.position
    for _ in range(20):
        writer.append(bytes(100))
    buffer = log_of(writer)
    buffer[cut : cut + 4] = 0
    frames = check(buffer, writer, 0)
    assert frames.end == cut and len(fr.assemble(frames)) == 50


def test_a_limit_inside_a_frame_and_a_region_starting_mid_message():
    writer = TermWriter(term_length=TERM, mtu=1408)
    for size in (100, 5000, 100, 3000, 100):
        writer.append(bytes(size))
    buffer = log_of(writer)
    positions = [p for p, _, _ in writer.messages]
    inside = positions[2] + 64  # within the third message's frame
    frames = check(buffer, writer, 0, inside)
    assert frames.end == positions[2]
    # from the second fragment of message 1: its tail is no message, the rest are
    second_fragment = positions[1] + 1408
    frames = check(buffer, writer, second_fragment)
    messages = fr.assemble(frames)
    assert (messages.offset).tolist() == positions[2:]
    # a region ending mid-message: the message is not there, its BEGIN is a boundary
    frames = check(buffer, writer, 0, positions[3] + 1408)
    assert (fr.assemble(frames).offset).tolist() == positions[:3]
    assert fr.boundaries(frames, 0).tolist() == positions[:4]


def test_boundaries_include_pads_and_term_ends():
    writer = TermWriter(term_length=TERM, mtu=1408)
    while writer.position < TERM + 100:
        writer.append(bytes(3000))
    buffer = log_of(writer)
    frames = check(buffer, writer, 0)
    found = fr.boundaries(frames, 0).tolist()
    assert TERM in found  # after the PAD that ends the first term
    assert found == sorted(set([p for p, _, _ in writer.messages] + writer.ends + [TERM]))


def test_term_ids_wrap_around_32_bits():
    writer = TermWriter(term_length=TERM, mtu=1408, initial_term_id=2**31 - 2)
    for i in range(200):
        writer.append(bytes(1000), reserved=i)
    assert writer.position > 3 * TERM
    buffer = log_of(writer)
    frames = check(buffer, writer, 0)
    assert len(fr.assemble(frames)) == 200
    (term_id,) = struct.unpack_from("<i", buffer, 3 * TERM + 20)
    assert term_id < 0  # wrapped


def test_header_ok():
    writer = TermWriter(term_length=TERM, mtu=1408)
    writer.append(bytes(10))
    buffer = log_of(writer, 64)
    assert fr.header_ok(buffer, 0, 0, TERM, writer.initial_term_id)
    assert not fr.header_ok(buffer, 0, TERM, TERM, writer.initial_term_id)  # wrong term id
    assert not fr.header_ok(buffer, 64, 64, TERM, writer.initial_term_id)  # zeros
    assert not fr.header_ok(buffer, len(buffer) - 8, 0, TERM, writer.initial_term_id)


runs = st.lists(
    st.tuples(st.integers(0, 200), st.integers(1, 300)),  # (message size, how many in a row)
    min_size=1,
    max_size=6,
)


@given(runs=runs, start_offset=st.integers(0, 3 * TERM // 32).map(lambda s: s * 32))
def test_runs_of_one_size_match_the_appender(runs, start_offset):
    """Messages of one size in a row (fixed records: the scan's uniform runs, with a PAD at
    each term's end and runs of other sizes between): scan == walk, and the messages."""
    writer = TermWriter(term_length=TERM, mtu=1408, start_position=start_offset)
    for size, count in runs:
        for i in range(count):
            writer.append(bytes([i % 251]) * size, reserved=i)
    buffer = log_of(writer, 4096)
    frames = check(buffer, writer, start_offset % TERM)
    assert frames.end == len(writer.data)
    messages = fr.assemble(frames)
    assert (messages.offset + writer.base).tolist() == [p for p, _, _ in writer.messages]
    assert messages.length.tolist() == [len(d) for _, d, _ in writer.messages]
    assert messages.reserved_value.tolist() == [r for *_, r in writer.messages]


def test_a_uniform_run_ends_where_a_walk_does():
    """Records of one size: a torn block in the middle, a limit inside a frame, a frame of
    another length (a payload slot holding a header for its slot is not taken)."""
    writer = TermWriter(term_length=TERM, mtu=1408)
    for i in range(3000):  # 64-byte frames: 2.9 terms, a PAD at none (64 divides the term)
        writer.append(i.to_bytes(32, "little"), reserved=i)
    buffer = log_of(writer, 4096)
    assert len(check(buffer, writer, 0)) == 3000
    assert len(check(buffer, writer, 0, 1000 * 64 + 32)) == 1000  # the 1001st does not fit
    torn = buffer.copy()
    torn[1500 * 64 : 1500 * 64 + 4] = 0
    assert check(torn, writer, 0).end == 1500 * 64
    longer = buffer.copy()
    longer[2000 * 64 : 2000 * 64 + 4] = np.frombuffer(np.int32(40).tobytes(), np.uint8)
    frames = check(longer, writer, 0)  # a 40-byte frame (aligned 64): the chain goes on
    assert len(frames) == 3000 and frames.length[2000] == 40


@pytest.mark.parametrize("size", [24, 40, 64])  # frames of 64 bytes, of 96 (PADs), of 96
def test_fixed_records_decode_through_strided_views_as_through_payloads(size):
    """The fixed layout's columns from strided views of the records (a run per term) equal
    those from the joined payloads, for every field, byte for byte."""
    from aeronio.spark.decode import _strided_records

    dtype = np.dtype({"names": ["a", "b", "c"], "formats": ["<i8", "<f8", "<i4"], "itemsize": size})
    rng = np.random.default_rng(size)
    raw = rng.integers(0, 256, (5000, size), np.uint8)
    writer = TermWriter(term_length=TERM, mtu=1408)
    for record in raw:
        writer.append(record.tobytes())
    buffer = log_of(writer)
    frames = fr.scan(buffer, 0, TERM, writer.initial_term_id)
    messages = fr.assemble(frames)
    views = _strided_records(buffer, messages.offset + HEADER_LENGTH, dtype)
    assert views is not None and len(views) <= len(np.unique(messages.offset // TERM))
    expected = np.frombuffer(raw.tobytes(), dtype)
    for name in dtype.names:
        assert np.concatenate([v[name] for v in views]).tobytes() == expected[name].tobytes()


def test_fragments_that_make_no_whole_message_are_broken():
    """Damaged flags or types leave fragments that are no whole message: `broken` names where
    each such message starts (and `assemble` leaves it out)."""
    writer = TermWriter(term_length=TERM, mtu=1408)
    for size in (100, 3000, 100, 100, 3000, 100):
        writer.append(bytes(size))
    clean = log_of(writer)
    p = [q for q, _, _ in writer.messages]

    def damaged(offset: int, value: int, field: str = "<B") -> list[int]:
        buffer = clean.copy()
        struct.pack_into(field, buffer, offset, value)
        frames = fr.scan(buffer, 0, TERM, writer.initial_term_id)
        assert frames.end == len(writer.data)
        return fr.broken(frames, 0, TERM, lead=False, whole=True).tolist()

    assert damaged(p[1] + 5, 0x00) == [p[1]]  # BEGIN lost: a run of fragments without it
    assert damaged(p[1] + 1408 + 5, 0x80) == [p[1]]  # a fragment turned BEGIN breaks its message
    assert damaged(p[4] + 2 * 1408 + 5, 0x00) == [p[4]]  # END lost: the next BEGIN breaks it
    assert damaged(p[2] + 5, 0x80) == [p[2]]  # a message without END
    assert damaged(p[3] + 6, 9, "<H") == [p[3]]  # a frame of unknown type
    assert damaged(p[1] + 1408 + 6, 0, "<H") == [p[1], p[1] + 2 * 1408]  # a PAD inside
    # a message open at its term's end (two frames of 4096 bytes: no PAD); fragments at the
    # next term's start
    writer = TermWriter(term_length=TERM, mtu=4096)
    while writer.position < TERM + 100:
        writer.append(bytes(4064 * 2))
    buffer = log_of(writer)
    last = max(q for q, _, _ in writer.messages if q < TERM)
    assert last == TERM - 8192
    struct.pack_into("<B", buffer, last + 4096 + 5, 0x00)  # its END lost: open at the term end
    struct.pack_into("<B", buffer, TERM + 5, 0x00)  # the next term's BEGIN lost
    frames = fr.scan(buffer, 0, TERM, writer.initial_term_id, 0, TERM + 8192)
    assert fr.broken(frames, 0, TERM, lead=False, whole=True).tolist() == [last, TERM]
    assert fr.broken(frames, 0, TERM, lead=False, whole=False).tolist() == [last, TERM]
    frames = fr.scan(buffer, 0, TERM, writer.initial_term_id, 0, TERM)
    assert fr.broken(frames, 0, TERM, lead=False, whole=True).tolist() == [last]
    assert fr.broken(frames, 0, TERM, lead=False, whole=False).tolist() == []


def test_a_region_starting_mid_message_is_broken_only_when_it_should_not():
    writer = TermWriter(term_length=TERM, mtu=1408)
    for size in (100, 5000, 100):
        writer.append(bytes(size))
    buffer = log_of(writer)
    second_fragment = writer.messages[1][0] + 1408
    frames = fr.scan(buffer, second_fragment, TERM, writer.initial_term_id, second_fragment)
    assert fr.broken(frames, writer.base, TERM, lead=True, whole=True).tolist() == []
    lost = fr.broken(frames, writer.base, TERM, lead=False, whole=True)
    assert lost.tolist() == [second_fragment]
