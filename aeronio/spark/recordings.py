"""What the Spark source knows of an archive: its recordings (from the catalog), how far each is
readable, where messages begin and end, and reading a recording's bytes for a partition.

Readable end
------------
A stopped recording is readable to its stop position. An active one (stop position -1) is
readable to its `rec-pos` counter when the archive's driver directory is given, else to the end
of the last whole frame in its segment files: segments fill in order (a new one is opened only
when the one before is full), so only the last segment's last started term is scanned.

Message boundaries
------------------
Messages never cross a term, so every term start (and the recording's start) is a message
boundary; any other boundary is found by scanning frames from one of those.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from aeronio.archive import segments
from aeronio.archive.catalog import CATALOG_FILE_NAME, Catalog, CatalogError
from aeronio.archive.codecs import RecordingDescriptor
from aeronio.archive.recording_pos import RecordingPos
from aeronio.archive.segments import RecordingLayout, SegmentError
from aeronio.cnc import CNC_FILE
from aeronio.errors import AeronError
from aeronio.protocol import limits
from aeronio.spark import frames as fr

log = logging.getLogger("aeronio.spark")


class SourceError(AeronError, ValueError):
    """A bad option, a missing or corrupt archive, or a message that cannot be decoded; the
    message names what is wrong."""


class DataLossError(SourceError):
    """Recorded bytes a query needs are gone (a recording truncated or deleted under it, a
    segment file missing or cut short)."""


class Recording(NamedTuple):
    """A recording's descriptor, as much of it as reading needs (picklable, sent to tasks)."""

    recording_id: int
    session_id: int
    stream_id: int
    channel: str
    start_position: int
    stop_position: int  # -1 while recording
    initial_term_id: int
    term_length: int
    segment_length: int
    mtu: int

    @property
    def active(self) -> bool:
        return self.stop_position < 0

    @property
    def layout(self) -> RecordingLayout:
        return RecordingLayout(
            self.recording_id, self.start_position, self.term_length, self.segment_length
        )

    def term_base(self, position: int) -> int:
        return position - (position & (self.term_length - 1))

    def term_end(self, position: int) -> int:
        """The end of the term holding `position`."""
        return self.term_base(position) + self.term_length

    def known_boundary(self, position: int) -> int:
        """The nearest message boundary at or before `position` known without a scan."""
        return max(self.term_base(position), self.start_position)

    def segment_end(self, position: int) -> int:
        layout = self.layout
        return layout.segment_base_position(layout.segment_index(position) + 1)

    def segment_path(self, archive_dir: Path, position: int) -> Path:
        return archive_dir / self.layout.file_name(self.layout.segment_index(position))


def open_catalog(archive_dir: str | os.PathLike[str]) -> Catalog:
    path = Path(archive_dir)
    if not path.is_dir():
        raise SourceError(f"archive directory {str(path)!r} does not exist")
    if not (path / CATALOG_FILE_NAME).exists():
        raise SourceError(f"no archive catalog in {str(path)!r} ({CATALOG_FILE_NAME} missing)")
    try:
        return Catalog(path, readonly=True)
    except (CatalogError, ValueError, OSError) as e:
        raise SourceError(f"archive catalog in {str(path)!r} cannot be read: {e}") from None


def from_descriptor(d: RecordingDescriptor, where: str) -> Recording:
    """The Recording of a RecordingDescriptor (from a catalog, or a remote archive's listing:
    `where` names it in errors), checked."""
    term = d.term_buffer_length

    def corrupt_lengths(_: str = "") -> SourceError:
        return SourceError(
            f"{where}: recording {d.recording_id} has a corrupt descriptor: term length "
            f"{term}, segment file length {d.segment_file_length}"
        )

    limits.check_term_length(term, error=corrupt_lengths)
    if d.segment_file_length % term:
        raise corrupt_lengths()
    if d.start_position < 0 or d.start_position & (segments.FRAME_ALIGNMENT - 1):
        raise SourceError(
            f"{where}: recording {d.recording_id} has a corrupt descriptor: start "
            f"position {d.start_position}"
        )
    return Recording(
        d.recording_id, d.session_id, d.stream_id, d.original_channel, d.start_position,
        d.stop_position, d.initial_term_id, term, d.segment_file_length, d.mtu_length,
    )  # fmt: skip


