"""The conductor's DutySchedule, sans-IO: each row a state and a clock, and what the schedule
decides (does the full duty cycle run now? does the timer tick? how long may the agent park?)."""

import pytest

from aeronio._core import (
    BOOKKEEPING_BACKLOG,
    BOOKKEEPING_DELAY_NS,
    BOOKKEEPING_IDLE_CYCLES,
    COALESCE_NS,
    DutySchedule,
)

MS = 1_000_000
INTERVAL = 80 * MS  # the timer's; it may run an eighth early
EARLY = INTERVAL // 8
TIMER, DEADLINE, DATA_PATH = 1000 * MS, 950 * MS, 990 * MS  # the quiet state's deadlines
QUIET = 900 * MS  # before all of them


def schedule(**state) -> DutySchedule:
    """A schedule after a quiet full duty cycle (nothing pending, not busy, many idle cycles,
    the deadlines above), with `state` set over it."""
    s = DutySchedule(INTERVAL)
    s.ran(
        TIMER - INTERVAL,
        ticked=True,
        busy=False,
        deadlines_ns=[DEADLINE],
        data_path_deadline_ns=DATA_PATH,
    )
    s.idle_cycles = BOOKKEEPING_IDLE_CYCLES
    for name, value in state.items():
        setattr(s, name, value)
    return s


# (state, now, (work, moved, urgent)) -> the full duty cycle runs
RUNS = {
    "quiet": ({}, QUIET, (0, 0, False), False),
    "urgent (datagrams left, a new sender, commands)": ({}, QUIET, (0, 0, True), True),
    "the last full one was busy": ({"busy": True}, QUIET, (0, 0, False), True),
    "a deadline comes": ({}, DEADLINE, (0, 0, False), True),
    "a nanosecond before it": ({}, DEADLINE - 1, (0, 0, False), False),
    "the timer comes (it is a deadline)": ({"next_deadline_ns": TIMER}, TIMER, (0, 0, False), True),
    "a lone move after a quiet spell": ({}, QUIET, (0, 1, False), True),
    "a move while data flows": ({"idle_cycles": 0}, QUIET, (1, 100, False), False),
    "the backlog reached at once": (
        {"idle_cycles": 0},
        QUIET,
        (1, BOOKKEEPING_BACKLOG, False),
        True,
    ),
    "one byte short of it": ({"idle_cycles": 0}, QUIET, (1, BOOKKEEPING_BACKLOG - 1, False), False),
    "the backlog's last byte": (
        {"idle_cycles": 0, "pending": True, "backlog": BOOKKEEPING_BACKLOG - 1},
        QUIET,
        (1, 1, False),
        True,
    ),
    "pending, the last idle cycle": (
        {"idle_cycles": BOOKKEEPING_IDLE_CYCLES - 1, "pending": True, "backlog": 1},
        QUIET,
        (0, 0, False),
        True,
    ),
    "pending, one idle cycle short": (
        {"idle_cycles": BOOKKEEPING_IDLE_CYCLES - 2, "pending": True, "backlog": 1},
        QUIET,
        (0, 0, False),
        False,
    ),
    "pending, data again": ({"pending": True, "backlog": 1}, QUIET, (1, 0, False), False),
    "pending, data flowing, its delay over": (
        {"idle_cycles": 0, "pending": True, "backlog": 1, "bookkeeping_by_ns": QUIET},
        QUIET,
        (1, 100, False),
        True,
    ),
    "pending, data flowing, a nanosecond before": (
        {"idle_cycles": 0, "pending": True, "backlog": 1, "bookkeeping_by_ns": QUIET + 1},
        QUIET,
        (1, 100, False),
        False,
    ),
    "idle cycles, nothing moved": ({"idle_cycles": 0}, QUIET, (0, 0, False), False),
    "the DataPath's deadline, the timer an eighth away: it runs early": (
        {"next_deadline_ns": TIMER, "data_path_deadline_ns": TIMER - EARLY},
        TIMER - EARLY,
        (0, 0, False),
        True,
    ),
    "the DataPath's deadline, the timer further": (
        {"next_deadline_ns": TIMER, "data_path_deadline_ns": TIMER - EARLY - 1},
        TIMER - EARLY - 1,
        (0, 0, False),
        False,
    ),
    "the timer an eighth away, no deadline of the DataPath": (
        {"next_deadline_ns": TIMER, "data_path_deadline_ns": 2000 * MS},
        TIMER - EARLY,
        (0, 0, False),
        False,
    ),
}


