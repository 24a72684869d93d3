"""DataPath: the driver's data work in one C call per duty cycle (data packets received and
rebuilt into images, new data of network publications sent from their logs) and, with the
conductor's DutySchedule fed as the conductor feeds it, whether the conductor's Python duty
cycle is due, over real loopback sockets, with changes made by real threads and real
processes."""

import asyncio
import select
import struct
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from aeronio import _core
from aeronio._core import BOOKKEEPING_BACKLOG as BACKLOG
from aeronio._core import BOOKKEEPING_IDLE_CYCLES as IDLE_CYCLES
from aeronio._core import AtomicBuffer, DatagramReceiver, DataPath, Doorbell, DutySchedule
from aeronio.concurrent.ring_buffer import TRAILER_LENGTH as RING_TRAILER_LENGTH
from aeronio.concurrent.ring_buffer import ManyToOneRingBuffer
from aeronio.counters import SystemCounters
from aeronio.driver.channel_endpoints import REPEAT_MEMORY_CAPACITY, SM_REPEAT_WINDOW_NS
from aeronio.driver.receiver_state import SM_TIMEOUT_NS
from aeronio.driver.sender_state import HEARTBEAT_TIMEOUT_NS
from aeronio.driver.to_driver_commands import ToDriverCommands
from aeronio.logbuffer import descriptor as d
from aeronio.protocol import control as p
from aeronio.protocol.frames import HDR_TYPE_PAD, SM_SETUP_FLAG, setup_frame, status_message
from tests.driver import test_udp_batch_io as batch
from tests.driver.test_udp_batch_io import (
    INITIAL_TERM_ID,
    MTU,
    SESSION,
    STREAM,
    TERM,
    VALID,
    T,
    at,
    new_log,
)
from tests.support.procs import ROOT, wait_until
from tests.support.udp_harness import Slot, image_from_setup

udp = batch.udp  # the fixture: bound loopback sockets with a large receive buffer
# Bookkeeping is due once the watched positions moved BACKLOG bytes in all, or after
# IDLE_CYCLES duty cycles in a row without data.
NEVER = 1 << 62  # no deadline, no timer: only what the DataPath saw makes the conductor due
MS, S = 1_000_000, 1_000_000_000


class Scheduled:
    """A DataPath (made of DataPath's arguments) telling a DutySchedule that has no deadline
    what each do_work saw, as in the conductor: `conductor_due` (whether the last do_work makes
    the full duty cycle run), `pending` (bookkeeping), `bookkept()` (the full duty cycle ran);
    the rest is the DataPath's."""

    def __init__(self, *args, **kwargs):
        self.schedule = DutySchedule(NEVER)
        self.bookkept()
        self.data_path = DataPath(*args, **kwargs, schedule=self.schedule)

    @property
    def conductor_due(self) -> bool:
        return self.schedule.due

    @property
    def pending(self) -> bool:
        return self.schedule.pending

    def bookkept(self) -> None:
        self.schedule.ran(0, ticked=True, busy=False, deadlines_ns=[], data_path_deadline_ns=NEVER)

    def __getattr__(self, name: str):  # the rest is the DataPath's
        return getattr(self.data_path, name)


def idle_until_due(path: Scheduled) -> int | None:
    """How many idle do_work calls (at most IDLE_CYCLES + 1) make the conductor due."""
    for calls in range(1, IDLE_CYCLES + 2):
        assert path.do_work(0) == 0
        if path.conductor_due:
            return calls
    return None


def settled(**parts) -> Scheduled:
    """A DataPath of `parts`, scheduled: new, nothing pending (what moved before it was made is
    not its bookkeeping), nor due, nor after more than IDLE_CYCLES quiet duty cycles."""
    names = ("controls", "receivers", "senders", "counters", "logs")
    path = Scheduled(**{name: list(parts.get(name, ())) for name in names})
    assert not (path.pending or path.conductor_due)
    assert idle_until_due(path) is None and not path.pending
    return path


class Elsewhere:
    """Python source (its arguments in `argv`) run in another thread or process."""

    def __init__(self, where: str, code: str, *args):
        self.args, self.failed, self.thread, self.child = [str(a) for a in args], [], None, None
        if where == "thread":
            self.thread = threading.Thread(target=self._run, args=(code,))
            self.thread.start()
        else:
            source = f"import sys; argv = sys.argv[1:]; sys.path.insert(0, {ROOT!r})\n{code}"
            command = [sys.executable, "-c", source, *self.args]
            self.child = subprocess.Popen(command, stderr=subprocess.PIPE)

    def _run(self, code: str) -> None:
        try:
            exec(code, {"argv": self.args})
        except BaseException as e:
            self.failed.append(e)

    def running(self) -> bool:
        return self.thread.is_alive() if self.thread else self.child.poll() is None

    def join(self) -> None:
        if self.thread:
            self.thread.join(60)
            assert not self.thread.is_alive() and not self.failed, self.failed
        else:
            assert self.child.wait(60) == 0, self.child.stderr.read().decode()


def append(appender, message: bytes) -> int:
    while (result := appender.try_offer(message)) == _core.ADMIN_ACTION:
        pass
    return result


# -- bookkeeping due: counters, logs, control sockets -----------------------------------------

MOVERS = {  # argv: a mapped counters file, a publication's log, a control socket's address
    "counter": """
import numpy as np
from aeronio._core import AtomicBuffer
buffer = AtomicBuffer(np.memmap(argv[0], dtype=np.uint8, mode="r+", shape=(4096,)))
buffer.put_int64_ordered(384, 7)
""",
    "log": """
from tests.support.procs import ROOT, wait_until
from tests.support.udp_harness import Slot
from aeronio._core import LogAppender
from aeronio.logbuffer.log_buffers import LogBuffers
log, limit = LogBuffers.open(argv[1]), Slot(1 << 40)
assert LogAppender(log.mapped, limit.array, 0, False).try_offer(b"x" * 100) == 160
""",
    "control": """
import socket
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
    sock.sendto(b"x", (argv[2], int(argv[3])))
""",
}


