"""MediaDriver: the driver's agents on an event loop, owning a driver directory.

Embedded mode (`MediaDriver.launch`) runs the conductor on the application's loop; clients in
this process find it by its directory.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable

from aeronio.counters import SystemCounters
from aeronio.driver import protocol as p
from aeronio.driver.agent import AgentRunner
from aeronio.driver.conductor import DriverConductor
from aeronio.driver.context import DriverContext
from aeronio.errors import ConfigurationError

_embedded: dict[str, MediaDriver] = {}


class MediaDriver:
    """A running media driver; use `async with MediaDriver.launch(...) as driver`."""

    def __init__(self, ctx: DriverContext):
        self.ctx = ctx
        self.conductor: DriverConductor | None = None
        self._runner: AgentRunner | None = None

    @classmethod
    def launch(cls, dir: str | None = None, **options: object) -> MediaDriver:
        """A driver to start with `async with` (or `await driver.start()`)."""
        if dir is not None:
            options["dir"] = str(dir)
        return cls(DriverContext.from_options(**options))

    @property
    def dir(self) -> str:
        return self.ctx.dir

    async def start(self) -> MediaDriver:
        path = os.path.abspath(self.ctx.dir)
        if path in _embedded:
            raise ConfigurationError(f"a driver already runs in this process on dir {path}")
        self.ctx.dir = path
        os.makedirs(path, exist_ok=True)
        self._runner = AgentRunner(
            "aeronio-conductor",
            self._do_work,
            self.ctx.conductor_idle_ns / 1e9,
            on_error=self._on_agent_error,
        )
        self.conductor = DriverConductor(self.ctx, wake=self._runner.wake)
        self._runner.start()
        _embedded[path] = self
        return self

    def _do_work(self) -> int:
        return self.conductor.do_work()

    def _on_agent_error(self, error: BaseException) -> None:
        self.conductor.system[SystemCounters.ERRORS].increment()

    def submit(self, command: p.Command, reply: Callable[[p.Response], None]) -> None:
        """Hand a client command to the conductor."""
        self.conductor.submit(command, reply)

    async def close(self) -> None:
        if self._runner is None:
            return
        await self._runner.close()
        self._runner = None
        _embedded.pop(self.ctx.dir, None)
        self.conductor.close()
        if self.ctx.dir_delete_on_shutdown:
            shutil.rmtree(self.ctx.dir, ignore_errors=True)

    async def __aenter__(self) -> MediaDriver:
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def __await__(self):
        return self.start().__await__()


def find_embedded(dir: str) -> MediaDriver | None:
    """The driver running in this process on `dir`, if any."""
    return _embedded.get(os.path.abspath(dir))
