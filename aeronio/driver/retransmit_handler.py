"""Which NAKed ranges to resend, and when (Aeron's RetransmitHandler), sans-IO.

A NAK for a range not already being handled schedules a resend after `delay_ns` (0 for unicast:
at once); once resent, the range lingers for `linger_ns`, during which further NAKs for it are
ignored (they were sent before the resend arrived).
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_LINGER_NS = 60_000_000
MAX_ACTIVE = 16


@dataclass(slots=True)
class _Action:
    term_id: int
    term_offset: int
    length: int
    deadline_ns: int
    lingering: bool = False


class RetransmitHandler:
    def __init__(self, delay_ns: int = 0, linger_ns: int = DEFAULT_LINGER_NS):
        self.delay_ns = delay_ns
        self.linger_ns = linger_ns
        self._actions: dict[tuple[int, int], _Action] = {}

    @property
    def pending(self) -> bool:
        """Ranges scheduled or lingering."""
        return bool(self._actions)

    @property
    def scheduled(self) -> bool:
        """Ranges waiting to be resent (not just lingering)."""
        return any(not action.lingering for action in self._actions.values())

    def deadline_ns(self) -> int | None:
        """When `due` next has a range to resend or a lingerer to drop (None: nothing in hand)."""
        return min((action.deadline_ns for action in self._actions.values()), default=None)

    def on_nak(self, term_id: int, term_offset: int, length: int, now_ns: int) -> bool:
        """Schedule a resend; False when the range is already scheduled or lingering (or too many
        ranges are in hand)."""
        key = (term_id, term_offset)
        if key in self._actions or len(self._actions) >= MAX_ACTIVE:
            return False
        self._actions[key] = _Action(term_id, term_offset, length, now_ns + self.delay_ns)
        return True

    def due(self, now_ns: int) -> list[tuple[int, int, int]]:
        """The (term_id, term_offset, length) ranges to resend now; drops expired lingerers."""
        resend = []
        for key, action in list(self._actions.items()):
            if now_ns < action.deadline_ns:
                continue
            if action.lingering:
                del self._actions[key]
            else:
                resend.append((action.term_id, action.term_offset, action.length))
                action.lingering = True
                action.deadline_ns = now_ns + self.linger_ns
        return resend
