"""The sender and receiver protocol cores, driven deterministically: a fake clock and an
in-memory network that drops, duplicates and reorders datagrams in both directions."""

import random

import pytest

from aeronio import _core
from aeronio.counters import SystemCounters
from aeronio.driver.data_dispatcher import DataDispatcher
from aeronio.driver.receiver_state import ReceiverStateMachine
from aeronio.logbuffer import descriptor as d
from aeronio.logbuffer.log_buffers import LogBuffers
from aeronio.protocol.frames import (
    EOS_FLAG,
    HDR_TYPE_DATA,
    HDR_TYPE_NAK,
    HDR_TYPE_PAD,
    HDR_TYPE_SETUP,
    HDR_TYPE_SM,
    DataHeader,
    NakFrame,
    SetupFrame,
    StatusMessage,
    data_header,
    iter_frames,
    setup_frame,
    status_message,
)
from tests.support.udp_harness import (
    LossyNetwork,
    Publisher,
    Slot,
    deliver,
    image_from_setup,
    message,
)

TERM_LENGTH = 64 * 1024
SOURCE = ("127.0.0.1", 40123)
MTU = 1408
MS = 1_000_000


class Session:
    """One publication, one receiver, a lossy network between them."""

    def __init__(
        self,
        tmp_path,
        seed: int,
        loss=0.1,
        duplicate=0.05,
        reorder=0.05,
        reliable=True,
        initial_term_id=None,
    ):
        self.rng = random.Random(seed)
        self.system = {c: Slot() for c in SystemCounters}
        initial = (
            self.rng.randint(-(2**31), 2**31 - 1) if initial_term_id is None else initial_term_id
        )
        publisher = Publisher(tmp_path / "pub.log", TERM_LENGTH, MTU, initial, self.system)
        self.publisher = publisher
        self.log, self.pub_limit, self.sender = publisher.log, publisher.pub_limit, publisher.sender
        self.appender = publisher.appender
        self.a_to_b = LossyNetwork(self.rng, loss, duplicate, reorder)
        self.b_to_a = LossyNetwork(self.rng, loss, duplicate, reorder)
        self.tmp_path, self.reliable = tmp_path, reliable
        self.image: ReceiverStateMachine | None = None
        self.reader: _core.ImageReader | None = None
        self.received: list = []
        self.gaps: list[tuple[int, int, int]] = []  # what the image's loss handler was given
        self.now = 0
        self.sent = 0
        self.dispatcher = DataDispatcher(
            99, self.system, self._on_setup, lambda frame, source: self.b_to_a.send(frame)
        )
        self.dispatcher.add_subscription(10)

    def _on_datagram(self, datagram: bytes) -> None:
        deliver(self.dispatcher, datagram, SOURCE, self.now)

    def _on_setup(self, setup: SetupFrame, source, now_ns: int) -> ReceiverStateMachine:
        image, reader, sub_position = image_from_setup(
            self.tmp_path / f"image-{setup.session_id}.log",
            setup,
            receiver_id=99,
            system=self.system,
            now_ns=now_ns,
            reliable=self.reliable,
        )
        if setup.session_id == self.log.session_id:  # the session under test
            self.image, self.reader, self.sub_position = image, reader, sub_position
            image.loss_handler = lambda *gap: self.gaps.append(gap)
        return image

    def _on_control(self, datagram: bytes) -> None:
        for ref in iter_frames(datagram):
            if ref.type == HDR_TYPE_SM:
                self.sender.on_status_message(StatusMessage.decode(datagram, ref.offset), self.now)
            elif ref.type == HDR_TYPE_NAK:
                self.sender.on_nak(NakFrame.decode(datagram, ref.offset), self.now)

    def _check_flow_control(self, datagram: bytes, limit: int) -> None:
        """No DATA goes past the sender limit (a PAD header may: it carries no data)."""
        for ref in iter_frames(datagram):
            if ref.type == HDR_TYPE_DATA and ref.frame_length > 0:
                header = DataHeader.decode(datagram, ref.offset)
                end = d.compute_position(
                    header.term_id, header.term_offset, TERM_LENGTH, self.log.initial_term_id
                ) + d.align(ref.frame_length)
                assert end <= limit, f"DATA up to {end} sent past the sender limit {limit}"

    def step(self, total: int, burst: int = 40) -> None:
        self.pub_limit.set(self.sender.sender_position.get() + TERM_LENGTH // 2)
        self.sent = self.publisher.offer(self.sent, total, burst)
        limit = self.sender.sender_limit.get()
        for datagram in self.publisher.datagrams(self.now):
            self._check_flow_control(bytes(datagram), limit)
            self.a_to_b.send(datagram)
        for datagram in self.a_to_b.deliver():
            self._on_datagram(datagram)
        if self.image is not None:
            for frame in self.image.do_work(self.now):
                self.b_to_a.send(frame)
            self.reader.poll_messages(self.received, 1000)
        for datagram in self.b_to_a.deliver():
            self._on_control(datagram)
        self.now += MS


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_lossy_duplicating_reordering_network_delivers_everything_once_in_order(tmp_path, seed):
    total = 100_000 if seed == 1 else 20_000
    session = Session(tmp_path, seed)
    for _ in range(400_000):
        session.step(total)
        if len(session.received) == total:
            break
    received = session.received
    assert len(received) == total
    for i, msg in enumerate(received):
        assert msg.data == message(i), f"message {i} differs"
    system = session.system
    assert session.a_to_b.dropped > 0 and session.b_to_a.dropped > 0
    assert system[SystemCounters.NAK_MESSAGES_SENT].get() > 0
    assert system[SystemCounters.NAK_MESSAGES_RECEIVED].get() > 0
    assert system[SystemCounters.RETRANSMITS_SENT].get() > 0
    retransmitted = system[SystemCounters.RETRANSMITTED_BYTES].get()
    assert retransmitted >= system[SystemCounters.RETRANSMITS_SENT].get() * _core.HEADER_LENGTH
    assert system[SystemCounters.STATUS_MESSAGES_SENT].get() > 0  # received: counted on reading
    limits = system[SystemCounters.SENDER_FLOW_CONTROL_LIMITS].get()
    assert session.sender.sender_bpe.get() == limits > 0
    rotations = session.sender.sender_position.get() >> 16
    assert rotations >= 10, "the stream must cross many terms"


def test_handshake_setup_until_status_message_then_data(tmp_path):
    session = Session(tmp_path, 3, loss=0, duplicate=0, reorder=0)
    datagrams = session.publisher.datagrams(0)
    kinds = [ref.type for dg in datagrams for ref in iter_frames(bytes(dg))]
    assert kinds == [HDR_TYPE_SETUP, HDR_TYPE_DATA]  # SETUP, then a heartbeat (frame length 0)
    assert session.sender.sender_limit.get() == session.sender.sender_position.get()
    assert not session.sender.is_connected
    for datagram in datagrams:
        session.a_to_b.send(datagram)
    session.step(5)  # the SETUP makes the image, which answers with a status message
    session.step(5)
    assert session.sender.is_connected
    assert session.sender.sender_limit.get() == session.image.join_position + 32 * 1024
    while len(session.received) < 5:
        session.step(5)
    assert [m.data for m in session.received] == [message(i) for i in range(5)]


def test_every_gap_naked_is_handed_to_the_loss_handler(tmp_path):
    """What the driver's loss report records: one observation per NAK, of the NAKed range."""
    session = Session(tmp_path, 5, loss=0.1, duplicate=0, reorder=0)
    total = 3000
    for _ in range(20_000):
        session.step(total)
        if len(session.received) == total:
            break
    assert len(session.received) == total
    naks = session.system[SystemCounters.NAK_MESSAGES_SENT].get()
    assert len(session.gaps) == naks > 0
    end = session.sender.sender_position.get()
    for term_id, offset, length in session.gaps:  # ranges of the stream, in whole frames
        start = d.compute_position(term_id, offset, TERM_LENGTH, session.log.initial_term_id)
        assert session.image.join_position <= start < start + length <= end
        assert offset % 32 == 0 and length % 32 == 0


def test_unreliable_image_fills_gaps_with_padding(tmp_path):
    session = Session(tmp_path, 4, loss=0.1, duplicate=0, reorder=0, reliable=False)
    total = 3000
    for _ in range(20_000):
        session.step(total)
        if (
            session.image is not None
            and session.image.rebuild_position.get() >= session.sender.sender_position.get()
            and session.sent == total
        ):
            session.step(total)
            break
    assert session.system[SystemCounters.LOSS_GAP_FILLS].get() > 0
    assert session.system[SystemCounters.NAK_MESSAGES_SENT].get() == 0
    assert session.gaps  # a gap given up on is a loss too
    got = [int.from_bytes(m.data[:4], "little") for m in session.received]
    assert got == sorted(set(got)) and len(got) < total  # in order, none twice, some lost


def test_flow_control_limit_follows_status_messages(tmp_path):
    session = Session(tmp_path, 5, loss=0, duplicate=0, reorder=0)
    for _ in range(10):
        session.step(10_000, burst=200)
    sender = session.sender
    window = min(128 * 1024, TERM_LENGTH // 2)
    assert sender.sender_limit.get() <= session.sub_position.get() + window + TERM_LENGTH
    assert sender.sender_limit.get() >= session.image.join_position + window


def mutations(rng: random.Random, datagram: bytes) -> bytes:
    """Random bytes, or a real datagram truncated, with a wrong frame length, an unknown type,
    or made into a SETUP with an absurd term length or MTU. (Not arbitrary rewrites of a valid
    header: UDP carries no authentication, a well-formed forged frame is data like any other.)"""
    data = bytearray(datagram)
    choice = rng.randrange(5)
    if choice == 0:
        return bytes(rng.randbytes(rng.randrange(0, 100)))
    if choice == 1:
        return bytes(data[: rng.randrange(0, len(data) + 1)])
    if choice == 2 and len(data) >= 8:
        data[0:4] = rng.choice([1, 31, -1, 2**31 - 1, -(2**31), len(data) + 32]).to_bytes(
            4, "little", signed=True
        )
        return bytes(data)
    if choice == 3 and len(data) >= 8:
        data[6:8] = rng.choice([4, 7, 0xFFFF, 0x1234]).to_bytes(2, "little")
        return bytes(data)
    if len(data) >= 40:  # a SETUP with absurd term length / MTU for a known session and stream
        data[6:8] = (5).to_bytes(2, "little")
        data[0:4] = (40).to_bytes(4, "little")
        data[28:32] = rng.choice([0, 3, 1 << 31 - 1, 65535]).to_bytes(4, "little", signed=True)
        data[32:36] = rng.choice([0, 31, 70000, 1 << 30]).to_bytes(4, "little", signed=True)
        return bytes(data[:40])
    return bytes(data)


def test_malformed_datagrams_are_counted_and_a_legitimate_stream_is_unaffected(tmp_path):
    session = Session(tmp_path, 6, loss=0, duplicate=0, reorder=0)
    rng = random.Random(6)
    total = 5000
    original = session.a_to_b.deliver

    def deliver_with_garbage():
        out = []
        for datagram in original():
            out.append(datagram)
            for _ in range(2):
                out.append(mutations(rng, datagram))
        return out

    session.a_to_b.deliver = deliver_with_garbage
    for _ in range(20_000):
        session.step(total)
        if len(session.received) >= total:
            break
    assert [m.data for m in session.received] == [message(i) for i in range(total)]
    assert session.system[SystemCounters.INVALID_PACKETS].get() > 1000


def test_an_ended_sessions_heartbeats_and_setups_make_no_new_image_during_its_cool_down():
    """After an image ends, its publication lingers, heartbeating and answering with SETUPs; the
    receiver makes no image of that session until the cool-down ends (then a SETUP makes one
    again). Meanwhile each source hears the image's farewell in answer, at most every 100 ms."""
    system = {c: Slot() for c in SystemCounters}
    setups, control = [], []
    dispatcher = DataDispatcher(
        99,
        system,
        lambda setup, source, now: setups.append(now),
        lambda f, s: control.append((f, s)),
    )
    dispatcher.add_subscription(10)
    setup = setup_frame(
        session_id=77, stream_id=10, initial_term_id=5, term_length=TERM_LENGTH, mtu=MTU
    ).encode()
    heartbeat = data_header(
        frame_length=0, term_offset=0, session_id=77, stream_id=10, term_id=5
    ).encode()
    other = ("127.0.0.1", 40999)
    until = 300 * MS
    dispatcher.cool_down(77, 10, until_ns=until, farewell=b"farewell")
    for now in (0, 50 * MS, 99 * MS):
        deliver(dispatcher, heartbeat, SOURCE, now)
        deliver(dispatcher, setup, SOURCE, now)
    deliver(dispatcher, heartbeat, other, 99 * MS)
    assert setups == []  # no image
    assert control == [(b"farewell", SOURCE), (b"farewell", other)]  # no SETUP asked for
    deliver(dispatcher, heartbeat, SOURCE, 100 * MS)
    deliver(dispatcher, heartbeat, SOURCE, until - 1)
    assert control[2:] == [(b"farewell", SOURCE)] * 2
    assert system[SystemCounters.STATUS_MESSAGES_SENT].get() == 4
    deliver(dispatcher, heartbeat, SOURCE, until)
    (asked, to) = control[4]  # cool-down over: it asks for a SETUP again
    assert StatusMessage.decode(asked).is_setup_eliciting and to == SOURCE
    deliver(dispatcher, setup, SOURCE, until + 1)
    assert setups == [until + 1]


def test_a_silent_sessions_cool_down_answers_nothing():
    """An image that ended silent has no farewell: its session's data, back during the
    cool-down, gets no answer at all (nor a SETUP asked for)."""
    system = {c: Slot() for c in SystemCounters}
    control = []
    dispatcher = DataDispatcher(99, system, lambda *a: None, lambda f, s: control.append(f))
    dispatcher.add_subscription(10)
    heartbeat = data_header(
        frame_length=0, term_offset=0, session_id=77, stream_id=10, term_id=5
    ).encode()
    dispatcher.cool_down(77, 10, until_ns=300 * MS, farewell=None)
    for now in (0, 150 * MS, 300 * MS - 1):
        deliver(dispatcher, heartbeat, SOURCE, now)
    assert control == []
    deliver(dispatcher, heartbeat, SOURCE, 300 * MS)
    assert StatusMessage.decode(control[0]).is_setup_eliciting


def test_a_dispatcher_forgets_old_answers_once_it_remembers_many():
    """Data of ever new sessions (forged, say) each get a setup-eliciting status message; what
    is remembered of them stays bounded, while recent answers are still not repeated."""
    system = {c: Slot() for c in SystemCounters}
    control = []
    dispatcher = DataDispatcher(99, system, lambda *a: None, lambda f, s: control.append(f))
    dispatcher.add_subscription(10)
    for session in range(5000):
        heartbeat = data_header(
            frame_length=0, term_offset=0, session_id=session, stream_id=10, term_id=5
        ).encode()
        deliver(dispatcher, heartbeat, SOURCE, session * MS)
        deliver(dispatcher, heartbeat, SOURCE, session * MS + 1)  # the same, at once: not again
    assert len(control) == 5000
    assert len(dispatcher._answered) <= 1024


def test_a_late_packet_reaching_past_the_receiver_position_leaves_nothing_behind(tmp_path):
    """A late copy of frames [64, 192) arrives after [0, 128) was rebuilt, consumed and cleaned.
    Written whole it would put a frame behind the cleaning, where it would pass as term 10's
    frame three terms later; it is dropped, and the frame it carried beyond is taken from the
    next copy."""
    system = {c: Slot() for c in SystemCounters}
    log = LogBuffers.create(
        tmp_path / "image.log",
        term_length=TERM_LENGTH,
        initial_term_id=7,
        session_id=1,
        stream_id=2,
        mtu=MTU,
    )
    sub = Slot(0)
    image = ReceiverStateMachine(
        log,
        join_position=0,
        receiver_id=9,
        rebuild_position=Slot(),
        hwm_position=Slot(),
        consumption_position=sub.get,
        system=system,
        now_ns=0,
    )

    def frame(term_id: int, offset: int, fill: int, length: int = 64, type=HDR_TYPE_DATA):
        header = data_header(
            frame_length=length,
            term_offset=offset,
            session_id=1,
            stream_id=2,
            term_id=term_id,
            type=type,
        ).encode()
        return header if type == HDR_TYPE_PAD else header + bytes([fill]) * (length - 32)

    insert = image.rebuilder.insert  # what the C router does with a data packet
    assert insert(frame(7, 0, 0xA0), 1) and insert(frame(7, 64, 0xA1), 1)
    image.do_work(1)
    sub.set(128)
    image.do_work(1)  # consumed and cleaned to 128
    assert not insert(frame(7, 64, 0xA1) + frame(7, 128, 0xA2), 1)  # late, straddling
    assert bytes(log.term(0)[64:128]) == bytes(64)  # nothing written behind the cleaning
    assert insert(frame(7, 128, 0xA2), 1)  # the frame beyond comes again
    for term_id, start in ((7, 192), (8, 0), (9, 0)):
        assert insert(frame(term_id, start, 0, TERM_LENGTH - start, HDR_TYPE_PAD), 1)
        image.do_work(1)
        sub.set(image.rebuild_position.get())
        image.do_work(1)
    assert image.rebuild_position.get() == 3 * TERM_LENGTH
    # Term 10 reuses partition 0: every one of its frames goes in, none is taken for stale.
    for offset, fill in ((0, 0xB0), (64, 0xB1), (128, 0xB2)):
        assert insert(frame(10, offset, fill), 1)
    image.do_work(1)
    assert image.rebuild_position.get() == 3 * TERM_LENGTH + 192
    assert bytes(log.term(0)[96:128]) == bytes([0xB1]) * 32


def status_message_at(session: Session, consumed: int) -> StatusMessage:
    """Receiver 99's status message of session 77, stream 10, saying it consumed up to
    `consumed`, its window 1 MiB."""
    term_id, term_offset = divmod(consumed, TERM_LENGTH)
    return status_message(
        session_id=77,
        stream_id=10,
        consumption_term_id=session.log.initial_term_id + term_id,
        consumption_term_offset=term_offset,
        receiver_window=1 << 20,
        receiver_id=99,
    )


def test_a_status_message_out_of_reach_is_rejected_and_counted(tmp_path):
    """A status message whose consumption position is more than half a term past the sender
    position (garbage, or forged gigabytes ahead: as Aeron 1.53's sender) or more than a term
    behind it (past repair) is rejected and counted, and moves nothing; one at either edge is
    taken; the stream goes on. The sender used to take them all: one far ahead put its limit
    gigabytes past its position."""
    session = Session(tmp_path, 8, loss=0, duplicate=0, reorder=0)
    while len(session.received) < 5:
        session.step(5)
    sender = session.sender
    rejected = session.system[SystemCounters.STATUS_MESSAGES_REJECTED]
    position, limit = sender.sender_position.get(), sender.sender_limit.get()
    half = TERM_LENGTH // 2
    for consumed in (position + 100_000 * TERM_LENGTH, position + half + 32, position - 2**40):
        sm = status_message_at(session, consumed)
        sender.on_status_message(StatusMessage.decode(sm.encode()), session.now)
    sm = status_message_at(session, position - TERM_LENGTH - 32)
    sender.on_status_message(StatusMessage.decode(sm.encode()), session.now)
    assert rejected.get() == 4
    assert sender.sender_limit.get() == limit
    for consumed in (position - TERM_LENGTH, position + half):
        sm = status_message_at(session, consumed)
        sender.on_status_message(StatusMessage.decode(sm.encode()), session.now)
    assert rejected.get() == 4
    assert sender.sender_limit.get() > limit
    while len(session.received) < 50:
        session.step(50)
    assert [m.data for m in session.received] == [message(i) for i in range(50)]


def setup_eliciting_status_message() -> StatusMessage:
    """What a receiver that wants a SETUP of session 77, stream 10 sends."""
    return status_message(
        session_id=77,
        stream_id=10,
        consumption_term_id=0,
        consumption_term_offset=0,
        receiver_window=0,
        receiver_id=5,
        flags=0x80,
    )


def test_an_ended_publication_answers_no_setup_eliciting_status_message(tmp_path):
    """Once closed and sent to its end, a publication heartbeats EOS and sets nobody up again
    (as the reference does): a SETUP would make a receiver a new image of a dead stream."""
    session = Session(tmp_path, 8, loss=0, duplicate=0, reorder=0)
    while len(session.received) < 10:
        session.step(10)
    sender = session.sender
    session.log.mapped.set_end_of_stream_position(sender.sender_position.get())
    eliciting = setup_eliciting_status_message()
    sender.on_status_message(eliciting, session.now)
    kinds = [ref.type for dg in sender.send(session.now + 200 * MS) for ref in iter_frames(dg)]
    assert kinds == [HDR_TYPE_DATA]  # the EOS heartbeat only


def test_a_setup_asked_for_is_sent_though_another_receivers_status_message_came_after(tmp_path):
    """A late joiner's setup-eliciting SM and an existing receiver's SM in one batch: the SETUP
    still goes out (an ordinary SM must not cancel what another receiver asked for)."""
    session = Session(tmp_path, 9, loss=0, duplicate=0, reorder=0)
    while len(session.received) < 10:
        session.step(10)
    sender = session.sender
    eliciting = setup_eliciting_status_message()
    sender.on_status_message(eliciting, session.now)
    ordinary = session.image._status_message(session.sub_position.get())
    sender.on_status_message(StatusMessage.decode(ordinary), session.now)
    kinds = [ref.type for dg in sender.send(session.now) for ref in iter_frames(dg)]
    assert HDR_TYPE_SETUP in kinds


def test_new_data_goes_on_while_a_setup_asked_for_is_sent(tmp_path):
    """A late joiner's setup request: the SETUP goes at once, once while a receiver is live, and
    new data goes on meanwhile with no status message waited for (Aeron 1.53's sender). It used
    to hold new data back until an ordinary status message came: up to 200 ms from an idle
    receiver, each time a receiver asked."""
    session = Session(tmp_path, 10, loss=0, duplicate=0, reorder=0)
    while len(session.received) < 10:
        session.step(10)
    sender, publisher = session.sender, session.publisher
    sender.on_status_message(setup_eliciting_status_message(), session.now)
    session.sent = publisher.offer(session.sent, 15, 5)
    datagrams = [bytes(dg) for dg in publisher.datagrams(session.now)]
    frames = [ref.type for dg in datagrams for ref in iter_frames(dg)]
    assert frames.count(HDR_TYPE_SETUP) == 1 and HDR_TYPE_DATA in frames
    for datagram in datagrams:  # no status message goes back to the sender
        session._on_datagram(datagram)
    session.reader.poll_messages(session.received, 1000)
    assert [m.data for m in session.received] == [message(i) for i in range(15)]
    later = [ref.type for dg in sender.send(session.now + 300 * MS) for ref in iter_frames(dg)]
    assert HDR_TYPE_SETUP not in later


def test_a_session_that_ended_its_stream_is_not_asked_for_a_setup():
    """A heartbeat of an unknown session of a subscribed stream asks for a SETUP, one flagged
    end-of-stream does not (its publication sends none: asking would only repeat)."""
    control = []
    dispatcher = DataDispatcher(99, {c: Slot() for c in SystemCounters}, lambda *a: None,
                                lambda f, s: control.append(f))  # fmt: skip
    dispatcher.add_subscription(10)
    for flags, session in ((EOS_FLAG, 77), (0, 78)):
        heartbeat = data_header(
            frame_length=0, term_offset=0, session_id=session, stream_id=10, term_id=5,
            flags=flags,
        ).encode()  # fmt: skip
        deliver(dispatcher, heartbeat, SOURCE, 0)
    (asked,) = map(StatusMessage.decode, control)
    assert asked.is_setup_eliciting and asked.session_id == 78


def test_a_stream_subscribed_anew_ends_the_cool_downs_of_its_sessions():
    """Unsubscribed, a stream's images leave, cooling down: what their sessions send meanwhile
    is answered with their farewells. Subscribed anew, its sessions get images at once."""
    control = []
    dispatcher = DataDispatcher(99, {c: Slot() for c in SystemCounters}, lambda *a: None,
                                lambda f, s: control.append(f))  # fmt: skip
    dispatcher.add_subscription(10)
    dispatcher.add_subscription(11)
    dispatcher.remove_subscription(10)
    dispatcher.cool_down(77, 10, until_ns=10_000 * MS, farewell=b"farewell 77")
    dispatcher.cool_down(78, 11, until_ns=10_000 * MS, farewell=b"farewell 78")
    heartbeats = {
        key: data_header(
            frame_length=0, term_offset=0, session_id=key[0], stream_id=key[1], term_id=5
        ).encode()
        for key in ((77, 10), (78, 11))
    }
    deliver(dispatcher, heartbeats[77, 10], SOURCE, MS)
    assert control == [b"farewell 77"]
    dispatcher.add_subscription(10)
    dispatcher.add_subscription(11)  # subscribed already: its cool-down goes on
    deliver(dispatcher, heartbeats[77, 10], SOURCE, 200 * MS)
    deliver(dispatcher, heartbeats[78, 11], SOURCE, 200 * MS)
    asked, farewell = control[1:]
    assert StatusMessage.decode(asked).is_setup_eliciting and farewell == b"farewell 78"


def test_a_dispatcher_forgets_cool_downs_that_are_over_of_sessions_not_seen_again():
    """Many short-lived sessions end, each cooling down, and none is heard again: what is
    remembered of them goes once their cool-downs are over (at the next datagram), not when
    each session is seen again; those still cooling down are kept."""
    system = {c: Slot() for c in SystemCounters}
    dispatcher = DataDispatcher(99, system, lambda *a: None, lambda f, s: None)
    dispatcher.add_subscription(10)
    for session in range(5000):
        dispatcher.cool_down(session, 10, until_ns=session * MS + 300 * MS, farewell=None)
    dispatcher.cool_down(0, 10, until_ns=6000 * MS, farewell=None)  # session 0 again, later
    heartbeat = data_header(
        frame_length=0, term_offset=0, session_id=9999, stream_id=11, term_id=5
    ).encode()
    deliver(dispatcher, heartbeat, SOURCE, 4000 * MS)
    assert sorted(dispatcher._cooling) == [(0, 10)] + [(s, 10) for s in range(3701, 5000)]
