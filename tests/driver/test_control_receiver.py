"""The sender side's repeated status messages absorbed in C (ControlReceiver), and the receiver
side's periodic status message sent by the DataPath (ImageRebuilder), over real loopback
sockets, checked byte for byte."""

import select
import time

import pytest

import aeronio
from aeronio._core import ControlReceiver, DatagramReceiver, DatagramSender
from aeronio.driver.channel_endpoints import REPEAT_MEMORY_CAPACITY, SM_REPEAT_WINDOW_NS
from aeronio.driver.receiver_state import SM_EARLY_NS, SM_TIMEOUT_NS
from aeronio.protocol.frames import SM_SETUP_FLAG, nak_frame, rttm_frame, status_message
from tests.driver import test_udp_batch_io as batch
from tests.driver.test_data_path import settled
from tests.driver.test_udp_batch_io import SESSION, STREAM, patch
from tests.support.driver_internals import udp_media
from tests.support.ports import free_port
from tests.support.udp_harness import Slot

udp = batch.udp  # the fixture: bound loopback sockets with a large receive buffer
WINDOW = SM_REPEAT_WINDOW_NS
NEVER = 2**63 - 1


def quiet(*sockets) -> None:
    """Nothing more waits on `sockets` (loopback sends arrive as they are made)."""
    assert select.select(sockets, [], [], 0.01)[0] == [], "more datagrams arrived than were sent"


def sm(offset: int = 0, *, session: int = SESSION, stream: int = STREAM, **fields) -> bytes:
    fields = {"receiver_window": 1 << 16, "receiver_id": 77, **fields}
    return status_message(
        session_id=session,
        stream_id=stream,
        consumption_term_id=1000,
        consumption_term_offset=offset,
        **fields,
    ).encode()


class Control:
    """A send endpoint's control socket: what arrives on it goes through a ControlReceiver that
    counts the repeats it absorbs on `counter`."""

    def __init__(self, udp, capacity: int = REPEAT_MEMORY_CAPACITY):
        self.socket, self.counter = udp(), Slot()
        self.receiver = DatagramReceiver(32, 2048)
        self.control = ControlReceiver(self.counter, WINDOW, capacity)

    def deliver(self, now_ns: int, *datagrams: bytes, sender) -> list[tuple[bytes, tuple]]:
        """Send `datagrams` from `sender`; what the ControlReceiver leaves for Python of them,
        received at now_ns, as (bytes, source)."""
        for datagram in datagrams:
            sender.sendto(datagram, self.socket.getsockname())
        left, got, deadline = [], 0, time.monotonic() + 5
        while got < len(datagrams):
            batch.wait_readable(self.socket, deadline, f"{got} of {len(datagrams)} arrived")
            got += self.receiver.recv(self.socket.fileno())
            for view, source in self.control.absorb_received(self.receiver, now_ns):
                assert isinstance(view, memoryview)
                left.append((bytes(view), source))
        quiet(self.socket)
        return left


@pytest.mark.parametrize("feedback", [b"", b"feedback"], ids=["plain", "with-feedback"])
def test_a_repeated_status_message_is_absorbed_counted_and_its_time_kept(udp, feedback):
    """A receiver's first SM for a session is Python's; the same bytes within the window of the
    last one heard (the window moves with each repeat) are absorbed and counted; different
    content (another offset) is Python's and is what repeats are compared with from then on."""
    c, peer = Control(udp), udp()
    first, other = sm(0, feedback=feedback), sm(4096, feedback=feedback)
    source = peer.getsockname()
    assert c.deliver(0, first, sender=peer) == [(first, source)]
    assert c.deliver(WINDOW, first, sender=peer) == []
    assert c.deliver(2 * WINDOW, first, first, sender=peer) == []
    assert c.counter.get() == 3
    assert c.control.take_repeats(2 * WINDOW, WINDOW) == [(first, source, 2 * WINDOW)]
    assert c.deliver(2 * WINDOW + 1, other, sender=peer) == [(other, source)]
    assert c.deliver(2 * WINDOW + 2, other, sender=peer) == []
    assert c.deliver(2 * WINDOW + 3, first, sender=peer) == [(first, source)]
    assert c.counter.get() == 4
    assert c.control.take_repeats(2 * WINDOW + 3, WINDOW) == []  # Python saw `first` since


