"""What IPC and network publications share in the driver: the log, its publisher limit and
cleaning, the subscribers that read the log directly, unblocking, and the lifecycle (Aeron's):

- ACTIVE while clients hold it;
- DRAINING once the last lets go (the end of stream is where it stopped) until its consumers
  have everything (or none is connected, or they made no progress for the unblock timeout:
  however slowly they read, they get it all);
- LINGER for the linger timeout (an IPC publication's subscribers, drained, are told at its
  start that their image went); a network publication ends it as soon as its receivers have
  acknowledged everything and its spies read it (`NetworkPublication`), and says so when they
  have not in time;
- DONE: the end of its life (the conductor closes it).

A closing driver waits for the publications `awaiting_delivery` (bounded: media_driver.py)."""

from __future__ import annotations

import enum
import os
from collections.abc import Callable
from dataclasses import dataclass

from aeronio._core import unblock_log
from aeronio.counters import Counter
from aeronio.driver import storage
from aeronio.driver.client_proxy import ClientProxy
from aeronio.driver.raw_log_factory import free_log
from aeronio.driver.resources import SubscriberPosition
from aeronio.driver.stream_counters import StreamCounters
from aeronio.errors import StorageSpaceError
from aeronio.logbuffer import descriptor as d
from aeronio.logbuffer import signals
from aeronio.logbuffer.log_buffers import LogBuffers
from aeronio.protocol.channel import IPC_CHANNEL
from aeronio.protocol.control import CHANNEL_STATUS_INDICATOR_NOT_ALLOCATED


class State(enum.Enum):
    ACTIVE = "active"
    DRAINING = "draining"
    LINGER = "linger"
    DONE = "done"


@dataclass(frozen=True, kw_only=True)
class PublicationParts:
    """What a publication is made of (the conductor makes them; a network publication also
    has its sender): its log (from the RawLogFactory) and pub-lmt, pub-pos counters, its
    settings, and what it uses of the driver."""

    registration_id: int
    channel: str
    media_key: str
    exclusive: bool
    log: LogBuffers
    counters: list[Counter]  # pub-lmt, pub-pos
    term_window_length: int
    unblock_timeout_ns: int
    linger_ns: int
    unblocked_counter: Counter
    stream_counters: StreamCounters
    proxy: ClientProxy
    wake: Callable[[], None]
    report: Callable[[str], None]