@pytest.mark.parametrize("where", ["thread", "process"])
@pytest.mark.parametrize("what", MOVERS)
def test_what_moves_elsewhere_makes_the_conductor_due(tmp_path, udp, what, where):
    """A subscriber position (a mapped file), a producer position or input on a control socket
    moved by another thread or process is seen by the next do_work: a position once, as pending
    bookkeeping (due at once after a quiet spell; the same value again moves nothing), input
    (read, and not a repeated status message) as due at once until Python takes it
    (slow_datagrams: that socket's; None for a socket the DataPath does not read)."""
    mapped = np.memmap(tmp_path / "c", dtype=np.uint8, mode="w+", shape=(4096,))
    words = [SimpleNamespace(buffer=AtomicBuffer(mapped), offset=128 * i) for i in range(4)]
    log = new_log(tmp_path / "log", INITIAL_TERM_ID, 0)
    a, b = udp(), udp()
    controls = [(s.fileno(), DatagramReceiver(32, 2048), control_receiver()) for s in (a, b)]
    path = settled(controls=controls, counters=words, logs=[log.mapped])
    assert path.slow_datagrams(DatagramReceiver(32, 2048)) is None
    writer = Elsewhere(where, MOVERS[what], tmp_path / "c", log.path, *a.getsockname())
    deadline = time.monotonic() + 10
    while not (path.pending or path.conductor_due):
        assert path.do_work(0) == 0 and time.monotonic() < deadline, "the change was never seen"
    writer.join()
    assert (path.pending, path.conductor_due) == (what != "control", True)
    counter = words[3].buffer.get_int64_volatile(384)
    expected = {"counter": (7, 0), "log": (0, 160), "control": (0, 0)}
    assert (counter, log.producer_position) == expected[what]
    assert bytes(log.term(0)[32:132]) == (b"x" * 100 if what == "log" else bytes(100))
    assert path.slow_datagrams(controls[1][1]) == []
    path.bookkept()
    if what == "control":
        assert path.do_work(0) == 0 and path.conductor_due  # not taken yet
        ((datagram, _),) = path.slow_datagrams(controls[0][1])
        assert bytes(datagram) == b"x"
        assert path.slow_datagrams(controls[0][1]) == []  # taken once
        path.bookkept()
    words[3].buffer.put_int64_ordered(384, counter)  # the same value again
    assert path.do_work(0) == 0 and not (path.pending or path.conductor_due)


def test_logs_must_be_mapped_logs():
    with pytest.raises(TypeError, match="MappedLog"):
        DataPath([], [], [], [], [object()])


# -- receiving --------------------------------------------------------------------------------