def test_a_repeat_after_a_silence_longer_than_the_window_is_pythons(udp):
    """More than repeat_window_ns since the last one heard, the same SM goes to Python (a
    receiver back after a silence), and the window counts from it."""
    c, peer = Control(udp), udp()
    source = peer.getsockname()
    assert c.control.repeat_window_ns == WINDOW
    assert c.deliver(0, sm(), sender=peer) == [(sm(), source)]
    assert c.deliver(WINDOW + 1, sm(), sender=peer) == [(sm(), source)]
    assert c.deliver(2 * WINDOW + 1, sm(), sender=peer) == []
    assert c.counter.get() == 1


SETUP_ELICITING = sm(flags=SM_SETUP_FLAG)
ALWAYS_PYTHONS = {
    "NAK": nak_frame(
        session_id=SESSION, stream_id=STREAM, term_id=1000, term_offset=0, length=1408
    ).encode(),
    "RTTM": rttm_frame(
        session_id=SESSION, stream_id=STREAM, echo_timestamp=5, receiver_id=77
    ).encode(),
    "two SMs in one datagram": sm() + sm(),
    "SM with version 1": patch(sm(), 4, "<B", 1),
    "SM frame length short of the datagram": sm() + bytes(8),
    "SM shorter than its header": sm()[:35],
    "garbage": b"garbage",
    "empty": b"",
}


@pytest.mark.parametrize("datagram", ALWAYS_PYTHONS.values(), ids=ALWAYS_PYTHONS)
def test_flagged_sms_other_frames_and_odd_datagrams_always_go_to_python(udp, datagram):
    """Anything but a lone flag-less SM frame filling its datagram goes to Python every time,
    uncounted, and is not remembered: the plain SM heard before it still absorbs its repeat."""
    c, peer = Control(udp), udp()
    source = peer.getsockname()
    assert c.deliver(0, sm(), sender=peer) == [(sm(), source)]
    assert c.deliver(1, datagram, datagram, sender=peer) == [(datagram, source)] * 2
    assert c.deliver(2, sm(), sender=peer) == []
    assert c.counter.get() == 1
    assert c.control.take_repeats(2, WINDOW) == [(sm(), source, 2)]


@pytest.mark.parametrize("everyone", [False, True], ids=["its session", "session 0"])
def test_a_setup_request_makes_each_receivers_next_sm_pythons(udp, everyone):
    """A setup request (flagged SM) goes to Python every time, and makes the next SM of every
    receiver of its session Python's again, whoever sent it (the SM that ends the SETUP it asked
    for must reach the sender); one for session 0 and stream 0 does so for every session.
    Other sessions' repeats are still absorbed."""
    c, peer, other = Control(udp), udp(), udp()
    elsewhere = sm(session=SESSION + 1)
    assert c.deliver(0, sm(), elsewhere, sender=peer) == [(sm(), peer.getsockname())] + [
        (elsewhere, peer.getsockname())
    ]
    request = sm(session=0, stream=0, flags=SM_SETUP_FLAG) if everyone else SETUP_ELICITING
    assert c.deliver(1, request, request, sender=other) == [(request, other.getsockname())] * 2
    assert c.deliver(2, sm(), sender=peer) == [(sm(), peer.getsockname())]
    assert c.deliver(3, sm(), sender=peer) == []  # remembered again
    left = c.deliver(4, elsewhere, sender=peer)
    assert left == ([(elsewhere, peer.getsockname())] if everyone else [])
    assert c.counter.get() == 1 + (not everyone)


