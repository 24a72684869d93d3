"""Heartbeats judged by their progress on the watcher's monotonic clock: a wall clock that steps
(a virtual machine resumed, NTP correcting a fresh machine) ends neither a client nor its
driver. Here the step is this process's `time.time_ns`, which both the embedded driver and its
client stamp their heartbeats with."""

import asyncio
import time

import pytest

import aeronio
from aeronio.cnc import CncFile
from aeronio.concurrent.error_log import read_error_log
from aeronio.counters import CLIENT_HEARTBEAT_TYPE_ID, CountersReader, SystemCounters
from tests.support.procs import await_until

IPC = "aeron:ipc?term-length=64k"
LIVENESS_NS = 2_000_000_000  # the client looks every 0.5 s (a quarter of it)


@pytest.mark.parametrize("step_s", [60, -60], ids=["forward", "back"])
async def test_a_wall_clock_step_ends_no_client_and_no_driver(tmp_path, monkeypatch, step_s):
    real_time_ns = time.time_ns
    async with aeronio.connect(
        tmp_path / "driver",
        driver_timeout_s=LIVENESS_NS / 1e9,
        client_liveness_timeout_ns=LIVENESS_NS,
        timer_interval_ns=50_000_000,
    ) as aeron:
        subscription = await aeron.add_subscription(IPC, 11)
        publication = await aeron.add_publication(IPC, 11)
        reader = CountersReader.open(tmp_path / "driver")
        cnc = CncFile.map(tmp_path / "driver")
        heartbeat_id = reader.find_by_type_id_and_registration_id(
            CLIENT_HEARTBEAT_TYPE_ID, aeron.client_id
        )
        try:
            monkeypatch.setattr(time, "time_ns", lambda: real_time_ns() + step_s * 1_000_000_000)

            def stepped(stamp_ms: int) -> bool:
                return abs(stamp_ms - real_time_ns() // 1_000_000 - step_s * 1000) < 5_000

            # Stamped after the step: the client looked at the driver's heartbeat before it
            # wrote its own, the driver at the client's before it beat (Aeron's rule, an age on
            # the wall clock, ends one or the other at the first of those looks).
            await await_until(
                lambda: stepped(reader.get_counter_value(heartbeat_id)), 10, "a keepalive"
            )
            await await_until(lambda: stepped(cnc.driver_heartbeat_ms), 10, "a driver heartbeat")
            # Looks enough to span the liveness timeout on both sides, each after the step.
            for _ in range(5):
                await await_until(
                    moved(lambda: reader.get_counter_value(heartbeat_id)), 10, "a keepalive"
                )
            aeron.check_alive()
            assert await publication.offer(b"after the step") > 0
            async with asyncio.timeout(10):
                async for message in subscription:
                    assert bytes(message.data) == b"after the step"
                    break
            assert reader.get_counter_value(SystemCounters.CLIENT_TIMEOUTS) == 0
            assert read_error_log(cnc.error_log_buffer) == []
        finally:
            monkeypatch.undo()
            reader.close()
            cnc.close()


def moved(read):
    """A condition: what `read` returns is no longer what it returned now."""
    was = read()
    return lambda: read() != was
