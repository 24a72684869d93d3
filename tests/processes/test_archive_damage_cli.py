"""`aeronio archive verify|list|dump` on damaged directories, each run in a process of its own (a
crash shows as its exit status): every segment of every recording is checked, every corrupt
catalog entry is reported by id without hiding the others, and empty files are named."""

import os
import random
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from aeronio.archive.catalog import Catalog
from aeronio.archive.recording_writer import RecordingWriter
from tests.processes.test_archive_cli import run

TERM = 64 * 1024
SEGMENT = 128 * 1024
FRAME = 1024  # every frame a 1024-byte unfragmented DATA frame: terms hold 64 each
STOP = 5 * TERM + 10 * FRAME  # three segments: two full, the third one term and ten frames
INITIAL_TERM_ID = 7
RECORD = 1024  # a catalog record; recording n is record n + 1, its descriptor body at +32
BODY = 32
FIELDS = {"start": BODY + 40, "stop": BODY + 48, "term length": BODY + 64}


def frame(position: int, rng: random.Random) -> bytes:
    header = struct.pack(
        "<iBBHiiiiq", FRAME, 0, 0xC0, 1, position % TERM, 42, 1001,
        INITIAL_TERM_ID + position // TERM, 0,
    )  # fmt: skip
    return header + rng.randbytes(FRAME - len(header))


@pytest.fixture
def directory(tmp_path) -> Path:
    """An archive directory with recordings 0 and 1, each STOP bytes of whole frames."""
    archive_dir = tmp_path / "archive"
    rng = random.Random(5)
    with Catalog(archive_dir, max_entries=16) as catalog:
        for _ in range(2):
            recording_id = catalog.add_recording(
                start_position=0, start_timestamp=1, initial_term_id=INITIAL_TERM_ID,
                segment_file_length=SEGMENT, term_buffer_length=TERM, mtu_length=1408,
                session_id=42, stream_id=1001, stripped_channel="aeron:ipc",
                original_channel="aeron:ipc", source_identity="aeron:ipc",
            )  # fmt: skip
            writer = RecordingWriter(archive_dir, catalog.layout(recording_id), 0)
            for position in range(0, STOP, FRAME):
                writer.write(memoryview(frame(position, rng)))
            writer.close()
            catalog.recording_stopped(recording_id, STOP, 2)
    return archive_dir


