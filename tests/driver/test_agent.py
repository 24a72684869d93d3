"""The driver's AgentRunner parks until woken or until its next deadline, never on a fixed tick;
it asks to be woken before its last look, so what comes in between is not missed; a deadline
that finds no work costs one duty cycle, run from its timer while the agent stays parked.

The tests run on a virtual clock (tests/support/virtual_time.py): the instants of the duty
cycles are exact, whatever the load of the machine."""

import asyncio

import pytest
from pytest import approx

from aeronio.driver.agent import AgentRunner
from tests.support.virtual_time import on_virtual_time


class Agent:
    def __init__(self, park_s, work=lambda: 0):
        self.calls: list[float] = []  # the instant of each duty cycle, on the loop's clock
        self.idle: list[bool] = []
        self._work, self.park_s = work, park_s

    def do_work(self) -> int:
        self.calls.append(asyncio.get_running_loop().time())
        return self._work()


async def run_for(runner: AgentRunner, seconds: float) -> None:
    runner.start()
    try:
        await asyncio.sleep(seconds)
    finally:
        await runner.close()


@on_virtual_time
async def test_it_parks_until_its_deadline():
    agent = Agent(park_s=lambda: 0.1)
    idle = []
    runner = AgentRunner("a", agent.do_work, agent.park_s, on_idle=idle.append)
    await run_for(runner, 0.55)
    # a duty cycle and its look after asking to be woken, then one duty cycle per 100 ms
    # deadline, from the timer: the agent stays parked and watched
    assert agent.calls == approx([0, 0, 0.1, 0.2, 0.3, 0.4, 0.5])
    # asked before the last look and again at each deadline (renewed); closing ends the park
    assert idle == [True] * 6 + [False]


@on_virtual_time
async def test_a_deadline_that_finds_work_runs_the_agent_again():
    """Work found by a deadline's duty cycle ends the park: the agent spins, then asks to be
    woken again and parks."""
    agent = Agent(park_s=lambda: 0.1)
    agent._work = lambda: 1 if len(agent.calls) == 3 else 0  # the first deadline's
    idle = []
    runner = AgentRunner("a", agent.do_work, agent.park_s, on_idle=idle.append, idle_spins=2)
    runner.start()
    try:
        await asyncio.sleep(0.15)
        # 1: nothing, on_idle(True), 2: last look, parked; on_idle(True), 3 (deadline): work,
        # on_idle(False); 4, 5: spins; 6: nothing, on_idle(True), 7: last look, parked again
        assert agent.calls == approx([0, 0, 0.1, 0.1, 0.1, 0.1, 0.1])
        assert idle == [True, True, False, True]
    finally:
        await runner.close()


@on_virtual_time
async def test_a_wake_up_during_a_deadlines_duty_cycle_runs_the_agent_again():
    agent = Agent(park_s=lambda: 0.1)
    runner = AgentRunner("a", agent.do_work, agent.park_s)

    def work() -> int:
        if len(agent.calls) == 3:  # the first deadline's: something rings meanwhile
            runner.wake()
        return 0

    agent._work = work
    runner.start()
    try:
        await asyncio.sleep(0.15)
        # 3 (deadline, woken during it); 4: the agent's duty cycle, 5: its last look; parked
        assert agent.calls == approx([0, 0, 0.1, 0.1, 0.1])
    finally:
        await runner.close()


@on_virtual_time
async def test_a_deadline_that_fails_hands_over_to_the_agent():
    """park_s failing in a deadline's timer callback does not leave the agent parked without
    deadlines: the task runs again and parks with its next deadline."""
    asked = []

    def park_s() -> float:
        asked.append(True)
        if len(asked) == 3:  # the first deadline's
            raise RuntimeError("park_s failed")
        return 0.1

    agent = Agent(park_s=park_s)
    loop = asyncio.get_running_loop()
    failures = []
    loop.set_exception_handler(lambda _, context: failures.append(context["exception"]))
    runner = AgentRunner("a", agent.do_work, agent.park_s)
    try:
        await run_for(runner, 0.25)
    finally:
        loop.set_exception_handler(None)
    assert [str(e) for e in failures] == ["park_s failed"]
    # 1, 2: parked; 3 (deadline): park_s fails; 4, 5: the task's cycle and look; 6: a deadline
    assert agent.calls == approx([0, 0, 0.1, 0.1, 0.1, 0.2])


