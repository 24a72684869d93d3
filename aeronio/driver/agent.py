"""Agents on the event loop: a `do_work() -> int` duty cycle run as a task, parking when idle."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

log = logging.getLogger("aeronio.driver")


class AgentRunner:
    """Runs `do_work` on the loop; when it does nothing, parks until `wake()` or for as long as
    `park_s()` allows (the agent's next deadline; 0: run again at once, None: until woken).

    Parking follows the rule of every park: ask to be woken (`on_idle(True)`), look once more
    (a duty cycle), then sleep; so what came just before the wake-up was asked for is not
    missed. After a duty cycle that did work, up to `idle_spins` idle duty cycles only yield to
    the loop before the agent parks (Aeron's back-off: while traffic flows, the next message
    finds the agent running instead of asleep), unless `spins_wanted()`, asked at the first
    idle duty cycle after work, says they would be for nothing. An exception from `do_work` is
    logged and counted by `on_error`; it never stops the agent.

    Deadlines while parked: the agent stays parked and watched while it stays idle (it wakes
    for deadlines that give no work, such as heartbeats). A deadline's timer callback asks
    again to be woken (`on_idle(True)` renews what it asks for) and runs the duty cycle, without
    resuming the task; when that does work, or a wake-up came, the task runs again; else the
    timer is set for the next deadline. `on_idle(False)` comes only once a duty cycle did work,
    or the agent stops.
    """

    def __init__(
        self,
        name: str,
        do_work: Callable[[], int],
        park_s: Callable[[], float | None],
        on_error: Callable[[BaseException], None] = lambda e: None,
        on_idle: Callable[[bool], None] = lambda idle: None,
        idle_spins: int = 0,
        spins_wanted: Callable[[], bool] = lambda: True,
    ):
        self.name = name
        self._do_work = do_work
        self._park_s = park_s
        self._idle_spins = idle_spins
        self._spins_wanted = spins_wanted
        self._on_error = on_error
        self._on_idle = on_idle
        self._woken = False
        self._watched = False  # on_idle(True) since the last on_idle(False)
        self.in_duty_cycle = False  # callbacks it makes must not run another
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakeup: asyncio.Future | None = None
        self._deadline: asyncio.TimerHandle | None = None  # while parked
        self._found = 0  # the work a deadline's duty cycle did, for the task it resumes
        self._task: asyncio.Task | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The loop the agent runs on (None before `start`)."""
        return self._loop

    def start(self) -> None:
        self._woken, self._found = False, 0
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._run(), name=self.name)

    def wake(self) -> None:
        """Make the agent run its duty cycle soon (callable from any thread)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        if self.on_its_loop():
            self._set_wakeup()
        else:
            loop.call_soon_threadsafe(self._set_wakeup)

    def on_its_loop(self) -> bool:
        """Whether the caller runs on the agent's loop (its thread, the loop running)."""
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:  # no loop runs on this thread
            return False

    def _set_wakeup(self) -> None:
        self._woken = True
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    def invoke(self) -> int:
        """One duty cycle now, on the calling thread (the loop's): how much work it did."""
        self.in_duty_cycle = True
        try:
            return self._do_work()
        except Exception as e:  # an agent never dies of one bad duty cycle
            log.exception("%s duty cycle failed", self.name)
            self._on_error(e)
            return 0
        finally:
            self.in_duty_cycle = False

    def deadline_moved(self) -> None:
        """A duty cycle run outside the task (`invoke` by the application) brought the agent's
        next deadline forward (it took input the parked task watched for, leaving work due by
        then): a parked agent sets its timer again from `park_s`."""
        loop = self._loop
        if loop is None or self._wakeup is None or self._wakeup.done() or self._woken:
            return  # not parked: the task asks park_s itself before it parks
        timeout = self._park_s()
        if timeout == 0:
            self._set_wakeup()
        elif timeout is not None and (
            self._deadline is None or self._deadline.when() > loop.time() + timeout
        ):
            if self._deadline is not None:
                self._deadline.cancel()
            self._deadline = loop.call_later(timeout, self._on_deadline, loop)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        spins = 0
        try:
            while True:
                work = self._found or self.invoke()
                self._found = 0
                if work:
                    self._unwatch()
                    spins = self._idle_spins
                elif spins == self._idle_spins and spins > 0 and not self._spins_wanted():
                    spins = 0  # the first idle duty cycle after work: spin for nothing?
                if work or spins > 0:
                    spins -= not work
                    await asyncio.sleep(0)
                    continue
                if self._park_s() == 0:  # due again at once: no need to ask to be woken
                    await asyncio.sleep(0)
                    continue
                self._woken = False
                self._on_idle(True)  # ask to be woken by what would give work
                self._watched = True
                work = self.invoke()  # then look once more
                if work:
                    self._unwatch()
                    spins = self._idle_spins
                    continue
                timeout = self._park_s()
                if timeout != 0:
                    await self._park(loop, timeout)
        finally:
            self._unwatch()

    def _unwatch(self) -> None:
        if self._watched:
            self._watched = False
            self._on_idle(False)

    async def _park(self, loop: asyncio.AbstractEventLoop, timeout: float | None) -> None:
        if self._woken:  # a wake-up since on_idle(True) is not lost
            return
        self._wakeup = loop.create_future()
        if timeout is not None:
            self._deadline = loop.call_later(timeout, self._on_deadline, loop)
        try:
            await self._wakeup
        finally:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            self._wakeup = None

    def _on_deadline(self, loop: asyncio.AbstractEventLoop) -> None:
        """A deadline while parked: ask to be woken again (renewing what a writer took), then
        the duty cycle here; the task again only if it did work or was woken, else the timer
        for the next deadline. Should anything here fail, the task takes over."""
        self._deadline = None
        if self._woken:
            return
        try:
            self._on_idle(True)
            work = self.invoke()
            timeout = None if work or self._woken else self._park_s()
            if work or self._woken or timeout == 0:
                self._found = work
                self._set_wakeup()
            elif timeout is not None:
                self._deadline = loop.call_later(timeout, self._on_deadline, loop)
        except BaseException:
            self._set_wakeup()
            raise

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