class Receiving:
    """An image behind a data socket, a DataPath receiving on it (watching the image's hwm, as
    the driver does, and `counters`), a peer socket sending to it, a sender the image has
    heard already (`introduce`)."""

    def __init__(self, path, udp, limit_position: int = TERM, counters=()):
        self.image = batch.Image(path, limit_position)
        self.data, self.peer = udp(), udp()
        self.parts = (self.data.fileno(), DatagramReceiver(64, 65536), self.image.router)
        self.path = settled(receivers=[self.parts], counters=[self.image.hwm, *counters])
        assert self.introduce(limit_position) == [(self.parts[1], self.peer.getsockname())]

    def introduce(self, limit_position: int) -> list[tuple]:
        """A data packet from the peer beyond the image's window (dropped: nothing written; the
        over-run and bytes it counts set back): a sender new to the image makes the conductor
        due at once (a known one does not); taken as the conductor takes them, the new senders;
        then nothing is due."""
        beyond = batch.packet(T, [b"A"], term_id=INITIAL_TERM_ID + limit_position // TERM + 1)
        self.peer.sendto(beyond, self.data.getsockname())
        assert select.select([self.data], [], [], 10)[0]
        before = self.image.snapshot()
        assert self.path.do_work(0) == 1 and not self.path.pending
        new = self.image.router.sources_changed
        assert self.path.conductor_due == new
        assert (self.image.over_runs.get(), self.image.bytes_received.get()) == (1, len(beyond))
        self.image.over_runs.set(0)
        self.image.bytes_received.set(0)
        batch.assert_unchanged(self.image, before)
        senders = self.image.rebuilder.take_new_sources()
        self.image.router.sources_changed = False
        self.path.bookkept()
        assert self.path.do_work(0) == 0 and not self.path.conductor_due
        assert self.image.rebuilder.take_new_sources() == []
        return senders

    def exchange(self, *datagrams: bytes) -> list[tuple[int, tuple, list]]:
        """Send `datagrams` and do_work until all were received: per do_work that received any,
        (how many, (pending, conductor_due), the datagrams left for Python as (bytes, source))."""
        for datagram in datagrams:
            self.peer.sendto(datagram, self.data.getsockname())
        calls, got, deadline = [], 0, time.monotonic() + 10
        while got < len(datagrams):
            assert time.monotonic() < deadline, f"{got} of {len(datagrams)} datagrams arrived"
            if received := self.path.do_work(0):
                slow = self.path.slow_datagrams(self.parts[1])
                assert all(isinstance(view, memoryview) for view, _ in slow)
                state = (self.path.pending, self.path.conductor_due)
                calls.append((received, state, [(bytes(v), s) for v, s in slow]))
                assert self.path.slow_datagrams(self.parts[1]) == []  # taken once
                got += received
        assert got == len(datagrams)
        return calls


def test_data_packets_are_rebuilt_and_the_rest_is_left_for_python(tmp_path, udp):
    """DATA frames received go byte for byte to the image's term (the hwm moved less than
    BACKLOG: bookkeeping pending; due at once for the first, which lands past the hwm: a gap
    before it, NAKed at once; not for those that follow it); a SETUP, an EOS heartbeat and a
    packet of an unknown session are left, due at once (nothing pending), returned once with
    their source."""
    r = Receiving(tmp_path / "image.log", udp)
    data = [VALID, at(T + 224), at(T + 448, [b"x" * 7])]
    assert T + 512 < BACKLOG
    assert [(state, slow) for _, state, slow in r.exchange(data[0])] == [((True, True), [])]
    r.path.bookkept()
    calls, image = r.exchange(*data[1:]), r.image
    assert [(state, slow) for _, state, slow in calls] == [((True, False), [])] * len(calls)
    assert image.term() == bytes(T) + b"".join(data) + bytes(TERM - T - 512)
    assert (image.hwm.get(), image.bytes_received.get(), image.invalid.get()) == (T + 512, 512, 0)
    r.path.bookkept()
    before = r.image.snapshot()
    eos = batch.heartbeat(T + 512, eos=True)
    others = [batch.NOT_ROUTED["SETUP"], eos, batch.NOT_ROUTED["unknown session"]]
    calls = r.exchange(*others)
    assert [state for _, state, _ in calls] == [(False, True)] * len(calls)
    source = r.peer.getsockname()
    assert [left for _, _, slow in calls for left in slow] == [(o, source) for o in others]
    batch.assert_unchanged(r.image, before)


def test_a_gap_opened_or_filled_makes_the_conductor_due_at_once(tmp_path, udp):
    """Data at the high-water mark is pending bookkeeping, not due (it waits for the backlog,
    idle duty cycles or its delay); data past it opens a gap, due at once, so that Python NAKs
    it in the duty cycle that saw it; the retransmit that fills the gap lands behind the hwm,
    which does not move (nothing pending), and is due at once too: the receiver position moves
    past it, and a gap beyond it is NAKed at once. Once seen, a gap is due no more (its NAK's
    retries are the receiver's deadlines)."""
    r = Receiving(tmp_path / "image.log", udp)
    for data, state in ((at(0), (True, False)), (at(448), (True, True)), (at(224), (False, True))):
        assert [seen for _, seen, _ in r.exchange(data)] == [state]
        r.path.bookkept()
        assert r.path.do_work(0) == 0 and not r.path.conductor_due
    assert r.image.hwm.get() == 672 and r.image.term()[:672] == at(0) + at(224) + at(448)


def test_an_images_heartbeats_are_housekeeping(tmp_path, udp):
    """A heartbeat of a known image is taken in C and is no work: nothing left for Python,
    nothing due; one ahead of the high-water mark (a lost tail) moves it, which is
    bookkeeping, and opens a gap: due at once (its NAK)."""
    r = Receiving(tmp_path / "image.log", udp)
    for term_offset, ahead in ((0, False), (T + 64, True)):
        r.peer.sendto(batch.heartbeat(term_offset), r.data.getsockname())
        assert select.select([r.data], [], [], 10)[0]
        assert r.path.do_work(5) == 0 and r.path.slow_datagrams(r.parts[1]) == []
        assert (r.path.pending, r.path.conductor_due) == (ahead, ahead)
        assert r.image.rebuilder.time_of_last_packet_ns == 5
    assert r.image.hwm.get() == T + 64 and r.image.heartbeats.get() == 2


def test_heartbeats_in_one_gro_run_are_no_work(tmp_path, udp):
    """Heartbeats the kernel hands over as one run (GRO: one datagram, several segments) are
    each taken, and are still no work; a run of data packets is work, one per packet."""
    batch.require(batch.UDP_SEGMENT, 0)
    batch.require(batch.UDP_GRO, 1)
    image, sender, data = batch.Image(tmp_path / "image.log"), udp(), udp(gro=True)
    parts = (data.fileno(), DatagramReceiver(64, 65536), image.router)
    path = settled(receivers=[parts])
    beat = batch.heartbeat(0)
    for datagrams, work in (([beat] * 3, 0), ([VALID, at(T + 224)], 2)):
        assert batch.send(sender, datagrams, data.getsockname(), True) == 0
        assert select.select([data], [], [], 10)[0]
        assert path.do_work(5) == work and path.slow_datagrams(parts[1]) == []
    assert image.heartbeats.get() == 3 and image.hwm.get() == T + 448


def test_leftovers_are_their_receivers_and_hold_their_socket_until_taken(tmp_path, udp):
    """What the router left (a SETUP) is taken with its socket's receiver (another gets []).
    Until then that socket is not read again: a data packet sent to it stays there, the
    leftover's view stays intact, and every do_work is due, bookkept or not. Once taken, the
    next do_work reads and rebuilds the packet (pending; due, as it lands past the hwm)."""
    r = Receiving(tmp_path / "image.log", udp)
    setup, receiver = batch.NOT_ROUTED["SETUP"], r.parts[1]
    for datagram, read in ((setup, 1), (VALID, 0)):
        r.peer.sendto(datagram, r.data.getsockname())
        assert select.select([r.data], [], [], 10)[0]
        assert r.path.do_work(0) == read and r.path.conductor_due
    for _ in range(2):
        r.path.bookkept()
        assert r.path.do_work(0) == 0 and r.path.conductor_due
    assert select.select([r.data], [], [], 0)[0] and r.image.hwm.get() == 0  # not read
    assert r.path.slow_datagrams(DatagramReceiver(64, 65536)) is None  # not its socket
    ((view, source),) = r.path.slow_datagrams(receiver)
    assert (bytes(view), source) == (setup, r.peer.getsockname())
    assert r.path.slow_datagrams(receiver) == []
    assert r.path.do_work(0) == 1 and (r.path.pending, r.path.conductor_due) == (True, True)
    assert r.image.hwm.get() == T + len(VALID) and r.image.term()[T : T + len(VALID)] == VALID


# -- when bookkeeping is due ----------------------------------------------------------------


def test_bookkeeping_is_due_after_idle_cycles_until_bookkept():
    """A position moved after a new DataPath was made is pending from the do_work that sees it,
    due after IDLE_CYCLES idle duty cycles (not one earlier) until bookkept(); a position moved
    after them (bookkept or not) is due at once: a lone message waits for nothing; quiet,
    nothing is."""
    subscriber = Slot(5)
    path = Scheduled([], [], [], [subscriber], [])
    subscriber.set(6)
    assert not (path.pending or path.conductor_due)
    assert idle_until_due(path) == IDLE_CYCLES
    assert path.do_work(0) == 0 and path.pending and path.conductor_due
    path.bookkept()
    assert not (path.pending or path.conductor_due)
    subscriber.set(-1)
    assert path.do_work(0) == 0 and path.pending and path.conductor_due
    path.bookkept()
    assert idle_until_due(path) is None and not path.pending


def test_commands_in_the_to_driver_ring_buffer_make_the_conductor_due():
    """A record written and not yet read (the ring buffer's tail past its head) makes the
    conductor due at the do_work that sees it, and every one after until it is read: a command
    waits for no bookkeeping."""
    ring = ManyToOneRingBuffer(bytearray(1024 + RING_TRAILER_LENGTH))
    path = Scheduled([], [], [], [], [], commands=ring.positions)
    assert path.do_work(0) == 0 and not path.conductor_due
    assert ring.write(1, b"command")
    for _ in range(3):
        path.do_work(0)
        assert path.conductor_due and not path.pending
        path.bookkept()
    assert ring.read(lambda *record: None, 10) == 1
    assert path.do_work(0) == 0 and not path.conductor_due


def test_records_the_conductor_could_not_read_are_not_urgent_until_the_head_record_changes():
    """A claim whose length is not stored (or a length never claimed): the conductor's read
    finds records waiting and reads none (ToDriverCommands.stuck). Until the length word at the
    head changes they do not make the conductor due, records written behind them neither (else
    a dead producer or a hostile length kept it running until unblocked); the DataPath that
    replaces this one knows it too. Once the claim is committed, due, and read."""
    ring = ManyToOneRingBuffer(bytearray(1024 + RING_TRAILER_LENGTH))
    commands = ToDriverCommands(ring, lambda command: None, lambda *bad: None, NEVER)
    path = Scheduled([], [], [], [], [], commands=ring.positions)
    atomic, tail_at = ring.positions[:2]
    assert atomic.compare_and_set_int64(tail_at, 0, 64)
    atomic.put_int32_ordered(0, -64)  # claimed, not committed
    path.do_work(0)
    assert path.conductor_due and commands.pending()
    path.bookkept()
    assert commands.read() == 0 and commands.stuck == (0, 0, -64)
    assert not commands.pending()
    path.data_path.stuck_commands(commands.stuck)
    assert ring.write(1, b"behind it")
    path.do_work(0)
    assert not path.conductor_due
    replaced = Scheduled([], [], [], [], [], previous=path.data_path, commands=ring.positions)
    replaced.do_work(0)
    assert not replaced.conductor_due
    atomic.put_int32(4, p.CLIENT_KEEPALIVE)
    atomic.put_int32_ordered(0, 64)  # committed
    replaced.do_work(0)
    assert replaced.conductor_due and commands.pending()
    assert commands.read() == 2 and commands.stuck is None
    replaced.data_path.stuck_commands(commands.stuck)
    replaced.bookkept()
    replaced.do_work(0)
    assert not replaced.conductor_due and not commands.pending()


@pytest.mark.parametrize("short", [0, 1], ids=["backlog", "one byte short"])
def test_a_data_path_sees_what_moved_since_the_one_it_replaced(tmp_path, short):
    """A position the replaced DataPath (`previous`) watched starts from what it last saw: a
    counter (the same memory, here through another buffer object) and a log moved after its
    last do_work are bookkeeping on the new one's first do_work, counted once with nothing
    else (BACKLOG bytes in all make it due at once, one short do not): not a move the old one
    saw, nor one of a counter only the new one watches. Made, it is not pending."""
    kept, dropped, added, limit = Slot(), Slot(), Slot(), Slot(1 << 40)
    log = new_log(tmp_path / "log", INITIAL_TERM_ID, 0)
    appender = _core.LogAppender(log.mapped, limit.array, 0, False)
    old = settled(counters=[kept, dropped], logs=[log.mapped])
    kept.increment(1000)
    assert old.do_work(0) == 0 and old.pending and old.conductor_due
    old.bookkept()
    assert append(appender, b"x" * 100) == 160
    kept.increment(BACKLOG - 160 - short)
    dropped.increment(BACKLOG)
    added.increment(BACKLOG)
    same = SimpleNamespace(buffer=AtomicBuffer(kept.array), offset=0)
    new = Scheduled([], [], [], [same, added], [log.mapped], previous=old.data_path)
    assert not (new.pending or new.conductor_due)
    assert new.do_work(0) == 0 and (new.pending, new.conductor_due) == (True, short == 0)
    unseen = [
        Scheduled([], [], [], [added], [], previous=old.data_path),
        Scheduled([], [], [], [kept], []),
    ]
    for path in unseen:  # a counter only the new one watches; one without `previous`
        assert path.do_work(0) == 0 and not path.pending


class Moving:
    """A settled DataPath whose `cycle` does one datagram of data work that moves a watched
    position STEP bytes (the image's hwm, or the sender's snd-pos: watched as in the driver),
    and moves a watched subscriber position along; returns (pending, conductor_due)."""

    STEP = len(VALID)

    def __init__(self, direction: str, tmp_path, udp):
        self.subscriber, self.pub = Slot(), None
        if direction == "receiving":
            self.r = Receiving(tmp_path / "image.log", udp, counters=[self.subscriber])
            self.path, self.position = self.r.path, self.r.image.hwm
        else:
            self.pub = Publication(tmp_path / "pub.log", udp(), [udp()])
            self.pub.counters.limit.set(TERM)
            self.position = self.pub.counters.position
            self.path = settled(senders=[self.pub.pair], counters=[self.position, self.subscriber])
            self.pub.sender.allow_new_data(True)

    def cycle(self, subscriber_moves: int = 0) -> tuple[bool, bool]:
        before = self.position.get()
        if self.pub:
            assert append(self.pub.appender, b"m" * (self.STEP - 32)) > 0
        else:
            self.r.peer.sendto(at(before), self.r.data.getsockname())  # the next frames
            assert select.select([self.r.data], [], [], 10)[0]
        self.subscriber.increment(subscriber_moves)
        assert self.path.do_work(0) == 1 and self.position.get() == before + self.STEP
        return self.path.pending, self.path.conductor_due


@pytest.mark.parametrize("direction", ["receiving", "sending"])
def test_while_data_moves_bookkeeping_waits_for_the_backlog(tmp_path, udp, direction):
    """While each do_work moves data, positions moved less than BACKLOG bytes in all leave
    bookkeeping pending, not due, until data stops for IDLE_CYCLES duty cycles; BACKLOG bytes (a
    move back counts as much as one forward) make it due on the do_work that sees them."""
    m = Moving(direction, tmp_path, udp)
    assert (IDLE_CYCLES + 2) * m.STEP + 100 < BACKLOG
    states = [m.cycle(100)] + [m.cycle() for _ in range(IDLE_CYCLES + 1)]
    assert states == [(True, False)] * len(states)
    assert idle_until_due(m.path) == IDLE_CYCLES
    for sign in (1, -1):
        m.path.bookkept()
        assert m.cycle(sign * (BACKLOG - 1 - m.STEP)) == (True, False)
        m.subscriber.increment(sign)  # the last byte, seen by an idle do_work
        assert m.path.do_work(0) == 0 and m.path.conductor_due
    m.path.bookkept()
    assert m.cycle(BACKLOG // 2) == (True, False)
    assert m.cycle(-BACKLOG // 2) == (True, True)  # back where it was: BACKLOG + 2 * STEP in all


# -- sending ----------------------------------------------------------------------------------


def control_receiver() -> _core.ControlReceiver:
    return _core.ControlReceiver(Slot(), SM_REPEAT_WINDOW_NS, REPEAT_MEMORY_CAPACITY)


def publication_sender(log) -> tuple[_core.PublicationSender, SimpleNamespace]:
    """A sender of `log` (new data not allowed, last data and heartbeat at 0: the next heartbeat
    is due at HEARTBEAT_TIMEOUT_NS) and its counters, all 0."""
    names = ("position", "limit", "bpe", "limits", "sent", "heartbeats")
    c = SimpleNamespace(**{k: Slot() for k in names})
    terms = [memoryview(log.term(i)) for i in range(d.PARTITION_COUNT)]
    counters = [getattr(c, name) for name in names]
    return _core.PublicationSender(
        log.mapped, terms, *counters, SESSION, STREAM, MTU, HEARTBEAT_TIMEOUT_NS,
        HEARTBEAT_TIMEOUT_NS,
    ), c  # fmt: skip


class Publication:
    """A network publication's log, appender and sender, sending from `sock` to `sinks`."""

    def __init__(self, path, sock, sinks, gso: bool = False):
        self.log = new_log(path, INITIAL_TERM_ID, 0)
        self.pub_limit, self.short_sends = Slot(2 * TERM), Slot()
        self.appender = _core.LogAppender(self.log.mapped, self.pub_limit.array, 0, False)
        self.sender, self.counters = publication_sender(self.log)
        self.channel = _core.DatagramSender(sock.fileno(), self.short_sends, gso)
        self.channel.set_destinations([(sink.getsockname(), 65507) for sink in sinks])
        self.pair = (self.sender, self.channel)

    def offer(self, sizes) -> None:
        for i, size in enumerate(sizes):
            assert append(self.appender, bytes([i % 251]) * size) > 0


def expected_datagrams(log, start: int, end: int) -> list[bytes]:
    """The datagrams of [start, end) of `log` by Aeron's rules: whole frames, at most an MTU,
    never across a term end, a PAD as its 32-byte header, ending its datagram."""
    out = []
    while start < end:
        term = bytes(log.term(d.index_by_position(start, TERM)))
        offset = start & (TERM - 1)
        budget, length, padding = min(MTU, end - start, TERM - offset), 0, 0
        while length < budget:
            frame_length, frame_type = struct.unpack_from("<i2xH", term, offset + length)
            size = 32 if frame_type == HDR_TYPE_PAD else d.align(frame_length)
            if length + size > budget:
                break
            length += size
            if frame_type == HDR_TYPE_PAD:
                padding = d.align(frame_length) - 32
                break
        assert length > 0
        out.append(term[offset : offset + length])
        start += length + padding
    return out


def arrivals(sink, count: int) -> list[bytes]:
    return batch.receive(sink, DatagramReceiver(64, 65536), count)[0]


@pytest.mark.parametrize("destinations", [1, 2], ids=["unicast", "mdc"])
@pytest.mark.parametrize("gso", [False, True], ids=["plain", "gso"])
def test_an_allowed_sender_sends_new_frames_to_every_destination(tmp_path, udp, destinations, gso):
    """New data not allowed: nothing sent. Allowed, below snd-lmt: the appended frames, as in
    the log, to each destination; snd-pos at the end, bytes sent counted once, the time of the
    last data now. `collect` (another sender of the log, allowed) gives the same datagrams, as
    views of the log."""
    if gso:
        batch.require(batch.UDP_SEGMENT, 0)
    sinks = [udp() for _ in range(destinations)]
    pub = Publication(tmp_path / "pub.log", udp(), sinks, gso)
    path = settled(senders=[pub.pair], logs=[pub.log.mapped])
    pub.offer([0, 1, 100, 1000, 1376, 1377, 3000, *[40] * 9, 500])
    end = pub.log.producer_position
    expected = expected_datagrams(pub.log, 0, end)
    pub.counters.limit.set(end + TERM)
    assert path.do_work(5) == 0 and path.pending  # the log moved; nothing sent
    for sink in sinks:
        batch.assert_nothing_more(sink)
    assert pub.counters.position.get() == 0 and pub.sender.time_of_last_data_ns == 0

    twin, counters = publication_sender(pub.log)
    counters.limit.set(end)
    out = []
    assert twin.collect(out, 1) == 0 == len(out)  # new data not allowed: nothing
    twin.allow_new_data(True)
    assert twin.collect(out, 1) == len(expected) == len(out)
    assert [bytes(view) for view in out] == expected
    assert all(np.shares_memory(np.asarray(view), pub.log.array) for view in out)
    assert counters.position.get() == end and counters.sent.get() == sum(map(len, expected))

    pub.sender.allow_new_data(True)
    assert path.do_work(1234) == len(expected)
    assert all(arrivals(sink, len(expected)) == expected for sink in sinks)
    assert pub.counters.position.get() == end and pub.sender.time_of_last_data_ns == 1234
    assert pub.counters.sent.get() == sum(map(len, expected)) and pub.short_sends.get() == 0
    assert path.do_work(2000) == 0 and pub.sender.time_of_last_data_ns == 1234


def test_an_allowed_sender_heartbeats_after_a_quiet_spell(tmp_path, udp):
    """A sender whose new data is allowed and that sends none for HEARTBEAT_TIMEOUT_NS sends a
    heartbeat to every destination (a DATA header of length 0 at snd-pos, EOS-flagged once
    snd-pos reached the end of stream): housekeeping, not work, counted with its bytes; the
    next is due a timeout later, or a timeout after new data. Not allowed (a SETUP or
    retransmit goes first: Python's), none; `deadline_ns` says when the next is due."""
    sinks = [udp(), udp()]
    pub = Publication(tmp_path / "pub.log", udp(), sinks)
    path = settled(senders=[pub.pair])
    hb = HEARTBEAT_TIMEOUT_NS
    assert path.deadline_ns() == 2**63 - 1  # not allowed: not the DataPath's
    assert path.do_work(hb) == 0 and pub.counters.heartbeats.get() == 0
    pub.sender.allow_new_data(True)
    assert path.deadline_ns() == pub.sender.heartbeat_deadline_ns == hb
    assert path.do_work(hb - 1) == 0 and pub.counters.heartbeats.get() == 0
    assert path.do_work(hb) == 0 and pub.counters.heartbeats.get() == 1
    expected = batch.heartbeat(0)
    assert all(arrivals(sink, 1) == [expected] for sink in sinks)
    assert pub.counters.sent.get() == 32 and path.deadline_ns() == 2 * hb
    pub.offer([100])
    pub.counters.limit.set(TERM)
    assert path.do_work(hb + 5) == 1  # new data: the next heartbeat a timeout after it
    assert all(len(arrivals(sink, 1)[0]) == 160 for sink in sinks)
    assert path.deadline_ns() == 2 * hb + 5
    pub.log.mapped.set_end_of_stream_position(160)
    assert path.do_work(2 * hb + 5) == 0 and pub.counters.heartbeats.get() == 2
    eos = batch.heartbeat(160, eos=True)
    assert all(arrivals(sink, 1) == [eos] for sink in sinks)
    assert pub.sender.heartbeat(2 * hb + 6) is None  # sent: not due again yet
    assert pub.sender.heartbeat(3 * hb + 5) == eos and pub.counters.heartbeats.get() == 3
    for sink in sinks:
        batch.assert_nothing_more(sink)


def test_sender_blocked_at_its_limit_counts_flow_control_limits(tmp_path, udp):
    """At snd-lmt with more appended, each do_work sends nothing and counts snd-bpe and the
    flow control limits once; at snd-lmt with nothing more, it counts nothing."""
    sink = udp()
    pub = Publication(tmp_path / "pub.log", udp(), [sink])
    c = pub.counters
    path = settled(senders=[pub.pair])
    pub.sender.allow_new_data(True)
    pub.offer([1376, 1376, 1376])  # three datagrams of one 1408-byte frame
    c.limit.set(1408)
    assert path.do_work(1) == 1 and (c.position.get(), c.bpe.get()) == (1408, 0)
    for blocked in (1, 2):
        assert path.do_work(2) == 0
        assert (c.position.get(), c.bpe.get(), c.limits.get()) == (1408, blocked, blocked)
    c.limit.set(10 * TERM)
    assert path.do_work(3) == 2 and c.position.get() == 3 * 1408
    assert path.do_work(4) == 0 and (c.bpe.get(), c.limits.get()) == (2, 2)
    assert arrivals(sink, 3) == [bytes(pub.log.term(0)[k : k + 1408]) for k in (0, 1408, 2816)]
    assert pub.sender.time_of_last_data_ns == 3


def sm(consumed: int, window: int, **fields) -> bytes:
    """A status message of the test stream: `consumed` bytes consumed (in the initial term)."""
    fields = {"session_id": SESSION, "stream_id": STREAM, "receiver_id": 9, **fields}
    return status_message(
        consumption_term_id=INITIAL_TERM_ID,
        consumption_term_offset=consumed,
        receiver_window=window,
        **fields,
    ).encode()


def test_a_status_message_opens_a_unicast_window_in_the_same_do_work(tmp_path, udp):
    """A sender that follows status messages (unicast flow control) has snd-lmt moved by each
    one its socket reads to its consumption position plus its window, never back, and the
    frames it allows go in the same do_work; the status message is still left for Python (due
    at once). One with the setup flag, of another stream, or to a sender that does not follow
    them (multicast's strategies) moves nothing."""
    receiver = udp()
    sock = udp()
    pub = Publication(tmp_path / "pub.log", sock, [receiver])
    c = pub.counters
    control = (sock.fileno(), DatagramReceiver(32, 2048), control_receiver())
    path = settled(controls=[control], senders=[pub.pair])
    pub.sender.allow_new_data(True)
    pub.sender.follow_status_messages(True)
    pub.offer([1376] * 4)  # four datagrams of one 1408-byte frame
    c.limit.set(1408)
    assert path.do_work(1) == 1 and arrivals(receiver, 1) == [bytes(pub.log.term(0)[:1408])]

    def answer(frame: bytes, now_ns: int) -> int:
        receiver.sendto(frame, sock.getsockname())
        assert select.select([sock], [], [], 10)[0]
        work = path.do_work(now_ns)
        assert path.conductor_due  # Python takes the status message too
        assert [bytes(view) for view, _ in path.slow_datagrams(control[1])] == [frame]
        path.bookkept()
        return work

    for ignored in (
        sm(1408, 2 * 1408, flags=SM_SETUP_FLAG),
        sm(1408, 2 * 1408, session_id=SESSION + 1),
        sm(1408, 2 * 1408, stream_id=STREAM + 1),
    ):
        assert answer(ignored, 2) == 0 and c.limit.get() == 1408
    assert answer(sm(0, 2 * 1408), 3) == 1 and c.limit.get() == 2 * 1408
    assert arrivals(receiver, 1) == [bytes(pub.log.term(0)[1408:2816])]
    assert pub.sender.time_of_last_data_ns == 3 and c.position.get() == 2 * 1408
    assert answer(sm(0, 1408), 4) == 0 and c.limit.get() == 2 * 1408  # never back
    pub.sender.follow_status_messages(False)
    assert answer(sm(1408, 2 * 1408), 5) == 0 and c.limit.get() == 2 * 1408
    pub.sender.follow_status_messages(True)
    assert answer(sm(1408, 2 * 1408, receiver_id=10), 6) == 1 and c.limit.get() == 3 * 1408
    assert arrivals(receiver, 1) == [bytes(pub.log.term(0)[2816:4224])]
    batch.assert_nothing_more(receiver)


def test_a_status_message_out_of_reach_moves_no_unicast_window(tmp_path, udp):
    """The status messages the DataPath follows in C keep the SenderStateMachine's rule: one
    consumed more than half a term past snd-pos (forged, or garbage: a thousand terms ahead)
    or more than a term behind it moves nothing, and Python still takes it (to reject and count
    it); one at either edge moves snd-lmt. The C path used to take them all: a forged one
    moved snd-lmt gigabytes ahead, past any flow control."""
    receiver, sock = udp(), udp()
    pub = Publication(tmp_path / "pub.log", sock, [receiver])
    control = (sock.fileno(), DatagramReceiver(32, 2048), control_receiver())
    path = settled(controls=[control], senders=[pub.pair])
    pub.sender.follow_status_messages(True)
    limit = pub.counters.limit

    def consumed_at(term_id: int, term_offset: int, window: int) -> bytes:
        return status_message(
            session_id=SESSION,
            stream_id=STREAM,
            receiver_id=9,
            consumption_term_id=INITIAL_TERM_ID + term_id,
            consumption_term_offset=term_offset,
            receiver_window=window,
        ).encode()

    def answer(frame: bytes, now_ns: int) -> int:
        receiver.sendto(frame, sock.getsockname())
        assert select.select([sock], [], [], 10)[0]
        path.do_work(now_ns)
        assert [bytes(view) for view, _ in path.slow_datagrams(control[1])] == [frame]
        path.bookkept()
        return limit.get()

    out_of_reach = (
        consumed_at(1000, 0, 0x7FFFFFFF),  # a thousand terms ahead
        consumed_at(0, TERM // 2 + 32, 1408),  # a frame past half a term ahead
        consumed_at(-2, TERM - 32, 3 * TERM),  # a frame more than a term behind
    )
    for now_ns, frame in enumerate(out_of_reach, 1):
        assert answer(frame, now_ns) == 0
    assert answer(consumed_at(0, TERM // 2, 1408), 4) == TERM // 2 + 1408  # the edge ahead
    assert answer(consumed_at(-1, 0, 3 * TERM), 5) == 2 * TERM  # the edge behind


@pytest.mark.parametrize("refuser", [0, 1], ids=["refuser first", "refuser last"])
def test_a_destination_that_refuses_outright_holds_back_no_other(tmp_path, udp, refuser):
    """With two destinations, one the kernel refuses outright (EACCES: broadcast from a socket
    without SO_BROADCAST) lost the datagrams, a short send per do_work: snd-pos moves to the
    end, bytes sent counted once, and the other destination gets every datagram."""
    sink = udp()
    pub = Publication(tmp_path / "pub.log", udp(), [])
    destinations = [(sink.getsockname(), 65507)]
    destinations.insert(refuser, (("255.255.255.255", 9), 65507))
    pub.channel.set_destinations(destinations)
    path = settled(senders=[pub.pair])
    pub.sender.allow_new_data(True)
    pub.offer([100, 1376, 3000, 40])
    end = pub.log.producer_position
    pub.counters.limit.set(end)
    expected = expected_datagrams(pub.log, 0, end)
    assert path.do_work(7) == len(expected) == 5
    assert (pub.counters.position.get(), pub.short_sends.get()) == (end, 1)
    assert pub.counters.sent.get() == sum(map(len, expected))
    assert pub.sender.time_of_last_data_ns == 7
    assert arrivals(sink, len(expected)) == expected
    assert path.do_work(8) == 0 and pub.short_sends.get() == 1


@pytest.mark.parametrize("size,pad_datagram", [(1376, 32), (1000, 1056 + 32)])
def test_pad_is_sent_as_its_header_and_the_next_term_follows(tmp_path, udp, size, pad_datagram):
    """Appends that fill a term leave a PAD: it goes as its 32-byte header, alone or after the
    last frame that fits with it, and the next datagram starts at the next term's start."""
    sink = udp()
    pub = Publication(tmp_path / "pub.log", udp(), [sink])
    path = settled(senders=[pub.pair])
    while pub.log.producer_position <= TERM:
        assert append(pub.appender, b"p" * size) > 0
    end = pub.log.producer_position
    pub.counters.limit.set(end)
    pub.sender.allow_new_data(True)
    sent = [path.do_work(1) for _ in range(2)]  # at most 64 datagrams per do_work
    assert pub.counters.position.get() == end and sent[1] == 0
    received = arrivals(sink, sent[0])
    assert received == expected_datagrams(pub.log, 0, end)
    (k,) = [k for k, datagram in enumerate(received) if batch.datagram_extent(datagram)[1]]
    tail = TERM % d.align(size + 32)  # what the PAD covers
    extent = len(received[k]) - 32 + tail
    assert len(received[k]) == pad_datagram and batch.datagram_extent(received[k])[0] == extent
    assert batch.datagram_position(received[k]) + extent == TERM
    assert batch.datagram_position(received[k + 1]) == TERM
    assert pub.counters.sent.get() == sum(map(len, received))


LOG_APPENDER = """
import random
from tests.support.procs import ROOT, wait_until
from tests.support.udp_harness import Slot
from aeronio._core import ADMIN_ACTION, LogAppender
from aeronio.logbuffer.log_buffers import LogBuffers
log, limit, rng = LogBuffers.open(argv[0]), Slot(int(argv[1])), random.Random(4)
appender = LogAppender(log.mapped, limit.array, 0, False)
while (result := appender.try_offer(rng.randbytes(rng.choice([0, 1, 100, 1377, 4000])))) > 0 \\
        or result == ADMIN_ACTION:
    pass
"""


@pytest.mark.parametrize("passes", ["do_work", "linger"])
def test_frames_appended_by_another_process_are_sent_and_rebuilt(tmp_path, udp, passes):
    """One DataPath sends what another process appends (two term rotations) and rebuilds it
    from its data socket into an image: the same bytes, whether each pass is a do_work or
    they run lingering (`linger`, ending 10 ms after the last work)."""
    pub = Publication(tmp_path / "pub.log", udp(), [])
    r = Receiving(tmp_path / "image.log", udp, limit_position=3 * TERM)
    pub.channel.set_destinations([(r.data.getsockname(), 65507)])
    pub.counters.limit.set(3 * TERM)
    path = DataPath([], [r.parts], [pub.pair], [], [pub.log.mapped])
    pub.sender.allow_new_data(True)
    writer = Elsewhere("process", LOG_APPENDER, pub.log.path, 2 * TERM + TERM // 2)
    deadline, work = time.monotonic() + 30, 0
    while writer.running() or r.image.hwm.get() < pub.log.producer_position:
        assert time.monotonic() < deadline, "the appended frames never all arrived"
        work = path.do_work(0) if passes == "do_work" else path.linger(work, 10 * MS, 60 * S)
    writer.join()
    end = r.image.hwm.get()
    assert end == pub.log.producer_position == pub.counters.position.get() > 2 * TERM
    for index in range(d.PARTITION_COUNT):
        assert bytes(r.image.log.term(index)) == bytes(pub.log.term(index)), f"term {index}"
    assert r.image.invalid.get() == 0 and r.image.over_runs.get() == 0


# -- lingering after work ---------------------------------------------------------------------


@pytest.mark.parametrize("bound", ["idle", "max"])
def test_a_lingering_data_path_ends_when_idle_or_at_its_bound(tmp_path, udp, bound):
    """With nothing to do, `linger` waits on its sockets between passes until `idle_ns` passed
    without work, or `max_ns` since the call, whichever comes first: no sooner, not at the
    other (a minute), and returning the work of its passes (none)."""
    r = Receiving(tmp_path / "image.log", udp)
    idle_ns, max_ns = (20 * MS, 60 * S) if bound == "idle" else (60 * S, 20 * MS)
    start = time.monotonic_ns()
    assert r.path.linger(1, idle_ns, max_ns) == 0
    assert 20 * MS <= time.monotonic_ns() - start < 30 * S
    assert not r.path.conductor_due


def test_a_lingering_data_path_ends_at_the_pass_that_makes_python_due(tmp_path, udp):
    """A SETUP (for Python) waiting on the data socket: the first pass reads it and leaves it
    for Python, which is due then, so `linger` returns its work at once, though it would idle
    for a minute."""
    r = Receiving(tmp_path / "image.log", udp)
    r.peer.sendto(batch.NOT_ROUTED["SETUP"], r.data.getsockname())
    assert select.select([r.data], [], [], 10)[0]
    start = time.monotonic_ns()
    assert r.path.linger(0, 60 * S, 60 * S) == 1
    assert time.monotonic_ns() - start < 30 * S
    assert r.path.conductor_due and len(r.path.slow_datagrams(r.parts[1])) == 1


def test_a_lingering_data_path_sends_what_another_thread_appends_meanwhile(tmp_path, udp):
    """A writer thread appends while the data path lingers (its waits release the GIL: the
    writer starts once the first pass sent the first message), then sends a SETUP to its data
    socket: the pass that reads it (Python due) has sent every frame appended before it, in
    order, and `linger` returns there, a minute before its idle end."""
    sink = udp()
    pub = Publication(tmp_path / "pub.log", udp(), [sink])
    pub.counters.limit.set(2 * TERM)
    r = Receiving(tmp_path / "image.log", udp)
    schedule = DutySchedule(NEVER)
    schedule.ran(0, ticked=True, busy=False, deadlines_ns=[], data_path_deadline_ns=NEVER)
    path = DataPath([], [r.parts], [pub.pair], [], [], schedule=schedule)  # nothing watched
    pub.sender.allow_new_data(True)
    setup = batch.NOT_ROUTED["SETUP"]

    def write() -> None:
        wait_until(lambda: pub.counters.position.get() > 0, 60, "the first pass")
        for i in range(1, 150):
            assert append(pub.appender, bytes([i]) * 300) > 0
        r.peer.sendto(setup, r.data.getsockname())

    pub.offer([100])
    writer = threading.Thread(target=write)
    writer.start()
    start = time.monotonic_ns()
    total = path.linger(0, 60 * S, 60 * S)
    assert time.monotonic_ns() - start < 30 * S
    writer.join(60)
    assert schedule.due and len(path.slow_datagrams(r.parts[1])) == 1
    end = pub.log.producer_position
    assert end == 160 + 149 * 352 and pub.counters.position.get() == end
    # The passes' work: the datagrams sent, and the SETUP. Heartbeats are no work (one goes
    # should the writer stall for 100 ms): counted apart, and left out.
    heartbeats = pub.counters.heartbeats.get()
    sent = arrivals(sink, total - 1 + heartbeats)
    data = [datagram for datagram in sent if struct.unpack_from("<i", datagram)[0] > 0]
    assert len(data) == total - 1 and len(sent) - len(data) == heartbeats
    assert b"".join(data) == bytes(pub.log.term(0))[:end]
    assert all(len(datagram) <= MTU for datagram in data)
    batch.assert_nothing_more(sink)


# -- waking subscribers -----------------------------------------------------------------------


@pytest.mark.loops
async def test_parked_subscriber_is_woken_by_new_frames_not_by_duplicates(tmp_path, udp):
    """The router rings the image's data doorbell after inserting new frames (in the term when
    it rings), only while someone is parked, and not for a duplicate."""
    r = Receiving(tmp_path / "image.log", udp)
    bell = r.image.rebuilder.data_doorbell = Doorbell()
    rang = []
    bell.add_callback(lambda: rang.append(r.image.term()[T : r.image.hwm.get()]))
    first, second = (asyncio.get_running_loop().create_future() for _ in range(2))
    bell.park(first)
    r.exchange(VALID)
    assert first.done() and rang == [VALID]
    bell.unpark(first)
    bell.park(second)
    r.exchange(VALID)  # a duplicate
    assert not second.done() and rang == [VALID]
    r.exchange(at(T + 224))
    assert second.done() and rang == [VALID, VALID + at(T + 224)]
    bell.unpark(second)
    r.exchange(at(T + 448))  # nobody parked
    assert len(rang) == 2 and r.image.hwm.get() == T + 672


def test_subscriber_parked_in_another_thread_is_woken(tmp_path, udp):
    """A subscriber parked on its own loop in another thread wakes, and finds the frames."""
    r = Receiving(tmp_path / "image.log", udp)
    bell = r.image.rebuilder.data_doorbell = Doorbell()
    parked, seen = threading.Event(), []

    async def subscriber():
        future = asyncio.get_running_loop().create_future()
        bell.park(future)
        parked.set()
        await asyncio.wait_for(future, 30)
        bell.unpark(future)
        seen.append(r.image.term()[T : T + 224])

    thread = threading.Thread(target=asyncio.run, args=(subscriber(),))
    thread.start()
    assert parked.wait(10)
    r.exchange(VALID)
    thread.join(60)
    assert not thread.is_alive() and seen == [VALID] and bell.waiters == 0


def test_consumption_past_a_quarter_window_sends_the_status_message_at_once(tmp_path, udp):
    """Once the image's subscribers consumed more than a quarter of the window past the last
    status message, the DataPath's next do_work sends the one the receiver state machine would
    (byte for byte: the consumption position patched into its template), counted, as the
    status message repeated from then on; the state machine's duty cycle then sends none."""
    system = {c: Slot() for c in SystemCounters}
    setup = setup_frame(
        session_id=SESSION, stream_id=STREAM, initial_term_id=INITIAL_TERM_ID,
        active_term_id=INITIAL_TERM_ID, term_length=TERM, mtu=MTU,
    )  # fmt: skip
    image, _, subscriber = image_from_setup(
        tmp_path / "image.log", setup, receiver_id=9, system=system, now_ns=0
    )
    rebuilder = image.rebuilder
    data, source = udp(), udp()
    channel = _core.DatagramSender(data.fileno(), Slot())
    channel.set_destinations([(source.getsockname(), 65507)])
    rebuilder.set_control_senders([channel])
    rebuilder.set_consumers([subscriber])
    router = _core.ImageRouter(Slot(), Slot(), Slot())
    router.add(rebuilder)
    path = settled(receivers=[(data.fileno(), DatagramReceiver(64, 65536), router)])
    quarter = image.window // 4
    subscriber.set(quarter)  # not past it
    path.do_work(1)
    batch.assert_nothing_more(source)
    subscriber.set(quarter + 32)
    path.do_work(2)
    expected = sm(quarter + 32, image.window)
    assert arrivals(source, 1) == [expected]
    assert (rebuilder.status_message, rebuilder.last_sm_position) == (expected, quarter + 32)
    assert rebuilder.time_of_last_sm_ns == 2
    assert system[SystemCounters.STATUS_MESSAGES_SENT].get() == 1
    assert image.do_work(3) == [] and rebuilder.status_message == expected
    path.do_work(4)
    batch.assert_nothing_more(source)
    path.do_work(2 + SM_TIMEOUT_NS)  # repeated as the periodic one
    assert arrivals(source, 1) == [expected]
    assert system[SystemCounters.STATUS_MESSAGES_SENT].get() == 2


def test_an_image_forgets_the_senders_of_a_removed_destination(tmp_path, udp):
    """A removed destination's receiver is let go by the images (no buffer kept alive, no
    identity left to match a later receiver): its sender is new to the image again."""
    r = Receiving(tmp_path / "image.log", udp)
    receiver = r.parts[1]
    r.image.rebuilder.forget_receiver(receiver)
    assert r.introduce(TERM) == [(receiver, r.peer.getsockname())]
    r.image.rebuilder.forget_receiver(DatagramReceiver(1, 64))  # another: nothing forgotten
    assert r.introduce(TERM) == []
