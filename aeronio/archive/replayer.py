"""Replayer: the replay sessions' duty cycle on a thread of its own (a SessionWorker), as the
reference's replayer agent in its DEDICATED threading mode, so that the copy of recorded frames
into replay logs overlaps the work of the event loop (subscribers, the driver, recordings'
bookkeeping).

The rules
---------
- The conductor hands over a replay session once it is REPLAYING; this thread polls it (runs of
  blocks offered with the GIL released, see `replay_session.py`) through LINGER until DONE,
  then rings `on_done` and leaves it: the conductor removes and closes it on the loop.
- A session is polled under its lock: by this thread, or once by the conductor before a
  truncation (so that a replay whose subscriber went away ends first). The conductor takes the
  lock to stop a session and to close it: a duty cycle is short, as a run ends at a window
  still shut after a millisecond.
- With no session the thread sleeps until one is added. When a cycle finds nothing to do
  (the window shut, a live recording not further yet, a subscriber still reading what
  lingers) the thread backs off to sleeps of up to a millisecond, as the conductor did for
  replays; a publisher limit moved in this process rings the publication's limit doorbell,
  which wakes it at once.
- A duty cycle that raises (a bug) ends its session, with the error as its failure.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from aeronio.archive.replay_session import ReplaySession, State
from aeronio.archive.session_worker import MAX_PARK_S, MIN_PARK_S, SessionWorker

log = logging.getLogger("aeronio.archive")


class Replayer(SessionWorker[ReplaySession]):
    def __init__(self, on_done: Callable[[], None] = lambda: None):
        super().__init__("aeronio-replayer", on_done)

    def add(self, session: ReplaySession) -> None:
        limit = session.publication.signals.limit
        limit.add_callback(self._wake.set)
        limit.add_waiter()  # the driver rings the callbacks only while someone waits
        super().add(session)

    def remove(self, session: ReplaySession) -> None:
        if session not in self._sessions:
            return
        super().remove(session)
        limit = session.publication.signals.limit
        limit.remove_waiter()
        limit.remove_callback(self._wake.set)

    def _run(self) -> None:
        park = MIN_PARK_S
        while not self._stop.is_set():
            if not self._sessions:  # nothing to replay: asleep until a session comes
                self._wake.wait()
                self._wake.clear()
            elif self._do_work():
                park = MIN_PARK_S
            else:
                self._wake.wait(park)
                self._wake.clear()
                park = min(park * 2, MAX_PARK_S)

    def _do_work(self) -> int:
        work = 0
        for session in self._sessions:
            with session.lock:
                if _done(session):
                    continue
                try:
                    work += session.do_work(time.monotonic_ns())
                except Exception as e:  # a bug: the session ends, the thread goes on
                    log.exception("replay %d failed", session.replay_session_id)
                    session.fail(f"replay {session.replay_session_id} failed: {e!r}")
                if _done(session):
                    self._on_done()
        return work


def _done(session: ReplaySession) -> bool:
    return session.state is State.DONE
