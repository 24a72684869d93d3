"""The receiver side of one publication session, sans-IO: the state machine of a
PublicationImage (Aeron's PublicationImage receiver logic).

Frames that arrive are put at their term offset (duplicates ignored, anything more than a term
ahead of the slowest subscriber dropped as an over-run). Each duty cycle the image moves the
receiver position over the frames that are complete, NAKs the first gap (or, unreliable, fills it
with PAD), sends a status message when one is due (every 200 ms) or consumption moved a quarter
window, and zeroes consumed terms. It returns the control frames to send back to the
publication's source. The status message it sent last, while consumption stays where it was, is
the rebuilder's `status_message`: the driver's DataPath repeats it every 200 ms in C (an idle
stream needs no Python), and the timing is the rebuilder's (`time_of_last_sm_ns`,
`status_message_is_due`). Each gap it NAKs (or fills) is also handed to `loss_handler` (Aeron's
LossHandler), if given: the driver keeps it in its loss report (`ImageLosses`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from aeronio._core import Doorbell, ImageRebuilder, term_rebuild_insert
from aeronio.counters import SystemCounters
from aeronio.driver import storage
from aeronio.driver.flow_control import receiver_window
from aeronio.driver.loss_detector import LossDetector
from aeronio.driver.sender_state import Position
from aeronio.errors import StorageSpaceError
from aeronio.logbuffer import descriptor as d
from aeronio.logbuffer.log_buffers import LogBuffers
from aeronio.protocol.frames import (
    EOS_FLAG,
    HDR_TYPE_PAD,
    REVOKED_FLAG,
    SM_EOS_FLAG,
    data_header,
    nak_frame,
    status_message,
)

SM_TIMEOUT_NS = 200_000_000
# A status message due within this is sent early by a duty cycle that heard a heartbeat.
SM_EARLY_NS = SM_TIMEOUT_NS // 4
IMAGE_LIVENESS_TIMEOUT_NS = 10_000_000_000
_logger = logging.getLogger("aeronio.driver")


class ReceiverStateMachine:
    def __init__(
        self,
        log: LogBuffers,
        *,
        join_position: int,
        receiver_id: int,
        rebuild_position: Position,
        hwm_position: Position,
        consumption_position: Callable[[], int | None],
        system: Mapping[SystemCounters, Position],
        now_ns: int,
        window: int | None = None,
        reliable: bool = True,
        loss_detector: LossDetector | None = None,
        feedback: bytes = b"",
        loss_handler: Callable[[int, int, int], None] | None = None,
        data_doorbell: Doorbell | None = None,
        report: Callable[[str], None] = _logger.warning,
    ):
        """`loss_handler` is called with (term_id, term_offset, length) of each gap NAKed or
        filled; `data_doorbell` rings for this process's subscribers parked for data; `report`
        is told when the file system has no room for the log's pages (storage.LogPages).
        StorageSpaceError when it has none for the page at `join_position`."""
        self.log = log
        self.term_length = log.term_length
        self.initial_term_id = log.initial_term_id
        self.session_id = log.session_id
        self.stream_id = log.stream_id
        self.join_position = join_position
        self.receiver_id = receiver_id
        self.rebuild_position = rebuild_position
        self.hwm_position = hwm_position
        self.consumption_position = consumption_position
        self.system = system
        self.window = receiver_window(self.term_length, window)
        self.reliable = reliable
        self.loss = loss_detector or LossDetector()
        self.feedback = feedback  # carried by every status message (a receiver group tag)
        self.loss_handler = loss_handler
        self._last_nak: tuple[int, int, int] | None = None
        rebuild_position.set(join_position)
        hwm_position.set(join_position)
        self._pages = storage.LogPages(log, join_position, report)
        if self._pages.allocate(join_position) <= join_position:  # readers look at its header
            raise StorageSpaceError(f"no room for the first page of the new log {log.path}")
        self.rebuilder = ImageRebuilder(
            log.mapped,
            self.session_id,
            self.stream_id,
            hwm_position,
            rebuild_position,
            system[SystemCounters.FLOW_CONTROL_OVER_RUNS],
            system[SystemCounters.STATUS_MESSAGES_SENT],
            join_position,
            SM_TIMEOUT_NS,
            SM_EARLY_NS,
            now_ns,
        )
        self.rebuilder.data_doorbell = data_doorbell
        # The DataPath sends the status message that consumption makes due (past a quarter of
        # the window) as soon as it sees it; so does `do_work`, whichever looks first.
        self.rebuilder.last_sm_position = join_position
        self.rebuilder.send_status_messages_past(
            self._status_message(join_position), self.window // 4
        )
        self._clean_position = join_position
        self._last_consumption: int | None = None
        self._set_limit(join_position)
        self.end_of_stream_position: int | None = None
        self.revoked = False  # its publication said it was revoked

    def _position(self, term_id: int, term_offset: int) -> int:
        return d.compute_position(term_id, term_offset, self.term_length, self.initial_term_id)

    def _consumption(self) -> int:
        consumption = self.consumption_position()
        return self.rebuild_position.get() if consumption is None else consumption

    def _set_limit(self, consumption: int) -> None:
        """Packets may go no more than a term past the slowest consumer (an over-run would
        write over a term still being read), nor past the log's pages (held short of them,
        every duty cycle looks again)."""
        limit = consumption + self.term_length
        allocated = self._pages.allocate(limit) - 1
        self._held_short = allocated < limit
        self.rebuilder.limit_position = min(limit, allocated)

    @property
    def time_of_last_packet_ns(self) -> int:
        return self.rebuilder.time_of_last_packet_ns

    # -- frames in (data packets go to the C rebuilder: ImageRouter) --------------------

    def on_nak_heard(self, term_id: int, term_offset: int, length: int, now_ns: int) -> None:
        """Another receiver of this multicast stream NAKed a range: suppress the same NAK.
        (This image's own NAKs come back too, looped to the group's members on this host:
        one the same as the last it sent is taken for its own.)"""
        if (term_id, term_offset, length) == self._last_nak:
            return
        if self.loss.on_nak_heard(term_id, term_offset, length, now_ns):
            self.system[SystemCounters.NAKS_SUPPRESSED].increment()

    def on_heartbeat(self, term_id: int, term_offset: int, flags: int, now_ns: int) -> None:
        """A heartbeat tells where the stream's end is, which reveals a lost tail (the router
        takes those without EOS of known images in C: ImageRebuilder.on_heartbeat). One also
        flagged REVOKED says its publication was revoked (Aeron 1.53): the log says so too,
        for the image's clients, and it is counted; the image then ends at once."""
        if self.rebuilder.heartbeat(term_id, term_offset, now_ns) and flags & EOS_FLAG:
            position = self._position(term_id, term_offset)
            self.end_of_stream_position = position
            self.log.mapped.set_end_of_stream_position(position)
            if flags & REVOKED_FLAG and not self.revoked:
                self.revoked = True
                self.log.set_publication_revoked()
                self.system[SystemCounters.PUBLICATION_IMAGES_REVOKED].increment()

    def status_message_due(self, now_ns: int) -> None:
        """Send a status message at the next duty cycle (a sender newly heard waits for one)."""
        self.rebuilder.time_of_last_sm_ns = now_ns - SM_TIMEOUT_NS

    # -- duty cycle -------------------------------------------------------------------

    def do_work(self, now_ns: int) -> list[bytes]:
        """Advance the receiver position; return the NAK and status message frames to send."""
        out: list[bytes] = []
        gap = self.rebuilder.advance()
        nak = self.loss.on_gap(gap, now_ns) if gap is not None or self.loss.active else None
        if nak is not None:
            if self.loss_handler is not None:
                self.loss_handler(*nak)
            if self.reliable:
                term_id, term_offset, length = nak
                self._last_nak = nak
                out.append(
                    nak_frame(
                        session_id=self.session_id,
                        stream_id=self.stream_id,
                        term_id=term_id,
                        term_offset=term_offset,
                        length=length,
                    ).encode()
                )
                self.system[SystemCounters.NAK_MESSAGES_SENT].increment()
            else:
                self._fill_gap(*nak)
                self.rebuilder.advance()
        consumption = self._consumption()
        # Idle streams: a status message due soon goes in the duty cycle that heard a heartbeat,
        # so that the receiver's driver wakes once per heartbeat, not once more for each SM.
        sm_due = self.rebuilder.status_message_is_due(now_ns)
        if consumption == self._last_consumption and not sm_due and not self._held_short:
            return out  # nothing consumed since the last duty cycle: no SM, nothing to clean
        rebuilder = self.rebuilder
        if consumption != self._last_consumption:
            if consumption != rebuilder.last_sm_position:  # the SM repeated so far is stale
                rebuilder.status_message = None
            self._last_consumption = consumption
        if sm_due or consumption - rebuilder.last_sm_position > self.window // 4:
            if rebuilder.status_message is None:  # the DataPath repeats it from now on
                rebuilder.status_message = self._status_message(consumption)
            out.append(rebuilder.status_message)
            self.system[SystemCounters.STATUS_MESSAGES_SENT].increment()
            rebuilder.last_sm_position = consumption
            rebuilder.time_of_last_sm_ns = now_ns
        self._clean_to(consumption)
        self._set_limit(consumption)
        return out

    def deadline_ns(self) -> int | None:
        """When `do_work` next has something due though nothing arrives or is consumed: the
        periodic status message (unless the driver's DataPath repeats it: the rebuilder's
        `repeats_status_messages`), the NAK of an open gap, or another look for the pages the
        limit is held short of; None if nothing."""
        deadlines = [self.loss.deadline_ns, self._pages.retry_ns]
        if not self.rebuilder.repeats_status_messages:
            deadlines.append(self.rebuilder.time_of_last_sm_ns + SM_TIMEOUT_NS)
        return min((d for d in deadlines if d is not None), default=None)

    def _fill_gap(self, term_id: int, term_offset: int, length: int) -> None:
        """Unreliable: give up on a gap by putting a PAD over it."""
        pad = data_header(
            frame_length=length,
            term_offset=term_offset,
            session_id=self.session_id,
            stream_id=self.stream_id,
            term_id=term_id,
            type=HDR_TYPE_PAD,
        ).encode()
        position = self._position(term_id, term_offset)
        term = self.log.term(d.index_by_position(position, self.term_length))
        if term_rebuild_insert(term, term_offset, pad):
            self.system[SystemCounters.LOSS_GAP_FILLS].increment()

    def farewell(self, left_at: int | None = None) -> bytes:
        """The status message of the image as it goes: where its subscribers left the stream
        (its end, once they read it all; with none left, where the last one left, `left_at`,
        or what it acknowledged last if that is further), flagged end-of-stream (Aeron 1.53's
        receivers send these while their image drains). A publication lingers until its
        receivers acknowledge its end: without this, what was read after the last periodic
        status message would never be. Counted as sent."""
        position = self.consumption_position()
        if position is None:
            position = max(self.rebuilder.last_sm_position, left_at or 0)
        self.system[SystemCounters.STATUS_MESSAGES_SENT].increment()
        return self._status_message(position, SM_EOS_FLAG)

    def _status_message(self, consumption: int, flags: int = 0) -> bytes:
        return status_message(
            session_id=self.session_id,
            stream_id=self.stream_id,
            consumption_term_id=d.compute_term_id_from_position(
                consumption, self.term_length, self.initial_term_id
            ),
            consumption_term_offset=consumption & (self.term_length - 1),
            receiver_window=self.window,
            receiver_id=self.receiver_id,
            feedback=self.feedback,
            flags=flags,
        ).encode()

    def _clean_to(self, position: int) -> None:
        """Zero the image up to `position`, never past what was rebuilt: the subscribers'
        positions are shared memory a client can set anywhere."""
        position = min(position, self.rebuild_position.get())
        while self._clean_position < position:
            self._clean_position += self.log.mapped.clean(self._clean_position, position)

    def is_alive(self, now_ns: int) -> bool:
        """Packets arrived lately and the stream has not ended and been rebuilt to its end."""
        ended = (
            self.end_of_stream_position is not None
            and self.rebuild_position.get() >= self.hwm_position.get()
        )
        return not ended and now_ns - self.time_of_last_packet_ns <= IMAGE_LIVENESS_TIMEOUT_NS
