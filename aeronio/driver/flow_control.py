"""Sender flow control: how far a network publication may send (sans-IO)."""

from __future__ import annotations

from aeronio.logbuffer import descriptor as d
from aeronio.protocol.frames import StatusMessage


class UnicastFlowControl:
    """One receiver paces the sender: limit = its consumption position + its window."""

    def on_status_message(
        self, sm: StatusMessage, sender_limit: int, initial_term_id: int, term_length: int
    ) -> int:
        position = d.compute_position(
            sm.consumption_term_id, sm.consumption_term_offset, term_length, initial_term_id
        )
        return max(sender_limit, position + sm.receiver_window)