@pytest.mark.parametrize("state, now, seen, runs", RUNS.values(), ids=RUNS.keys())
def test_when_the_full_duty_cycle_runs(state, now, seen, runs):
    s = schedule(**state)
    work, moved, urgent = seen
    assert s.on_data_path(now, work, moved, urgent, 2000 * MS) is runs
    assert s.data_path_deadline_ns == 2000 * MS  # the DataPath's next, for the next decision
    assert s.pending is (state.get("pending", False) or moved > 0)


@pytest.mark.parametrize("spins", [True, False], ids=["spins", "parks at once"])
def test_pending_bookkeeping_waits_for_idle_cycles_or_its_delay(spins):
    """The first move makes bookkeeping pending, due BOOKKEEPING_DELAY_NS later at the latest
    (further moves do not put that off; the backlog makes it due at once). While the agent
    spins after work it is due after BOOKKEEPING_IDLE_CYCLES idle duty cycles too (the next
    message may come in them); an agent that parks at once parks with it pending, until its
    delay is over at the latest, so that one full duty cycle keeps the books for the
    messages of that time."""
    s = schedule(idle_cycles=0)
    assert s.spins
    s.agent_spins(spins)
    assert s.spins is spins
    assert not s.on_data_path(QUIET, 1, 100, False, 2000 * MS)
    assert (s.pending, s.bookkeeping_by_ns) == (True, QUIET + BOOKKEEPING_DELAY_NS)
    later = QUIET + BOOKKEEPING_DELAY_NS // 2
    assert not s.on_data_path(later, 1, 100, False, 2000 * MS)
    assert s.bookkeeping_by_ns == QUIET + BOOKKEEPING_DELAY_NS  # not put off
    idle = [s.on_data_path(later, 0, 0, False, 2000 * MS) for _ in range(BOOKKEEPING_IDLE_CYCLES)]
    assert idle == [False] * (BOOKKEEPING_IDLE_CYCLES - 1) + [spins]
    assert s.park_ns(later, False) == BOOKKEEPING_DELAY_NS // 2
    assert s.on_data_path(QUIET + BOOKKEEPING_DELAY_NS, 0, 0, False, 2000 * MS)
    s.ran(later, ticked=False, busy=False, deadlines_ns=[DEADLINE], data_path_deadline_ns=DATA_PATH)
    assert (s.pending, s.bookkeeping_by_ns, s.park_ns(later, False)) == (
        False,
        2**63 - 1,
        DEADLINE - later,
    )
    assert s.on_data_path(later, 1, BOOKKEEPING_BACKLOG, False, 2000 * MS)  # the backlog


@pytest.mark.parametrize(
    "windows, limit",
    [
        ([], BOOKKEEPING_BACKLOG),  # none known: a quarter of the smallest term's window
        ([32 * 1024], BOOKKEEPING_BACKLOG),  # the smallest term's (64 KiB) window
        ([8 << 20, 2 << 20], 512 * 1024),  # a 16 MiB term's window, a 2 MiB receiver window
        ([8 << 20, 128 * 1024, 32 << 20], 32 * 1024),
        ([3], 1),
    ],
)
def test_the_backlog_is_a_quarter_of_the_smallest_window_kept_open(windows, limit):
    """While data flows, bookkeeping waits for the positions to move a quarter of the smallest
    window it keeps open (a publication's term window, an image's receiver window), so that a
    window never waits on it: a publisher limit moves, a log is cleaned, well before the
    publisher or the sender could reach them."""
    s = schedule(idle_cycles=0)
    s.keep_open(iter(windows))
    assert s.backlog_limit == limit
    if limit > 1:
        assert not s.on_data_path(QUIET, 1, limit - 1, False, 2000 * MS)
    assert s.on_data_path(QUIET, 1, 1, False, 2000 * MS)
    assert s.backlog == limit


# (now) -> the timer ticks in the full duty cycle at that time
TICKS = [(TIMER - EARLY - 1, False), (TIMER - EARLY, True), (TIMER, True), (TIMER + 5 * MS, True)]


@pytest.mark.parametrize("now, ticks", TICKS)
def test_the_timer_ticks_up_to_an_eighth_early(now, ticks):
    assert schedule().timer_due(now) is ticks


