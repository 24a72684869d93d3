"""CommandWatch: the driver's look for commands that no doorbell announces runs only while a
process that rings none (one that maps cnc.dat writable without aeronio's core) may write them."""

import os
import time

import pytest

from aeronio.driver.command_watch import foreign_writers
from aeronio.driver.media_driver import MediaDriver
from aeronio.protocol import control as p
from tests.support.cnc_mapper import mapping
from tests.support.procs import await_until
from tests.support.ring_client import TIMEOUT_S, RingClient

pytestmark = pytest.mark.loops  # readers on an eventfd and inotify, an executor's scan

SETTLE_S = 10  # the watch settles within a second or so of the latest open, or a rescan


@pytest.fixture
async def driver(request):
    options = getattr(request, "param", {})
    async with MediaDriver.launch(**options) as driver:
        yield driver


def looking(driver: MediaDriver) -> bool:
    return driver.command_watch.watching


def test_foreign_writers_are_processes_that_map_it_writable_without_aeronio(tmp_path):
    path = str(tmp_path / "cnc.dat")
    with open(path, "wb") as f:
        f.write(bytes(4096))
    with (
        mapping(path, "rw") as writer,
        mapping(path, "ro") as reader,
        mapping(path, "rw", aeronio=True) as aeronio_process,
    ):
        pids = foreign_writers(path)
        assert writer.pid in pids
        assert reader.pid not in pids and aeronio_process.pid not in pids
        assert os.getpid() not in pids
    assert writer.pid not in foreign_writers(path)


async def test_an_idle_driver_stops_looking_and_a_foreign_mapper_makes_it_look_again(driver):
    await await_until(lambda: not looking(driver), SETTLE_S, "the watch to settle: not looking")
    with mapping(driver.conductor.cnc.path, "rw"):
        await await_until(lambda: driver.command_watch.rules.foreign, SETTLE_S, "a scan")
        assert looking(driver)
    await await_until(lambda: not looking(driver), SETTLE_S, "no look once the mapper left")


async def test_aeronio_processes_and_readers_leave_it_idle(driver):
    await await_until(lambda: not looking(driver), SETTLE_S, "the watch to settle: not looking")
    path = driver.conductor.cnc.path
    with mapping(path, "rw", aeronio=True), mapping(path, "ro"):
        await await_until(lambda: driver.command_watch.rules.foreign is False, SETTLE_S, "a scan")
        assert not looking(driver)


PARKED = {"timer_interval_ns": 30_000_000_000, "conductor_idle_spins": 0}  # only a look wakes it


async def answered_while_parked(driver: MediaDriver) -> None:
    """Commands written without ringing (as Aeron's clients write them) are answered within 5 s
    (the look's 10 ms, not the timer's 30 s), the second by a driver parked since the first."""
    client = RingClient(driver.dir)
    try:
        for _ in range(2):
            await await_until(lambda: driver._runner._wakeup is not None, TIMEOUT_S, "parked")
            start = time.monotonic()
            add = p.AddPublication(client.next_id(), client.client_id, "aeron:ipc", 7)
            client.send(add)
            assert isinstance(await client.answer(add.correlation_id), p.PublicationReady)
            assert time.monotonic() - start < 5
    finally:
        client.close()


@pytest.mark.parametrize("driver", [PARKED], indirect=True)
async def test_a_parked_driver_sees_a_command_that_rang_no_doorbell(driver):
    """With a foreign mapper about, the driver's ChangeWatcher looks, and wakes it."""
    with mapping(driver.conductor.cnc.path, "rw"):
        await await_until(lambda: driver.command_watch.rules.foreign, SETTLE_S, "the mapper")
        await answered_while_parked(driver)


@pytest.mark.parametrize("driver", [{**PARKED, "command_watch_always": True}], indirect=True)
async def test_asked_to_look_always_it_sees_a_client_the_scan_cannot(driver):
    """A client inside this process (aeronio's core loaded: not foreign to the scan) is seen
    with `command_watch_always`."""
    assert looking(driver) and driver.command_watch.rules.always
    await answered_while_parked(driver)
