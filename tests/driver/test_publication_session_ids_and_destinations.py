"""A client asks the driver for a free session id (Aeron's nextSessionId) and removes a
manual multi-destination-cast destination by the registration id its add returned; adds of
one publication share it, each named by its own add."""

import asyncio

import pytest

from aeronio import Publication, Subscription, connect
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


async def shared_publication_scenario(dir: str, control_port: int) -> None:
    """As Aeron's clients: adds of one publication (by two clients, and by one twice) share its
    log; the first add's registration id names the log (`original_registration_id`, its
    destinations), each add is removed by its own (`registration_id`) in any order, and what
    is offered through those left arrives."""
    async with connect(dir) as one, connect(dir) as two:
        sub = await one.add_subscription("aeron:ipc", 9)
        adds = [
            await one.add_publication("aeron:ipc", 9),
            await two.add_publication("aeron:ipc", 9),
            await one.add_publication("aeron:ipc", 9),
        ]
        first, second, third = adds
        assert [pub.is_original for pub in adds] == [True, False, False]
        assert {pub.original_registration_id for pub in adds} == {first.registration_id}
        assert len({pub.registration_id for pub in adds}) == 3
        assert len({pub.session_id for pub in adds}) == 1
        await first.close()  # the original first: the others keep the log
        assert await deliver(third, sub, b"through the third") == b"through the third"
        await third.close()
        assert await deliver(second, sub, b"through the second") == b"through the second"
        await second.close()

        channel = f"aeron:udp?control=127.0.0.1:{control_port}|control-mode=manual"
        mdc = [await one.add_publication(channel, 8), await two.add_publication(channel, 8)]
        destination = await mdc[1].add_destination("aeron:udp?endpoint=127.0.0.1:9")
        await mdc[1].remove_destination_by_id(destination)
        for pub in reversed(mdc):
            await pub.close()


async def deliver(pub: Publication, sub: Subscription, message: bytes) -> bytes:
    """`message` offered through `pub`: the next message `sub` reads."""
    await pub.offer(message, timeout=20)
    async with asyncio.timeout(20):
        async for received in sub:
            return received.data
    raise AssertionError("the subscription closed")


async def test_adds_of_one_publication_are_each_removed_by_their_own_id(driver):
    await shared_publication_scenario(driver.dir, free_port())
