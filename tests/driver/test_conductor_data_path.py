"""The Python side of the DataPath: when a network publication allows the C sender its new
data, sans-IO; and the conductor around its DataPath in an embedded driver (a failing
DataPath, bookkeeping pending in a driver that spins and in one that parks at once, a
DataPath rebuilt with `previous`)."""

import asyncio
import errno
import socket
import time
from types import SimpleNamespace

import pytest

import aeronio
from aeronio import _core
from aeronio._core import BOOKKEEPING_DELAY_NS
from aeronio._core import BOOKKEEPING_IDLE_CYCLES as IDLE_CYCLES
from aeronio.concurrent.error_log import read_error_log
from aeronio.counters import SystemCounters
from aeronio.driver import conductor as conductor_module
from aeronio.driver.flow_control import (
    RECEIVER_TIMEOUT_NS,
    MaxFlowControl,
    MinFlowControl,
    UnicastFlowControl,
)
from aeronio.driver.retransmit_handler import (
    DEFAULT_LINGER_NS,
    MAX_RESEND,
    RetransmitHandler,
)
from aeronio.driver.sender_state import (
    HEARTBEAT_TIMEOUT_NS,
    RETRANSMIT_RECEIVER_WINDOW_MULTIPLE,
    SETUP_TIMEOUT_NS,
)
from aeronio.logbuffer import descriptor as d
from aeronio.protocol import control as p
from aeronio.protocol.frames import HDR_TYPE_SETUP, iter_frames, nak_frame, status_message
from tests.sans_io.test_udp_sans_io import MS, MTU, TERM_LENGTH, setup_eliciting_status_message
from tests.support import forged_sender
from tests.support.ports import free_port
from tests.support.procs import await_until
from tests.support.udp_harness import Publisher, Slot

INITIAL_TERM_ID = 5
SESSION, STREAM = 77, 10  # the Publisher's
FRAME = 160  # a 100-byte message's aligned frame


# -- when the SenderStateMachine allows the C sender new data, sans-IO ------------------------


def frames(datagrams) -> list[tuple[str, int]]:
    """(kind, position) of each frame sent: SETUP (at its active term and offset), HB (a
    heartbeat) or DATA."""
    out = []
    for datagram in map(bytes, datagrams):
        for ref in iter_frames(datagram):
            frame = ref.decode(datagram)
            if ref.type == HDR_TYPE_SETUP:
                kind, term_id = "SETUP", frame.active_term_id
            else:
                kind, term_id = ("HB" if ref.is_heartbeat else "DATA"), frame.term_id
            position = d.compute_position(term_id, frame.term_offset, TERM_LENGTH, INITIAL_TERM_ID)
            out.append((kind, position))
    return out


def status():
    """A receiver's ordinary status message (nothing consumed, a half-term window)."""
    return status_message(
        session_id=SESSION,
        stream_id=STREAM,
        consumption_term_id=INITIAL_TERM_ID,
        consumption_term_offset=0,
        receiver_window=TERM_LENGTH // 2,
        receiver_id=5,
    )


def answered(tmp_path) -> Publisher:
    """A publication that sent its SETUP (and a heartbeat) at 0, no new data allowed while it
    was due, and got a receiver's status message at 1 ms."""
    system = {counter: Slot() for counter in SystemCounters}
    pub = Publisher(tmp_path / "pub.log", TERM_LENGTH, MTU, INITIAL_TERM_ID, system)
    pub.pub_limit.set(TERM_LENGTH)
    sender = pub.sender
    assert not sender.data_sender.new_data_allowed
    assert frames(sender.send(0)) == [("SETUP", 0), ("HB", 0)]
    assert not sender.data_sender.new_data_allowed
    sender.on_status_message(status(), MS)
    return pub


def append(pub: Publisher, count: int) -> int:
    """Append `count` 100-byte messages; the producer position after them."""
    for _ in range(count):
        while (result := pub.appender.try_offer(b"m" * 100)) == _core.ADMIN_ACTION:
            pass
        assert result > 0
    return pub.log.producer_position


