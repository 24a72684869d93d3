"""Readable ends, message boundaries, partitions and the partition reader on segment files
written from terms laid out as the appender lays them (no Spark session, no driver)."""

import random
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("pyarrow", reason='needs pyarrow: pip install -e ".[spark]"')
pytest.importorskip("pyspark.sql.datasource", reason='needs PySpark: pip install -e ".[spark]"')

from aeronio.spark import reader as rd  # noqa: E402
from aeronio.spark import recordings as recs  # noqa: E402
from aeronio.spark.decode import Decoder, raw_schema  # noqa: E402
from aeronio.spark.recordings import DataLossError, Recording, SourceError  # noqa: E402
from tests.spark.terms import TermWriter  # noqa: E402

TERM = 64 * 1024
SEGMENT = 2 * TERM


def write_recording(
    directory: Path, writer: TermWriter, recording_id=0, stop=None, segment=SEGMENT
) -> Recording:
    """Segment files of the writer's log (each the full segment length, zeros beyond)."""
    data = bytes(writer.data)
    for index in range((len(data) + segment - 1) // segment):
        chunk = data[index * segment : (index + 1) * segment]
        (directory / f"{recording_id}-{index}.rec").write_bytes(chunk + bytes(segment - len(chunk)))
    start = writer.messages[0][0] if writer.messages else writer.position
    return Recording(
        recording_id, writer.session_id, writer.stream_id, "aeron:ipc", start,
        writer.position if stop is None else stop, writer.initial_term_id, TERM, segment, 1408,
    )  # fmt: skip


def filled(seed: int, count: int, start_position: int = 0) -> TermWriter:
    rng = random.Random(seed)
    writer = TermWriter(term_length=TERM, mtu=1408, start_position=start_position)
    for i in range(count):
        writer.append(rng.randbytes(rng.choice([0, 50, 700, 1400, 3000, 6000])), reserved=i)
    return writer


def read_all(directory: Path, parts: list, fail: bool = True) -> list[tuple]:
    decoder = Decoder(raw_schema(), "raw")
    out = []
    for part in parts:
        for batch in rd.read_part(directory, part, decoder, fail, chunk_bytes=TERM):
            out += zip(
                batch.column("position").to_pylist(), batch.column("data").to_pylist(), strict=True
            )
    return out


@pytest.mark.parametrize("start_position", [0, 3 * TERM + 4096])
def test_split_parts_read_every_message_once(tmp_path, start_position):
    writer = filled(1, 400, start_position)
    r = write_recording(tmp_path, writer)
    expected = [(p, d) for p, d, _ in writer.messages]
    for max_bytes in (None, TERM, 3 * TERM):
        parts = rd.split(r, r.start_position, r.stop_position, r.stop_position, max_bytes)
        assert len(parts) > 3
        assert read_all(tmp_path, parts) == expected
    # ranges that start and end anywhere: the messages that start in them
    rng = random.Random(2)
    for _ in range(10):
        low = rng.randrange(r.start_position, r.stop_position)
        high = rng.randrange(low, r.stop_position + 1)
        parts = rd.split(r, low, high, r.stop_position, TERM)
        assert read_all(tmp_path, parts) == [(p, d) for p, d in expected if low <= p < high]


def test_a_part_never_crosses_a_segment(tmp_path):
    """Runs of terms that do not divide a segment end at its end (the JVM reader maps one
    segment file a partition)."""
    writer = filled(4, 400)
    r = write_recording(tmp_path, writer, segment=4 * TERM)
    parts = rd.split(r, 0, r.stop_position, r.stop_position, 3 * TERM)
    assert r.stop_position > 8 * TERM
    for p in parts:
        assert r.layout.segment_index(p.scan_from) == r.layout.segment_index(p.emit_to - 1)
    assert [p.emit_to - p.emit_from for p in parts[:3]] == [3 * TERM, TERM, 2 * TERM]
    assert read_all(tmp_path, parts) == [(p, d) for p, d, _ in writer.messages]


def test_written_end_of_an_active_recording(tmp_path):
    writer = filled(3, 300)
    torn = writer.position
    for _ in range(5):
        writer.append(bytes(200))
    r = write_recording(tmp_path, writer, stop=-1)
    with open(tmp_path / f"0-{torn // SEGMENT}.rec", "r+b") as f:  # a torn block
        f.seek(torn % SEGMENT)
        f.write(bytes(4))
    assert recs.written_end(tmp_path, r) == torn
    assert recs.written_end(tmp_path, r, hint=torn - 5000) == torn
    earlier = max(p for p, _, _ in writer.messages if p < torn and p >= torn - torn % TERM)
    assert recs.written_end(tmp_path, r, known_end=earlier) == torn
    # a segment file made but nothing written in it yet
    nothing = write_recording(tmp_path, filled(4, 0), recording_id=1, stop=-1)
    assert recs.written_end(tmp_path, nothing) == 0  # no segment file
    (tmp_path / "1-0.rec").write_bytes(bytes(SEGMENT))
    assert recs.written_end(tmp_path, nothing) == 0  # one made, nothing written in it yet


def test_boundaries_of_a_recording(tmp_path):
    writer = TermWriter(term_length=TERM, mtu=1408)
    for size in (100, 5000, 100, 7000, 7000, 7000):
        writer.append(bytes(size))
    r = write_recording(tmp_path, writer)
    starts = [p for p, _, _ in writer.messages]
    inside = starts[1] + 2 * 1408  # within the fragmented second message
    assert recs.last_boundary(tmp_path, r, 0, inside) == starts[1]
    assert recs.last_boundary(tmp_path, r, starts[1], inside) == starts[1]
    assert recs.last_boundary(tmp_path, r, 0, starts[3]) == starts[3]
    assert recs.first_boundary_after(tmp_path, r, starts[1], r.stop_position) == starts[2]
    assert recs.first_boundary_after(tmp_path, r, starts[1], inside) == starts[1]
    assert recs.is_message_start(tmp_path, r, starts[1])
    assert not recs.is_message_start(tmp_path, r, starts[1] + 1408)  # a middle fragment
    assert rd.advance(tmp_path, r, 0, r.stop_position, 10) == starts[1]  # one whole message
    assert rd.advance(tmp_path, r, 0, r.stop_position, starts[3] + 64) == starts[3]
    assert rd.allot({1: 300, 2: 100}, 200) == {1: 150, 2: 50}
    assert rd.allot({1: 300, 2: 100}, None) == {1: 300, 2: 100}


def test_the_reader_on_missing_and_zeroed_bytes(tmp_path):
    writer = filled(5, 300)
    r = write_recording(tmp_path, writer)
    cut = writer.messages[150][0]
    with open(tmp_path / f"0-{cut // SEGMENT}.rec", "r+b") as f:  # as segments.truncate does
        f.seek(cut % SEGMENT)
        f.write(bytes(SEGMENT - cut % SEGMENT))
    parts = rd.split(r, 0, r.stop_position, r.stop_position, None)
    with pytest.raises(
        DataLossError, match=f"no whole frame at position {cut} of .*0-{cut // SEGMENT}.rec"
    ):
        read_all(tmp_path, parts)
    got = read_all(tmp_path, parts, fail=False)  # the rest of that segment is skipped
    assert got[:150] == [(p, d) for p, d, _ in writer.messages[:150]]
    assert all(p >= (cut // SEGMENT + 1) * SEGMENT for p, _ in got[150:])
    (tmp_path / "0-1.rec").unlink()
    with pytest.raises(DataLossError, match="0-1.rec is missing"):
        read_all(tmp_path, parts)


def test_a_descriptors_term_length_is_checked_by_the_limits():
    """Term lengths as `limits.check_term_length` allows them (64 KiB .. 1 GiB, a power of two),
    the segment file length a multiple of it; else the descriptor is corrupt."""
    fields = dict(
        recording_id=3, session_id=1, stream_id=2, original_channel="aeron:ipc", start_position=0,
        stop_position=-1, initial_term_id=0, mtu_length=1408,
    )  # fmt: skip
    for term, segment in ((TERM, SEGMENT), (1 << 30, 1 << 30)):
        d = SimpleNamespace(term_buffer_length=term, segment_file_length=segment, **fields)
        assert recs.from_descriptor(d, "here").term_length == term
    for term, segment in ((1 << 31, 1 << 31), (TERM // 2, SEGMENT), (3 * TERM, 6 * TERM)):
        d = SimpleNamespace(term_buffer_length=term, segment_file_length=segment, **fields)
        with pytest.raises(SourceError) as e:
            recs.from_descriptor(d, "here")
        assert str(e.value) == (
            f"here: recording 3 has a corrupt descriptor: term length {term}, segment file "
            f"length {segment}"
        )
    d = SimpleNamespace(term_buffer_length=TERM, segment_file_length=TERM + 32, **fields)
    with pytest.raises(SourceError, match="corrupt descriptor: term length 65536, segment"):
        recs.from_descriptor(d, "here")