def recordings(catalog: Catalog) -> list[Recording]:
    """Every valid recording, in id order; a corrupt catalog entry is logged and skipped, so
    that it hides no other."""
    return listing(catalog)[0]


def listing(catalog: Catalog) -> tuple[list[Recording], set[int]]:
    """`recordings`, and the ids of the corrupt entries it skips."""
    out, corrupt = [], set()
    for rid, entry in catalog.entries():
        try:
            if isinstance(entry, CatalogError):
                raise SourceError(str(entry))
            out.append(from_descriptor(entry, str(catalog.path)))
        except SourceError as e:
            log.warning("skipping a recording: %s", e)
            corrupt.add(rid)
    return out, corrupt


def check_named(catalog: Catalog, named: frozenset[int] | None, streaming: bool = False) -> None:
    """SourceError naming the first id of option recording_ids that is no sound recording of
    the catalog: a batch read cannot wait for it (it would read nothing of it, silently); a
    stream can, for one not there yet, not for a corrupt entry (why it is corrupt is logged
    where `listing` skips it)."""
    found, corrupt = listing(catalog)
    sound = {r.recording_id for r in found}
    for rid in sorted((named or frozenset()) - sound):
        if not streaming:
            raise SourceError(
                f"option recording_ids: recording {rid} is not a sound recording of the "
                "archive's catalog (not there, invalidated, or its entry corrupt: logged)"
            )
        if rid in corrupt:
            raise SourceError(
                f"option recording_ids: recording {rid} has a corrupt catalog entry (logged)"
            )


class Selection(NamedTuple):
    """Which recordings a query reads (the options recording_ids, channel, stream_id)."""

    recording_ids: frozenset[int] | None = None
    channel: str | None = None
    stream_id: int | None = None

    def __call__(self, r: Recording) -> bool:
        return (
            (self.recording_ids is None or r.recording_id in self.recording_ids)
            and (self.channel is None or self.channel in r.channel)
            and (self.stream_id is None or r.stream_id == self.stream_id)
        )


# -- reading bytes ----------------------------------------------------------------------------


def read_bytes(
    archive_dir: Path,
    r: Recording,
    position: int,
    end: int,
    partial: bool = False,
    into: np.ndarray | None = None,
) -> np.ndarray:
    """The recording's bytes [position, end) (one segment), copied from its segment file by
    `segments.read_segment` (into the start of `into` when it is large enough: a buffer reused,
    its pages touched once); DataLossError when the file is missing or, unless `partial` (then
    what there is, in whole frame slots, is returned), shorter."""
    length = end - position
    out = into[:length] if into is not None and len(into) >= length else np.empty(length, np.uint8)
    try:
        got = segments.read_segment(archive_dir, r.layout, position, out.data)
    except SegmentError as e:
        raise DataLossError(
            f"recording {r.recording_id}: {e} (positions {position}..{end} are gone)"
        ) from None
    if got != length:
        if partial:
            return out[: got & ~(segments.FRAME_ALIGNMENT - 1)]
        raise DataLossError(
            f"recording {r.recording_id}: segment file {r.segment_path(archive_dir, position)} "
            f"is cut short: {r.layout.segment_offset(position) + got} bytes, positions up to "
            f"{end} need {r.layout.segment_offset(position) + length}"
        )
    return out


def scan_range(
    archive_dir: Path, r: Recording, start: int, end: int
) -> tuple[np.ndarray, fr.Frames]:
    """The bytes [start, end) (within a segment, `start` a frame boundary) and their frames."""
    buffer = read_bytes(archive_dir, r, start, end)
    return buffer, fr.scan(buffer, start, r.term_length, r.initial_term_id)


