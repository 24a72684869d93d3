"""Which NAKed ranges to resend, and when (Aeron 1.53's RetransmitHandler), sans-IO.

## The rules

- A NAK whose offset lies inside a range already in hand (waiting to be resent, or resent and
  lingering) of its term is ignored: it was sent before that resend reached its receiver.
- A unicast publication keeps one range in hand: a NAK outside it replaces it. A group
  (multicast, multi-destination-cast) keeps up to `max_resend`: a NAK that finds them all in
  hand is dropped and said to `on_overflow` (the Retransmit Pool Overflow counter).
- A range is resent `delay_ns` after its NAK (0: at once), then lingers `linger_ns`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

DEFAULT_LINGER_NS = 10_000_000  # Aeron's retransmit linger
MAX_RESEND = 16  # Aeron's ranges in hand for a group


def _nobody() -> None:
    """An `on_overflow` that counts nothing."""


@dataclass(slots=True)
class _Action:
    term_id: int
    term_offset: int
    length: int
    deadline_ns: int
    lingering: bool = False

    def covers(self, term_id: int, term_offset: int) -> bool:
        return term_id == self.term_id and 0 <= term_offset - self.term_offset < self.length


class RetransmitHandler:
    def __init__(
        self,
        *,
        group: bool = False,
        max_resend: int = MAX_RESEND,
        delay_ns: int = 0,
        linger_ns: int = DEFAULT_LINGER_NS,
        on_overflow: Callable[[], object] = _nobody,
    ):
        self.group = group
        self.capacity = max_resend if group else 1
        self.delay_ns = delay_ns
        self.linger_ns = linger_ns
        self.on_overflow = on_overflow
        self._actions: list[_Action] = []

    @property
    def pending(self) -> bool:
        """Ranges scheduled or lingering."""
        return bool(self._actions)

    @property
    def scheduled(self) -> bool:
        """Ranges waiting to be resent (not just lingering)."""
        return any(not action.lingering for action in self._actions)

    def deadline_ns(self) -> int | None:
        """When `due` next has a range to resend or a lingerer to drop (None: nothing in hand)."""
        return min((action.deadline_ns for action in self._actions), default=None)

    def on_nak(self, term_id: int, term_offset: int, length: int, now_ns: int) -> bool:
        """Schedule a resend; False when the NAK falls in a range in hand, or a group has no
        room for it (said to `on_overflow`)."""
        if any(action.covers(term_id, term_offset) for action in self._actions):
            return False
        if len(self._actions) >= self.capacity:
            if self.group:
                self.on_overflow()
                return False
            self._actions.clear()  # unicast: the one range in hand is replaced
        self._actions.append(_Action(term_id, term_offset, length, now_ns + self.delay_ns))
        return True

    def due(self, now_ns: int) -> list[tuple[int, int, int]]:
        """The (term_id, term_offset, length) ranges to resend now; drops expired lingerers."""
        resend = []
        for action in list(self._actions):
            if now_ns < action.deadline_ns:
                continue
            if action.lingering:
                self._actions.remove(action)
            else:
                resend.append((action.term_id, action.term_offset, action.length))
                action.lingering = True
                action.deadline_ns = now_ns + self.linger_ns
        return resend
