"""MediaDriver: the driver's agents on an event loop, owning a driver directory.

Embedded (`MediaDriver.launch` on the application's loop) or standalone (`aeronio driver`), the
driver is the same: a conductor agent, a control socket for clients in other processes, and a
waker so that parked clients and the conductor wake each other across processes. One driver
owns a directory: a second refuses to start while the first is alive, and takes over a dead
one's directory.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import Callable

from aeronio.counters import CountersReader, SystemCounters
from aeronio.driver import protocol as p
from aeronio.driver.agent import AgentRunner
from aeronio.driver.conductor import COUNTERS_FILE, DriverConductor
from aeronio.driver.context import DriverContext
from aeronio.driver.control_server import ControlServer, control_address, is_serving
from aeronio.errors import ConfigurationError, DriverError
from aeronio.logbuffer import waker

_embedded: dict[str, MediaDriver] = {}


class MediaDriver:
    """A running media driver; use `async with MediaDriver.launch(...) as driver`."""

    def __init__(self, ctx: DriverContext):
        self.ctx = ctx
        self.conductor: DriverConductor | None = None
        self._runner: AgentRunner | None = None
        self._server: ControlServer | None = None

    @classmethod
    def launch(
        cls, dir: str | None = None, *, config_file: str | None = None, **options: object
    ) -> MediaDriver:
        """A driver to start with `async with` (or `await driver.start()`). Options come from
        keywords, then `AERONIO_*` environment variables, then `config_file`, then defaults."""
        if dir is not None:
            options["dir"] = str(dir)
        return cls(DriverContext.from_sources(config_file=config_file, env=os.environ, **options))

    @property
    def dir(self) -> str:
        return self.ctx.dir

    @property
    def is_running(self) -> bool:
        return self._runner is not None

    async def start(self) -> MediaDriver:
        path = os.path.abspath(self.ctx.dir)
        self.ctx.dir = path
        _claim_dir(path, self.ctx.driver_timeout_ns)
        loop = asyncio.get_running_loop()
        self._waker = waker.waker()
        self._waker.attach(loop)
        self._runner = AgentRunner(
            "aeronio-conductor",
            self._do_work,
            self.ctx.conductor_idle_ns / 1e9,
            on_error=self._on_agent_error,
        )
        self.conductor = DriverConductor(self.ctx, wake=self._runner.wake, wake_id=self._waker.id)
        self._waker.callbacks.append(self._runner.wake)
        self._runner.start()
        _embedded[path] = self
        self._server = ControlServer(
            control_address(path), self.submit, self.hello, self._on_bad_control_input
        )
        await self._server.start()
        return self

    def hello(self) -> p.DriverHello:
        return p.DriverHello(
            p.PROTOCOL_VERSION,
            os.getpid(),
            self.ctx.client_liveness_timeout_ns,
            self.ctx.client_keepalive_interval_ns,
            self._waker.id,
        )

    def _do_work(self) -> int:
        return self.conductor.do_work()

    def _on_agent_error(self, error: BaseException) -> None:
        self.conductor.record_error(error)

    def _on_bad_control_input(self, reason: str) -> None:
        self.conductor.system[SystemCounters.INVALID_PACKETS].increment()
        self.conductor.record_error(reason)

    def submit(self, command: p.Command, reply: Callable[[p.Response], None]) -> None:
        """Hand a client command to the conductor."""
        self.conductor.submit(command, reply)

    async def close(self) -> None:
        if self._runner is None:
            return
        await self._server.close()
        await self._runner.close()
        self._runner = None
        self._waker.callbacks.remove(self.conductor.wake)
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


def _claim_dir(path: str, driver_timeout_ns: int) -> None:
    """Refuse a directory whose driver is alive; clear one left by a dead driver."""
    if path in _embedded:
        raise ConfigurationError(f"a driver already runs in this process on dir {path}")
    counters_file = os.path.join(path, COUNTERS_FILE)
    if os.path.exists(counters_file):
        pid, age_ms = _previous_driver(counters_file)
        if is_serving(path) or (age_ms < driver_timeout_ns / 1e6 and _pid_alive(pid)):
            raise DriverError(f"a media driver (pid {pid}) is active on {path}")
        shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path, exist_ok=True)


def _previous_driver(counters_file: str) -> tuple[int, float]:
    try:
        reader = CountersReader.open(counters_file)
    except Exception:
        return 0, float("inf")  # unreadable: no live driver could have left it so
    try:
        return reader.driver_pid, time.time() * 1000 - reader.driver_heartbeat_ms
    finally:
        reader.close()


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
