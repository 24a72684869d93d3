"""Recorder: the recording sessions' duty cycle on a thread of its own, as the reference's
recorder agent in its DEDICATED threading mode, so that writing to disk overlaps the work of
the event loop (publishers, the driver, replays).

The rules
---------
- The thread polls each session (block_poll, then pwrite, which releases the GIL); when a
  cycle finds nothing it backs off to sleeps of up to a millisecond.
- A session is polled under its lock, by this thread or, to drain it before its subscription
  closes, by the conductor: never by both at once.
- The conductor owns sessions' lifecycles: it adds them here, and when one is DONE (read on its
  own duty cycle) removes it and closes it on the loop.
"""

from __future__ import annotations

import threading

from aeronio.archive.recording_session import RecordingSession

_MIN_PARK_S, _MAX_PARK_S = 1e-5, 1e-3


class Recorder:
    def __init__(self):
        self._sessions: tuple[RecordingSession, ...] = ()  # replaced, never changed in place
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="aeronio-recorder", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def add(self, session: RecordingSession) -> None:
        self._sessions = (*self._sessions, session)
        self._wake.set()

    def remove(self, session: RecordingSession) -> None:
        self._sessions = tuple(s for s in self._sessions if s is not session)

    def _run(self) -> None:
        park = _MIN_PARK_S
        while not self._stop.is_set():
            work = 0
            for session in self._sessions:
                with session.lock:
                    work += session.do_work()
            if work:
                park = _MIN_PARK_S
            else:
                self._wake.wait(park)
                self._wake.clear()
                park = min(park * 2, _MAX_PARK_S)

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()
