"""The driver's side of an IPC publication: its consumers are the subscribers reading its log."""

from __future__ import annotations

from aeronio.driver.driver_publication import DriverPublication, State
from aeronio.driver.resources import slowest
from aeronio.protocol import control as p

# Where an IPC image's rejection comes from, as Aeron's Java driver says it: loopback, port 0.
IPC_SOURCE = ("127.0.0.1", 0)


class IpcPublication(DriverPublication):
    # Until when (monotonic ns) its subscriptions stay unlinked after its image was rejected.
    cool_down_until_ns: int | None = None

    def _subscribers_changed(self) -> None:
        """An IPC publication is connected while it has subscribers."""
        self.say_connected(bool(self.subscribers))

    def accepts_subscribers(self) -> bool:
        return super().accepts_subscribers() and self.cool_down_until_ns is None

    def reject(self, reason: str, now_ns: int, cool_down_ns: int) -> None:
        """A subscriber rejected its image (Aeron's IpcPublication.reject): every client is told
        (ON_PUBLICATION_ERROR, IMAGE_REJECTED, `reason`). Unless it cools down already, all its
        subscribers are told that their image went and let go: it is not connected, its
        publishers held at the producer position. No subscription links again until
        `cool_down_ns` after the last rejection (`cool_down_over`)."""
        self._proxy.publication_error(self, p.IMAGE_REJECTED, reason, source=IPC_SOURCE)
        if self.cool_down_until_ns is None:
            self._release_subscribers()
            self._subscribers_changed()
            self.update_publisher_limit()
            self._wake_publishers()
        self.cool_down_until_ns = now_ns + cool_down_ns

    def cool_down_over(self, now_ns: int) -> bool:
        """Its rejection's cool-down is over and it is active: the conductor links its
        subscriptions again, then ends it (a released one cools down until it ends)."""
        until = self.cool_down_until_ns
        return self.state is State.ACTIVE and until is not None and now_ns > until

    def consumer_position(self) -> int | None:
        return slowest(self.subscribers)

    def _on_drained(self) -> None:
        """As Aeron's: its subscribers, who have all of it, are told at once that their image
        went (not once the linger ends). It stays connected, as Aeron's: a publisher that did
        not know it was released is back-pressured at the end of stream."""
        self._release_subscribers()
