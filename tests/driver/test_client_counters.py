"""Counters a client allocates in the driver's cnc.dat (Aeron's addCounter)."""

import asyncio

import pytest

from aeronio import connect
from aeronio.counters import MAX_KEY_LENGTH, RECORD_ALLOCATED, CountersReader
from aeronio.driver.media_driver import MediaDriver
from aeronio.errors import DriverError


@pytest.fixture
async def driver(tmp_path):
    driver = await MediaDriver.launch(dir=str(tmp_path / "driver")).start()
    yield driver
    await driver.close()


@pytest.fixture
async def aeron(driver):
    async with connect(driver.dir) as client:
        yield client


async def test_a_client_counter_is_in_the_file_for_every_reader(aeron, tmp_path):
    counter = await aeron.add_counter(100, "rec-pos: 7 1 10 aeron:ipc", key=b"\x07" + bytes(7))
    counter.set(4096)
    with CountersReader.open(tmp_path / "driver") as reader:
        assert reader.get_counter_label(counter.id) == "rec-pos: 7 1 10 aeron:ipc"
        assert reader.get_counter_type_id(counter.id) == 100
        assert reader.get_counter_key(counter.id)[:8] == b"\x07" + bytes(7)
        assert reader.get_counter_owner_id(counter.id) == aeron.client_id
        assert reader.get_counter_value(counter.id) == 4096
        await counter.close()
        assert reader.get_counter_state(counter.id) != RECORD_ALLOCATED


async def test_a_client_counter_goes_with_its_client(driver):
    async with connect(driver.dir) as owner:
        async with connect(driver.dir) as other:
            counter = await other.add_counter(101, "archive-recorder total write bytes")
            assert owner.counters.get_counter_state(counter.id) == RECORD_ALLOCATED
        for _ in range(200):  # the driver frees it when it handles the close
            if owner.counters.get_counter_state(counter.id) != RECORD_ALLOCATED:
                break
            await asyncio.sleep(0.01)
        assert owner.counters.get_counter_state(counter.id) != RECORD_ALLOCATED


async def test_a_key_over_the_limit_is_refused(aeron):
    with pytest.raises(DriverError, match="key is 113 bytes"):
        await aeron.add_counter(100, "too long", key=bytes(MAX_KEY_LENGTH + 1))
    counter = await aeron.add_counter(100, "still works")
    assert counter.get() == 0
