"""The drivers running in this process, by directory: how an application finds an embedded
driver without importing the driver (to run its duty cycle itself, `invoke`). A `MediaDriver`
registers itself when it starts and unregisters when it closes. Clients reach every driver,
this process's too, through its cnc.dat (client/transport.py)."""

from __future__ import annotations

import os
from typing import Protocol


class EmbeddedDriver(Protocol):
    """What a client (or an application that busy-spins) uses of a driver in its own process."""

    @property
    def dir(self) -> str: ...

    @property
    def is_running(self) -> bool: ...

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
