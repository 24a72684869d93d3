"""Frames and messages of recorded terms, found with numpy rather than a Python loop per frame.

A recording's bytes are its stream's terms verbatim: DATA and PAD frames, each a header and its
payload, aligned (the format is archive/segments.py's: `FRAME_HEADER`, `HEADER_LENGTH`, the
field offsets, types and flags, `align_frame`, all imported from there). The frames of a
region chain from a frame boundary by their lengths; a sequential reader stops at the first zero
length (the archive writes a block's first length word last, so what is behind it is not there
yet).

Finding the chain without a loop per frame: every 32-byte slot that *could* be a frame header
(length plausible, and its term offset and term id fields equal to those of the slot's own
position) is a candidate. Every real header is one; a payload slot almost never is. Candidates
whose `next = slot + aligned length` is the next candidate form verified runs; where a run
breaks, the walk jumps to the break's `next` (skipping candidates inside a payload) or, when
that slot is no candidate, ends there. The result is exactly the frames a sequential walk that
checks each header the same way would find, in a handful of vectorised passes.

Records of one size (the common case: fixed-layout records, one per message) take a shorter
way: from a header of length L, the frames of a uniform run sit every aligned(L) bytes to the
end of the term, so only those headers are checked (one pass over a strided view, no
candidates); the run ends at the first that differs, and a frame there (a PAD at the term's end)
is taken alone before the next run. A short run hands the rest to the candidate scan.

Messages: a DATA frame with the BEGIN flag (0x80) starts one, a frame with the END flag (0x40)
ends it (0xC0: both, an unfragmented message); fragments of one message are contiguous frames of
one term. Leading fragments without their BEGIN (a region that starts mid-message) and a
trailing message without its END are not messages.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from aeronio.archive import segments as seg  # the recorded format, defined there once
from aeronio.archive.segments import FRAME_HEADER, HEADER_LENGTH, align_frame
from aeronio.logbuffer.descriptor import compute_term_id_from_position

# A header seen as int32 words (the flags and type share a word) and int64 words.
_LENGTH = seg.FRAME_LENGTH_FIELD_OFFSET // 4
_TERM_OFFSET = seg.TERM_OFFSET_FIELD_OFFSET // 4
_TERM_ID = seg.TERM_ID_FIELD_OFFSET // 4
_FLAGS_TYPE = seg.FLAGS_FIELD_OFFSET // 4
_FLAGS_SHIFT = 8 * (seg.FLAGS_FIELD_OFFSET % 4)
_TYPE_SHIFT = 8 * (seg.TYPE_FIELD_OFFSET % 4)
_RESERVED = seg.RESERVED_VALUE_FIELD_OFFSET // 8


class Frames(NamedTuple):
    """Whole frames of a buffer region, in order."""

    offset: np.ndarray  # int64: each frame's offset in the buffer
    length: np.ndarray  # int32: frame length (header included, not aligned)
    flags: np.ndarray  # uint8
    type: np.ndarray  # uint16
    reserved_value: np.ndarray  # int64
    end: int  # the offset after the last whole frame (the region's start when there is none)

    def __len__(self) -> int:
        return len(self.offset)


class Messages(NamedTuple):
    """Whole messages of a region: the indices of their first and last frames in `Frames`."""

    first: np.ndarray  # int64 frame index of each message's BEGIN frame
    last: np.ndarray  # int64 frame index of its END frame
    offset: np.ndarray  # int64 buffer offset of its first frame (its position - the region's)
    length: np.ndarray  # int32 payload length (fragments reassembled)
    reserved_value: np.ndarray  # int64: the last fragment's, as a subscriber's header shows it

    def __len__(self) -> int:
        return len(self.first)

    def take(self, keep: np.ndarray) -> Messages:
        return Messages(*(field[keep] for field in self))


def _empty_frames(end: int) -> Frames:
    return Frames(
        np.empty(0, np.int64),
        np.empty(0, np.int32),
        np.empty(0, np.uint8),
        np.empty(0, np.uint16),
        np.empty(0, np.int64),
        end,
    )


def expected_fields(
    position: int, count: int, term_length: int, initial_term_id: int
) -> tuple[np.ndarray, np.ndarray]:
    """(term offset, term id) that headers at `count` consecutive slots from `position` hold."""
    positions = position + np.arange(count, dtype=np.int64) * HEADER_LENGTH
    shift = term_length.bit_length() - 1
    term_offset = (positions & (term_length - 1)).astype(np.int32)
    term_id = (initial_term_id + (positions >> shift)).astype(np.int64)
    term_id = ((term_id + 2**31) % 2**32 - 2**31).astype(np.int32)  # int32 wrap, as Aeron's
    return term_offset, term_id


def header_ok(
    buffer: np.ndarray, offset: int, position: int, term_length: int, initial_term_id: int
) -> bool:
    """Whether a frame header for `position` sits at `offset` (a quick check of one slot)."""
    if offset < 0 or offset + HEADER_LENGTH > len(buffer):
        return False
    length, _, _, _, term_offset, _, _, term_id, _ = FRAME_HEADER.unpack_from(buffer.data, offset)
    expected_offset = position & (term_length - 1)
    expected_id = compute_term_id_from_position(position, term_length, initial_term_id)
    return (
        HEADER_LENGTH <= length <= term_length - expected_offset
        and term_offset == expected_offset
        and term_id == expected_id
    )


# A uniform run shorter than this hands the rest of the region to the candidate scan.
MIN_UNIFORM_RUN = 64


def scan(
    buffer: np.ndarray,
    position: int,
    term_length: int,
    initial_term_id: int,
    start: int = 0,
    end: int | None = None,
) -> Frames:
    """The whole frames of `buffer[start:end]`, chained from `start` (a frame boundary whose
    stream position is `position`), as a sequential reader finds them: it stops at a slot that
    is no plausible header (a zero length: nothing written there yet) or at a frame that does
    not fit before `end`. `buffer` is a uint8 array; `start` and `end` are multiples of 32."""
    end = len(buffer) if end is None else end
    pieces: list[Frames] = []
    at = start
    while True:
        run = _uniform_run(buffer, position + at - start, term_length, initial_term_id, at, end)
        if len(run) < MIN_UNIFORM_RUN:
            rest = _scan_candidates(
                buffer, position + at - start, term_length, initial_term_id, at, end
            )
            pieces.append(rest)
            break
        pieces.append(run)
        at = run.end
        one = _one_frame(buffer, position + at - start, term_length, initial_term_id, at, end)
        if one is None:
            break
        pieces.append(one)
        at = one.end
    if len(pieces) == 1:
        return pieces[0]
    offset, length, flags, kind, reserved = (
        np.concatenate([getattr(p, name) for p in pieces]) for name in Frames._fields[:5]
    )
    return Frames(offset, length, flags, kind, reserved, pieces[-1].end)


def _frames_at(buffer: np.ndarray, offsets: np.ndarray, end: int) -> Frames:
    """The frames whose headers are at `offsets` (checked by the caller)."""
    heads = buffer[offsets[:, None] + np.arange(HEADER_LENGTH)].view(np.int32)
    vft = heads[:, _FLAGS_TYPE].view(np.uint32)
    return Frames(
        offsets.astype(np.int64),
        heads[:, _LENGTH].copy(),
        ((vft >> _FLAGS_SHIFT) & 0xFF).astype(np.uint8),
        (vft >> _TYPE_SHIFT).astype(np.uint16),
        heads.view(np.int64)[:, _RESERVED].copy(),
        end,
    )


def _uniform_run(
    buffer: np.ndarray, position: int, term_length: int, initial_term_id: int, at: int, end: int
) -> Frames:
    """The frames from `at` that have the first one's length, up to the end of its term or
    `end` (empty unless a header for `position` is at `at`)."""
    if not header_ok(buffer, at, position, term_length, initial_term_id):
        return _empty_frames(at)
    length = FRAME_HEADER.unpack_from(buffer.data, at)[0]
    aligned = align_frame(length)
    term_offset = position & (term_length - 1)
    count = min((term_length - term_offset) // aligned, (end - at) // aligned)
    if count <= 0:
        return _empty_frames(at)
    region = buffer[at : at + count * aligned]
    words = region.view(np.int32).reshape(count, aligned // 4)
    term_id = int(expected_fields(position, 1, term_length, initial_term_id)[1][0])
    n, window = 0, 256  # checked in windows that double: a short run costs little
    while n < count:
        high = min(count, n + window)
        expected_offset = term_offset + np.arange(n, high, dtype=np.int32) * aligned
        ok = (
            (words[n:high, _LENGTH] == length)
            & (words[n:high, _TERM_OFFSET] == expected_offset)
            & (words[n:high, _TERM_ID] == term_id)
        )
        if not ok.all():
            n += int(np.argmin(ok))
            break
        n, window = high, window * 2
    vft = words[:n, _FLAGS_TYPE].view(np.uint32)
    return Frames(
        at + np.arange(n, dtype=np.int64) * aligned,
        np.full(n, length, np.int32),
        ((vft >> _FLAGS_SHIFT) & 0xFF).astype(np.uint8),
        (vft >> _TYPE_SHIFT).astype(np.uint16),
        region.view(np.int64).reshape(count, aligned // 8)[:n, _RESERVED].copy(),
        at + n * aligned,
    )


def _one_frame(
    buffer: np.ndarray, position: int, term_length: int, initial_term_id: int, at: int, end: int
) -> Frames | None:
    """The frame at `at`, if a header for `position` is there and the frame fits before
    `end`."""
    if not header_ok(buffer, at, position, term_length, initial_term_id):
        return None
    length = FRAME_HEADER.unpack_from(buffer.data, at)[0]
    after = at + align_frame(length)
    if after > end:
        return None
    return _frames_at(buffer, np.array([at], np.int64), after)


def _scan_candidates(
    buffer: np.ndarray,
    position: int,
    term_length: int,
    initial_term_id: int,
    start: int,
    end: int,
) -> Frames:
    """`scan` of any frames: the candidate slots and their verified runs."""
    count = (end - start) // HEADER_LENGTH
    if count <= 0:
        return _empty_frames(start)
    region = buffer[start : start + count * HEADER_LENGTH]
    words = region.view(np.int32).reshape(count, HEADER_LENGTH // 4)
    length = words[:, _LENGTH]
    term_offset, term_id = expected_fields(position, count, term_length, initial_term_id)
    candidate = (
        (length >= HEADER_LENGTH)
        & (length <= term_length - term_offset)
        & (words[:, _TERM_OFFSET] == term_offset)
        & (words[:, _TERM_ID] == term_id)
    )
    slots = np.flatnonzero(candidate)
    if len(slots) == 0 or slots[0] != 0:
        return _empty_frames(start)
    following = slots + align_frame(length[slots].astype(np.int64)) // HEADER_LENGTH  # in slots
    breaks = np.flatnonzero(following[:-1] != slots[1:])
    runs = []
    i = 0
    while True:
        b = np.searchsorted(breaks, i)
        k = int(breaks[b]) if b < len(breaks) else len(slots) - 1
        runs.append((i, k + 1))
        target = following[k]
        if target >= count:
            break
        m = int(np.searchsorted(slots, target))
        if m < len(slots) and slots[m] == target:
            i = m  # candidates inside frame k's payload are skipped
        else:
            break  # no header where the chain goes next: the frames end there
    chain = (
        slots[runs[0][0] : runs[0][1]]
        if len(runs) == 1
        else np.concatenate([slots[a:b] for a, b in runs])
    )
    chain_following = (
        following[runs[0][0] : runs[0][1]]
        if len(runs) == 1
        else np.concatenate([following[a:b] for a, b in runs])
    )
    fits = int(np.searchsorted(chain_following, count, side="right"))  # following ascends
    chain = chain[:fits]
    if fits == 0:
        return _empty_frames(start)
    vft = words[chain, _FLAGS_TYPE].view(np.uint32)
    reserved = region.view(np.int64).reshape(count, HEADER_LENGTH // 8)[chain, _RESERVED]
    return Frames(
        start + chain.astype(np.int64) * HEADER_LENGTH,
        length[chain].copy(),
        ((vft >> _FLAGS_SHIFT) & 0xFF).astype(np.uint8),
        (vft >> _TYPE_SHIFT).astype(np.uint16),
        reserved.copy(),
        start + int(chain_following[fits - 1]) * HEADER_LENGTH,
    )


def boundaries(frames: Frames, start: int) -> np.ndarray:
    """Buffer offsets where no message is in progress, ascending: `start` (a boundary itself),
    the start of each BEGIN frame, the end of each END frame and of each PAD."""
    if len(frames) == 0:
        return np.array([start], np.int64)
    data = frames.type == seg.HDR_TYPE_DATA
    ends = frames.offset + align_frame(frames.length.astype(np.int64))
    before = frames.offset[data & ((frames.flags & seg.BEGIN_FRAG_FLAG) != 0)]
    after = ends[
        (frames.type == seg.HDR_TYPE_PAD) | (data & ((frames.flags & seg.END_FRAG_FLAG) != 0))
    ]
    return np.unique(np.concatenate([[start], before, after]))


def assemble(frames: Frames) -> Messages:
    """The whole messages of the frames: BEGIN to END, contiguous DATA frames."""
    n = len(frames)
    if n == 0:
        e = np.empty(0, np.int64)
        return Messages(e, e, e, np.empty(0, np.int32), e)
    data = frames.type == seg.HDR_TYPE_DATA
    whole = seg.BEGIN_FRAG_FLAG | seg.END_FRAG_FLAG
    if np.all(((frames.flags & whole) == whole) | ~data):  # every DATA frame a message
        index = np.flatnonzero(data)
        return Messages(
            index,
            index,
            frames.offset[index],
            frames.length[index] - HEADER_LENGTH,
            frames.reserved_value[index],
        )
    index = np.arange(n, dtype=np.int64)
    is_begin = data & ((frames.flags & seg.BEGIN_FRAG_FLAG) != 0)
    is_end = data & ((frames.flags & seg.END_FRAG_FLAG) != 0)
    last_begin = np.maximum.accumulate(np.where(is_begin, index, -1))
    ends = np.flatnonzero(is_end)
    firsts = last_begin[ends]
    previous_end = np.concatenate([[-1], ends[:-1]])
    not_data = np.cumsum(~data)  # frames that are not DATA, up to each index
    ok = (firsts >= 0) & (firsts > previous_end) & (not_data[ends] == not_data[firsts])
    firsts, ends = firsts[ok], ends[ok]
    payload = frames.length.astype(np.int64) - HEADER_LENGTH
    if np.array_equal(firsts, ends):
        length = payload[ends]
    else:
        total = np.cumsum(payload)
        length = total[ends] - total[firsts] + payload[firsts]
    return Messages(
        firsts,
        ends,
        frames.offset[firsts],
        length.astype(np.int32),
        frames.reserved_value[ends],
    )


def broken(frames: Frames, position: int, term_length: int, lead: bool, whole: bool) -> np.ndarray:
    """Buffer offsets, ascending, of the messages the frames break (`position` is the buffer's
    first byte's): a run of fragments without its BEGIN (the first run too, unless `lead`: the
    region starts mid-message), a message broken by a BEGIN, another frame or its term's end
    (at the frames' end too when they are `whole`, to a term's end), a frame of unknown type.
    Recorded terms hold none: each is damage that `assemble` leaves out."""
    n = len(frames)
    if n == 0:
        return np.empty(0, np.int64)
    index = np.arange(n, dtype=np.int64)
    data = frames.type == seg.HDR_TYPE_DATA
    begin = data & ((frames.flags & seg.BEGIN_FRAG_FLAG) != 0)
    going = data & ((frames.flags & seg.END_FRAG_FLAG) == 0)  # a fragment with more to come
    term_start = ((position + frames.offset) & (term_length - 1)) == 0
    # A run of `going` frames within a term: a message is open after frame i when a BEGIN is
    # in the run that holds i.
    run_start = np.maximum(
        np.maximum.accumulate(np.where(~going, index, -1)) + 1,
        np.maximum.accumulate(np.where(term_start, index, 0)),
    )
    last_begin = np.maximum.accumulate(np.where(begin, index, -1))
    open_after = going & (last_begin >= run_start)
    was_open = np.concatenate([[False], open_after[:-1]])
    interrupted = was_open & (~data | begin | term_start)
    orphan = data & ~begin & ~(was_open & ~term_start)
    orphan_after = np.concatenate([[False], (orphan & going)[:-1]]) & ~term_start
    first_orphan = orphan & ~orphan_after
    if lead:
        first_orphan[0] = False
    unknown = ~data & (frames.type != seg.HDR_TYPE_PAD)
    found = [
        frames.offset[first_orphan],
        frames.offset[last_begin[np.flatnonzero(interrupted) - 1]],
        frames.offset[unknown],
    ]
    if whole and open_after[-1] and ((position + frames.end) & (term_length - 1)) == 0:
        found.append(frames.offset[last_begin[-1:]])
    return np.unique(np.concatenate(found))


def payload_spans(frames: Frames, messages: Messages) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, ends, counts): buffer spans of the payload of every frame of the messages, in
    order, and how many frames each message has."""
    counts = messages.last - messages.first + 1
    if np.all(counts == 1):
        idx = messages.first
    else:
        total = int(counts.sum())
        starts_at = np.cumsum(counts) - counts
        idx = np.repeat(messages.first - starts_at, counts) + np.arange(total, dtype=np.int64)
    starts = frames.offset[idx] + HEADER_LENGTH
    return starts, frames.offset[idx] + frames.length[idx], counts


def walk(
    buffer: np.ndarray,
    position: int,
    term_length: int,
    initial_term_id: int,
    start: int = 0,
    end: int | None = None,
) -> list[tuple[int, int, int, int, int]]:
    """The sequential reference of `scan` (for tests and tools): (offset, length, flags, type,
    reserved value) of each whole frame, one header at a time."""
    end = len(buffer) if end is None else end
    out, offset = [], start
    while offset + HEADER_LENGTH <= end:
        if not header_ok(buffer, offset, position + offset - start, term_length, initial_term_id):
            break
        length, _, flags, kind, *_, reserved = FRAME_HEADER.unpack_from(buffer.data, offset)
        aligned = align_frame(length)
        if offset + aligned > end:
            break
        out.append((offset, length, flags, kind, reserved))
        offset += aligned
    return out