def test_each_receiver_address_session_and_stream_is_remembered_apart(udp):
    """The same SM from another source port is another receiver's: Python's the first time;
    another session or stream from the same socket too. Each then absorbs its own repeats, and
    take_repeats gives each with its source."""
    c, a, b = Control(udp), udp(), udp()
    kinds = [(a, sm()), (b, sm()), (a, sm(session=SESSION + 1)), (a, sm(stream=STREAM + 1))]
    for now, (peer, frame) in enumerate(kinds):
        assert c.deliver(now, frame, sender=peer) == [(frame, peer.getsockname())]
    for now, (peer, frame) in enumerate(kinds, 10):
        assert c.deliver(now, frame, sender=peer) == []
    assert c.counter.get() == 4
    expected = [(frame, peer.getsockname(), now) for now, (peer, frame) in enumerate(kinds, 10)]
    assert c.control.take_repeats(20, WINDOW) == expected


def test_of_more_status_messages_than_its_capacity_the_one_heard_longest_ago_is_forgotten(udp):
    """Remembered apart, status messages from ever new receivers or of ever new sessions would
    take ever more memory: one more than `capacity` makes the one heard longest ago (a repeat
    counts) forgotten, and its next status message is Python's."""
    c, peer = Control(udp, capacity=2), udp()
    source = peer.getsockname()
    first, second, third = (sm(session=SESSION + k) for k in range(3))
    assert c.deliver(0, first, second, sender=peer) == [(first, source), (second, source)]
    assert c.deliver(1, first, sender=peer) == []  # heard again: second is the oldest now
    assert c.deliver(2, third, sender=peer) == [(third, source)]
    assert c.deliver(3, first, third, sender=peer) == []
    assert c.deliver(4, second, sender=peer) == [(second, source)]  # forgotten
    assert c.control.capacity == 2 and c.counter.get() == 3
    assert c.deliver(5, second, sender=peer) == []  # remembered again, in first's place
    assert c.deliver(6, first, sender=peer) == [(first, source)]


async def test_a_send_endpoint_remembers_status_messages_up_to_its_capacity():
    async with aeronio.connect() as aeron:
        await aeron.add_publication(f"aeron:udp?endpoint=127.0.0.1:{free_port()}", STREAM)
        (endpoint,) = udp_media(aeron).send_endpoints.values()
        assert endpoint.control.capacity == REPEAT_MEMORY_CAPACITY


def test_take_repeats_gives_each_repeat_once_and_forgets_the_silent(udp):
    """take_repeats gives an SM repeated since Python last saw it once, at its latest repeat;
    one not heard for more than forget_after_ns (not exactly that long) is forgotten, unless it
    has a repeat to give, and then goes to Python again even within the window."""
    c, peer = Control(udp), udp()
    source, forget = peer.getsockname(), WINDOW // 10
    assert c.deliver(0, sm(), sender=peer) == [(sm(), source)]
    assert c.control.take_repeats(0, forget) == []  # Python saw it
    assert c.deliver(10, sm(), sender=peer) == []
    assert c.deliver(20, sm(), sender=peer) == []
    assert c.control.take_repeats(20, forget) == [(sm(), source, 20)]
    assert c.control.take_repeats(20, forget) == []
    assert c.control.take_repeats(20 + forget, forget) == []  # kept: not more than forget
    assert c.deliver(20 + forget, sm(), sender=peer) == []
    late = 20 + 3 * forget
    assert c.control.take_repeats(late, forget) == [(sm(), source, 20 + forget)]  # not forgotten
    assert c.control.take_repeats(late, forget) == []  # forgotten now
    assert 20 + forget + WINDOW > late
    assert c.deliver(late, sm(), sender=peer) == [(sm(), source)]
    assert c.counter.get() == 3


