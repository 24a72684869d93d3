"""The sender side of a network publication, sans-IO: the state machine of a NetworkPublication
(Aeron's NetworkPublication sender logic).

Fed the clock and the control frames that arrive (status messages, NAKs, RTT measurements), it
keeps the sender limit and says which datagrams to send besides new data: SETUP until a receiver
answers (and whenever one asks, new data going on meanwhile as Aeron's), retransmits of NAKed
ranges within the term behind the sender position (what was sent of them, at most
RETRANSMIT_RECEIVER_WINDOW_MULTIPLE receiver windows; `retransmit_handler` says which and when),
and a heartbeat (EOS-flagged once the publication ended and everything was sent) after 100 ms
without data. New data (the log's frames from the sender position up to min(sender limit, MTU,
term end), several frames per datagram, a PAD as its header only) is sent by the C
PublicationSender alone (`data_sender`: in the driver, by its DataPath), whenever this machine
allows it: once a receiver answered a SETUP, while no retransmit is scheduled (they go first).
The heartbeat is the PublicationSender's too: the DataPath sends it while new data is allowed
(an idle stream needs no Python), `send` before the first answer and while retransmits wait.

It keeps which receivers are live (Aeron's receiver liveness: heard within RECEIVER_TIMEOUT_NS,
and neither said farewell nor refused the stream with an ERR frame): the publication is
connected while one is, and flow control has the receivers it requires. And what each receiver
acknowledged (the consumption position of its status messages): `acknowledged_position`, what
every receiver heard lately has, says when a released publication has delivered its stream
(`has_delivered`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from aeronio._core import AtomicBuffer, PublicationSender, scan_datagrams
from aeronio.counters import SystemCounters
from aeronio.driver.flow_control import (
    RECEIVER_TIMEOUT_NS,
    FlowControl,
    UnicastFlowControl,
    receiver_window,
)
from aeronio.driver.retransmit_handler import RetransmitHandler
from aeronio.logbuffer import descriptor as d
from aeronio.logbuffer.log_buffers import LogBuffers
from aeronio.protocol.frames import (
    ErrorFrame,
    NakFrame,
    RttmFrame,
    StatusMessage,
    rttm_frame,
    setup_frame,
)

HEARTBEAT_TIMEOUT_NS = 100_000_000
SETUP_TIMEOUT_NS = 100_000_000
MAX_DATAGRAMS_PER_SEND = 64
# A NAK is answered with at most this many default receiver windows of its term (Aeron's
# retransmission length): no receiver's gap is longer than its window, and more is a storm.
RETRANSMIT_RECEIVER_WINDOW_MULTIPLE = 16


def nobody_told(error: ErrorFrame, source: tuple[str, int]) -> None:
    """A sender's `on_receiver_error` while no publication listens (none yet, or it closed)."""


class Position(Protocol):
    """A counter: read and moved here, and by the core in place (at `offset` of `buffer`)."""

    @property
    def buffer(self) -> AtomicBuffer: ...
    @property
    def offset(self) -> int: ...
    def get(self) -> int: ...
    def set(self, value: int) -> None: ...
    def increment(self, delta: int = 1) -> int: ...


