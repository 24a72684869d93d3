"""ReplaySession: a recording, from a position, published again on an exclusive publication made
with the recording's initial term id, term length and MTU and positioned at the replay position,
so replayed positions equal recorded positions.

States
------
- CONNECTING: until the replay publication has a subscriber (or the connect timeout: DONE,
  "no connection established for replay").
- REPLAYING: each duty cycle offers a run of blocks (whole frames of one term, no longer than
  the publication's window) from the mapped segment, the GIL released
  (`try_offer_recorded`, at most `MAX_RUN_LENGTH` bytes); where the run stops short it reads
  the next block from the segments and offers it whole (`try_offer_block`), which maps the
  next segment, reports damage and asks for the window to move. The limit is the replay's
  end, or, for a recording still being written, its `rec-pos` (a replay with length -1
  follows a live recording until it stops). The subscriber going away ends it ("stream closed
  before replay is complete"). Damaged or
  missing recorded bytes (SegmentError from the reader) end it too, with the reader's message
  (recording, position, file) as its `failure`.
- LINGER: all is sent; the publication stays until its subscriber has it (or the linger
  timeout), then DONE.

Threads
-------
CONNECTING is polled by the archive's conductor; from REPLAYING on, by the replayer's thread
(`replayer.py`), under the session's lock, until DONE; the conductor takes the lock to stop
it. The conductor then closes it on the loop: `close` hands a `failure` to `on_error`, which
the archive sends as an ERROR for the replay request, and the replay's publication closes, so
its image ends. A replay that ends before it is complete for want of a subscriber (its
`early_end`, the reference's texts) gets its ERROR too, not counted as the archive's error.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable

from aeronio.archive.context import MAX_BLOCK_LENGTH
from aeronio.archive.segments import RecordingReader, SegmentError
from aeronio.client.publication import ADMIN_ACTION, ExclusivePublication
from aeronio.logbuffer.descriptor import HEADER_LENGTH

# The most a duty cycle offers, and how long it waits for a shut window before it hands back
# (only after a duty cycle that offered: a replay held back for longer, by a slow subscriber,
# is left to the replayer's idle strategy): a stop waits for the duty cycle (the session's
# lock), and each duty cycle takes the GIL back once, which while the event loop's thread is
# busy can take up to the interpreter's switch interval (5 ms).
MAX_RUN_LENGTH = 8 * MAX_BLOCK_LENGTH
WINDOW_WAIT_NS = 1_000_000


class State(enum.Enum):
    CONNECTING = 1
    REPLAYING = 2
    LINGER = 3
    DONE = 4


class ReplaySession:
    def __init__(
        self,
        replay_session_id: int,
        recording_id: int,
        publication: ExclusivePublication,
        reader: RecordingReader,
        end_position: int,
        recorded: Callable[[], tuple[int, bool]],
        connect_timeout_ns: int,
        linger_timeout_ns: int,
        now_ns: int,
        on_error: Callable[[str, bool], None] = lambda message, failed: None,
    ):
        self.replay_session_id = replay_session_id
        self.recording_id = recording_id
        self.publication = publication
        self.reader = reader
        self.end_position = end_position  # where the replay stops (may be past rec-pos)
        self.recorded = recorded  # (recorded position, whether still recording)
        self.connect_timeout_ns = connect_timeout_ns
        self.linger_timeout_ns = linger_timeout_ns
        self.state = State.CONNECTING
        self._deadline_ns = now_ns + connect_timeout_ns
        self.reason = ""
        self.failure: str | None = None  # what damaged recorded bytes ended it with
        self.early_end: str | None = None  # why it ended incomplete, its subscriber gone
        self.on_error = on_error
        self.lock = threading.Lock()  # held by whoever polls it (see the module's Threads)
        self._flowing = True  # the last duty cycle offered: a run may wait for the window

    def do_work(self, now_ns: int) -> int:
        match self.state:
            case State.CONNECTING:
                if self.publication.is_connected:
                    self.state = State.REPLAYING
                    return 1
                if now_ns > self._deadline_ns:
                    self._end_early("no connection established for replay")
                return 0
            case State.REPLAYING:
                return self._replay(now_ns)
            case State.LINGER:
                drained = self.publication.position_limit >= self.publication.position
                if now_ns > self._deadline_ns or not self.publication.is_connected or drained:
                    self._done("replayed")
                return 0
        return 0

    def _replay(self, now_ns: int) -> int:
        if not self.publication.is_connected:
            self._end_early("stream closed before replay is complete")
            return 0
        recorded, active = self.recorded()
        limit = min(self.end_position, recorded)
        if self.reader.position >= limit:
            if not active or self.reader.position >= self.end_position:
                self.state = State.LINGER
                self._deadline_ns = now_ns + self.linger_timeout_ns
            return 0
        publication = self.publication
        try:
            segment, base = self.reader.mapped_segment()
        except SegmentError as e:
            self.fail(str(e))
            return 0
        wait = WINDOW_WAIT_NS if self._flowing else 0
        position = publication.try_offer_recorded(
            segment, base, limit, recorded, MAX_BLOCK_LENGTH, MAX_RUN_LENGTH, wait
        )
        if position != self.reader.position:
            self.reader.position = position
            self._flowing = True
            return 1
        self._flowing = False
        # Where the run stopped short, a block at a time. At least one frame even when the
        # window is shut: its offer, refused, tells the driver this publication wants its
        # limit moved (a parked driver is woken for it).
        window = publication.position_limit - publication.position
        frame = publication.max_payload_length + HEADER_LENGTH
        to_end = self.end_position - self.reader.position
        length = min(MAX_BLOCK_LENGTH, max(window, frame), to_end)
        try:
            block = self.reader.peek(length, recorded)
        except SegmentError as e:
            self.fail(str(e))
            return 0
        if block is None:  # the next frame is longer than the window, or ends past the end
            if length == to_end:
                self.state = State.LINGER
                self._deadline_ns = now_ns + self.linger_timeout_ns
            return 0
        result = self.publication.try_offer_block(block.data)
        if result == ADMIN_ACTION:  # the term rotated: the block goes into the next one
            result = self.publication.try_offer_block(block.data)
        if result > 0:
            self.reader.advance(block)
            self._flowing = True
            return 1
        return 0

    def _done(self, reason: str) -> None:
        self.state = State.DONE
        self.reason = reason

    def _end_early(self, reason: str) -> None:
        self.early_end = reason
        self._done(reason)

    def fail(self, failure: str) -> None:
        """End with `failure` (damage, or a bug in a duty cycle): an ERROR for the request."""
        self.failure = failure  # before DONE: the conductor closes it once it sees DONE
        self._done(failure)

    def abort(self, reason: str = "stopped") -> None:
        if self.state is not State.DONE:
            self._done(reason)

    def cut_short(self, reason: str) -> None:
        """End now, for `reason` (the archive closing): an early end, an ERROR for the request,
        unless all of it was sent (lingering, or done)."""
        if self.state in (State.CONNECTING, State.REPLAYING):
            self._end_early(reason)

    def close(self) -> None:
        """Unmap what was read; a failure or an early end goes to `on_error` (on the
        conductor's loop), saying which."""
        self.reader.close()
        if self.failure is not None:
            self.on_error(self.failure, True)
        elif self.early_end is not None:
            self.on_error(self.early_end, False)
