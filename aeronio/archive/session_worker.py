"""SessionWorker: sessions polled on a thread of their own, each under its lock (the reference
archive's SessionWorker, the base of its recorder and replayer agents in DEDICATED mode).

The rules
---------
- The conductor adds and removes sessions (`add`, `remove`: the tuple of sessions is replaced,
  never changed in place, so the thread reads a consistent one without a lock).
- The thread runs `_run` (each worker's duty cycles and idle strategy) until `close`, which
  stops and joins it; `_wake` cuts a sleep short.
- `on_done` is rung (on the worker's thread) when a session becomes DONE; the conductor then
  removes and closes it on the loop.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar


class Session(Protocol):
    lock: threading.Lock


S = TypeVar("S", bound=Session)

# A worker that finds nothing to do sleeps this long at first, doubling to the most.
MIN_PARK_S, MAX_PARK_S = 1e-5, 1e-3


class SessionWorker(ABC, Generic[S]):
    def __init__(self, name: str, on_done: Callable[[], None] = lambda: None):
        self._on_done = on_done  # a session became DONE (called on the worker's thread)
        self._sessions: tuple[S, ...] = ()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def __contains__(self, session: object) -> bool:
        return session in self._sessions

    def add(self, session: S) -> None:
        self._sessions = (*self._sessions, session)
        self._wake.set()

    def remove(self, session: S) -> None:
        self._sessions = tuple(s for s in self._sessions if s is not session)

    @abstractmethod
    def _run(self) -> None:
        """The worker's duty cycles and idle strategy, until `_stop` is set."""

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()
