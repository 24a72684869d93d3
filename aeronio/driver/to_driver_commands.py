"""The clients' commands in cnc.dat's to-driver ring buffer (Aeron's `to_driver_commands`), read
by the conductor in its duty cycle.

Each record is one of Aeron's commands (`protocol.control.decode_command`). A record that is
not (an unknown msg type id, a payload too short or with a length past its end) never reaches
the conductor: it is reported to `on_bad_record` with Aeron's error code (UNKNOWN_COMMAND_TYPE_ID
or MALFORMED_COMMAND) and the correlation id at its usual place (@8, after the client id) when
the payload is long enough to hold one. A producer that died inside its claim would stop the
buffer: `check_blocked` turns its record into padding once the head has not moved for the client
liveness timeout while records wait (Aeron's check for blocked driver commands). So too for a
record that cannot be whole (a length its producer did not claim): reported, then dropped up to
the next record found. Until then such a record is not waiting for the conductor (`stuck`): it
parks as an idle driver does, and reads again once the record at the head changes.
"""

from __future__ import annotations

from collections.abc import Callable

from aeronio.concurrent.ring_buffer import (
    ManyToOneRingBuffer,
)
from aeronio.protocol import control as p

CORRELATION_ID_END = 16  # client id i64, correlation id i64: every command starts with them
# Records read per duty cycle (Aeron's conductor reads up to 10 commands per duty cycle).
READ_LIMIT = 10

OnCommand = Callable[[p.Command], None]
OnBadRecord = Callable[[int, int | None, str], None]  # code, correlation id, message


class ToDriverCommands:
    def __init__(
        self,
        ring: ManyToOneRingBuffer,
        on_command: OnCommand,
        on_bad_record: OnBadRecord,
        blocked_timeout_ns: int,
    ):
        self.ring = ring
        self._on_command = on_command
        self._on_bad_record = on_bad_record
        self._blocked_timeout_ns = blocked_timeout_ns
        self._last_head = ring.consumer_position()
        self._seen_tail: int | None = None  # the tail when records were first seen waiting
        self._waiting_since_ns = 0  # and when
        # Where the last read found records waiting and could read none (a claim not committed
        # yet, or never: its producer died, or stored a length it did not claim): the head, its
        # index and the length word there as the read saw it (`ring.head_record()`); or None.
        self.stuck: tuple[int, int, int] | None = None

    def pending(self) -> bool:
        """Records wait to be read, unless the last read could read none of them and the record
        at the head is as it saw it."""
        ring = self.ring
        head = ring.head_record()
        return ring.producer_position() != head[0] and head != self.stuck

    def read(self, limit: int = READ_LIMIT) -> int:
        """Hand the conductor up to `limit` commands; returns the records read."""
        ring = self.ring
        before = ring.head_record()  # first: a length committed after it makes pending() true
        count = ring.read(self._on_record, limit)
        head = before[0]
        stuck = count == 0 and ring.consumer_position() == head != ring.producer_position()
        self.stuck = before if stuck else None
        return count

    def _on_record(self, msg_type_id: int, payload: memoryview) -> None:
        try:
            command = p.decode_command(msg_type_id, payload)
        except p.UnknownMessageTypeError as e:
            self._refuse(p.UNKNOWN_COMMAND_TYPE_ID, payload, str(e))
        except p.MalformedMessageError as e:
            self._refuse(p.MALFORMED_COMMAND, payload, str(e))
        else:
            self._on_command(command)

    def _refuse(self, code: int, payload: memoryview, reason: str) -> None:
        correlation_id = None
        if len(payload) >= CORRELATION_ID_END:
            correlation_id = int.from_bytes(payload[8:CORRELATION_ID_END], "little", signed=True)
        self._on_bad_record(code, correlation_id, f"command refused: {reason}")

    def check_blocked(self, now_ns: int) -> bool:
        """Unblock the buffer if a record has stopped it for the timeout since records were
        first seen waiting at its head (a producer died while writing it, or wrote a length it
        did not claim: reported); True if it did."""
        ring = self.ring
        head = ring.consumer_position()
        tail = ring.producer_position()
        if head != self._last_head or tail == head:
            self._last_head, self._seen_tail = head, None
            return False
        if self._seen_tail is None:
            self._seen_tail, self._waiting_since_ns = tail, now_ns
            return False
        if now_ns - self._waiting_since_ns <= self._blocked_timeout_ns:
            return False
        unreadable = ring.unreadable_record()
        if not ring.unblock(self._seen_tail):
            return False
        self._seen_tail = None
        if unreadable is not None:
            self._on_bad_record(p.MALFORMED_COMMAND, None, f"command refused: the {unreadable}")
        return True
