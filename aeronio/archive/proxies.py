"""What the archive sends: control responses to one client, recording events to all.

A control response the publication cannot take now waits in order
(`ControlResponseProxy.pending`, `pending_bytes` long) and goes on a later duty cycle; its
control session bounds that backlog (`control_session.py`). A response must fit in one
message of the publication (`max_message_length`, an eighth of the client's term length): an
error's text, which may quote a client's input at any length, is cut to fit; anything else too
long is refused (`encode` gives None). Recording events are best effort, as the reference's: an
event no subscriber can take now is dropped (counted).
"""

from __future__ import annotations

from collections import deque

import msgspec

from aeronio.archive import codecs
from aeronio.client.publication import Publication

CUT = "..."  # ends an error's text cut to fit


class ControlResponseProxy:
    """The response publication of one control session, with its backlog."""

    def __init__(self, publication: Publication):
        self.publication = publication
        self.pending: deque[bytes] = deque()
        self.pending_bytes = 0

    def encode(self, message: codecs.Message) -> bytes | None:
        """`message` as one message of the publication, an error's text cut (ending in "...")
        to fit; None if it cannot fit."""
        data = message.encode()
        over = len(data) - self.publication.max_message_length
        if over > 0 and isinstance(message, codecs.ControlResponse):
            keep = len(message.error_message) - over - len(CUT)  # ASCII: a byte a character
            if keep >= 0:
                cut = message.error_message[:keep] + CUT
                data = msgspec.structs.replace(message, error_message=cut).encode()
        return data if len(data) <= self.publication.max_message_length else None

    def send(self, data: bytes) -> int:
        """Queue `data` (from `encode`) behind what waits and offer; returns how many went."""
        self.pending.append(data)
        self.pending_bytes += len(data)
        return self.flush()

    def flush(self) -> int:
        """Offer what waits; returns how many went."""
        sent = 0
        while self.pending:
            if self.publication.try_offer(self.pending[0]) < 0:
                break
            self.pending_bytes -= len(self.pending.popleft())
            sent += 1
        return sent

    def drop(self) -> None:
        """Forget what waits (its session is closing)."""
        self.pending.clear()
        self.pending_bytes = 0


class RecordingEventsProxy:
    """The recording events publication (started, progress, stopped)."""

    def __init__(self, publication: Publication | None):
        self.publication = publication
        self.dropped = 0

    def send(self, message: codecs.Message) -> None:
        if self.publication is not None and self.publication.try_offer(message.encode()) < 0:
            self.dropped += 1