def test_new_data_goes_by_the_c_sender_alone_once_a_receiver_answered(tmp_path):
    """After the first status message new data is allowed: send() never gives it, the C sender
    does (what the DataPath sends; `collect` here), moving snd-pos and counting the bytes. A late
    joiner's setup request holds none of it back (Aeron's: the SETUP goes besides); it used to
    stop new data until the next ordinary status message."""
    pub = answered(tmp_path)
    sender, data = pub.sender, pub.sender.data_sender
    bytes_sent = sender.system[SystemCounters.BYTES_SENT]
    before = bytes_sent.get()
    assert data.new_data_allowed
    end = append(pub, 3)
    assert frames(sender.send(2 * MS)) == []
    assert sender.sender_position.get() == 0
    out: list = []
    assert data.collect(out, 2 * MS) == 1 and frames(out) == [("DATA", k * FRAME) for k in range(3)]
    assert sender.sender_position.get() == end and data.time_of_last_data_ns == 2 * MS
    assert bytes_sent.get() - before == 3 * FRAME
    sender.on_status_message(setup_eliciting_status_message(), 3 * MS)
    end = append(pub, 1)
    assert data.collect(out, 3 * MS) == 1 and sender.sender_position.get() == end
    assert frames(sender.send(3 * MS)) == [("SETUP", end)]


@pytest.mark.parametrize(
    "flow_control, follows",
    [(None, True), (UnicastFlowControl(), True), (MaxFlowControl(), False),
     (MinFlowControl(), False)],
    ids=["default", "unicast", "max", "min"],
)  # fmt: skip
def test_only_unicast_flow_control_lets_the_c_sender_follow_status_messages(
    tmp_path, flow_control, follows
):
    """The DataPath moves snd-lmt on a status message only under unicast flow control (its
    limit is the receiver's consumption plus its window; multicast's strategies keep theirs)."""
    system = {counter: Slot() for counter in SystemCounters}
    options = {} if flow_control is None else {"flow_control": flow_control}
    pub = Publisher(tmp_path / "pub.log", TERM_LENGTH, MTU, INITIAL_TERM_ID, system, **options)
    assert pub.sender.data_sender.follows_status_messages is follows


def test_heartbeats_after_the_timeout_without_data(tmp_path):
    """With data appended and allowed, send() gives nothing until HEARTBEAT_TIMEOUT_NS after the
    last data or heartbeat, then a heartbeat at snd-pos (counted); what the C sender sends (it
    alone records when) puts the next one off and moves it."""
    pub = answered(tmp_path)
    sender, data = pub.sender, pub.sender.data_sender
    heartbeats = sender.system[SystemCounters.HEARTBEATS_SENT]
    end = append(pub, 3)
    assert sender.send(HEARTBEAT_TIMEOUT_NS - 1) == [] and heartbeats.get() == 1
    assert frames(sender.send(HEARTBEAT_TIMEOUT_NS)) == [("HB", 0)] and heartbeats.get() == 2
    assert data.collect([], 150 * MS) == 1 and sender.sender_position.get() == end
    assert sender.send(150 * MS + HEARTBEAT_TIMEOUT_NS - 1) == []
    assert frames(sender.send(150 * MS + HEARTBEAT_TIMEOUT_NS)) == [("HB", end)]
    assert data.new_data_allowed and heartbeats.get() == 3


def test_a_setup_asked_for_goes_beside_new_data_until_one_went_with_a_receiver_live(tmp_path):
    """Aeron 1.53's setup check: a setup-eliciting status message holds no new data back; the
    SETUP goes at the next send() (an ordinary status message does not cancel it), once while a
    receiver is live. With none live, it goes every SETUP_TIMEOUT_NS until one is."""
    pub = answered(tmp_path)
    sender, data = pub.sender, pub.sender.data_sender

    def setups(datagrams) -> list[tuple[str, int]]:
        return [frame for frame in frames(datagrams) if frame[0] == "SETUP"]

    sender.on_status_message(setup_eliciting_status_message(), 2 * MS)
    sender.on_status_message(status(), 3 * MS)
    assert data.new_data_allowed
    end = append(pub, 3)
    assert data.collect([], 4 * MS) == 1 and sender.sender_position.get() == end
    assert setups(sender.send(4 * MS)) == [("SETUP", end)]
    assert setups(sender.send(4 * MS + SETUP_TIMEOUT_NS)) == []

    silent = 3 * MS + RECEIVER_TIMEOUT_NS + 1
    sender.check_receiver_liveness(silent)
    assert not sender.is_connected
    sender.on_status_message(setup_eliciting_status_message(), silent)
    assert setups(sender.send(silent)) == [("SETUP", end)]
    assert setups(sender.send(silent + SETUP_TIMEOUT_NS)) == [("SETUP", end)]
    sender.on_status_message(status(), silent + SETUP_TIMEOUT_NS + MS)
    assert setups(sender.send(silent + 2 * SETUP_TIMEOUT_NS)) == [("SETUP", end)]
    assert setups(sender.send(silent + 3 * SETUP_TIMEOUT_NS)) == []