def test_a_data_paths_control_socket_absorbs_repeats_without_python(udp):
    """On a DataPath's control socket a repeated SM is no work and makes nothing due; a new one
    is due at once and left for Python (slow_datagrams)."""
    c, peer = Control(udp), udp()
    path = settled(controls=[(c.socket.fileno(), c.receiver, c.control)])
    for now, frame, left in ((0, sm(), [sm()]), (1, sm(), []), (2, sm(64), [sm(64)])):
        peer.sendto(frame, c.socket.getsockname())
        assert select.select([c.socket], [], [], 5)[0]
        assert path.do_work(now) == 0 and path.conductor_due == bool(left)
        assert [bytes(view) for view, _ in path.slow_datagrams(c.receiver)] == left
        path.bookkept()
    assert c.counter.get() == 1


# -- the periodic status message sent by the DataPath -------------------------------------------


class Receiving:
    """An image behind a data socket, a DataPath receiving on it, a peer sending heartbeats
    to it, two sinks (the image's senders' control sockets) and the control senders to them,
    not yet given to the image."""

    def __init__(self, tmp_path, udp):
        self.image = batch.Image(tmp_path / "image.log")
        self.rebuilder = self.image.rebuilder
        self.data, self.peer, self.control = udp(), udp(), udp()
        self.sinks = [udp(), udp()]
        self.short_sends = Slot()
        self.senders = [DatagramSender(self.control.fileno(), self.short_sends) for _ in self.sinks]
        for sender, sink in zip(self.senders, self.sinks, strict=True):
            sender.set_destinations([(sink.getsockname(), 0)])
        self.path = settled(
            receivers=[(self.data.fileno(), DatagramReceiver(64, 65536), self.image.router)]
        )

    def heartbeat(self) -> None:
        """A heartbeat of the image, waiting on the data socket."""
        self.peer.sendto(batch.heartbeat(0), self.data.getsockname())
        assert select.select([self.data], [], [], 5)[0]

    def sent(self, now_ns: int, datagram: bytes | None) -> None:
        """do_work(now_ns) is no work and sends `datagram` to each sink (None: nothing)."""
        assert self.path.do_work(now_ns) == 0
        receiver = DatagramReceiver(8, 2048)
        for sink in self.sinks if datagram is not None else ():
            assert select.select([sink], [], [], 5)[0] and receiver.recv(sink.fileno()) == 1
            assert (bytes(receiver.data(0)), receiver.address(0)) == (
                datagram,
                self.control.getsockname(),
            )
        quiet(*self.sinks)


def test_without_a_status_message_or_control_senders_the_data_path_sends_none(tmp_path, udp):
    """The DataPath repeats an image's SM only once it has one and control senders: until
    then nothing is sent however late, nothing counted, and it never needs waking for one."""
    r = Receiving(tmp_path, udp)
    for message, senders in ((None, []), (sm(), []), (None, r.senders)):
        r.rebuilder.status_message = message
        r.rebuilder.set_control_senders(senders)
        assert not r.rebuilder.repeats_status_messages
        assert r.path.deadline_ns() == NEVER
        r.sent(10 * SM_TIMEOUT_NS, None)
    assert r.image.sms_sent.get() == 0 and r.rebuilder.time_of_last_sm_ns == -SM_TIMEOUT_NS


def test_the_periodic_status_message_goes_to_each_control_sender_when_due(tmp_path, udp):
    """With an SM and control senders the DataPath wakes at the last SM's time + SM_TIMEOUT +
    SM_EARLY; do_work sends nothing before last + SM_TIMEOUT, and from then the exact bytes to
    each sender once, as housekeeping (no work), counted on sms_sent, the time kept."""
    r = Receiving(tmp_path, udp)
    message, last = sm(4096, feedback=b"fb"), 10**12
    r.rebuilder.status_message = message
    r.rebuilder.set_control_senders(r.senders)
    r.rebuilder.time_of_last_sm_ns = last
    assert r.rebuilder.repeats_status_messages
    assert r.path.deadline_ns() == last + SM_TIMEOUT_NS + SM_EARLY_NS
    r.sent(last + SM_TIMEOUT_NS - 1, None)
    assert r.image.sms_sent.get() == 0 and r.rebuilder.time_of_last_sm_ns == last
    due = last + SM_TIMEOUT_NS
    r.sent(due, message)
    assert r.image.sms_sent.get() == 1 and r.rebuilder.time_of_last_sm_ns == due
    assert r.path.deadline_ns() == due + SM_TIMEOUT_NS + SM_EARLY_NS
    r.sent(due + SM_TIMEOUT_NS - 1, None)
    assert r.image.sms_sent.get() == 1 and r.short_sends.get() == 0