def is_frame_at(archive_dir: Path, r: Recording, position: int) -> bool:
    """Whether a frame header for `position` is recorded there."""
    try:
        buffer = read_bytes(archive_dir, r, position, position + segments.HEADER_LENGTH)
    except DataLossError:
        return False
    return fr.header_ok(buffer, 0, position, r.term_length, r.initial_term_id)


# -- how far a recording is readable ----------------------------------------------------------


class RecordingPositions:
    """The archive's `rec-pos` counters in a driver's cnc.dat: recording id -> the
    position recorded so far (active recordings only)."""

    def __init__(self, driver_dir: str | os.PathLike[str]):
        from aeronio.counters import CountersFileError, CountersReader

        try:
            self.reader = CountersReader.open(Path(driver_dir) / CNC_FILE)
        except FileNotFoundError:
            raise SourceError(
                f"driver_dir {str(driver_dir)!r} has no media driver counters ({CNC_FILE} missing)"
            ) from None
        except (CountersFileError, OSError, ValueError) as e:
            raise SourceError(f"driver_dir {str(driver_dir)!r}: {e}") from None

    def snapshot(self) -> dict[int, int]:
        return RecordingPos.positions(self.reader)

    def close(self) -> None:
        self.reader.close()


def written_end(
    archive_dir: Path, r: Recording, hint: int | None = None, known_end: int | None = None
) -> int:
    """The end of the last whole frame of an active recording, from its segment files
    (`segments.written_end`): the last segment present from `hint`'s on, from `known_end`,
    where whole frames were found to end before, when that is in its last started term."""
    layout = r.layout
    index = layout.segment_index(max(hint or 0, r.start_position))
    while (archive_dir / layout.file_name(index + 1)).exists():
        index += 1
    return segments.written_end(archive_dir, layout, index, known_end)


def last_boundary(archive_dir: Path, r: Recording, low: int, target: int) -> int:
    """The greatest message boundary in [low, target] (`low` a boundary, bytes up to `target`
    whole frames); `low` when there is none past it."""
    if target <= low:
        return low
    if target == r.term_base(target) and target >= r.start_position:
        return target
    start = r.known_boundary(target)
    if start <= low:
        start = low if is_message_start(archive_dir, r, low) else r.known_boundary(low)
    _, frames = scan_range(archive_dir, r, start, target)
    found = fr.boundaries(frames, 0) + start
    found = found[(found >= low) & (found <= target)]
    return int(found[-1]) if len(found) else low


def first_boundary_after(archive_dir: Path, r: Recording, low: int, limit: int) -> int:
    """The first message boundary after `low` up to `limit` (the end of the first whole message
    or PAD from there), or `low` when none ends before `limit`. `low` may be inside a message
    (a stream's starting position): the frames are then walked from the term's start."""
    end = min(limit, r.term_end(low))
    if end <= low:
        return low
    start = low if is_message_start(archive_dir, r, low) else r.known_boundary(low)
    _, frames = scan_range(archive_dir, r, start, end)
    found = fr.boundaries(frames, 0) + start
    found = found[found > low]
    return int(found[0]) if len(found) else low


def is_message_start(archive_dir: Path, r: Recording, position: int) -> bool:
    """Whether `position` is a known boundary or a BEGIN or PAD frame is recorded there."""
    if position == r.known_boundary(position):
        return True
    try:
        buffer = read_bytes(archive_dir, r, position, position + segments.HEADER_LENGTH)
    except DataLossError:
        return False
    if not fr.header_ok(buffer, 0, position, r.term_length, r.initial_term_id):
        return False
    _, _, flags, kind = segments.FRAME_HEADER.unpack_from(buffer.data)[:4]
    return kind == segments.HDR_TYPE_PAD or (
        kind == segments.HDR_TYPE_DATA and bool(flags & segments.BEGIN_FRAG_FLAG)
    )