def test_a_nak_holds_new_data_until_its_range_is_resent(tmp_path):
    """A NAK of a range behind snd-pos schedules a retransmit: new data is held until send()
    resent the range's frames (counted); lingering, it holds nothing back. A NAK of what was not
    sent, or of the range lingering, changes nothing (only counted)."""
    pub = answered(tmp_path)
    sender, data, system = pub.sender, pub.sender.data_sender, pub.sender.system
    end = append(pub, 3)
    assert data.collect([], 2 * MS) == 1  # the DataPath's send

    def nak(term_offset: int, length: int) -> None:
        frame = nak_frame(
            session_id=SESSION,
            stream_id=STREAM,
            term_id=INITIAL_TERM_ID,
            term_offset=term_offset,
            length=length,
        )
        sender.on_nak(frame, 3 * MS)

    nak(end, FRAME)
    assert data.new_data_allowed and not sender.retransmit.pending
    nak(FRAME, 2 * FRAME)
    assert not data.new_data_allowed and sender.retransmit.scheduled
    assert frames(sender.send(4 * MS)) == [("DATA", FRAME), ("DATA", 2 * FRAME)]
    assert data.new_data_allowed and sender.retransmit.pending
    assert not sender.retransmit.scheduled
    nak(FRAME, 2 * FRAME)
    assert data.new_data_allowed and sender.sender_position.get() == end
    assert system[SystemCounters.RETRANSMITS_SENT].get() == 1
    assert system[SystemCounters.NAK_MESSAGES_RECEIVED].get() == 3


def nak_of(term_offset: int, length: int):
    return nak_frame(
        session_id=SESSION,
        stream_id=STREAM,
        term_id=INITIAL_TERM_ID,
        term_offset=term_offset,
        length=length,
    )


def test_a_nak_is_answered_with_what_was_sent_only(tmp_path):
    """A NAK reaching past snd-pos gets the frames before it: those after wait for flow
    control (snd-lmt), a NAK does not send them."""
    pub = answered(tmp_path)
    sender = pub.sender
    end = append(pub, 3)
    assert sender.data_sender.collect([], 2 * MS) == 1  # the DataPath's send
    append(pub, 3)  # not sent yet
    sender.on_nak(nak_of(FRAME, 10 * FRAME), 3 * MS)
    assert frames(sender.send(4 * MS)) == [("DATA", FRAME), ("DATA", 2 * FRAME)]
    assert sender.sender_position.get() == end


def test_a_nak_running_past_its_terms_end_is_an_invalid_packet(tmp_path):
    pub = answered(tmp_path)
    sender = pub.sender
    append(pub, 3)
    assert sender.data_sender.collect([], 2 * MS) == 1
    invalid = sender.system[SystemCounters.INVALID_PACKETS]
    sender.on_nak(nak_of(FRAME, TERM_LENGTH), 3 * MS)
    assert invalid.get() == 1 and not sender.retransmit.pending
    sender.on_nak(nak_of(FRAME, TERM_LENGTH - FRAME), 3 * MS)  # to its end: resent
    assert invalid.get() == 1 and sender.retransmit.scheduled
    assert frames(sender.send(4 * MS)) == [("DATA", FRAME), ("DATA", 2 * FRAME)]


