"""The replayer's thread (aeronio/archive/replayer.py) with sessions that count their duty
cycles: polled on a thread of their own under their locks until DONE, `on_done` rung once
each, a duty cycle that raises ends its session and no other, asleep with none."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

import aeronio
from aeronio.archive.replay_session import WINDOW_WAIT_NS, ReplaySession, State
from aeronio.archive.replayer import Replayer
from aeronio.archive.segments import Block
from aeronio.logbuffer.signals import LogSignals
from tests.support.procs import wait_until


class Session:
    """A replay session that is DONE after `cycles` duty cycles (raising at `raises`)."""

    def __init__(self, replay_session_id: int, cycles: int, raises: int = -1):
        self.replay_session_id = replay_session_id
        self.publication = SimpleNamespace(signals=LogSignals())
        self.lock = threading.Lock()
        self.state = State.REPLAYING
        self.cycles, self.raises = cycles, raises
        self.threads: set[int] = set()
        self.unlocked = 0  # duty cycles run without the lock held
        self.failure: str | None = None

    def do_work(self, now_ns: int) -> int:
        self.threads.add(threading.get_ident())
        self.unlocked += not self.lock.locked()
        self.cycles -= 1
        if self.cycles == self.raises:
            raise RuntimeError("a bug")
        if self.cycles <= 0:
            self.state = State.DONE
        return 1

    def fail(self, failure: str) -> None:
        self.failure = failure
        self.state = State.DONE


def test_sessions_run_on_its_thread_under_their_locks_until_done():
    done = []
    replayer = Replayer(on_done=lambda: done.append(threading.get_ident()))
    replayer.start()
    try:
        sessions = [Session(1, 50), Session(2, 200)]
        for session in sessions:
            replayer.add(session)
            assert session.publication.signals.limit.waiters == 1  # the driver rings it
        wait_until(lambda: len(done) == 2, 30, "both sessions done")
        for session in sessions:
            assert session.state is State.DONE and session.cycles == 0  # never polled after
            assert session.threads == set(done[:1]) != {threading.get_ident()}
            assert session.unlocked == 0
            assert session in replayer
            replayer.remove(session)
            assert session not in replayer
            assert session.publication.signals.limit.waiters == 0
    finally:
        replayer.close()
    assert not replayer._thread.is_alive()


def test_a_duty_cycle_that_raises_ends_its_session_only(caplog):
    replayer = Replayer()
    replayer.start()
    try:
        failing, other = Session(7, 10, raises=5), Session(8, 100)
        replayer.add(failing)
        replayer.add(other)
        wait_until(lambda: other.state is State.DONE, 30, "the other session done")
        assert failing.state is State.DONE and failing.cycles == 5
        assert failing.failure == "replay 7 failed: RuntimeError('a bug')"
        assert other.failure is None
        assert "replay 7 failed" in caplog.text
    finally:
        replayer.close()


def voluntary_switches(thread: threading.Thread) -> int:
    with open(f"/proc/self/task/{thread.native_id}/status") as status:
        for line in status:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches")


def test_with_no_session_the_thread_sleeps():
    """An archive that replays nothing costs nothing: the thread waits for a session (a
    thread that backed off to 1 ms sleeps would wake some 300 times in this period)."""
    replayer = Replayer()
    replayer.start()
    try:
        session = Session(1, 3)
        replayer.add(session)  # once a session has come and gone
        wait_until(lambda: session.state is State.DONE, 30, "the session done")
        replayer.remove(session)
        wait_until(lambda: replayer._thread.native_id is not None, 30, "the thread's id")
        before = voluntary_switches(replayer._thread)
        time.sleep(0.3)  # a period measured, not a wait for anything
        # a few as it settles into the wait (the GIL's hand-overs count too on a busy machine)
        assert voluntary_switches(replayer._thread) - before <= 20
    finally:
        replayer.close()


class HeldBackPublication:
    """A replay's publication that takes `step` bytes a run (none: its window stays shut)."""

    is_connected = True
    max_payload_length = 1376

    def __init__(self) -> None:
        self.position = self.position_limit = self.step = 0
        self.waits: list[int] = []

    def try_offer_recorded(self, segment, base, limit, stop, block, max_length, wait) -> int:
        self.waits.append(wait)
        self.position += self.step
        return self.position

    def try_offer_block(self, block) -> int:
        return aeronio.BACK_PRESSURED


class Reader:
    position = 0

    def mapped_segment(self) -> tuple[memoryview, int]:
        return memoryview(b""), 0

    def peek(self, limit: int, stop: int) -> Block:
        return Block(self.position, memoryview(bytes(64)))

    def close(self) -> None:
        pass


def test_a_run_waits_for_the_window_only_after_a_duty_cycle_that_offered():
    """A replay held back by a slow subscriber is left to the replayer's idle strategy (its
    sleeps, the limit doorbell), not to waits in runs that find the window still shut."""
    publication = HeldBackPublication()
    session = ReplaySession(
        1, 0, publication, Reader(), 1 << 40, lambda: (1 << 40, True), 10**9, 10**9, 0
    )
    session.do_work(0)  # CONNECTING -> REPLAYING
    works = []
    for step in (4096, 4096, 0, 0, 0, 4096, 4096):
        publication.step = step
        works.append(session.do_work(0))
    assert works == [1, 1, 0, 0, 0, 1, 1]
    wait = WINDOW_WAIT_NS
    assert publication.waits == [wait, wait, wait, 0, 0, 0, wait]


@pytest.mark.parametrize("connected", [False, True], ids=["never connected", "subscriber went"])
def test_a_replay_that_ends_incomplete_says_why_as_the_reference(connected):
    """No subscriber within the connect timeout, or the subscriber gone before the replay is
    complete: an ERROR for the request with the reference's texts (once, at close), not a
    failure of the archive's. It used to end without a word."""
    publication = HeldBackPublication()
    publication.is_connected = connected
    ended = []
    session = ReplaySession(
        1, 0, publication, Reader(), 1 << 40, lambda: (1 << 40, True), 10, 10, 0,
        lambda message, failed: ended.append((message, failed)),
    )  # fmt: skip
    if connected:
        session.do_work(0)  # REPLAYING
        publication.is_connected = False
    session.do_work(5)
    assert session.state is (State.DONE if connected else State.CONNECTING)
    session.do_work(11)
    assert session.state is State.DONE
    session.close()
    if connected:
        assert ended == [("stream closed before replay is complete", False)]
    else:
        assert ended == [("no connection established for replay", False)]