def test_the_deadline_after_a_full_duty_cycle():
    """Nothing pending after it; a tick sets the next timer; the next deadline is the earliest
    of the timer's and the resources', or the last within COALESCE_NS of it."""
    s = schedule(pending=True, backlog=5, idle_cycles=3)
    s.ran(1000 * MS, ticked=True, busy=True, deadlines_ns=[], data_path_deadline_ns=1001 * MS)
    assert (s.pending, s.backlog, s.idle_cycles, s.busy) == (False, 0, 3, True)
    assert (s.next_timer_ns, s.next_deadline_ns) == (1080 * MS, 1080 * MS)
    assert s.data_path_deadline_ns == 1001 * MS
    for deadlines, expected in (
        ([1020 * MS], 1020 * MS),
        ([1020 * MS, 1020 * MS + COALESCE_NS], 1020 * MS + COALESCE_NS),
        ([1020 * MS, 1020 * MS + COALESCE_NS + 1], 1020 * MS),
        ([1075 * MS], 1080 * MS),  # within COALESCE_NS of the timer: with it
    ):
        s.ran(1001 * MS, ticked=False, busy=False, deadlines_ns=deadlines, data_path_deadline_ns=0)
        assert (s.next_timer_ns, s.next_deadline_ns) == (1080 * MS, expected)


# (state, now, commands waiting) -> ns the agent may park
PARKS = {
    "until the earlier deadline (Python's)": ({}, QUIET, False, DEADLINE - QUIET),
    "until the earlier deadline (the DataPath's)": (
        {"data_path_deadline_ns": 920 * MS},
        QUIET,
        False,
        20 * MS,
    ),
    "busy: not at all": ({"busy": True}, QUIET, False, 0),
    "commands waiting: not at all": ({}, QUIET, True, 0),
    "a deadline passed: not at all": ({}, DEADLINE + 1, False, 0),
    "bookkeeping pending: until its delay is over": (
        {"pending": True, "bookkeeping_by_ns": QUIET + 5 * MS},
        QUIET,
        False,
        5 * MS,
    ),
    "its delay later than the deadlines": (
        {"pending": True, "bookkeeping_by_ns": DEADLINE + 1},
        QUIET,
        False,
        DEADLINE - QUIET,
    ),
}


@pytest.mark.parametrize("state, now, commands, park", PARKS.values(), ids=PARKS.keys())
def test_how_long_the_agent_parks(state, now, commands, park):
    assert schedule(**state).park_ns(now, commands) == park


def test_when_the_agent_must_run_next():
    """`wake_ns`, what park_ns counts down to (and what an application's invoke compares):
    the earliest of the deadlines and pending bookkeeping's, at once while busy."""
    assert schedule().wake_ns == DEADLINE
    assert schedule(data_path_deadline_ns=920 * MS).wake_ns == 920 * MS
    assert schedule(pending=True, bookkeeping_by_ns=QUIET + 5 * MS).wake_ns == QUIET + 5 * MS
    assert schedule(busy=True).wake_ns == 0


def test_an_idle_stream_wakes_once_per_heartbeat_and_the_timer_goes_with_one():
    """An idle driver with one stream: the DataPath sends a heartbeat every 95 ms (no Python);
    the timer (every 80 ms) runs at its own time, or in the duty cycle that woke for a heartbeat
    if it is due within an eighth of its interval (one wake-up for both). The agent parks from
    one wake-up to the next; each row is a wake-up: (ms, full duty cycle, timer ticked)."""
    beat = 95 * MS
    s = DutySchedule(INTERVAL)
    s.ran(0, ticked=True, busy=False, deadlines_ns=[], data_path_deadline_ns=beat)
    s.idle_cycles = BOOKKEEPING_IDLE_CYCLES
    now, wakes = 0, []
    for _ in range(11):
        now += s.park_ns(now, False)
        data_path_deadline = (now // beat + 1) * beat  # the DataPath's, after its do_work
        runs = s.on_data_path(now, 0, 0, False, data_path_deadline)
        ticked = runs and s.timer_due(now)
        if runs:
            s.ran(
                now,
                ticked=ticked,
                busy=False,
                deadlines_ns=[],
                data_path_deadline_ns=data_path_deadline,
            )
        wakes.append((now // MS, runs, ticked))
    assert wakes == [
        (80, True, True),
        (95, False, False),
        (160, True, True),
        (190, False, False),
        (240, True, True),
        (285, False, False),
        (320, True, True),
        (380, False, False),
        (400, True, True),
        (475, True, True),  # the heartbeat's wake-up, the timer 5 ms early: none at 480
        (555, True, True),
    ]
