"""Planning partitions of recordings and reading them (no Spark here: plain functions that the
DataSource classes call, and tests can call directly).

A partition reads one recording's messages that *start* in [emit_from, emit_to): it scans from a
frame boundary at or before emit_from and reads on, up to read_limit, to finish a message that
starts before emit_to. Partitions end at term boundaries (messages never cross a term) or at
message boundaries found by a scan, so a message is never split between two partitions and
belongs to the one where it starts.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from aeronio.archive.segments import FRAME_ALIGNMENT
from aeronio.spark import frames as fr
from aeronio.spark import recordings as recs
from aeronio.spark.recordings import DataLossError, Recording

if TYPE_CHECKING:
    from aeronio.spark.decode import Decoder

log = logging.getLogger("aeronio.spark")

CHUNK_BYTES = 8 << 20  # bytes of whole terms read and decoded at a time (one Arrow batch)


class Part(NamedTuple):
    recording: Recording
    scan_from: int  # a frame boundary at or before emit_from (checked; else the term's start)
    emit_from: int
    emit_to: int
    read_limit: int  # whole frames are recorded up to here


def split(
    r: Recording,
    start: int,
    stop: int,
    read_limit: int,
    max_bytes: int | None,
    trusted: bool = False,
) -> list[Part]:
    """Parts of [start, stop): one per segment, or per run of whole terms of at most
    `max_bytes` (at least a term) within a segment, each reading to the end of its last term
    (or read_limit).
    The first scans from `start` when it is `trusted` to be a frame boundary, else from the
    start of its term."""
    if stop <= start:
        return []
    step = r.segment_length
    if max_bytes is not None:
        step = min(step, max(r.term_length, max_bytes - max_bytes % r.term_length))
    base = r.layout.base_position
    parts, low = [], start
    while low < stop:
        high = min(stop, base + ((low - base) // step + 1) * step, r.segment_end(low))
        limit = min(read_limit, r.term_end(high - 1))
        first = low if trusted or low != start else r.known_boundary(low)
        parts.append(Part(r, first, low, high, limit))
        low = high
    return parts


def scan_start(archive_dir: Path, part: Part) -> int:
    """Where a read of `part` starts: its scan_from when a frame header is recorded there, else
    the nearest boundary known without a scan (the start of its term or recording)."""
    r = part.recording
    position = part.scan_from
    if position > part.emit_from or position & (FRAME_ALIGNMENT - 1):
        position = r.known_boundary(part.emit_from)
    if position != r.known_boundary(position) and not recs.is_frame_at(archive_dir, r, position):
        position = r.known_boundary(position)  # not a frame boundary: scan from the term's start
    return position


def read_part(
    archive_dir: Path,
    part: Part,
    decoder: Decoder,
    fail_on_data_loss: bool = True,
    chunk_bytes: int = CHUNK_BYTES,
) -> Iterator:
    """Record batches of the part's messages (`decoder.batch` builds each: it copies what it
    takes, so one read buffer serves every chunk)."""
    r = part.recording
    reused = None
    position = scan_start(archive_dir, part)
    lead = (position & (r.term_length - 1)) != 0  # may start mid-message (a stream's offset)
    while position < part.read_limit and position < part.emit_to:
        end = min(
            part.read_limit,
            r.segment_end(position),
            max(r.term_end(position), r.term_base(position + chunk_bytes)),
        )
        if reused is None or len(reused) < end - position:
            reused = np.empty(end - position, np.uint8)
        path = r.segment_path(archive_dir, position)
        try:
            buffer = recs.read_bytes(archive_dir, r, position, end, partial=True, into=reused)
        except DataLossError:  # the segment file is missing
            gone = f"positions {position}..{part.read_limit} are gone"
            _lost(part, f"segment file {path} is missing ({gone})", fail_on_data_loss)
            return
        frames = fr.scan(buffer, position, r.term_length, r.initial_term_id)
        messages = fr.assemble(frames)
        at = messages.offset + position
        last = frames.offset[messages.last] + position  # a message never crosses a term
        in_term = last - (at - (at & (r.term_length - 1))) < r.term_length
        keep = (at >= part.emit_from) & (at < part.emit_to) & in_term
        if not keep.all():
            messages = messages.take(keep)
        whole = frames.end == end - position
        for damaged in fr.broken(frames, position, r.term_length, lead, whole) + position:
            if part.emit_from <= damaged < part.emit_to:
                broken(part, str(path), int(damaged), fail_on_data_loss)
        lead = False
        why = None
        if frames.end < end - position:
            why = _short(path, part, position + frames.end, len(buffer) < end - position)
            if fail_on_data_loss:
                _lost(part, why, True)
        if len(messages):
            yield decoder.batch(r, buffer, position, frames, messages)
        if why is not None:
            _lost(part, why, False)
            return
        position = end


# -- batch planning ---------------------------------------------------------------------------


class Bounds(NamedTuple):
    """The positions the options leave of each recording: message starts in [low, high)."""

    low: int = 0
    high: int = 2**63 - 1


def _short(path: Path, part: Part, position: int, cut: bool) -> str:
    """Why the whole frames of `part`'s segment file `path` end at `position`, short of the read
    limit: the file is `cut` short, or holds no whole frame there (PartReader.shortWhy's words)."""
    if cut:
        base = part.recording.layout.segment_base_position(
            part.recording.layout.segment_index(position)
        )
        return (
            f"segment file {path} is cut short ({path.stat().st_size} of "
            f"{part.read_limit - base} bytes)"
        )
    return f"no whole frame at position {position} of {path}"


def _lost(part: Part, why: str, fail_on_data_loss: bool) -> None:
    """Fails the read with `why` (DataLossError), or warns that the rest of the partition is
    skipped (PartReader.lost's words)."""
    problem = (
        f"recording {part.recording.recording_id}: {why}, though the query reads to "
        f"{part.read_limit}: the recording was truncated under the query, or the segment is "
        "damaged"
    )
    if fail_on_data_loss:
        raise DataLossError(f"{problem} (option fail_on_data_loss false skips it)")
    log.warning("%s; skipping the rest of this partition", problem)


def broken(part: Part, where: str, position: int, fail_on_data_loss: bool) -> None:
    """Fails the read: the frames at `position` of `where` (a segment file, a replay) are no
    whole message (`frames.broken`), or warns that they are skipped (PartReader.broken's
    words)."""
    problem = (
        f"recording {part.recording.recording_id}: the frames at position {position} of {where} "
        "are not a whole message (a fragment without its first or last, or a frame of unknown "
        "type): the segment is damaged"
    )
    if fail_on_data_loss:
        raise DataLossError(f"{problem} (option fail_on_data_loss false skips it)")
    log.warning("%s; skipping it", problem)


def readable_end(
    archive_dir: Path,
    r: Recording,
    positions: dict[int, int] | None,
    hint: int | None = None,
    known_end: int | None = None,
) -> int:
    """Where whole frames end: the stop position, the rec-pos counter, or a scan (from
    `known_end`, a readable end found before, when that helps)."""
    if not r.active:
        return r.stop_position
    if positions is not None and r.recording_id in positions:
        return max(positions[r.recording_id], r.start_position)
    return recs.written_end(archive_dir, r, hint, known_end)


def plan_batch(
    archive_dir: Path,
    recordings: list[Recording],
    bounds: Bounds,
    positions: dict[int, int] | None,
    max_partition_bytes: int | None,
) -> list[Part]:
    parts = []
    for r in recordings:
        low = max(bounds.low, r.start_position)
        end = readable_end(archive_dir, r, positions)
        high = min(bounds.high, end)
        parts += split(r, low, high, end, max_partition_bytes)
    return parts


# -- stream planning --------------------------------------------------------------------------


def allot(backlogs: dict[int, int], budget: int | None) -> dict[int, int]:
    """Split a byte budget over recordings in proportion to their backlog (all of each when
    there is no budget or enough of it)."""
    total = sum(backlogs.values())
    if budget is None or total <= budget:
        return dict(backlogs)
    return {rid: backlog * budget // total for rid, backlog in backlogs.items()}


def advance(archive_dir: Path, r: Recording, position: int, end: int, allotment: int) -> int:
    """The next offset of a recording read from `position` with whole frames to `end`: the last
    message boundary within the allotment, or the end of the first message when not even that
    fits (a trigger always moves on while there is a whole message)."""
    if end <= position:
        return position
    target = min(end, position + allotment)
    found = recs.last_boundary(archive_dir, r, position, target)
    if found > position:
        return found
    return recs.first_boundary_after(archive_dir, r, position, end)


def as_offset(positions: dict[int, int]) -> dict[str, int]:
    return {str(rid): int(p) for rid, p in sorted(positions.items())}


def from_offset(offset: dict | None) -> dict[int, int]:
    return {int(k): int(v) for k, v in (offset or {}).items()}
