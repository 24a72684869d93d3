"""MediaDriver: the driver's agents on an event loop, owning a driver directory.

Embedded (`MediaDriver.launch` on the application's loop) or standalone (`aeronio driver`), the
driver is the same: a conductor agent serving cnc.dat's to-driver ring buffer (aeronio's clients
and Aeron's alike), and a waker so that parked clients and the conductor wake each other across
processes. A client's doorbell (or, without one, a ChangeWatcher thread
looking at the ring buffer every `command_watch_interval_ns` while such a client may be there:
aeronio.driver.command_watch) wakes the parked conductor. One
driver owns a directory: a second refuses to start while the first is alive, and takes over a dead
one's directory. Every driver, when it starts, removes the directories that dead embedded
drivers left under /dev/shm (aeronio.driver.directories). Closing, it first runs until its
released publications have delivered what they hold (network: sent and acknowledged by their
receivers; IPC: consumed), for at most the longest linger timeout, so that a process that
leaves right after its last offer loses nothing; what is lost all the same is reported.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import shutil
from collections.abc import Generator
from typing import Any

from aeronio.driver.agent import AgentRunner
from aeronio.driver.command_watch import CommandWatch
from aeronio.driver.conductor import DriverConductor
from aeronio.driver.context import DriverContext
from aeronio.driver.directories import remove_dead_driver_dirs
from aeronio.errors import ConfigurationError, DriverError
from aeronio.logbuffer import waker
from aeronio.protocol import embedded
from aeronio.protocol.layout import LOCK_FILE


class MediaDriver:
    """A running media driver; use `async with MediaDriver.launch(...) as driver`."""

    def __init__(self, ctx: DriverContext):
        self.ctx = ctx
        self.conductor: DriverConductor | None = None
        self._runner: AgentRunner | None = None
        self._lock_fd: int | None = None
        self._delivered: asyncio.Future | None = None  # while closing: all delivered
        self.command_watch: CommandWatch | None = None
        # Set when a client's TERMINATE_DRIVER stopped it (ctx.terminate_driver_enabled).
        self.terminated = asyncio.Event()

    @classmethod
    def launch(
        cls,
        dir: str | os.PathLike[str] | None = None,
        *,
        config_file: str | None = None,
        **options: object,
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
        """Claim the directory (refused while another driver is alive on it), remove dead
        drivers' directories, start the conductor; returns self."""
        path = os.path.abspath(self.ctx.dir)
        self.ctx.dir = path
        remove_dead_driver_dirs()  # what drivers killed before they could clean up left
        self._lock_fd = _claim_dir(path)
        try:
            await self._start(path)
        except BaseException:
            await self.close()
            raise
        return self

    async def _start(self, path: str) -> None:
        loop = asyncio.get_running_loop()
        self._waker = waker.waker()
        self._waker.attach(loop)
        self._runner = runner = AgentRunner(
            "aeronio-conductor",
            lambda: self._do_work(conductor),
            lambda: conductor.park_ns() / 1e9,
            on_error=lambda error: conductor.record_error(error),
            on_idle=lambda idle: conductor.on_idle(idle),
            idle_spins=self.ctx.conductor_idle_spins,
            spins_wanted=lambda: conductor.spins_wanted(),
        )

        def unwatch(fd: int) -> None:
            loop.remove_reader(fd)

        self.conductor = conductor = DriverConductor(
            self.ctx,
            wake=runner.wake,
            wake_id=self._waker.id,
            watch=lambda fd: loop.add_reader(fd, runner.wake),
            unwatch=unwatch,
            ring=self._waker.wake,
            terminate=self.terminated.set,
        )
        self._waker.callbacks.append(runner.wake)
        # Commands that no doorbell announces (Aeron's clients) wake the agent within
        # `command_watch_interval_ns` (aeronio.driver.command_watch).
        self.command_watch = CommandWatch(
            loop,
            conductor.cnc.path,
            conductor.cnc.to_driver.positions,
            self.ctx.command_watch_interval_ns,
            runner.wake,
            self.ctx.command_watch_always,
        )
        runner.start()
        embedded.register(self)

    def invoke(self) -> int:
        """Run one duty cycle of the driver's agent now (Aeron's agent invoker): for an
        application that busy-spins on this loop's thread and would rather not yield to the loop
        between polls. Call it from the loop's thread only; returns the work done (0: idle)."""
        if self._runner is None or self.conductor is None:
            raise DriverError("the driver is not running")
        if not self._runner.on_its_loop():
            raise DriverError("MediaDriver.invoke() must be called on the driver's event loop")
        if self._runner.in_duty_cycle:
            raise DriverError("MediaDriver.invoke() from a callback of the driver's duty cycle")
        schedule = self.conductor.schedule
        wake_ns = schedule.wake_ns
        work = self._runner.invoke()
        if schedule.wake_ns < wake_ns:  # e.g. bookkeeping left pending: a parked agent runs then
            self._runner.deadline_moved()
        return work

    def _do_work(self, conductor: DriverConductor) -> int:
        work = conductor.do_work()
        if self._delivered is not None and not self._delivered.done():
            if not any(pub.awaiting_delivery for pub in conductor.publications):
                self._delivered.set_result(None)
        return work

    async def _deliver_released(self, runner: AgentRunner, conductor: DriverConductor) -> None:
        """Run until no released publication awaits delivery, at most the longest linger
        timeout (the conductor's close reports what is lost then)."""
        lingers = [pub.linger_ns for pub in conductor.publications]
        timeout_ns = max([self.ctx.publication_linger_ns, *lingers])
        self._delivered = asyncio.get_running_loop().create_future()
        runner.wake()  # a duty cycle looks (and takes the commands queued before)
        try:
            await asyncio.wait_for(self._delivered, timeout_ns / 1e9)
        except TimeoutError:
            pass
        finally:
            self._delivered = None

    async def close(self) -> None:
        """Let released publications deliver what they hold (bounded), stop the agents, release
        every resource, remove (or keep) the directory, unlock it."""
        if self._lock_fd is None:
            return
        try:
            if self._runner is not None and self.conductor is not None:
                await self._deliver_released(self._runner, self.conductor)
        finally:  # cancelled (a second SIGTERM) while it waits, the driver still closes
            await self._close()

    async def _close(self) -> None:
        if self._runner is not None:
            if self.command_watch is not None:
                self.command_watch.close()
                self.command_watch = None
            await self._runner.close()
            if self._runner.wake in self._waker.callbacks:  # not if the conductor could not start
                self._waker.callbacks.remove(self._runner.wake)
            self._runner = None
        embedded.unregister(self)
        if self.conductor is not None:
            self.conductor.close()
        if self.ctx.dir_delete_on_shutdown:
            shutil.rmtree(self.ctx.dir, ignore_errors=True)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    async def __aenter__(self) -> MediaDriver:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __await__(self) -> Generator[Any, None, MediaDriver]:
        return self.start().__await__()


def _claim_dir(path: str) -> int:
    """Lock the directory for this driver (an flock the kernel drops when the process dies) and
    clear what a dead driver left; refuse it while another driver holds the lock. Returns the
    lock file descriptor, held for the driver's life."""
    if embedded.find(path) is not None:
        raise ConfigurationError(f"a driver already runs in this process on dir {path}")
    os.makedirs(path, exist_ok=True)
    fd = os.open(os.path.join(path, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise DriverError(f"a media driver (pid {pid}) is active on {path}") from None
    for entry in os.scandir(path):
        if entry.name != LOCK_FILE:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd
