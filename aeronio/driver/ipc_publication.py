"""The driver's side of an IPC publication: its consumers are the subscribers reading its log."""

from __future__ import annotations

from aeronio.driver.driver_publication import DriverPublication
from aeronio.driver.resources import slowest


class IpcPublication(DriverPublication):
    def _subscribers_changed(self) -> None:
        """An IPC publication is connected while it has subscribers."""
        self.log.mapped.set_connected(bool(self.subscribers))

    def consumer_position(self) -> int | None:
        return slowest(self.subscribers)

    def _on_drained(self) -> None:
        """As Aeron's: its subscribers, who have all of it, are told at once that their image
        went (not once the linger ends). It stays connected, as Aeron's: a publisher that did
        not know it was released is back-pressured at the end of stream."""
        self._release_subscribers()
