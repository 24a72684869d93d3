"""The driver's side of an IPC publication: the log, its limit and cleaning, its subscribers.

Driven by the conductor's duty cycle with the time passed in; it touches only the log and the
position counters.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field

from aeronio._core import unblock_log
from aeronio.counters import Counter
from aeronio.logbuffer import descriptor as d
from aeronio.logbuffer import signals
from aeronio.logbuffer.log_buffers import LogBuffers


class State(enum.Enum):
    ACTIVE = "active"
    DRAINING = "draining"
    LINGER = "linger"
    DONE = "done"


@dataclass(eq=False)
class SubscriberPosition:
    """One subscription's position on one publication's image."""

    subscription_registration_id: int
    counter: Counter


def slowest(subscribers: list[SubscriberPosition]) -> int | None:
    """The least position of the subscribers (None without any)."""
    if not subscribers:
        return None
    if len(subscribers) == 1:  # the common case
        return subscribers[0].counter.get()
    return min(sub.counter.get() for sub in subscribers)


@dataclass(eq=False)
class IpcPublication:
    registration_id: int
    session_id: int
    stream_id: int
    channel: str
    exclusive: bool
    log: LogBuffers
    log_file: str
    publisher_limit: Counter
    publisher_position: Counter
    term_window_length: int
    unblock_timeout_ns: int
    linger_ns: int
    unblocked_counter: Counter
    ref_count: int = 1
    state: State = State.ACTIVE
    subscribers: list[SubscriberPosition] = field(default_factory=list)
    clean_position: int = 0
    last_consumer_position: int = 0
    time_of_last_consumer_change_ns: int = 0
    time_of_state_change_ns: int = 0
    media_key: str = "ipc"  # publications share a log only within one media key
    limit_consumer_position: int | None = None  # the consumer position the limit was set for

    def __post_init__(self) -> None:
        self.signals = signals.acquire(self.log_file)
        position = self.log.producer_position
        self.clean_position = position
        self.last_consumer_position = position
        self.publisher_limit.set(position)
        self.publisher_position.set(position)

    @property
    def producer_position(self) -> int:
        return self.log.producer_position

    def join_position(self) -> int:
        return self.producer_position

    def add_subscriber(self, position: SubscriberPosition) -> None:
        self.subscribers.append(position)
        self._subscribers_changed()

    def remove_subscriber(self, subscription_registration_id: int) -> SubscriberPosition | None:
        for sub in self.subscribers:
            if sub.subscription_registration_id == subscription_registration_id:
                self.subscribers.remove(sub)
                self._subscribers_changed()
                return sub
        return None

    def _subscribers_changed(self) -> None:
        """An IPC publication is connected while it has subscribers."""
        self.log.mapped.set_connected(bool(self.subscribers))

    def consumer_position(self) -> int | None:
        return slowest(self.subscribers)

    def update_publisher_limit(self) -> int:
        """Clean behind the slowest subscriber, then let the publisher run a window past it
        (nothing to do while an active publication's consumers have not moved)."""
        consumer = self.consumer_position()
        if consumer is not None and consumer == self.limit_consumer_position:
            if self.state is State.ACTIVE:
                return 0
        self.limit_consumer_position = consumer
        producer = self.producer_position
        self.publisher_position.set(producer)
        if consumer is None or self.state is not State.ACTIVE:
            limit = self.publisher_limit.get()
            if consumer is None and limit > producer:
                self.publisher_limit.set(producer)
            return 0
        work = self._clean_to(consumer)
        proposed = consumer + self.term_window_length
        if proposed > self.publisher_limit.get():
            self.publisher_limit.set(proposed)
            self._wake_publishers()
            work += 1
        return work

    def _wake_publishers(self) -> None:
        if self.signals.limit.waiters:
            self.signals.limit.ring()
        self.log.mapped.wake_space_waiters()

    def _clean_to(self, position: int) -> int:
        work = 0
        while self.clean_position < position:
            cleaned = self.log.mapped.clean(self.clean_position, position)
            self.clean_position += cleaned
            work += 1
        return work

    def unblock_position(self) -> int | None:
        """Where a frame left unfinished would hold every consumer up."""
        return self.consumer_position()

    def check_for_blocked_publisher(self, now_ns: int) -> bool:
        """Unblock a frame left unfinished at the consumers' position past the unblock timeout."""
        consumer = self.unblock_position()
        if consumer is None:
            return False
        if consumer == self.last_consumer_position and self._possibly_blocked(consumer):
            if now_ns - self.time_of_last_consumer_change_ns > self.unblock_timeout_ns:
                if unblock_log(self.log.mapped, consumer):
                    self.unblocked_counter.increment()
                    self.time_of_last_consumer_change_ns = now_ns
                    return True
        else:
            self.last_consumer_position = consumer
            self.time_of_last_consumer_change_ns = now_ns
        return False

    def _possibly_blocked(self, consumer: int) -> bool:
        """Data (or a term rotation) is pending beyond where the consumers stopped."""
        term_count = consumer >> d.position_bits_to_shift(self.log.term_length)
        return self.log.active_term_count != term_count or self.producer_position > consumer

    def close(self, now_ns: int) -> None:
        """The last client let go: mark the end of the stream and drain the subscribers."""
        self.log.mapped.set_end_of_stream_position(self.producer_position)
        self.state = State.DRAINING
        self.time_of_state_change_ns = now_ns
        self._wake_publishers()

    def on_time_event(self, now_ns: int) -> bool:
        """Advance DRAINING -> LINGER -> DONE; True when the publication may be deleted."""
        if self.state is State.DRAINING:
            consumer = self.consumer_position()
            drained = consumer is None or consumer >= self.producer_position
            timed_out = now_ns - self.time_of_state_change_ns > self.unblock_timeout_ns
            if drained or timed_out:
                self.state = State.LINGER
                self.time_of_state_change_ns = now_ns
        elif self.state is State.LINGER:
            if now_ns - self.time_of_state_change_ns >= self.linger_ns:
                self.state = State.DONE
        return self.state is State.DONE

    def delete(self) -> None:
        self.log.close()
        signals.release(self.log_file)
        try:
            os.unlink(self.log_file)
        except FileNotFoundError:
            pass