@on_virtual_time
async def test_no_deadline_runs_after_close():
    agent = Agent(park_s=lambda: 0.03)
    runner = AgentRunner("a", agent.do_work, agent.park_s)
    await run_for(runner, 0.1)  # parked with a timer set again by a deadline
    assert agent.calls == approx([0, 0, 0.03, 0.06, 0.09])
    await asyncio.sleep(0.1)  # the clock passes the next deadline (0.12): nothing runs
    assert agent.calls == approx([0, 0, 0.03, 0.06, 0.09])


@on_virtual_time
async def test_without_a_deadline_it_parks_until_woken():
    agent = Agent(park_s=lambda: None)
    runner = AgentRunner("a", agent.do_work, agent.park_s)
    runner.start()
    try:
        await asyncio.sleep(0.3)
        assert agent.calls == [0, 0]  # the duty cycle and the last look: then nothing
        runner.wake()
        await asyncio.sleep(0.05)
        assert agent.calls == approx([0, 0, 0.3, 0.3])  # at once: a cycle and its last look
    finally:
        await runner.close()


@on_virtual_time
async def test_what_comes_before_it_parks_is_seen_by_its_last_look():
    """Work that arrives after a duty cycle found none, but before the runner parks, is found
    by the duty cycle it runs after asking to be woken (on_idle(True)): no wake-up needed."""
    agent = Agent(park_s=lambda: None)
    arrived = []

    def on_idle(idle: bool) -> None:
        agent.idle.append(idle)
        if idle and not arrived:
            arrived.append(True)  # work comes now, and nobody wakes the runner

    def work() -> int:
        return 1 if arrived and len(agent.calls) == 2 else 0

    agent._work = work
    runner = AgentRunner("a", agent.do_work, agent.park_s, on_idle=on_idle, idle_spins=3)
    await run_for(runner, 0.2)
    # 1: nothing; on_idle(True); 2: the work; on_idle(False); 3 spins (yields, no park); then
    # 6: nothing, on_idle(True), 7: its last look, parked for good
    assert agent.calls == [0] * 7
    assert agent.idle == [True, False, True, False]  # closing ends the park


@on_virtual_time
async def test_it_spins_after_work_only_when_spins_are_wanted():
    """`spins_wanted()` is asked at the first idle duty cycle after work: False, the agent
    parks at once (its last look, then asleep) instead of spinning."""
    for wanted, cycles in ((True, 6), (False, 3)):
        agent = Agent(park_s=lambda: None)
        agent._work = lambda agent=agent: 1 if len(agent.calls) == 1 else 0
        asked = []

        def spins_wanted(agent=agent, asked=asked, wanted=wanted) -> bool:
            asked.append(len(agent.calls))
            return wanted

        runner = AgentRunner(
            "a", agent.do_work, agent.park_s, idle_spins=3, spins_wanted=spins_wanted
        )
        now = asyncio.get_running_loop().time()
        await run_for(runner, 0.2)
        # 1: work; 2: nothing, asked; then spins 2-4 and 5, 6 (its last look), or 3 (its look)
        assert agent.calls == approx([now] * cycles), wanted
        assert asked == [2]


@pytest.mark.loops
async def test_it_knows_whether_the_caller_runs_on_its_loop():
    """`wake()` sets the wake-up directly on the loop and hands it over from other threads."""
    runner = AgentRunner("loop", lambda: 0, lambda: None)
    assert not runner.on_its_loop()  # not started: no loop of its own
    runner.start()
    try:
        assert runner.on_its_loop()
        assert not await asyncio.to_thread(runner.on_its_loop)  # a thread with no loop
        assert not await asyncio.to_thread(asyncio.run, _on_its_loop(runner))  # another loop
    finally:
        await runner.close()


async def _on_its_loop(runner: AgentRunner) -> bool:
    return runner.on_its_loop()
