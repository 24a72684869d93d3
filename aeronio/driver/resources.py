"""The driver's resources and their one lifecycle (Aeron's DriverManagedResource).

Every client session, subscription link, publication (IPC and network) and publication image is
a resource: on each timer tick the conductor hands it the time (`on_time_event`); one that
`has_reached_end_of_life` is taken out of the registry and closed (`close` releases all it holds:
counters, logs, sockets, and tells the clients concerned). The registry, `DriverResources`, is
the one place they are held.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from aeronio.concurrent.heartbeat import HeartbeatWatch
from aeronio.counters import Counter
from aeronio.protocol import control as p
from aeronio.protocol.channel import ChannelUri


class DriverResource(Protocol):
    @property
    def KIND(self) -> str:  # noqa: N802 (a class constant): the registry's list of its kind
        ...

    def on_time_event(self, now_ns: int) -> None: ...

    def has_reached_end_of_life(self) -> bool: ...

    def close(self) -> None: ...


@dataclass(eq=False)
class SubscriberPosition:
    """One subscription's position on one image (or publication log), for one client."""

    subscription_id: int
    client_id: int
    channel: str  # the subscription's
    counter: Counter


def slowest(subscribers: list[SubscriberPosition]) -> int | None:
    """The least position of the subscribers (None without any)."""
    if not subscribers:
        return None
    if len(subscribers) == 1:  # the common case
        return subscribers[0].counter.get()
    return min(sub.counter.get() for sub in subscribers)


@dataclass(eq=False)
class ClientSession:
    """A client of the driver (Aeron's AeronClient): alive while its heartbeat counter (epoch
    ms, written by the client itself or by the driver on a keepalive command) moves; timed out
    once it stood still for the client liveness timeout on the driver's monotonic clock
    (HeartbeatWatch, a look each timer tick). At the end of its life (closed, or timed out)
    `release` gives up everything it held."""

    KIND: ClassVar[str] = "clients"

    client_id: int
    send: Callable[[p.Response], None]
    heartbeat: Counter
    liveness_timeout_ns: int
    release: Callable[[ClientSession], None]
    timer_interval_ns: int
    # One entry per add: the publication's registration id, by the add's correlation id (Aeron's
    # clients name a publication by the latter, aeronio's by the former).
    publications: dict[int, int] = field(default_factory=dict)
    subscriptions: list[int] = field(default_factory=list)
    counters: dict[int, Counter] = field(default_factory=dict)  # by registration id
    doorbells: dict[int, int] = field(default_factory=dict)  # wake ids, by registration id
    closed: bool = False
    timed_out: bool = False
    _liveness: HeartbeatWatch = field(init=False)

    def __post_init__(self) -> None:
        self._liveness = HeartbeatWatch(
            self.heartbeat.get(), time.monotonic_ns(), self.timer_interval_ns
        )

    def on_keepalive(self) -> None:
        self.heartbeat.set(time.time_ns() // 1_000_000)

    def on_time_event(self, now_ns: int) -> None:
        if self._liveness.look(self.heartbeat.get(), now_ns) > self.liveness_timeout_ns:
            self.timed_out = True

    def has_reached_end_of_life(self) -> bool:
        return self.closed or self.timed_out

    def close(self) -> None:
        self.release(self)


@dataclass(eq=False)
class SubscriptionLink:
    """A client's subscription: which logs (IPC, spies) or images (UDP) it reads. It lives until
    its client removes it or ends."""

    registration_id: int
    client_id: int
    channel: ChannelUri
    stream_id: int
    release: Callable[[SubscriptionLink], None]
    # its channel's canonical form: the logs it reads (IPC, spies: their publications'), or
    # the receive endpoint it shares (a multi-destination subscription's is its own)
    media_key: str
    KIND = "subscriptions"

    @property
    def reads_logs(self) -> bool:
        """Reads publications' logs directly (IPC, spies) rather than network images."""
        return self.channel.is_ipc or self.channel.is_spy

    def on_time_event(self, now_ns: int) -> None:
        pass

    def has_reached_end_of_life(self) -> bool:
        return False  # removed by its client (or with it)

    def close(self) -> None:
        self.release(self)


class DriverResources:
    """Every live resource of the driver, by kind (each resource's `KIND` names its list)."""

    def __init__(self) -> None:
        self.clients: dict[int, ClientSession] = {}
        self.subscriptions: list[SubscriptionLink] = []
        self.publications: list = []  # IpcPublication and NetworkPublication
        self.images: list = []  # PublicationImage
        self.changes = 0  # how many came or went (what watches them compares it)
        self._ended: set[int] = set()  # ids of the resources ended during this time event

    def __iter__(self) -> Iterator[DriverResource]:
        yield from list(self.clients.values())
        yield from list(self.subscriptions)
        yield from list(self.publications)
        yield from list(self.images)

    def add(self, resource: DriverResource) -> None:
        if isinstance(resource, ClientSession):
            self.clients[resource.client_id] = resource
        else:
            getattr(self, resource.KIND).append(resource)
        self.changes += 1

    def end(self, resource: DriverResource) -> None:
        """Take a resource out and close it."""
        if isinstance(resource, ClientSession):
            del self.clients[resource.client_id]
        else:
            getattr(self, resource.KIND).remove(resource)
        self.changes += 1
        self._ended.add(id(resource))
        resource.close()

    def on_time_event(self, now_ns: int) -> None:
        """Give every resource the time; end those that reached the end of their life. Clients
        go first: what an ended client held (its subscriptions) ends with it."""
        self._ended.clear()
        for resource in self:
            if id(resource) in self._ended:
                continue  # ended with the client that held it
            resource.on_time_event(now_ns)
            if resource.has_reached_end_of_life():
                self.end(resource)
