"""What the archive sends: control responses to one client, recording events to all.

Control responses are never dropped: a response the publication cannot take now waits in
order (`ControlResponseProxy.pending`) and goes on a later duty cycle. Recording events are
best effort, as the reference's: an event no subscriber can take now is dropped (counted).
"""

from __future__ import annotations

from collections import deque

from aeronio.archive import codecs
from aeronio.client.publication import Publication


class ControlResponseProxy:
    """The response publication of one control session, with its backlog."""

    def __init__(self, publication: Publication):
        self.publication = publication
        self.pending: deque[bytes] = deque()

    def send(self, message: codecs.Message) -> None:
        self.pending.append(message.encode())
        self.flush()

    def response(self, session_id: int, correlation_id: int, relevant_id: int, code, text=""):
        self.send(codecs.ControlResponse(session_id, correlation_id, relevant_id, code, text))

    def flush(self) -> int:
        """Offer what waits; returns how many went."""
        sent = 0
        while self.pending:
            if self.publication.try_offer(self.pending[0]) < 0:
                break
            self.pending.popleft()
            sent += 1
        return sent


class RecordingEventsProxy:
    """The recording events publication (started, progress, stopped)."""

    def __init__(self, publication: Publication | None):
        self.publication = publication
        self.dropped = 0

    def send(self, message: codecs.Message) -> None:
        if self.publication is not None and self.publication.try_offer(message.encode()) < 0:
            self.dropped += 1
