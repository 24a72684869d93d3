"""Sender flow control: how far a network publication may send (sans-IO).

A strategy turns the Status Messages (SMs) of the receivers into the sender limit: the position
the publication may send up to. Unicast follows its one receiver; multicast and MDC publications
pick a strategy with the channel's ``fc=`` parameter (its grammar: `protocol.channel.
parse_flow_control`): ``max`` (the default: the fastest receiver paces), ``min`` (the slowest
receiver paces) or ``tagged`` (the slowest receiver among those whose subscription channel has
``gtag=<tag>`` paces). Setup-eliciting SMs never count.
"""

from __future__ import annotations

import struct
from typing import Protocol

from aeronio.logbuffer import descriptor as d
from aeronio.protocol.channel import parse_flow_control
from aeronio.protocol.frames import StatusMessage

__all__ = [
    "RECEIVER_TIMEOUT_NS",
    "FlowControl",
    "MaxFlowControl",
    "MinFlowControl",
    "TaggedFlowControl",
    "UnicastFlowControl",
    "flow_control_for",
    "group_tag_feedback",
    "receiver_window",
]

RECEIVER_TIMEOUT_NS = 2_000_000_000  # a receiver silent this long no longer counts
DEFAULT_RECEIVER_WINDOW = 128 * 1024

_GTAG = struct.Struct("<q")


class FlowControl(Protocol):
    """A sender flow control strategy: SMs and time in, sender limit out."""

    def on_status_message(
        self,
        sm: StatusMessage,
        sender_limit: int,
        initial_term_id: int,
        term_length: int,
        now_ns: int,
    ) -> int:
        """The new sender limit after `sm` arrived at `now_ns`."""
        ...

    def on_receiver_left(self, receiver_id: int, sender_limit: int) -> int:
        """Receiver `receiver_id` said farewell (an end-of-stream status message): it paces
        and counts no more (Aeron 1.53's); the new sender limit."""
        ...

    def on_idle(self, now_ns: int, sender_limit: int) -> int:
        """Drop receivers that timed out; the new sender limit."""
        ...

    @property
    def receiver_count(self) -> int:
        """The receivers tracked now (the fc-receivers counter)."""
        ...

    def has_required_receivers(self) -> bool:
        """Whether enough receivers are tracked for the publication to count as connected."""
        ...


