"""Loss detection on a rebuilding image (Aeron's LossDetector), sans-IO.

The gap scanner reports the first gap between the rebuild position and the high-water mark; a new
gap is NAKed after a delay (0 for unicast: at once; for multicast a random one, so that of many
receivers missing the same data one NAKs first and the others, hearing it, hold theirs back) and
again every `retry_ns` while the same gap stays open.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

DEFAULT_RETRY_NS = 60_000_000
# Multicast NAK delays (RFC 5401's randomised back-off): at most this long, drawn for a group of
# about this many receivers. Aeron's maximum is 60 ms; aeronio NAKs a gap at a time as Aeron
# does, so under steady loss a shorter wait keeps a lossy receiver closer to the others.
MULTICAST_MAX_BACKOFF_NS = 10_000_000
MULTICAST_GROUP_SIZE = 10


def multicast_nak_delay(
    max_backoff_ns: int = MULTICAST_MAX_BACKOFF_NS,
    group_size: int = MULTICAST_GROUP_SIZE,
    rng: random.Random | None = None,
) -> Callable[[], int]:
    """Draws NAK delays in [0, max_backoff_ns), skewed towards the maximum (a truncated
    exponential with rate ln(group_size) + 1): few receivers of a group NAK early."""
    rate = math.log(group_size) + 1
    uniform = (rng or random.Random()).random

    def draw() -> int:
        return int(max_backoff_ns * math.log1p(uniform() * math.expm1(rate)) / rate)

    return draw


class LossDetector:
    def __init__(
        self,
        delay_ns: int = 0,
        retry_ns: int = DEFAULT_RETRY_NS,
        delay: Callable[[], int] | None = None,
    ):
        """A new gap is NAKed after `delay()` if given, else after `delay_ns`."""
        self.delay_ns = delay_ns
        self.retry_ns = retry_ns
        self._delay = delay
        self._gap: tuple[int, int, int] | None = None
        self._deadline_ns = 0

    @property
    def active(self) -> bool:
        """A gap is open (on_gap must hear when it closes)."""
        return self._gap is not None

    @property
    def deadline_ns(self) -> int | None:
        """When the open gap is (again) NAKed, unless it closes first (None: no gap)."""
        return None if self._gap is None else self._deadline_ns

    def on_gap(self, gap: tuple[int, int, int] | None, now_ns: int) -> tuple[int, int, int] | None:
        """Given the current gap (term_id, term_offset, length) or None, the gap to NAK now."""
        if gap is None:
            self._gap = None
            return None
        if gap != self._gap:
            self._gap = gap
            self._deadline_ns = now_ns + (self._delay() if self._delay else self.delay_ns)
        if now_ns >= self._deadline_ns:
            self._deadline_ns = now_ns + self.retry_ns
            return gap
        return None

    def on_nak_heard(self, term_id: int, term_offset: int, length: int, now_ns: int) -> bool:
        """Another receiver NAKed a range: if it covers the start of the open gap, the
        retransmission is on its way, so this receiver's NAK waits a retry interval (NAK
        suppression). True if it did."""
        gap = self._gap
        if gap is None or gap[0] != term_id or not term_offset <= gap[1] < term_offset + length:
            return False
        self._deadline_ns = max(self._deadline_ns, now_ns + self.retry_ns)
        return True
