"""A heartbeat watched for progress, on the watcher's own monotonic clock.

A driver stores its heartbeat (epoch ms) in cnc.dat, a client its own in a counter, and Aeron
judges each by comparing that stamp with the watcher's wall clock. A wall clock that steps (a
virtual machine resumed, NTP correcting a fresh machine) then ends a healthy peer: one step of
twenty seconds and every client and driver looks dead. `HeartbeatWatch` judges the other way:
a peer is silent while its stamp stays the same, for as long as the watcher's monotonic clock
says, whatever the stamp holds.

Rules:
- **Any change is a beat.** A stamp that moves back (the writer's clock stepped back) is one too.
- **A look counts one period at most.** The watcher looks every `period_ns`; a longer gap since
  the last look counts as one period. The watcher itself was stalled, and a peer on its loop (an
  embedded driver, a client of it) could not beat either: the stall is judged apart (a client's
  keepalive task raises ClientTimeoutError for its own). A busy watcher, looking late, takes
  longer to call a peer silent, never less.
"""

from __future__ import annotations


class HeartbeatWatch:
    """How long a heartbeat stamp has stood still (`look`), from `stamp` seen at `now_ns`."""

    def __init__(self, stamp: int, now_ns: int, period_ns: int):
        self._stamp = stamp
        self._looked_ns = now_ns
        self._period_ns = period_ns
        self.silent_ns = 0

    def look(self, stamp: int, now_ns: int) -> int:
        """The stamp read at `now_ns` (monotonic): the time it has stood still (0 if it moved)."""
        gap_ns = max(0, now_ns - self._looked_ns)
        self._looked_ns = now_ns
        if stamp != self._stamp:
            self._stamp, self.silent_ns = stamp, 0
        else:
            self.silent_ns += min(gap_ns, self._period_ns)
        return self.silent_ns
