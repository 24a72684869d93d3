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