@pytest.mark.parametrize(("before_due", "early"), [(SM_EARLY_NS, True), (SM_EARLY_NS + 1, False)])
def test_a_heartbeat_heard_takes_a_status_message_due_soon_with_it(
    tmp_path, udp, before_due, early
):
    """A heartbeat of the image received in a do_work when its SM is due within SM_EARLY_NS
    sends the SM in that do_work; one due later stays, and the heartbeat counts for that
    do_work only."""
    r = Receiving(tmp_path, udp)
    message, last = sm(), 10**12
    r.rebuilder.status_message = message
    r.rebuilder.set_control_senders(r.senders)
    r.rebuilder.time_of_last_sm_ns = last
    now = last + SM_TIMEOUT_NS - before_due
    r.heartbeat()
    r.sent(now, message if early else None)
    assert r.image.heartbeats.get() == 1 and not r.rebuilder.heartbeat_heard
    assert (r.image.sms_sent.get(), r.rebuilder.time_of_last_sm_ns) == (
        (1, now) if early else (0, last)
    )
    if not early:
        r.sent(last + SM_TIMEOUT_NS - SM_EARLY_NS, None)  # no heartbeat heard in this one


def test_control_senders_must_be_datagram_senders(tmp_path, udp):
    """set_control_senders takes a list of DatagramSenders; anything else is refused with
    TypeError, and the senders set before stay."""
    r = Receiving(tmp_path, udp)
    r.rebuilder.status_message = sm()
    r.rebuilder.set_control_senders(r.senders)
    with pytest.raises(TypeError, match="DatagramSender"):
        r.rebuilder.set_control_senders([r.senders[0], r.control])
    with pytest.raises(TypeError):
        r.rebuilder.set_control_senders(tuple(r.senders))
    assert r.rebuilder.repeats_status_messages
    r.sent(0, sm())


def test_a_status_message_to_this_data_paths_own_control_socket_is_read_in_the_same_do_work(
    tmp_path, udp
):
    """An image's SM to a send endpoint of the same process (its control socket in the same
    DataPath) is read by the do_work that sent it: an idle stream within one driver costs one
    duty cycle per SM, not a second wake-up to hear it. The first SM is left for Python, the
    repeat absorbed; nothing waits on the socket after either."""
    r, c = Receiving(tmp_path, udp), Control(udp)
    r.senders[0].set_destinations([(c.socket.getsockname(), 0)])
    r.rebuilder.status_message = message = sm(128)
    r.rebuilder.set_control_senders(r.senders[:1])
    r.rebuilder.time_of_last_sm_ns = last = 10**12
    path = settled(
        controls=[(c.socket.fileno(), c.receiver, c.control)],
        receivers=[(r.data.fileno(), DatagramReceiver(64, 65536), r.image.router)],
    )
    due = last + SM_TIMEOUT_NS
    assert path.do_work(due) == 0 and path.conductor_due
    assert [bytes(view) for view, _ in path.slow_datagrams(c.receiver)] == [message]
    quiet(c.socket)
    path.bookkept()
    assert path.do_work(due + SM_TIMEOUT_NS) == 0 and not path.conductor_due
    assert r.image.sms_sent.get() == 2 and c.counter.get() == 1
    quiet(c.socket)
