"""The drivers running in this process, by directory: how a client finds an embedded driver
without importing the driver. A `MediaDriver` registers itself when it starts and unregisters
when it closes; a client on the same directory then hands it commands in-process instead of
over the control socket."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Protocol

from aeronio.protocol.control import Command, DriverHello, Response


class EmbeddedDriver(Protocol):
    """What a client (or an application that busy-spins) uses of a driver in its own process."""

    @property
    def dir(self) -> str: ...

    @property
    def is_running(self) -> bool: ...

    def hello(self) -> DriverHello: ...

    def submit(self, command: Command, reply: Callable[[Response], None]) -> None: ...

    def invoke(self) -> int:
        """One duty cycle of the driver now, on its loop (Aeron's agent invoker)."""
        ...

    async def close(self) -> None: ...


_drivers: dict[str, EmbeddedDriver] = {}


def register(driver: EmbeddedDriver) -> None:
    _drivers[os.path.abspath(driver.dir)] = driver


def unregister(driver: EmbeddedDriver) -> None:
    if _drivers.get(os.path.abspath(driver.dir)) is driver:
        del _drivers[os.path.abspath(driver.dir)]


def find(dir: str) -> EmbeddedDriver | None:
    """The driver running in this process on `dir`, if any."""
    return _drivers.get(os.path.abspath(dir))
