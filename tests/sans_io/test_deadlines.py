"""The deadlines the driver parks until: each state machine says when it next has something due
though nothing arrives, and it is due then and not before (so a driver that sleeps until the
earliest one misses nothing and wakes for nothing). Sans-IO: the times are given."""

from aeronio._core import COALESCE_NS, coalesced
from aeronio.driver.loss_detector import LossDetector
from aeronio.driver.receiver_state import SM_EARLY_NS, SM_TIMEOUT_NS
from aeronio.driver.retransmit_handler import RetransmitHandler
from aeronio.driver.sender_state import HEARTBEAT_TIMEOUT_NS
from aeronio.protocol.frames import HDR_TYPE_DATA, HDR_TYPE_SETUP, HDR_TYPE_SM, iter_frames
from tests.sans_io.test_udp_sans_io import MS, SOURCE, Session, setup_eliciting_status_message
from tests.support.udp_harness import deliver


def kinds(datagrams) -> list[tuple[int, int]]:
    """(frame type, frame length) of each frame sent."""
    return [(ref.type, ref.frame_length) for d in datagrams for ref in iter_frames(bytes(d))]


def idle_session(tmp_path) -> Session:
    """Connected, 20 messages sent, received and acknowledged; then nothing."""
    session = Session(tmp_path, seed=1, loss=0, duplicate=0, reorder=0)
    for _ in range(400):
        session.step(20)
    assert len(session.received) == 20 and session.sender.is_connected
    return session


def test_a_senders_heartbeat_is_due_at_its_deadline_and_not_before(tmp_path):
    """Its PublicationSender's deadline: the driver's DataPath sends it while new data is
    allowed (then the state machine has no deadline of its own); `send` sends it too."""
    sender = idle_session(tmp_path).sender
    assert sender.deadline_ns() is None
    deadline = sender.data_sender.heartbeat_deadline_ns
    assert sender.send(deadline - 1) == []
    assert kinds(sender.send(deadline)) == [(HDR_TYPE_DATA, 0)]  # a heartbeat
    assert sender.data_sender.heartbeat_deadline_ns == deadline + HEARTBEAT_TIMEOUT_NS


def test_a_setup_due_brings_the_senders_deadline_forward(tmp_path):
    session = idle_session(tmp_path)
    sender, now = session.sender, session.now
    heartbeat = sender.data_sender.heartbeat_deadline_ns
    sender.on_status_message(
        setup_eliciting_status_message(), now
    )  # a new receiver asks for a SETUP
    assert sender.deadline_ns() <= now < heartbeat
    assert (HDR_TYPE_SETUP, 40) in kinds(sender.send(now))
    assert sender.deadline_ns() is None  # sent, with a receiver live: nothing more is due


def test_a_receivers_status_message_is_due_at_its_deadline_and_not_before(tmp_path):
    image = idle_session(tmp_path).image
    deadline = image.deadline_ns()
    assert image.do_work(deadline - 1) == []
    assert kinds(image.do_work(deadline)) == [(HDR_TYPE_SM, 36)]
    assert image.deadline_ns() == deadline + SM_TIMEOUT_NS


def test_a_heartbeat_heard_takes_a_status_message_due_soon_along(tmp_path):
    """The status message due within SM_EARLY_NS goes in the duty cycle that heard a heartbeat
    (one wake-up for both); one due later waits for its deadline."""
    session = idle_session(tmp_path)
    image, sender = session.image, session.sender
    deadline = image.deadline_ns()
    beat = sender.data_sender.heartbeat(sender.data_sender.heartbeat_deadline_ns)
    for at, sent in (
        (deadline - SM_EARLY_NS - 1, []),
        (deadline - SM_EARLY_NS, [(HDR_TYPE_SM, 36)]),
    ):
        deliver(session.dispatcher, beat, SOURCE, at)
        assert kinds(image.do_work(at)) == sent
    assert image.do_work(deadline - SM_EARLY_NS + 1) == []  # no heartbeat: not early


def test_a_gap_is_naked_at_the_loss_detectors_deadline():
    loss = LossDetector(delay_ns=5 * MS, retry_ns=60 * MS)
    gap = (3, 1024, 64)
    assert loss.deadline_ns is None
    assert loss.on_gap(gap, 100 * MS) is None
    assert loss.deadline_ns == 105 * MS
    assert loss.on_gap(gap, 105 * MS - 1) is None
    assert loss.on_gap(gap, 105 * MS) == gap
    assert loss.deadline_ns == 165 * MS  # the retry
    assert loss.on_gap(None, 110 * MS) is None and loss.deadline_ns is None


def test_a_retransmit_and_its_lingering_end_at_the_handlers_deadlines():
    handler = RetransmitHandler(delay_ns=10 * MS, linger_ns=100 * MS)
    assert handler.deadline_ns() is None
    handler.on_nak(3, 1024, 64, 0)
    assert handler.deadline_ns() == 10 * MS
    assert handler.due(10 * MS - 1) == []
    assert handler.due(10 * MS) == [(3, 1024, 64)]
    assert handler.deadline_ns() == 110 * MS  # lingering: a repeated NAK is ignored until then
    assert handler.due(110 * MS) == [] and handler.deadline_ns() is None


def test_deadlines_close_together_run_in_one_duty_cycle():
    assert coalesced([100 * MS]) == 100 * MS
    assert coalesced([300 * MS, 100 * MS, 100 * MS + COALESCE_NS]) == 100 * MS + COALESCE_NS
    assert coalesced([100 * MS, 100 * MS + COALESCE_NS + 1]) == 100 * MS