def receiver_window(term_length: int, configured: int | None = None) -> int:
    """Aeron's static window: 128 KiB unless set (`rcv-wnd`), at most half a term (so that the
    receiver never lets a sender over-run what its subscribers still read)."""
    return min(configured or DEFAULT_RECEIVER_WINDOW, term_length // 2)


def group_tag_feedback(gtag: int | None) -> bytes:
    """The SM feedback a receiver sends for its channel's ``gtag`` (b"" without one)."""
    return b"" if gtag is None else _GTAG.pack(gtag)


def _position_of(sm: StatusMessage, initial_term_id: int, term_length: int) -> int:
    """The receiver's consumption position."""
    return d.compute_position(
        sm.consumption_term_id, sm.consumption_term_offset, term_length, initial_term_id
    )


def _limit_of(sm: StatusMessage, initial_term_id: int, term_length: int) -> int:
    """The receiver's consumption position plus its window."""
    return _position_of(sm, initial_term_id, term_length) + sm.receiver_window


class MaxFlowControl:
    """The fastest receiver paces the sender (the multicast and MDC default).

    Receivers are only tracked (by receiver id) for `receiver_count`; one silent for more than
    `timeout_ns` is dropped in `on_idle`.
    """

    def __init__(self, timeout_ns: int = RECEIVER_TIMEOUT_NS) -> None:
        self.timeout_ns = timeout_ns
        self._last_sm_ns: dict[int, int] = {}  # receiver id -> time of its last SM

    def on_status_message(
        self,
        sm: StatusMessage,
        sender_limit: int,
        initial_term_id: int,
        term_length: int,
        now_ns: int,
    ) -> int:
        if sm.is_setup_eliciting:
            return sender_limit
        self._last_sm_ns[sm.receiver_id] = now_ns
        return max(sender_limit, _limit_of(sm, initial_term_id, term_length))

    def on_receiver_left(self, receiver_id: int, sender_limit: int) -> int:
        self._last_sm_ns.pop(receiver_id, None)
        return sender_limit

    def on_idle(self, now_ns: int, sender_limit: int) -> int:
        silent = [r for r, t in self._last_sm_ns.items() if now_ns - t > self.timeout_ns]
        for receiver_id in silent:
            del self._last_sm_ns[receiver_id]
        return sender_limit

    @property
    def receiver_count(self) -> int:
        return len(self._last_sm_ns)

    def has_required_receivers(self) -> bool:
        return True


class UnicastFlowControl(MaxFlowControl):
    """One receiver paces the sender: limit = its consumption position + its window (what
    max flow control computes for a single receiver)."""


class MinFlowControl:
    """The slowest tracked receiver paces the sender: limit = min(position + window).

    A receiver (by receiver id) is tracked from its first SM until it is silent for more than
    `timeout_ns` (dropped in `on_idle`, so a dead receiver stops holding the sender back). One
    not tracked joins only if its position is within its window of the slowest tracked one's
    (Aeron's rule, which for equal windows is the same on position plus window): one back
    from far behind (a driver paused past its timeout) cannot catch up from the term the
    sender keeps, and taken in it would hold every receiver until its image timed out. The
    limit may go down when a slower receiver joins. Fewer than `min_group_size` tracked: it
    stays put, and the publication does not count as connected. None tracked while none are
    required (`min_group_size` 0): any receiver's SM moves it on, as max flow control (Aeron's;
    with tagged flow control, the receivers outside the group then pace it).
    """

    def __init__(self, timeout_ns: int = RECEIVER_TIMEOUT_NS, min_group_size: int = 0) -> None:
        self.timeout_ns = timeout_ns
        self.min_group_size = min_group_size
        # receiver id -> (position, position + window, time of its last SM)
        self._receivers: dict[int, tuple[int, int, int]] = {}

    def _is_member(self, sm: StatusMessage) -> bool:
        """Whether `sm`'s receiver is one of those that pace the sender."""
        return True

    def _limit(self, sender_limit: int) -> int:
        if not self._receivers or len(self._receivers) < self.min_group_size:
            return sender_limit
        return min(limit for _, limit, _ in self._receivers.values())

    def on_status_message(
        self,
        sm: StatusMessage,
        sender_limit: int,
        initial_term_id: int,
        term_length: int,
        now_ns: int,
    ) -> int:
        if sm.is_setup_eliciting:
            return sender_limit
        position = _position_of(sm, initial_term_id, term_length)
        if not self._is_member(sm):
            if self._receivers or self.min_group_size:
                return sender_limit
            return max(sender_limit, position + sm.receiver_window)  # none in the group yet
        if sm.receiver_id not in self._receivers and self._receivers:
            slowest = min(tracked for tracked, _, _ in self._receivers.values())
            if position < slowest - sm.receiver_window:
                return sender_limit  # too far behind the group to join it
        self._receivers[sm.receiver_id] = (position, position + sm.receiver_window, now_ns)
        return self._limit(sender_limit)

    def on_receiver_left(self, receiver_id: int, sender_limit: int) -> int:
        if self._receivers.pop(receiver_id, None) is None:
            return sender_limit
        return self._limit(sender_limit)

    def on_idle(self, now_ns: int, sender_limit: int) -> int:
        silent = [r for r, (_, _, t) in self._receivers.items() if now_ns - t > self.timeout_ns]
        if not silent:
            return sender_limit
        for receiver_id in silent:
            del self._receivers[receiver_id]
        return self._limit(sender_limit)

    @property
    def receiver_count(self) -> int:
        return len(self._receivers)

    def has_required_receivers(self) -> bool:
        """The group minimum is tracked (with none required, receivers outside the group are
        enough: the publication is connected while one is live)."""
        return len(self._receivers) >= self.min_group_size


class TaggedFlowControl(MinFlowControl):
    """Like :class:`MinFlowControl`, over the receivers whose SMs carry `group_tag` only.

    The tag is the SM feedback: exactly 8 bytes, a little-endian int64 (see
    :func:`group_tag_feedback`). Other receivers are not tracked; they pace the sender only
    while no group member is and none is required (`g:<tag>` without `/<size>`).
    """

    def __init__(
        self, group_tag: int, min_group_size: int = 0, timeout_ns: int = RECEIVER_TIMEOUT_NS
    ) -> None:
        super().__init__(timeout_ns, min_group_size)
        self.group_tag = group_tag
        self._feedback = group_tag_feedback(group_tag)

    def _is_member(self, sm: StatusMessage) -> bool:
        return sm.feedback == self._feedback


def flow_control_for(fc: str | None, one_to_many: bool) -> FlowControl:
    """The strategy for a publication: its ``fc=`` value, else max (multicast/MDC) or unicast."""
    if fc is None:
        return MaxFlowControl() if one_to_many else UnicastFlowControl()
    spec = parse_flow_control(fc)
    options = {"timeout_ns": spec.timeout_ns} if spec.timeout_ns is not None else {}
    if spec.strategy == "max":
        return MaxFlowControl(**options)
    if spec.strategy == "min":
        return MinFlowControl(min_group_size=spec.min_group_size, **options)
    assert spec.group_tag is not None  # parse_flow_control requires one of "tagged"
    return TaggedFlowControl(spec.group_tag, spec.min_group_size, **options)
