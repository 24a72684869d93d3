"""Recorder: the recording sessions' duty cycle on a thread of its own (a SessionWorker), as the
reference's recorder agent in its DEDICATED threading mode, so that writing to disk overlaps the
work of the event loop (publishers, the driver, replays).

The rules
---------
- The thread polls each session (block_poll, then pwrite, which releases the GIL); when a
  cycle finds nothing it backs off to sleeps of up to a millisecond. Idle for longer
  (IDLE_CYCLES), it parks: an append rings the image's data doorbell, which wakes it, in this
  process (a publication, or the driver rebuilding an image) or from another through the log's
  wake slots, as a parked subscriber is woken; IDLE_PARK_S bounds a missed wake-up.
- A session is polled under its lock, by this thread or, to drain it before its subscription
  closes, by the conductor: never by both at once.
- The conductor owns sessions' lifecycles: it adds them here, and when one is DONE (read on its
  own duty cycle) removes it and closes it on the loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from aeronio.archive.recording_session import RecordingSession, State
from aeronio.archive.session_worker import MAX_PARK_S, MIN_PARK_S, SessionWorker
from aeronio.logbuffer import waker

log = logging.getLogger("aeronio.archive")

IDLE_CYCLES = 200  # idle cycles (at MAX_PARK_S: 0.2 s) before the longer park
IDLE_PARK_S = 0.1


class Recorder(SessionWorker[RecordingSession]):
    def __init__(self, on_done: Callable[[], None] = lambda: None):
        super().__init__("aeronio-recorder", on_done)

    def add(self, session: RecordingSession) -> None:
        session.image.signals.data.add_callback(self._wake.set)
        super().add(session)

    def remove(self, session: RecordingSession) -> None:
        super().remove(session)
        session.image.signals.data.remove_callback(self._wake.set)

    def _run(self) -> None:
        park, idle = MIN_PARK_S, 0
        while not self._stop.is_set():
            if self._do_work():
                park, idle = MIN_PARK_S, 0
            elif idle < IDLE_CYCLES:
                self._wake.wait(park)
                self._wake.clear()
                park, idle = min(park * 2, MAX_PARK_S), idle + 1
            else:
                self._park()

    def _do_work(self) -> int:
        work = 0
        for session in self._sessions:
            with session.lock:
                was_done = session.state is State.DONE
                try:
                    work += session.do_work()
                except Exception as e:  # a bug: the recording ends, the thread goes on
                    log.exception("recording %d failed", session.recording_id)
                    session.fail(e)
                if session.state is State.DONE and not was_done:
                    self._on_done()
        return work

    def _park(self) -> None:
        """Ask the sessions' images to ring on an append, look once more, then sleep."""
        sessions = self._sessions
        registrations = []
        for session in sessions:
            session.image.signals.data.add_waiter()
            registrations.append(waker.register_data_waiter(session.image.metadata))
        try:
            if not self._do_work():
                self._wake.wait(IDLE_PARK_S)
                self._wake.clear()
        finally:
            for session, registration in zip(sessions, registrations, strict=True):
                session.image.signals.data.remove_waiter()
                registration.cancel()