class SenderStateMachine:
    def __init__(
        self,
        log: LogBuffers,
        *,
        sender_position: Position,
        sender_limit: Position,
        sender_bpe: Position,
        system: Mapping[SystemCounters, Position],
        now_ns: int,
        ttl: int = 0,
        flow_control: FlowControl | None = None,
        retransmit: RetransmitHandler | None = None,
        receivers: Position | None = None,
    ):
        self.log = log
        self.term_length = log.term_length
        self.initial_term_id = log.initial_term_id
        self.session_id = log.session_id
        self.stream_id = log.stream_id
        self.mtu = log.mtu
        self.ttl = ttl
        self.sender_position = sender_position
        self.sender_limit = sender_limit
        self.sender_bpe = sender_bpe
        self.system = system
        self.flow_control = flow_control or UnicastFlowControl()
        self.receivers = receivers  # fc-receivers: how many receivers flow control tracks
        self.retransmit = retransmit or RetransmitHandler()
        self._terms = [log.term(index).data for index in range(d.PARTITION_COUNT)]
        start = log.producer_position
        sender_position.set(start)
        sender_limit.set(start)
        self._has_initial_connection = False  # a receiver answered a SETUP
        self._setup_elicited = False  # a receiver asked for a SETUP (until one went with one live)
        self._time_of_last_setup_ns = now_ns - SETUP_TIMEOUT_NS
        self.data_sender = PublicationSender(
            log.mapped,
            self._terms,
            sender_position,
            sender_limit,
            sender_bpe,
            system[SystemCounters.SENDER_FLOW_CONTROL_LIMITS],
            system[SystemCounters.BYTES_SENT],
            system[SystemCounters.HEARTBEATS_SENT],
            self.session_id,
            self.stream_id,
            self.mtu,
            HEARTBEAT_TIMEOUT_NS,
            now_ns,
        )
        # Unicast: the DataPath moves the limit on a status message as `on_status_message` does
        # (to the same limit), and sends the window it opens at once.
        self.data_sender.follow_status_messages(type(self.flow_control) is UnicastFlowControl)
        # Receiver liveness: receiver id -> when its last status message came. A farewell or an
        # ERR frame takes the receiver out at once; `_departed` (receiver id -> when) keeps a
        # status message heard before that (a repeat taken late) from bringing it back.
        self._live: dict[int, int] = {}
        self._departed: dict[int, int] = {}
        # receiver id -> (the consumption position it acknowledged, when last heard)
        self._receivers_acked: dict[int, tuple[int, int]] = {}
        self.acknowledged_position = start  # what every receiver heard lately has
        self.heard_any = False  # a receiver ever acknowledged (else spies alone consumed it)
        self._connected = False
        self._log_connected = False
        self.spies_connected = False  # spies there that simulate a connection
        # Who is told of a receiver's error (its ERR frame, and where it came from).
        self.on_receiver_error: Callable[[ErrorFrame, tuple[str, int]], None] = nobody_told
        # What sets the log's connected flag (its publication's `say_connected`, which takes
        # the publisher limit back first as the flag goes down).
        self.say_connected: Callable[[bool], None] = log.mapped.set_connected

    # -- control frames in ------------------------------------------------------------

    def on_status_message(self, sm: StatusMessage, now_ns: int) -> None:
        """A receiver's status message, heard at `now_ns` (counted where it is read).

        Out of reach: one (but a SETUP-eliciting one) whose consumption position is more than
        half a term past the sender position, or more than a term behind it, is rejected and
        counted (Status Messages rejected). Past: no receiver consumed what was not sent, and
        flow control keeps the sender within a window (at most half a term) of its receivers
        (Aeron 1.53's sender rejects these). Behind: Aeron's rejects more than half a term
        behind, aeronio's only past the term that NAKs can still repair, so that a receiver
        behind by up to a term still counts among those the end of the stream waits for."""
        if sm.is_setup_eliciting:
            if self.sender_position.get() >= self.log.end_of_stream_position:
                return  # the stream ended and was sent: no new receiver to set up (as Aeron)
            self._setup_elicited = True
            self._time_of_last_setup_ns = now_ns - SETUP_TIMEOUT_NS
            return
        ahead = self._consumed(sm) - self.sender_position.get()
        if not -self.term_length <= ahead <= self.term_length >> 1:
            self.system[SystemCounters.STATUS_MESSAGES_REJECTED].increment()
            return
        if now_ns <= self._departed.get(sm.receiver_id, now_ns - 1):
            return  # heard before its farewell or ERR frame: it stays gone
        if sm.is_end_of_stream:  # its farewell: what it read counts, it paces no more
            self._acknowledge(sm, now_ns)
            self._depart(sm.receiver_id, now_ns)
            return
        self._departed.pop(sm.receiver_id, None)
        self._live[sm.receiver_id] = max(now_ns, self._live.get(sm.receiver_id, now_ns))
        self._has_initial_connection = True
        limit = self.flow_control.on_status_message(
            sm, self.sender_limit.get(), self.initial_term_id, self.term_length, now_ns
        )
        self.sender_limit.set(limit)
        self._acknowledge(sm, now_ns)
        self._update_receivers()
        self._allow_new_data()

    def on_nak(self, nak: NakFrame, now_ns: int) -> None:
        """A receiver's NAK: its range is resent if it starts behind the sender position, within
        the term behind it (else it is late, or early, and ignored). One running past its term's
        end names nothing of this stream: an invalid packet."""
        self.system[SystemCounters.NAK_MESSAGES_RECEIVED].increment()
        if nak.term_offset + nak.length > self.term_length:
            self.system[SystemCounters.INVALID_PACKETS].increment()
            return
        start = d.compute_position(
            nak.term_id, nak.term_offset, self.term_length, self.initial_term_id
        )
        position = self.sender_position.get()
        if nak.length > 0 and position - self.term_length <= start < position:
            most = RETRANSMIT_RECEIVER_WINDOW_MULTIPLE * receiver_window(self.term_length)
            self.retransmit.on_nak(nak.term_id, nak.term_offset, min(nak.length, most), now_ns)
            self._allow_new_data()

    def on_error(self, error: ErrorFrame, source: tuple[str, int], now_ns: int) -> None:
        """A receiver's ERR frame (its image refused, Aeron 1.53): a receiver heard lately paces
        the stream no more (what it acknowledged stays counted) and is told to `on_receiver_error`
        (the publication's clients), once: its next ERR frames find it gone, as Aeron's."""
        if self._receivers_acked.pop(error.receiver_id, None) is None:
            return
        self._depart(error.receiver_id, now_ns)
        self.on_receiver_error(error, source)

    def _depart(self, receiver_id: int, now_ns: int) -> None:
        """A receiver left (its farewell, its ERR frame): not live, out of flow control."""
        self._live.pop(receiver_id, None)
        self._departed[receiver_id] = now_ns
        limit = self.flow_control.on_receiver_left(receiver_id, self.sender_limit.get())
        self.sender_limit.set(limit)
        self._update_receivers()

    def on_rttm(self, rttm: RttmFrame, now_ns: int) -> bytes | None:
        """The reply to an RTT measurement request (None for anything else)."""
        if not rttm.is_reply_requested:
            return None
        return rttm_frame(
            session_id=rttm.session_id,
            stream_id=rttm.stream_id,
            echo_timestamp=rttm.echo_timestamp,
            receiver_id=rttm.receiver_id,
        ).encode()

    @property
    def is_connected(self) -> bool:
        """A receiver is live, and flow control has the receivers it requires."""
        return self._connected

    def check_receiver_liveness(self, now_ns: int) -> None:
        """Receivers silent for RECEIVER_TIMEOUT_NS stop counting (for flow control too); with
        none live, the publication is not connected."""
        self.sender_limit.set(self.flow_control.on_idle(now_ns, self.sender_limit.get()))
        for heard in (self._live, self._departed):
            for receiver_id in [r for r, t in heard.items() if now_ns - t > RECEIVER_TIMEOUT_NS]:
                del heard[receiver_id]
        acked = self._receivers_acked
        for receiver_id, (_, heard_ns) in list(acked.items()):
            if now_ns - heard_ns > RECEIVER_TIMEOUT_NS:
                del acked[receiver_id]
        self._update_acknowledged()
        self._update_receivers()

    def _consumed(self, sm: StatusMessage) -> int:
        """The position a status message says its receiver consumed up to."""
        return d.compute_position(
            sm.consumption_term_id,
            sm.consumption_term_offset,
            self.term_length,
            self.initial_term_id,
        )

    def _acknowledge(self, sm: StatusMessage, now_ns: int) -> None:
        """A receiver's status message acknowledges what it consumed."""
        position = self._consumed(sm)
        previous = self._receivers_acked.get(sm.receiver_id)
        if previous is not None:
            position, now_ns = max(position, previous[0]), max(now_ns, previous[1])
        self._receivers_acked[sm.receiver_id] = (position, now_ns)
        self.heard_any = True
        self._update_acknowledged()

    def _update_acknowledged(self) -> None:
        """What every receiver heard lately has acknowledged (a receiver gone keeps what it
        acknowledged counted)."""
        if self._receivers_acked:
            least = min(position for position, _ in self._receivers_acked.values())
            self.acknowledged_position = max(self.acknowledged_position, least)

    @property
    def receivers_heard(self) -> bool:
        """A receiver was heard lately (its farewell too): one that may acknowledge more."""
        return bool(self._receivers_acked)

    def has_delivered(self, end: int, ended_ns: int) -> bool:
        """The stream ended at `end` (at `ended_ns`) reached its receivers: all of it sent,
        every receiver heard lately acknowledged it (status messages at or past `end`; none to
        acknowledge it if none was ever heard), and a heartbeat flagged end-of-stream went out
        (sent after `ended_ns` and the last data)."""
        acknowledged = self.acknowledged_position >= end or not self.heard_any
        return acknowledged and self.end_of_stream_sent(end, ended_ns)

    def end_of_stream_sent(self, end: int, ended_ns: int) -> bool:
        return self.sender_position.get() >= end and self.heartbeat_sent_since(ended_ns)

    def heartbeat_sent_since(self, since_ns: int) -> bool:
        """A heartbeat went out after `since_ns` and after the last data (flagged as the log
        said then: end of stream, revoked)."""
        sender = self.data_sender
        return sender.time_of_last_heartbeat_ns > max(sender.time_of_last_data_ns, since_ns)

    def _update_receivers(self) -> None:
        if self.receivers is not None:
            self.receivers.set(self.flow_control.receiver_count)
        self._connected = bool(self._live) and self.flow_control.has_required_receivers()
        self.refresh_connected()

    def refresh_connected(self) -> None:
        """The log says connected (publishers may offer) while receivers are, or spies that
        simulate a connection are there."""
        flag = self._connected or self.spies_connected
        if flag != self._log_connected:
            self._log_connected = flag
            self.say_connected(flag)

    def skip_to(self, position: int) -> None:
        """With no receiver, count what spies read as sent (nothing is left to send, or to
        clean away from under the sender, when a receiver comes)."""
        if position > self.sender_position.get():
            self.sender_position.set(position)

    # -- datagrams out ----------------------------------------------------------------

    @property
    def _setup_due(self) -> bool:
        """SETUPs go until a receiver answers one, and when one asks (Aeron's setup check)."""
        return self._setup_elicited or not self._has_initial_connection

    def _allow_new_data(self) -> None:
        """New data may go once a receiver answered a SETUP, while no retransmit is scheduled."""
        self.data_sender.allow_new_data(
            self._has_initial_connection and not self.retransmit.scheduled
        )

    def send(self, now_ns: int) -> list:
        """The datagrams to send now besides new data, in order: a due SETUP, due retransmits, a
        heartbeat after HEARTBEAT_TIMEOUT_NS without data."""
        out: list = []
        heartbeat_due = now_ns >= self.data_sender.heartbeat_deadline_ns
        if not (self._setup_due or self.retransmit.pending or heartbeat_due):
            return out  # idle: nothing due
        if self._setup_due and now_ns - self._time_of_last_setup_ns >= SETUP_TIMEOUT_NS:
            out.append(self._setup())
            self._time_of_last_setup_ns = now_ns
            self._setup_elicited = self._setup_elicited and not self._live
        if self.retransmit.pending:
            for term_id, term_offset, length in self.retransmit.due(now_ns):
                self._resend(term_id, term_offset, length, out)
        if out:
            self.system[SystemCounters.BYTES_SENT].increment(sum(map(len, out)))
        heartbeat = self.data_sender.heartbeat(now_ns)  # counted by the sender
        if heartbeat is not None:
            out.append(heartbeat)
        self._allow_new_data()
        return out

    def deadline_ns(self) -> int | None:
        """When `send` next has something due (a SETUP, a retransmit, a heartbeat while new
        data is not allowed: else the DataPath sends it), if no new data is sent meanwhile; None
        if nothing."""
        deadline = self.retransmit.deadline_ns()
        if self._setup_due:
            setup = self._time_of_last_setup_ns + SETUP_TIMEOUT_NS
            deadline = setup if deadline is None else min(deadline, setup)
        if not self.data_sender.new_data_allowed:
            heartbeat = self.data_sender.heartbeat_deadline_ns
            deadline = heartbeat if deadline is None else min(deadline, heartbeat)
        return deadline

    def _resend(self, term_id: int, term_offset: int, length: int, out: list) -> None:
        """The frames of a NAKed range (within one term) that were sent: what lies past the
        sender position waits for flow control."""
        position = d.compute_position(term_id, term_offset, self.term_length, self.initial_term_id)
        sender_position = self.sender_position.get()
        if position < sender_position - self.term_length:
            return  # cleaned away by now
        term = self._terms[d.index_by_position(position, self.term_length)]
        start, end = term_offset, term_offset + min(length, sender_position - position)
        while term_offset < end:
            covered, count = scan_datagrams(
                term, term_offset, end - term_offset, self.mtu, MAX_DATAGRAMS_PER_SEND, out
            )
            if count == 0:
                break
            term_offset += covered
        if term_offset > start:  # one retransmit per range, as Aeron counts them
            self.system[SystemCounters.RETRANSMITS_SENT].increment()
            self.system[SystemCounters.RETRANSMITTED_BYTES].increment(term_offset - start)

    def _setup(self) -> bytes:
        position = self.sender_position.get()
        return setup_frame(
            session_id=self.session_id,
            stream_id=self.stream_id,
            initial_term_id=self.initial_term_id,
            active_term_id=d.compute_term_id_from_position(
                position, self.term_length, self.initial_term_id
            ),
            term_offset=position & (self.term_length - 1),
            term_length=self.term_length,
            mtu=self.mtu,
            ttl=self.ttl,
        ).encode()
