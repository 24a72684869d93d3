"""Cancellation at every step: a cancel must never be lost, wherever it meets the work."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine


async def cancel_at_each_step(work: Callable[[], Coroutine], steps: int) -> None:
    """Run `work()` as a task and cancel it after 0, 1, ... `steps` - 1 passes of the loop;
    each time the task must end cancelled (not go on, as if it was never cancelled)."""
    for step in range(steps):
        task = asyncio.create_task(work())
        for _ in range(step):
            await asyncio.sleep(0)
        task.cancel()
        await asyncio.wait([task], timeout=5)
        assert task.cancelled(), f"cancelled after {step} steps, the task went on"
