"""Counters a client allocates in the driver's cnc.dat (Aeron's addCounter)."""

import asyncio

import pytest

from aeronio import connect
from aeronio.counters import MAX_KEY_LENGTH, RECORD_ALLOCATED, CountersReader
from aeronio.driver import conductor as driver_conductor
from aeronio.driver.media_driver import MediaDriver
from aeronio.errors import ConfigurationError, DriverError, DriverTimeoutError


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


@pytest.fixture
async def reusing_driver(tmp_path, monkeypatch):
    """A driver that gives a freed counter's id to the next counter at once."""
    monkeypatch.setattr(driver_conductor, "COUNTER_REUSE_TIMEOUT_MS", 0)
    driver = await MediaDriver.launch(dir=str(tmp_path / "reusing")).start()
    yield driver
    await driver.close()


def write_every_way(counter) -> None:
    counter.set(90)
    counter.increment(5)
    counter.propose_max(100)


async def test_a_closed_counter_never_writes_to_the_next_counter_of_its_id(reusing_driver):
    async with connect(reusing_driver.dir) as aeron:
        closed = await aeron.add_counter(100, "closed")
        closed.set(7)
        await closed.close()
        assert closed.get() == 7
        reused = await aeron.add_counter(100, "given the id next")
        assert reused.id == closed.id
        write_every_way(closed)
        assert (reused.get(), closed.get()) == (0, 100)


@pytest.mark.parametrize("end", ["close", "driver lost"])
async def test_a_counter_is_detached_when_its_client_ends(driver, end):
    """The driver frees the counters of a client that ends: their handles let go of the file."""
    async with connect(driver.dir) as owner:
        client = await connect(driver.dir)
        counter = await client.add_counter(101, "of a client that ends")
        counter.set(3)
        if end == "close":
            await client.close()
        else:
            client._conductor._fail(DriverTimeoutError("media driver on D lost: it closed"))
        assert counter.is_closed and counter.get() == 3
        write_every_way(counter)
        assert counter.get() == 100
        assert owner.counters.get_counter_value(counter.id) == 3
        assert f"ClientCounter(id={counter.id}, closed, value=100)" == repr(counter)
        await client.close()


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