class DriverPublication:
    """A publication's log in the driver. Subclasses say who its consumers are."""

    KIND = "publications"

    def __init__(self, parts: PublicationParts):
        log = parts.log
        self.registration_id = parts.registration_id
        self.session_id = log.session_id
        self.stream_id = log.stream_id
        self.channel = parts.channel
        self.media_key = parts.media_key  # publications share a log only within one media key
        self.exclusive = parts.exclusive
        self.log = log
        self.log_file = os.fspath(log.path)
        self.publisher_limit, self.publisher_position = parts.counters
        self.term_window_length = parts.term_window_length
        self.unblock_timeout_ns = parts.unblock_timeout_ns
        self.linger_ns = parts.linger_ns
        self.unblocked_counter = parts.unblocked_counter
        self._counters = parts.stream_counters
        self._proxy = parts.proxy
        self._wake = parts.wake
        self._report = parts.report  # where what a publication lost is said (the error log)
        self.ref_count = 1
        self.state = State.ACTIVE
        self.revoked = False
        self.subscribers: list[SubscriberPosition] = []
        self.time_of_state_change_ns = 0
        self.released_ns = 0  # when the last client let go
        self.drain_position: int | None = None  # where the draining consumers were last seen
        self.time_of_drain_progress_ns = 0  # when they were last seen moving
        self.time_of_last_consumer_change_ns = 0
        self.limit_consumer_position: int | None = None  # the consumer position of the limit
        position = self.start_position = log.producer_position
        self.clean_position = self.last_consumer_position = position
        self._pages = storage.LogPages(log, position, self._report)
        if self._pages.allocate(position) <= position:  # readers look at the first header
            raise StorageSpaceError(f"no room for the first page of the new log {log.path}")
        self._reach = storage.append_reach(log)
        self._held_short = False  # the limit, short of the log's pages
        self.publisher_limit.set(position)
        self.publisher_position.set(position)
        self.signals = signals.acquire(self.log_file)
        self.signals.consumed.add_callback(self._wake)

    @property
    def channel_status_id(self) -> int:
        """Its endpoint's channel status counter's id; IPC has none (Aeron's NOT_ALLOCATED)."""
        return CHANNEL_STATUS_INDICATOR_NOT_ALLOCATED

    @property
    def producer_position(self) -> int:
        return self.log.producer_position

    def join_position(self) -> int:
        return self.producer_position

    # -- subscribers ------------------------------------------------------------------

    def accepts_subscribers(self) -> bool:
        """A subscription that reads its log is linked to it now."""
        return self.state is State.ACTIVE

    def add_subscriber(self, subscriber: SubscriberPosition) -> None:
        """A subscription reading this log (IPC or a spy: its image's source is "aeron:ipc",
        as Aeron's)."""
        self.subscribers.append(subscriber)
        self._subscribers_changed()
        self.update_publisher_limit()
        self._proxy.image_ready(self, subscriber, IPC_CHANNEL)

    def remove_subscriber(self, subscription_id: int) -> None:
        for sub in self.subscribers:
            if sub.subscription_id == subscription_id:
                self.subscribers.remove(sub)
                self._counters.free(sub.counter)
                self._subscribers_changed()
                return

    def _subscribers_changed(self) -> None:
        raise NotImplementedError

    def consumer_position(self) -> int | None:
        raise NotImplementedError

    def unblock_position(self) -> int | None:
        """Where a frame left unfinished would hold every consumer up."""
        return self.consumer_position()

    # -- limit and cleaning -----------------------------------------------------------

    def update_publisher_limit(self) -> int:
        """Clean behind the slowest consumer, then let the publisher run a window past it, as
        far as the log's pages go (storage.LogPages); nothing to do while an active
        publication's consumers have not moved and its limit is not held short of pages."""
        consumer = self.consumer_position()
        if consumer is not None and consumer == self.limit_consumer_position:
            if self.state is State.ACTIVE:
                return 0
        self.limit_consumer_position = consumer
        producer = self.producer_position
        self.publisher_position.set(producer)
        if consumer is None or self.state is not State.ACTIVE:
            self._held_short = False
            limit = self.publisher_limit.get()
            if consumer is None and limit > producer:
                self.publisher_limit.set(producer)
            return 0
        work = self._clean_to(self._clean_limit(consumer))
        proposed = consumer + self.term_window_length
        allocated = self._pages.allocate(proposed + self._reach) - self._reach - 1
        self._held_short = allocated < proposed
        if self._held_short:  # held where the pages end: the next duty cycle looks again
            proposed, self.limit_consumer_position = allocated, None
        if proposed > self.publisher_limit.get():
            self.publisher_limit.set(proposed)
            self._wake_publishers()
            work += 1
        return work

    def say_connected(self, connected: bool) -> None:
        """Set the log's connected flag, which publishers read. Going down, the publisher limit
        first comes back to the producer position (as the next `update_publisher_limit` would):
        a publisher that reads the flag down finds no room past where it is, and its offer says
        NOT_CONNECTED instead of appending to a stream nobody reads."""
        if not connected:
            producer = self.producer_position
            if self.publisher_limit.get() > producer:
                self.publisher_limit.set(producer)
        self.log.mapped.set_connected(connected)

    def pages_deadline_ns(self) -> int | None:
        """When a limit held short of the log's pages looks for them again (None: not held)."""
        return self._pages.retry_ns if self._held_short else None

    def _clean_limit(self, consumer: int) -> int:
        """How far behind the consumers the log may be zeroed."""
        return consumer

    def _wake_publishers(self) -> None:
        if self.signals.limit.waiters:
            self.signals.limit.ring()
        self.log.mapped.wake_space_waiters()

    def _clean_to(self, position: int) -> int:
        """Zero the log up to `position`, never past what was written: the consumers'
        positions are shared memory a client can set anywhere (2**60 would be a loop of 2**44
        terms)."""
        position = min(position, self.producer_position)
        work = 0
        while self.clean_position < position:
            cleaned = self.log.mapped.clean(self.clean_position, position)
            self.clean_position += cleaned
            work += 1
        return work

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

    # -- lifecycle --------------------------------------------------------------------

    def decref(self, now_ns: int) -> None:
        """A client let go; the last one ends the stream, which then drains its consumers.

        The limit is frozen at the producer position before the end of stream is set there (as
        Aeron's), so a client let go without knowing it (timed out while its loop stalled) is
        back-pressured, not appending past the end where no subscriber reads."""
        self.ref_count -= 1
        if self.ref_count == 0 and self.state is State.ACTIVE:  # not revoked
            end = self.producer_position
            self.publisher_limit.set(end)
            self.log.mapped.set_end_of_stream_position(end)
            self.state = State.DRAINING
            self.time_of_state_change_ns = self.released_ns = now_ns
            self.drain_position = self.consumer_position()
            self.time_of_drain_progress_ns = now_ns
            self._wake_publishers()

    def revoke(self, now_ns: int) -> None:
        """As Aeron's: its stream ends where its publishers stopped, at once, not drained: its
        limit stops there, its log says it was revoked, its subscribers are told their image
        went (what they had not read is not theirs), and it lingers."""
        end = self.producer_position
        self.publisher_limit.set(end)
        self.log.mapped.set_end_of_stream_position(end)
        self.log.set_publication_revoked()
        self.revoked = True
        self._release_subscribers()
        self._subscribers_changed()
        self.state = State.LINGER
        self.time_of_state_change_ns = self.released_ns = now_ns
        self._wake_publishers()

    def on_time_event(self, now_ns: int) -> None:
        """Sample pub-pos, unblock a stuck frame, advance the lifecycle."""
        self.publisher_position.set(self.producer_position)
        self.check_for_blocked_publisher(now_ns)
        self.advance(now_ns)

    def advance(self, now_ns: int) -> None:
        """DRAINING -> LINGER once drained (or its consumers stalled), LINGER -> DONE once the
        linger ends (`_linger_ended`). The conductor also calls it between timer ticks for a
        released publication, so that it moves on when its consumers do."""
        if self.state is State.DRAINING:
            consumer = self.consumer_position()
            drained = consumer is None or consumer >= self.producer_position
            if drained or self._drain_stalled(consumer, now_ns):
                self.state = State.LINGER
                self.time_of_state_change_ns = now_ns
                if drained:
                    self._on_drained()
        elif self.state is State.LINGER and self.ref_count <= 0 and self._linger_ended(now_ns):
            self.state = State.DONE  # (revoked, it lingers while others hold it, as Aeron's)

    def _on_drained(self) -> None:
        """Its consumers have all of it, and it starts to linger."""

    def _release_subscribers(self) -> None:
        """Tell the subscribers their image went; free their positions."""
        for sub in self.subscribers:
            self._proxy.image_unavailable(self, sub)
            self._counters.free(sub.counter)
        self.subscribers.clear()

    def _drain_stalled(self, consumer: int | None, now_ns: int) -> bool:
        """The draining consumers, now at `consumer`, made no progress for the unblock timeout,
        and the unblocker had its chance to pad a frame left unfinished where they stopped."""
        if consumer != self.drain_position:
            self.drain_position = consumer
            self.time_of_drain_progress_ns = now_ns
            return False
        timeout = self.unblock_timeout_ns
        return (
            now_ns - self.time_of_drain_progress_ns > timeout
            and now_ns - self.time_of_last_consumer_change_ns > timeout
        )

    def _linger_ended(self, now_ns: int) -> bool:
        return now_ns >= self.linger_deadline_ns()

    def linger_deadline_ns(self) -> int:
        return self.time_of_state_change_ns + self.linger_ns

    def deadline_ns(self) -> int | None:
        """When the lifecycle next moves though nothing else happens (None: on its own)."""
        return self.linger_deadline_ns() if self.state is State.LINGER else None

    @property
    def awaiting_delivery(self) -> bool:
        """Released, its consumers not yet given all of it: what a closing driver waits for
        (an IPC publication's subscribers have it once drained)."""
        return self.state is State.DRAINING

    def undelivered(self) -> str | None:
        """What its consumers have not got, were it to end now (None: nothing)."""
        consumer = self.consumer_position()
        end = self.producer_position
        if self.state is State.ACTIVE or consumer is None or consumer >= end:
            return None
        return f"its subscribers consumed up to {consumer}, not up to {end}"

    def report_loss(self, why: str) -> None:
        """Say what is lost (if anything) as it ends for `why`."""
        lost = self.undelivered()
        if lost is not None:
            self._report(
                f"publication {self.registration_id} on {self.channel} (session "
                f"{self.session_id}, stream {self.stream_id}) ended {why}: {lost}"
            )

    def has_reached_end_of_life(self) -> bool:
        return self.state is State.DONE

    def close(self) -> None:
        """Tell the subscribers their image is gone; free the counters, the log and its file."""
        self._release_subscribers()
        self._counters.free(self.publisher_limit, self.publisher_position)
        self.signals.consumed.remove_callback(self._wake)
        signals.release(self.log_file)
        free_log(self.log)
