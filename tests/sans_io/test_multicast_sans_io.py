"""One publication, several receivers, the sans-IO cores: a fake clock and an in-memory multicast
network — every datagram of the sender reaches each receiver over its own lossy link, and every
status message or NAK a receiver sends reaches the sender and, overheard on the control group,
the other receivers — with min flow control, randomised NAK delays and NAK suppression."""

import random

import pytest

from aeronio.counters import SystemCounters
from aeronio.driver.data_dispatcher import DataDispatcher
from aeronio.driver.flow_control import MinFlowControl
from aeronio.driver.loss_detector import LossDetector, multicast_nak_delay
from aeronio.protocol.frames import (
    HDR_TYPE_NAK,
    HDR_TYPE_SM,
    NakFrame,
    StatusMessage,
    data_header,
    iter_frames,
    setup_frame,
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
WINDOW = TERM_LENGTH // 2
MTU = 1408
MS = 1_000_000


class Receiver:
    """A receiver of the group: its dispatcher, image (with multicast NAK delays), reader."""

    def __init__(self, tmp_path, index: int, rng: random.Random, loss: float, send_control):
        self.index = index
        self.system = {c: Slot() for c in SystemCounters}
        self.link = LossyNetwork(rng, loss, 0.02, 0.05)  # sender -> this receiver
        self.tmp_path = tmp_path
        self.image = self.reader = self.sub_position = None
        self.received: list = []
        self.dispatcher = DataDispatcher(
            100 + index, self.system, self._on_setup, send_control, hears_naks=True
        )
        self.dispatcher.add_subscription(10)
        self._rng = rng

    def _on_setup(self, setup, source, now_ns):
        self.image, self.reader, self.sub_position = image_from_setup(
            self.tmp_path / f"image-{self.index}.log",
            setup,
            receiver_id=100 + self.index,
            system=self.system,
            now_ns=now_ns,
        )
        self.image.loss = LossDetector(delay=multicast_nak_delay(rng=self._rng))
        return self.image


class Group:
    def __init__(self, tmp_path, seed: int, losses: list[float]):
        self.rng = random.Random(seed)
        self.system = {c: Slot() for c in SystemCounters}
        publisher = Publisher(
            tmp_path / "pub.log",
            TERM_LENGTH,
            MTU,
            self.rng.randint(-(2**31), 2**31 - 1),
            self.system,
            flow_control=MinFlowControl(min_group_size=len(losses)),
            receivers=Slot(),
        )
        self.publisher, self.log, self.pub_limit = publisher, publisher.log, publisher.pub_limit
        self.sender = publisher.sender
        self.control = LossyNetwork(self.rng, 0.05, 0.02, 0.05)  # receivers -> control group
        self.receivers = [
            Receiver(tmp_path, i, self.rng, loss, self._control_from(i))
            for i, loss in enumerate(losses)
        ]
        self.now = 0
        self.sent = 0

    def _control_from(self, index: int):
        return lambda frame, destination: self.control.send(bytes([index]) + bytes(frame))

    def step(self, total: int) -> None:
        slowest = min((r.sub_position.get() for r in self.receivers if r.image), default=None)
        if self.sender.is_connected:
            self.pub_limit.set(self.sender.sender_position.get() + TERM_LENGTH // 2)
        self.sent = self.publisher.offer(self.sent, total, total)
        limit = self.sender.sender_limit.get()
        if slowest is not None and len([r for r in self.receivers if r.image]) == 3:
            assert limit <= slowest + WINDOW, "min flow control let the sender pass the slowest"
        for datagram in self.publisher.datagrams(self.now):
            for receiver in self.receivers:
                receiver.link.send(datagram)
        for receiver in self.receivers:
            for datagram in receiver.link.deliver():
                deliver(receiver.dispatcher, datagram, ("10.0.0.1", 40456), self.now)
            if receiver.image is not None:
                for frame in receiver.image.do_work(self.now):
                    receiver.dispatcher.send_control(frame, None)
                receiver.reader.poll_messages(receiver.received, 1000)
        for tagged in self.control.deliver():  # the control group: the sender and every receiver
            origin, datagram = tagged[0], tagged[1:]
            for ref in iter_frames(datagram):
                if ref.type == HDR_TYPE_SM:
                    self.sender.on_status_message(
                        StatusMessage.decode(datagram, ref.offset), self.now
                    )
                elif ref.type == HDR_TYPE_NAK:
                    self.sender.on_nak(NakFrame.decode(datagram, ref.offset), self.now)
            for receiver in self.receivers:
                if receiver.index != origin:
                    deliver(receiver.dispatcher, datagram, ("10.0.0.9", 40456), self.now)
        self.sender.check_receiver_liveness(self.now)
        self.now += MS


@pytest.mark.slow
def test_three_receivers_under_loss_each_get_everything_and_suppress_duplicate_naks(tmp_path):
    total = 20_000
    group = Group(tmp_path, 11, losses=[0.0, 0.05, 0.1])
    for _ in range(200_000):
        group.step(total)
        if all(len(r.received) == total for r in group.receivers):
            break
    for receiver in group.receivers:
        assert len(receiver.received) == total, f"receiver {receiver.index}"
        for i, msg in enumerate(receiver.received):
            assert msg.data == message(i), f"receiver {receiver.index}: message {i} differs"
    lossy = [r.system for r in group.receivers[1:]]
    assert all(s[SystemCounters.NAK_MESSAGES_SENT].get() > 0 for s in lossy)
    assert sum(s[SystemCounters.NAKS_SUPPRESSED].get() for s in lossy) > 0
    assert group.system[SystemCounters.RETRANSMITS_SENT].get() > 0
    assert group.sender.receivers.get() == 3
    assert group.sender.sender_position.get() >> 16 >= 10, "the stream must cross many terms"


def test_the_publication_is_connected_only_once_the_group_minimum_answered(tmp_path):
    group = Group(tmp_path, 12, losses=[0.0, 0.0, 0.0])
    answering = group.receivers[:2]
    group.receivers = answering  # the third is not there yet
    for _ in range(300):
        group.step(0)
    assert group.sender.receivers.get() == 2
    assert not group.sender.is_connected and not group.log.is_connected
    group.receivers = answering + [Receiver(tmp_path, 2, group.rng, 0.0, group._control_from(2))]
    for _ in range(300):
        group.step(0)
        if group.sender.is_connected:
            break
    assert group.sender.is_connected and group.log.is_connected
    assert group.sender.receivers.get() == 3


def test_multicast_nak_delays_are_bounded_and_mostly_late():
    draw = multicast_nak_delay(10 * MS, 10, random.Random(1))
    delays = [draw() for _ in range(10_000)]
    assert 0 <= min(delays) and max(delays) < 10 * MS
    early = sum(d < 2 * MS for d in delays) / len(delays)
    late = sum(d >= 8 * MS for d in delays) / len(delays)
    assert early < 0.05 < 0.3 < late  # few receivers of a group NAK early


def test_a_nak_heard_for_the_open_gap_holds_this_receivers_nak_back():
    loss = LossDetector(delay_ns=5 * MS, retry_ns=60 * MS)
    gap = (7, 4096, 1024)
    assert loss.on_gap(gap, 0) is None  # waits its delay
    assert not loss.on_nak_heard(7, 8192, 1024, MS)  # another range: no effect
    assert not loss.on_nak_heard(8, 4096, 1024, MS)  # another term: no effect
    assert loss.on_nak_heard(7, 0, 8192, 2 * MS)  # covers the gap's start: suppressed
    assert loss.on_gap(gap, 5 * MS) is None
    assert loss.on_gap(gap, 61 * MS) is None
    assert loss.on_gap(gap, 62 * MS) == gap  # the retransmission never came: NAK after all
    assert loss.on_gap(None, 63 * MS) is None
    assert not loss.on_nak_heard(7, 0, 8192, 64 * MS)  # no gap open


def test_an_image_takes_its_own_nak_looped_back_for_its_own(tmp_path):
    """Its NAKs come back to it from the control group: the same as the last it sent is not
    another receiver's, and suppresses nothing; another receiver's does."""
    system = {c: Slot() for c in SystemCounters}
    setup = setup_frame(
        session_id=1, stream_id=10, initial_term_id=0, term_length=TERM_LENGTH, mtu=MTU
    )
    image, _, _ = image_from_setup(
        tmp_path / "image.log", setup, receiver_id=1, system=system, now_ns=0
    )
    frame = data_header(
        frame_length=64, term_offset=1024, session_id=1, stream_id=10, term_id=0
    ).encode() + bytes(32)
    assert image.rebuilder.insert(frame, 0)  # [0, 1024) is missing
    naks = [f for f in image.do_work(0) if f[6] == HDR_TYPE_NAK]
    nak = NakFrame.decode(naks[0])
    assert (nak.term_id, nak.term_offset, nak.length) == (0, 0, 1024)
    image.on_nak_heard(0, 0, 1024, MS)  # its own, looped back
    assert system[SystemCounters.NAKS_SUPPRESSED].get() == 0
    image.on_nak_heard(0, 0, 2048, MS)  # another receiver's, covering the gap
    assert system[SystemCounters.NAKS_SUPPRESSED].get() == 1