def test_a_nak_of_more_than_16_receiver_windows_gets_16(tmp_path):
    """A NAK is answered with at most RETRANSMIT_RECEIVER_WINDOW_MULTIPLE default receiver
    windows of its term (Aeron's): one of a whole 4 MiB term gets its first 2 MiB."""
    term_length, frame = 4 << 20, 1024
    system = {counter: Slot() for counter in SystemCounters}
    pub = Publisher(tmp_path / "pub.log", term_length, MTU, INITIAL_TERM_ID, system)
    pub.pub_limit.set(term_length)
    sender = pub.sender
    sender.send(0)  # the SETUP
    sender.on_status_message(status()._replace(receiver_window=term_length), MS)
    for _ in range(term_length // 2 // frame + 512):  # 2.5 MiB
        assert pub.appender.try_offer(bytes(frame - 32)) > 0
    while sender.data_sender.collect([], 2 * MS):
        pass
    assert sender.sender_position.get() == pub.log.producer_position == (5 << 20) // 2
    sender.on_nak(nak_of(0, term_length), 3 * MS)
    resent = [position for _, position in frames(sender.send(4 * MS))]
    assert resent == [k * frame for k in range((2 << 20) // frame)]
    assert RETRANSMIT_RECEIVER_WINDOW_MULTIPLE * 128 * 1024 == 2 << 20
    # One retransmit of 2 MiB, as Aeron counts them (it was counted once per datagram).
    assert system[SystemCounters.RETRANSMITS_SENT].get() == 1
    assert system[SystemCounters.RETRANSMITTED_BYTES].get() == 2 << 20


def test_retransmit_scheduled_until_resent_pending_until_its_linger_ends():
    """`scheduled`: a range waits to be resent (after the delay); `pending`: also while one
    lingers after its resend (a NAK of it is ignored then)."""
    handler = RetransmitHandler(delay_ns=10, linger_ns=100)
    assert not (handler.scheduled or handler.pending)
    assert handler.on_nak(1, 0, 64, 0)
    assert handler.due(9) == [] and (handler.scheduled, handler.pending) == (True, True)
    assert handler.due(10) == [(1, 0, 64)]
    assert (handler.scheduled, handler.pending) == (False, True)
    assert not handler.on_nak(1, 0, 64, 50) and not handler.scheduled
    assert handler.on_nak(1, 64, 64, 50) and handler.scheduled  # unicast: replaces the first
    assert handler.due(60) == [(1, 64, 64)]
    assert (handler.scheduled, handler.pending) == (False, True)
    assert handler.due(110) == [] and handler.pending  # it lingers until 160
    assert handler.due(160) == [] and not handler.pending


def test_a_nak_inside_a_range_in_hand_is_ignored_and_unicast_keeps_one_range():
    """Aeron 1.53's rules: a NAK whose offset lies in a range waiting or lingering (of its term)
    was sent before that resend arrived: ignored. Unicast keeps one range in hand, which a NAK
    outside it replaces. Resent at once, a range lingers 10 ms. A NAK inside a lingering range
    used to be resent again, and the linger was 60 ms."""
    handler = RetransmitHandler()
    assert handler.on_nak(1, 1024, 4096, 0)
    assert not handler.on_nak(1, 2048, 64, 0)  # inside, waiting
    assert handler.due(0) == [(1, 1024, 4096)]
    assert not handler.on_nak(1, 1024 + 4064, 32, MS)  # inside, lingering
    assert handler.deadline_ns() == DEFAULT_LINGER_NS == 10 * MS
    assert handler.on_nak(2, 2048, 64, MS)  # another term: outside
    assert handler.due(MS) == [(2, 2048, 64)]  # the first was replaced
    assert handler.on_nak(1, 2048, 64, 2 * MS)


def test_a_group_keeps_max_resend_ranges_and_counts_an_overflow():
    """Multicast and MDC keep up to MAX_RESEND (16) ranges in hand; a NAK outside them all while
    they are is dropped and said to `on_overflow` (Retransmit Pool Overflow, never counted
    before); one inside a range is only ignored."""
    overflows: list[int] = []
    handler = RetransmitHandler(group=True, on_overflow=lambda: overflows.append(1))
    for k in range(MAX_RESEND):
        assert handler.on_nak(1, k * 64, 64, 0)
    assert not handler.on_nak(1, 5 * 64 + 32, 16, 0) and overflows == []
    assert not handler.on_nak(1, MAX_RESEND * 64, 64, 0) and overflows == [1]
    assert handler.due(0) == [(1, k * 64, 64) for k in range(MAX_RESEND)]
    assert handler.due(DEFAULT_LINGER_NS) == [] and not handler.pending
    assert handler.on_nak(1, MAX_RESEND * 64, 64, DEFAULT_LINGER_NS)


# -- the conductor and its DataPath, in an embedded driver -----------------------------------


@pytest.fixture
async def ipc(tmp_path):
    """An embedded driver, a client, and an IPC publication whose subscription has its image."""
    async with aeronio.MediaDriver.launch(str(tmp_path / "driver")) as driver:
        async with aeronio.connect(driver.dir) as client:
            sub = await client.add_subscription("aeron:ipc", 5)
            pub = await client.add_publication("aeron:ipc", 5)
            await await_until(lambda: sub.images and pub.is_connected, 10, "the IPC image")
            yield SimpleNamespace(conductor=driver.conductor, client=client, pub=pub, sub=sub)


def settle(conductor) -> int:
    """A timer tick (commands queued handled, the DataPath rebuilt), the full duty cycle that
    follows it and an idle one (its DataPath's second do_work): nothing pending. Returns a time
    before the next tick. (No await here or after: the driver's agent does not run between.)"""
    now = conductor.schedule.next_timer_ns
    conductor.do_work(now)
    conductor.do_work(now + 1)
    assert conductor.do_work(now + 1) == 0 and not conductor.schedule.pending
    return now + 1


def consume(ipc) -> None:
    assert ipc.sub.poll(lambda *_: None, 10) == 1


def spins_until_bookkept(conductor, now: int) -> None:
    """Bookkeeping pending in an agent that spins: each duty cycle (no Python) returns 1, the
    full one after IDLE_CYCLES idle duty cycles returns the traffic it saw."""
    states = []
    for _ in range(2 * IDLE_CYCLES):
        states.append((conductor.do_work(now), conductor.schedule.pending))
        if not conductor.schedule.pending:
            break
    assert states[:-1] == [(1, True)] * (IDLE_CYCLES - 1)
    assert states[-1][1] is False and states[-1][0] > 0


class FailingDataPath(_core.DataPath):
    """A DataPath whose do_work fails as a socket's error would. (A DataPath: the conductor
    makes its successor with it as `previous`.)"""

    def do_work(self, now_ns: int) -> int:
        raise OSError(errno.EIO, "a data socket failed")


async def test_a_failing_data_path_is_recorded_and_the_duty_cycle_still_runs(ipc):
    """The error of the DataPath's do_work is counted (ERRORS) and kept in the error log; the
    commands, the timer and the DataPath's rebuilding still run."""
    conductor = ipc.conductor
    errors = conductor.system[SystemCounters.ERRORS]
    now, before = conductor.schedule.next_timer_ns, errors.get()
    conductor._data_path = FailingDataPath([], [], [], [], [])
    conductor.cnc.to_driver.write(*p.encode(p.ClientKeepalive(ipc.client.client_id)))
    conductor.do_work(now)
    assert errors.get() == before + 1
    client = conductor.resources.clients[ipc.client.client_id]
    assert not conductor.to_driver.pending() and client.heartbeat.get() > 0
    assert conductor.schedule.next_timer_ns == now + conductor.ctx.timer_interval_ns
    assert type(conductor._data_path) is _core.DataPath
    seen = read_error_log(conductor.cnc.error_log_buffer)
    text = "OSError: [Errno 5] a data socket failed"
    assert [o.count for o in seen if o.text.splitlines()[0] == text] == [1]


@pytest.mark.loops
async def test_the_conductor_does_not_park_while_bookkeeping_is_pending(ipc):
    """A subscriber's consumption is bookkeeping (it frees the publisher). While the schedule
    has it pending but not due (here: just after a duty cycle that did work), each duty cycle
    (no Python) returns 1; it is due after IDLE_CYCLES idle duty cycles, when the full one
    moves the publisher limit; then an idle duty cycle returns 0."""
    conductor = ipc.conductor
    now = settle(conductor)
    (publication,) = conductor.publications
    schedule, limit = conductor.schedule, publication.publisher_limit.get()
    schedule.idle_cycles = 0  # as after a duty cycle that received or sent data
    assert ipc.pub.try_offer(b"x" * 100) > 0
    consume(ipc)
    spins_until_bookkept(conductor, now)
    assert publication.publisher_limit.get() == limit + FRAME
    assert conductor.do_work(now) == 0


async def test_the_rebuilt_data_path_sees_what_moved_during_the_full_duty_cycle(ipc):
    """The subscriber consumes while the conductor handles a command: after the DataPath's
    do_work, before the one that replaces it is made. That one's first do_work has it pending
    (the conductor returns 1); one made without `previous` would not."""
    conductor = ipc.conductor
    now = settle(conductor)
    assert ipc.pub.try_offer(b"x" * 100) > 0
    handle = conductor._on_command

    def consume_then_handle(*args) -> None:
        del conductor._on_command  # once
        consume(ipc)
        handle(*args)

    conductor._on_command = consume_then_handle
    conductor.cnc.to_driver.write(*p.encode(p.ClientKeepalive(ipc.client.client_id)))
    old = conductor._data_path
    conductor.do_work(now)
    new, fresh = conductor._data_path, conductor._new_data_path()
    assert new is not old and not conductor.schedule.pending
    assert "_on_command" not in vars(conductor)
    conductor.schedule.idle_cycles = 0  # bookkeeping pending, not due at once
    assert conductor.do_work(now) == 1 and conductor.schedule.pending and new.moved == FRAME
    assert fresh.do_work(now) == 0 and fresh.moved == 0


@pytest.fixture
async def udp(tmp_path):
    """An embedded driver set as a standalone one is (`conductor_idle_spins_ipc_only`: it parks
    at once after work while it serves no IPC), a client, and a UDP stream connected."""
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=64k"
    options = {"conductor_idle_spins_ipc_only": True}
    async with aeronio.MediaDriver.launch(str(tmp_path / "driver"), **options) as driver:
        async with aeronio.connect(driver.dir) as client:
            sub = await client.add_subscription(channel, 5)
            pub = await client.add_publication(channel, 5)
            await await_until(lambda: sub.images and pub.is_connected, 10, "the image")
            yield SimpleNamespace(conductor=driver.conductor, client=client, pub=pub, sub=sub)


@pytest.mark.parametrize("spins", [False, True], ids=["parks at once", "spins"])
async def test_an_agent_that_parks_at_once_parks_with_bookkeeping_pending(udp, spins):
    """A message sent and received over loopback by the DataPath, then consumed: bookkeeping
    pending (the publisher limit has not moved yet). A driver that parks at once after work
    gets no work for it (it parks, `park_ns` no later than BOOKKEEPING_DELAY_NS after the
    first move), and the full duty cycle then keeps the books, returning the DataPath's work
    (none), not the traffic it saw. One that spins (here: told so by its context) has each
    duty cycle return 1 while it is pending, and it is due after IDLE_CYCLES idle duty cycles,
    when the full one returns the traffic."""
    conductor, schedule = udp.conductor, udp.conductor.schedule
    conductor.ctx.conductor_idle_spins_ipc_only = not spins
    now = settle(conductor)
    assert schedule.spins is spins
    (publication,) = conductor.publications
    limit = publication.publisher_limit.get()
    assert udp.pub.try_offer(b"x" * 100) > 0
    for _ in range(1000):  # loopback: sent, then received, within a few duty cycles
        if conductor.do_work(now) and udp.sub.poll(lambda *_: None, 10) == 1:
            break
    else:
        pytest.fail("the message did not come")
    if spins:
        spins_until_bookkept(conductor, now)
    else:
        assert conductor.do_work(now) == 0 and schedule.pending
        assert publication.publisher_limit.get() == limit
        assert schedule.park_ns(now, False) == BOOKKEEPING_DELAY_NS
        assert conductor.do_work(now + BOOKKEEPING_DELAY_NS) == 0 and not schedule.pending
    assert publication.publisher_limit.get() == limit + FRAME


async def test_after_work_a_standalone_driver_lingers_until_its_books_are_due(udp, monkeypatch):
    """With `data_path_linger_ns` (a standalone driver's default) a duty cycle whose DataPath
    sent and received goes on passing in C (DataPath.linger) instead of returning to park: here
    the message sent and received over loopback in its first pass, then nothing for as long as
    the bookkeeping its moves made pending is not due (BOOKKEEPING_DELAY_NS; idle and bounded
    by a minute here, it would linger that long), then the books kept in the same duty cycle,
    which returns the datagrams. A driver that spins (it serves IPC) does not linger: it parks
    with the books pending, as one that lingers not at all does."""
    conductor, schedule = udp.conductor, udp.conductor.schedule
    conductor.ctx.data_path_linger_ns = 60_000_000_000
    monkeypatch.setattr(conductor_module, "LINGER_MAX_NS", 60_000_000_000)
    settle(conductor)
    assert not schedule.spins
    assert udp.pub.try_offer(b"x" * 100) > 0
    start = time.monotonic_ns()
    assert conductor.do_work() == 2  # sent and received
    assert BOOKKEEPING_DELAY_NS <= time.monotonic_ns() - start < 30_000_000_000
    assert not schedule.pending and udp.sub.poll(lambda *_: None, 10) == 1
    conductor.ctx.conductor_idle_spins_ipc_only = False  # as while it serves IPC
    settle(conductor)
    assert schedule.spins
    assert udp.pub.try_offer(b"x" * 100) > 0
    for _ in range(1000):  # loopback: sent, then received, within a few duty cycles
        if conductor.do_work() and udp.sub.poll(lambda *_: None, 10) == 1:
            break
    else:
        pytest.fail("the message did not come")
    assert schedule.pending


async def test_the_backlog_follows_the_smallest_window_the_streams_keep_open(tmp_path):
    """The conductor tells its schedule the windows its bookkeeping keeps open whenever it
    makes a DataPath: a UDP stream's (its publication's term window, half its 16 MiB term; its
    image's receiver window, `rcv-wnd=2m`), then an IPC publication's with a 64 KiB term (half
    of it) as long as it lasts; bookkeeping is due at a quarter of the smallest."""
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=16m|rcv-wnd=2m|so-rcvbuf=2m"
    async with aeronio.MediaDriver.launch(str(tmp_path / "driver")) as driver:
        schedule = driver.conductor.schedule
        async with aeronio.connect(driver.dir) as client:
            sub = await client.add_subscription(channel, 5)
            pub = await client.add_publication(channel, 5)
            await await_until(lambda: sub.images and pub.is_connected, 10, "the image")
            await await_until(lambda: schedule.backlog_limit == (2 << 20) // 4, 10, "2 MiB / 4")
            ipc = await client.add_publication("aeron:ipc?term-length=64k|linger=0", 6)
            await await_until(lambda: schedule.backlog_limit == 32 * 1024 // 4, 10, "32 KiB / 4")
            await ipc.close()
            await await_until(lambda: schedule.backlog_limit == (2 << 20) // 4, 10, "again")


async def test_an_application_invoke_that_takes_input_brings_the_parked_agent_forward(tmp_path):
    """An application's `invoke()` takes a datagram another process sent before the parked
    agent's task saw the socket readable (nothing rings the task then): it leaves bookkeeping
    pending, due within BOOKKEEPING_DELAY_NS, and the parked agent's timer comes forward to
    it from the image's next deadline; the task then keeps the books."""
    port = free_port()
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender.bind(("127.0.0.1", 0))
    options = {"conductor_idle_spins_ipc_only": True}  # it parks at once after work
    try:
        async with aeronio.MediaDriver.launch(str(tmp_path / "driver"), **options) as driver:
            async with aeronio.connect(driver.dir) as client:
                channel = f"aeron:udp?endpoint=127.0.0.1:{port}"
                sub = await client.add_subscription(channel, forged_sender.STREAM)
                await forged_sender.forge_image(sender, port, sub)
                sender.sendto(forged_sender.data(0), ("127.0.0.1", port))  # the image's first data
                await await_until(lambda: sub.poll(lambda *_: None, 10), 10, "the first frame")
                runner, schedule = driver._runner, driver.conductor.schedule
                loop = asyncio.get_running_loop()

                def parked_for_long() -> bool:
                    deadline, wakeup = runner._deadline, runner._wakeup
                    return (
                        wakeup is not None
                        and not wakeup.done()
                        and not schedule.pending
                        and deadline is not None
                        and deadline.when() - loop.time() > 0.01
                    )

                await await_until(parked_for_long, 10, "the agent parked until a far deadline")
                sender.sendto(forged_sender.data(64), ("127.0.0.1", port))  # the next, in order
                for _ in range(1_000_000):  # no await: the task does not see the socket
                    if driver.invoke():
                        break
                else:
                    pytest.fail("the datagram did not come")
                assert schedule.pending
                delay = runner._deadline.when() - loop.time()
                assert delay <= BOOKKEEPING_DELAY_NS / 1e9
                await await_until(lambda: not schedule.pending, 10, "the books kept")
                assert sub.poll(lambda *_: None, 10) == 1
    finally:
        sender.close()
