"""ControlSession: one client of the archive, from its ConnectRequest to its close.

States
------
- CONNECTING: the response publication is made; when it has a subscriber the session answers
  the ConnectRequest (OK, relevant id = the control session id) and is ACTIVE. No subscriber
  within the connect timeout: DONE.
- ACTIVE: requests are answered in order on the response publication (`ControlResponseProxy`
  keeps what it cannot take yet). A response publication that loses its subscriber for the
  message timeout, or a CloseSessionRequest, ends it: DONE.

A client that does not read its answers ends its session too, as the reference's
(`ControlSession`: "failed to send response for more than connectTimeoutMs"): responses that
wait with none sent for the message timeout, or more than `max_pending_bytes` of them waiting,
abort it (DONE, the backlog dropped, `abort_reason` says why). Its memory stays bounded
whatever it sends. A response that cannot fit in one message of its response channel (a
descriptor of a long channel, to a client with a small term length) aborts it too; an error's
text is cut to fit instead (`ControlResponseProxy.encode`).

Listings (`list_recordings*`) are answered a batch of descriptors per duty cycle, as the
reference does, so a long listing never stalls the archive.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Iterator

from aeronio.archive import codecs
from aeronio.archive.proxies import ControlResponseProxy

LISTING_BATCH = 16  # descriptors sent per duty cycle per listing


class State(enum.Enum):
    CONNECTING = 1
    ACTIVE = 2
    DONE = 3


class ControlSession:
    def __init__(
        self,
        control_session_id: int,
        connect_correlation_id: int,
        proxy: ControlResponseProxy,
        connect_timeout_ns: int,
        message_timeout_ns: int,
        max_pending_bytes: int,
        now_ns: int,
    ):
        self.control_session_id = control_session_id
        self.connect_correlation_id = connect_correlation_id
        self.proxy = proxy
        self.message_timeout_ns = message_timeout_ns
        self.max_pending_bytes = max_pending_bytes
        self.state = State.CONNECTING
        self.abort_reason: str | None = None
        self._deadline_ns = now_ns + connect_timeout_ns
        self._send_deadline_ns: int | None = None  # set while responses wait and none go
        self._listings: deque[Iterator[codecs.Message]] = deque()

    def do_work(self, now_ns: int) -> int:
        publication = self.proxy.publication
        if self.state is State.CONNECTING:
            if publication.is_connected:
                self.state = State.ACTIVE
                self.ok(self.connect_correlation_id, self.control_session_id)
                return 1
            if now_ns > self._deadline_ns:
                self.state = State.DONE
            return 0
        if self.state is not State.ACTIVE:
            return 0
        if publication.is_connected:
            self._deadline_ns = now_ns + self.message_timeout_ns
        elif now_ns > self._deadline_ns:
            self.state = State.DONE
            return 0
        work = self.proxy.flush()
        if work or not self.proxy.pending:
            self._send_deadline_ns = None
        elif self._send_deadline_ns is None:
            self._send_deadline_ns = now_ns + self.message_timeout_ns
        elif now_ns > self._send_deadline_ns:
            self.abort(
                f"failed to send response for more than {self.message_timeout_ns // 1_000_000} ms"
            )
            return work
        if self._listings and not self.proxy.pending:
            listing = self._listings[0]
            for _ in range(LISTING_BATCH):
                message = next(listing, None)
                if message is None:
                    self._listings.popleft()
                    break
                self.send(message)
                work += 1
                if self.abort_reason is not None:  # aborted: its listings are dropped
                    break
        return work

    @property
    def busy(self) -> bool:
        """Connecting, or with answers still to send: its duty cycle has work nothing signals."""
        return self.state is State.CONNECTING or bool(self.proxy.pending or self._listings)

    # -- responses ------------------------------------------------------------------------

    def send(self, message: codecs.Message) -> None:
        """Send `message` now or after what waits; past `max_pending_bytes` waiting, abort."""
        if self.state is State.DONE:
            return
        data = self.proxy.encode(message)
        if data is None:
            self.abort(
                f"a {type(message).__name__} of {len(message.encode())} bytes does not fit the "
                f"response channel's max message length {self.proxy.publication.max_message_length}"
            )
            return
        if self.proxy.send(data):
            self._send_deadline_ns = None  # progress
        if self.proxy.pending_bytes > self.max_pending_bytes:
            self.abort(
                f"{self.proxy.pending_bytes} bytes of responses wait, over the "
                f"{self.max_pending_bytes} allowed (max_pending_response_bytes)"
            )

    def ok(self, correlation_id: int, relevant_id: int = 0) -> None:
        self._response(correlation_id, relevant_id, codecs.ControlResponseCode.OK)

    def error(self, correlation_id: int, error_code: int, message: str) -> None:
        self._response(correlation_id, error_code, codecs.ControlResponseCode.ERROR, message)

    def recording_unknown(self, correlation_id: int, recording_id: int) -> None:
        self._response(correlation_id, recording_id, codecs.ControlResponseCode.RECORDING_UNKNOWN)

    def _response(self, correlation_id: int, relevant_id: int, code: int, text: str = "") -> None:
        text = text.encode("ascii", "replace").decode("ascii")  # SBE's text is ASCII: "?" else
        self.send(
            codecs.ControlResponse(self.control_session_id, correlation_id, relevant_id, code, text)
        )

    def list(self, messages: Callable[[], Iterator[codecs.Message]]) -> None:
        """Answer a listing over the next duty cycles (descriptors, maybe RECORDING_UNKNOWN)."""
        self._listings.append(messages())

    def close(self) -> None:
        self.state = State.DONE

    def abort(self, reason: str) -> None:
        """End the session now, its waiting responses and listings dropped."""
        self.state = State.DONE
        self.abort_reason = reason
        self.proxy.drop()
        self._listings.clear()
