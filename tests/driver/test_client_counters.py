"""Counters a client allocates in the driver's cnc.dat (Aeron's addCounter)."""

import asyncio

import pytest

from aeronio import connect
from aeronio.counters import MAX_KEY_LENGTH, RECORD_ALLOCATED, CountersReader
from aeronio.driver.media_driver import MediaDriver
from aeronio.errors import ConfigurationError, DriverError


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


async def test_a_static_counter_is_found_again_and_outlives_its_client(driver):
    """Aeron's addStaticCounter: the counter of a type and registration id, made by the first
    add, found by the next (another client's); no client owns it, its client's close leaves it;
    where a client owns the counter of that type and registration id, DriverError."""
    async with connect(driver.dir) as other:
        async with connect(driver.dir) as first:
            made = await first.add_static_counter(1006, "static", 777, key=b"\x07")
            made.set(42)
            assert first.counters.get_counter_owner_id(made.id) == -1
            owned = await first.add_counter(1007, "owned")
            with pytest.raises(DriverError, match="non-static counter exists") as refused:
                await first.add_static_counter(1007, "static", owned.registration_id)
            assert refused.value.code == 11  # Aeron's GENERIC_ERROR
        found = await other.add_static_counter(1006, "another label", 777)
        assert (found.id, found.get(), found.label) == (made.id, 42, "static")
        assert other.counters.get_counter_state(made.id) == RECORD_ALLOCATED
        with pytest.raises(ConfigurationError, match="registration_id"):
            await other.add_static_counter(1006, "static", 2**63)
