"""Loss detection on a rebuilding image (Aeron's LossDetector), sans-IO.

The gap scanner reports the first gap between the rebuild position and the high-water mark; a new
gap is NAKed after `delay_ns` (0 for unicast: at once) and again every `retry_ns` while the same
gap stays open.
"""

from __future__ import annotations

DEFAULT_RETRY_NS = 60_000_000


class LossDetector:
    def __init__(self, delay_ns: int = 0, retry_ns: int = DEFAULT_RETRY_NS):
        self.delay_ns = delay_ns
        self.retry_ns = retry_ns
        self._gap: tuple[int, int, int] | None = None
        self._deadline_ns = 0

    @property
    def active(self) -> bool:
        """A gap is open (on_gap must hear when it closes)."""
        return self._gap is not None

    def on_gap(self, gap: tuple[int, int, int] | None, now_ns: int) -> tuple[int, int, int] | None:
        """Given the current gap (term_id, term_offset, length) or None, the gap to NAK now."""
        if gap is None:
            self._gap = None
            return None
        if gap != self._gap:
            self._gap = gap
            self._deadline_ns = now_ns + self.delay_ns
        if now_ns >= self._deadline_ns:
            self._deadline_ns = now_ns + self.retry_ns
            return gap
        return None
