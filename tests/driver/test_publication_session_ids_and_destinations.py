"""A client asks the driver for a free session id (Aeron's nextSessionId) and removes a
manual multi-destination-cast destination by the registration id its add returned."""

import pytest

from aeronio import connect
from aeronio.cnc import CONTROL_PROTOCOL_VERSION
from aeronio.counters import SystemCounters
from aeronio.driver.media_driver import MediaDriver
from aeronio.errors import AeronError
from tests.support.ports import free_port


@pytest.fixture
async def driver(tmp_path):
    driver = await MediaDriver.launch(dir=str(tmp_path / "driver")).start()
    yield driver
    await driver.close()


async def test_a_next_session_id_is_free_for_a_publication(driver):
    async with connect(driver.dir) as aeron:
        auto = await aeron.add_publication("aeron:ipc", 7)
        session_id = await aeron.next_session_id(7)
        assert session_id != auto.session_id
        chosen = await aeron.add_exclusive_publication(f"aeron:ipc?session-id={session_id}", 7)
        assert chosen.session_id == session_id
        assert await aeron.next_session_id(7) not in (auto.session_id, session_id)


async def test_a_client_asks_only_a_driver_that_shows_control_protocol_1_0_0(driver):
    """As Aeron's clients: the driver's "Control protocol version" system counter (1.0.0 from
    aeronio's driver) says it answers GET_NEXT_AVAILABLE_SESSION_ID; a client that saw an older
    version when it connected makes a random id instead, and asks nothing (the driver's
    sequence, started at 5000 here, is not taken)."""
    driver.conductor._session_id_sequence = 5000
    async with connect(driver.dir) as aeron:
        version = aeron.counters.counter(SystemCounters.CONTROL_PROTOCOL_VERSION)
        assert version.get() == CONTROL_PROTOCOL_VERSION
        assert [await aeron.next_session_id(7) for _ in range(2)] == [5000, 5001]
        version.set(0)  # as a driver before control protocol 1.0.0 shows it
        try:
            async with connect(driver.dir) as old_drivers_client:
                ids = {await old_drivers_client.next_session_id(7) for _ in range(4)}
        finally:
            version.set(CONTROL_PROTOCOL_VERSION)
        assert len(ids) == 4 and 5002 not in ids
        assert await aeron.next_session_id(7) == 5002


async def test_a_destination_is_removed_by_its_registration_id(driver):
    async with connect(driver.dir) as aeron:
        control = f"127.0.0.1:{free_port()}"
        publication = await aeron.add_publication(
            f"aeron:udp?control={control}|control-mode=manual", 7
        )
        (endpoint,) = [
            pub.endpoint
            for pub in driver.conductor.publications
            if pub.registration_id == publication.registration_id
        ]
        port = free_port()
        registration_id = await publication.add_destination(f"aeron:udp?endpoint=127.0.0.1:{port}")
        assert set(endpoint.destinations) == {("127.0.0.1", port)}
        await publication.remove_destination_by_id(registration_id)
        assert endpoint.destinations == {}
        await publication.close()
        with pytest.raises(AeronError, match="the publication is closed"):
            await publication.remove_destination_by_id(registration_id)