def write(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def verify(directory: Path, *options: str):
    result = run("verify", "--dir", str(directory), *options)
    assert not result.stderr, result.stderr
    return result.returncode, result.stdout


def segment_lines(directory: Path, damaged: dict[int, str]) -> str:
    bounds = [(0, SEGMENT), (SEGMENT, 2 * SEGMENT), (2 * SEGMENT, STOP)]
    return "".join(
        f"  0-{i}.rec positions [{first}, {end}): {damaged[i]}\n"
        for i, (first, end) in enumerate(bounds)
        if i in damaged
    )


def test_a_sound_directory_verifies_segment_by_segment(directory):
    assert verify(directory) == (0, "recordingId=0 OK\nrecordingId=1 OK\n")
    lines = [
        f"  {r}-0.rec positions [0, {SEGMENT}): OK\n"
        f"  {r}-1.rec positions [{SEGMENT}, {2 * SEGMENT}): OK\n"
        f"  {r}-2.rec positions [{2 * SEGMENT}, {STOP}): OK\n"
        for r in (0, 1)
    ]
    assert verify(directory, "--segments") == (
        0,
        f"recordingId=0 OK\n{lines[0]}recordingId=1 OK\n{lines[1]}",
    )


# (segment, offset in it, bytes written there, or "missing", "empty", ("cut", size)), then
# what verify says of that segment
SEGMENT_DAMAGE = {
    "missing middle segment": (1, "missing", "segment file {path} is missing"),
    "empty segment": (1, "empty", "segment file {path} is empty (0 bytes)"),
    "middle segment cut mid-frame": (
        1, ("cut", 39 * FRAME + 80),
        f"no whole frame at position {SEGMENT + 39 * FRAME}: frame length 1024 goes past the "
        f"file's end at {39 * FRAME + 80} bytes",
    ),
    "negative frame length": (
        0, (3 * FRAME, struct.pack("<i", -5)),
        f"no whole frame at position {3 * FRAME}: frame length -5",
    ),
    "huge frame length": (
        0, (3 * FRAME, struct.pack("<i", 0x10000000)),
        f"no whole frame at position {3 * FRAME}: frame length 268435456 goes past its "
        "term's end",
    ),
    "frame type in an earlier segment": (
        0, (2 * FRAME + 6, struct.pack("<H", 5)),
        f"no whole frame at position {2 * FRAME}: frame type 5",
    ),
    "term offset in an earlier segment": (
        0, (TERM + 4 * FRAME + 8, struct.pack("<i", 64)),
        f"no whole frame at position {TERM + 4 * FRAME}: term offset 64 where {4 * FRAME} "
        "belongs",
    ),
    "shortened frame length": (
        0, (4 * FRAME, struct.pack("<i", FRAME - 64)),
        f"no whole frame at position {5 * FRAME - 64}: ",
    ),
    "random 4 KiB block": (
        0, (8 * FRAME, random.Random(11).randbytes(4096)),
        f"no whole frame at position {8 * FRAME}: ",
    ),
}  # fmt: skip


@pytest.mark.parametrize("kind", SEGMENT_DAMAGE)
def test_verify_finds_damage_in_any_segment(directory, kind):
    index, damage, said = SEGMENT_DAMAGE[kind]
    path = directory / f"0-{index}.rec"
    if damage == "missing":
        path.unlink()
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage[0] == "cut":
        path.write_bytes(path.read_bytes()[: damage[1]])
    else:
        write(path, *damage)
    status, out = verify(directory)
    said = said.format(path=path)
    head, *segment_line, last = out.splitlines(keepends=True)
    assert (status, head, last) == (
        1,
        "recordingId=0 1 of 3 segments damaged\n",
        "recordingId=1 OK\n",
    )
    (line,) = segment_line
    expected = segment_lines(directory, {index: said})
    if said.endswith(": "):  # what the random bytes there say is theirs
        assert line.startswith(expected[:-1]) and len(line) > len(expected)
    else:
        assert line == expected


def test_missing_segments_from_some_point_on_are_one_line(directory):
    for index in (1, 2):
        (directory / f"0-{index}.rec").unlink()
    status, out = verify(directory)
    assert (status, out) == (
        1,
        "recordingId=0 2 of 3 segments damaged\n"
        f"  0-1.rec to 0-2.rec positions [{SEGMENT}, {STOP}): segment files "
        f"{directory / '0-1.rec'} to 0-2.rec are missing (2 files)\n"
        "recordingId=1 OK\n",
    )


def test_verify_of_a_stop_position_far_beyond_the_data_is_prompt(directory):
    """One bit flipped in the stop position: 2**39 segments would be missing (a list of them
    took minutes and gigabytes); the files present are what is checked."""
    stop = STOP + (1 << 56)
    write(directory / "archive.catalog", RECORD + FIELDS["stop"], struct.pack("<q", stop))
    count = (stop - 1) // SEGMENT + 1
    status, out = verify(directory)
    assert (status, out) == (
        1,
        f"recordingId=0 {count - 2} of {count} segments damaged\n"
        f"  0-2.rec positions [{2 * SEGMENT}, {3 * SEGMENT}): no whole frame at position "
        f"{STOP}: frame length 0\n"
        f"  0-3.rec to 0-{count - 1}.rec positions [{3 * SEGMENT}, {stop}): segment files "
        f"{directory / '0-3.rec'} to 0-{count - 1}.rec are missing ({count - 3} files)\n"
        "recordingId=1 OK\n",
    )


CATALOG_DAMAGE = {
    "term length 0": (
        FIELDS["term length"], struct.pack("<i", 0),
        "term length 0 must be a power of two between 65536 and 1073741824",
    ),
    "term length 100000": (
        FIELDS["term length"], struct.pack("<i", 100000),
        "term length 100000 must be a power of two between 65536 and 1073741824",
    ),
    "start position 13": (
        FIELDS["start"], struct.pack("<q", 13),
        "start position 13 is not a frame aligned position",
    ),
    "unaligned stop": (
        FIELDS["stop"], struct.pack("<q", STOP - 8),
        f"stop position {STOP - 8} is not a frame aligned position from the start",
    ),
    "huge length": (0, struct.pack("<i", 1 << 30), "descriptor length 1073741824"),
    "zeroed": (0, bytes(RECORD), "zeroed, with recordings after it"),
}  # fmt: skip


@pytest.mark.parametrize("kind", CATALOG_DAMAGE)
def test_a_corrupt_catalog_entry_is_reported_and_hides_no_other(directory, kind):
    offset, data, said = CATALOG_DAMAGE[kind]
    catalog = directory / "archive.catalog"
    write(catalog, RECORD + offset, data)
    problem = f"{catalog}: recording 0 has a corrupt catalog entry: {said}"
    assert verify(directory) == (1, f"recordingId=0 {problem}\nrecordingId=1 OK\n")
    listed = run("list", "--dir", str(directory))
    assert listed.returncode == 1
    assert listed.stderr == f"aeronio archive list: {problem}\n"
    assert listed.stdout.startswith(f"recordingId=1 startPosition=0 stopPosition={STOP} ")
    assert listed.stdout.count("\n") == 1


def test_an_empty_catalog_is_a_clear_error(directory):
    catalog = directory / "archive.catalog"
    catalog.write_bytes(b"")
    for action in ("verify", "list"):
        result = run(action, "--dir", str(directory))
        assert (result.returncode, result.stdout, result.stderr) == (
            1,
            "",
            f"aeronio archive {action}: {catalog}: 0 bytes is too short for a catalog\n",
        )


def test_a_catalog_cut_inside_a_record_is_reported_and_hides_no_other(directory):
    catalog = directory / "archive.catalog"
    os.truncate(catalog, 2 * RECORD + 500)  # 500 bytes into recording 1's record
    before = catalog.read_bytes()
    problem = (
        f"{catalog}: 2548 bytes is not a whole number of 1024-byte records: "
        "recording 1's record is cut short at 500 bytes"
    )
    assert verify(directory) == (1, f"recordingId=0 OK\nrecordingId=1 {problem}\n")
    listed = run("list", "--dir", str(directory))
    assert (listed.returncode, listed.stderr) == (1, f"aeronio archive list: {problem}\n")
    assert listed.stdout.startswith(f"recordingId=0 startPosition=0 stopPosition={STOP} ")
    assert listed.stdout.count("\n") == 1
    described = run("describe", "--dir", str(directory), "1")
    assert (described.returncode, described.stdout, described.stderr) == (
        1, "", f"aeronio archive describe: {problem}\n",
    )  # fmt: skip
    assert catalog.read_bytes() == before


def test_dump_of_an_empty_segment_names_it(directory):
    path = directory / "0-1.rec"
    path.write_bytes(b"")
    result = run("dump", "--dir", str(directory), "0", "--segment", "1")
    assert (result.returncode, result.stderr) == (
        1,
        f"aeronio archive dump: segment file {path} is empty (0 bytes)\n",
    )


def test_the_spark_source_skips_a_corrupt_entry_and_names_it(directory, caplog):
    from aeronio.spark import recordings as recs

    write(directory / "archive.catalog", RECORD + FIELDS["term length"], struct.pack("<i", 0))
    with recs.open_catalog(directory) as catalog:
        found = recs.recordings(catalog)
    assert [(r.recording_id, r.stop_position) for r in found] == [(1, STOP)]
    (skipped,) = [r.getMessage() for r in caplog.records if r.name == "aeronio.spark"]
    assert "recording 0 has a corrupt catalog entry: term length 0 must be" in skipped


READ_ALL = """
import sys
from aeronio.archive.segments import RecordingLayout, RecordingReader, SegmentError
layout = RecordingLayout(0, 0, {term}, {segment})
try:
    with RecordingReader(sys.argv[1], layout, 0, {stop}) as reader:
        for block in reader.blocks():
            pass
except SegmentError as e:
    print(e)
"""


def test_a_reader_stops_at_an_int32_max_frame_length(directory):
    """A length near 2**31 inside a block: the reader (replay, Spark) raises SegmentError. The
    C length walk crashed on it (int32 overflow) until core-bounds' 64-bit bounds checks, so
    this runs in a process of its own."""
    write(directory / "0-0.rec", 5 * FRAME, struct.pack("<i", 0x7FFFFFF0))
    script = READ_ALL.format(term=TERM, segment=SEGMENT, stop=STOP)
    result = subprocess.run(
        [sys.executable, "-c", script, str(directory)], capture_output=True, text=True, timeout=60
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (
        f"recording 0 is damaged at position {5 * FRAME} in {directory / '0-0.rec'}: frame "
        f"length 2147483632 goes past its term's end (read up to position {4 * FRAME})\n"
    )
