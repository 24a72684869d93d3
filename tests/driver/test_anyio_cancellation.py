"""The awaitable API under anyio's cancel scopes (on asyncio and uvloop, see tests/conftest.py):
`move_on_after` around a back-pressured `await offer`, an empty `async for` in each form, and
`wait_connected` cancels cleanly - no parked future, doorbell waiter or wake slot is left behind,
nothing is appended - and the streams work on afterwards. A scope cancelled around a client's
`async with` (which cancels its close too) still closes the client and its own driver, or tells
another driver that it went."""

from __future__ import annotations

import os

import anyio
import pytest

import aeronio
from aeronio.logbuffer import waker
from aeronio.logbuffer.descriptor import LOG_WAKE_SLOT_COUNT, LOG_WAKE_SLOTS_OFFSET
from aeronio.protocol import embedded
from tests.driver.test_async_api import TERM_64K, fill_window, first_messages, image_of
from tests.support.procs import await_until

pytestmark = pytest.mark.loops  # cancel scopes over the loop's futures


@pytest.fixture
async def aeron():
    async with aeronio.connect() as client:
        yield client


def parked_here(metadata) -> int:
    """How many of a log's wake slots hold this process's wake id."""
    own = waker.waker().id
    return sum(
        metadata.get_int64_volatile(LOG_WAKE_SLOTS_OFFSET + 8 * i) & ((1 << 62) - 1) == own
        for i in range(LOG_WAKE_SLOT_COUNT)
    )


def assert_nothing_left(pub, sub, image) -> None:
    assert waker._slots == {}
    assert parked_here(image.metadata) == 0
    assert image.signals.data.waiters == 0
    assert image.signals.limit.waiters == 0
    assert sub.changed.waiters == 0


async def test_move_on_after_a_back_pressured_offer(aeron):
    sub = await aeron.add_subscription("aeron:ipc", 1)
    pub = await aeron.add_publication(TERM_64K, 1)
    image = await image_of(sub)
    consumed_waiters = pub._appender.consumed_doorbell.waiters
    sent = await fill_window(pub, b"w" * 200)
    position = pub.position
    with anyio.move_on_after(0.1) as scope:
        await pub.offer(b"never")
    assert scope.cancelled_caught
    assert pub.position == position
    got = [m.data async for m in first_messages(sub, sent)]
    assert got == [b"w" * 200] * sent
    assert_nothing_left(pub, sub, image)
    assert await pub.offer(b"after") == position + 32 + 32
    assert (await sub.receive()).data == b"after"
    # The appender's interest in consumption lasts until its next append (as without anyio).
    assert pub._appender.consumed_doorbell.waiters == consumed_waiters


@pytest.mark.parametrize("form", ["copy", "views", "batches"])
async def test_move_on_after_an_empty_async_for(aeron, form):
    sub = await aeron.add_subscription("aeron:ipc", 2)
    pub = await aeron.add_publication(TERM_64K, 2)
    image = await image_of(sub)
    loop = {"copy": sub, "views": sub.messages(copy=False), "batches": sub.batches()}[form]
    got = []
    with anyio.move_on_after(0.2) as scope:
        async for item in loop:
            got.append(item)
    assert scope.cancelled_caught and got == []
    assert_nothing_left(pub, sub, image)
    await pub.offer(b"after")
    with anyio.fail_after(5):
        message = await sub.receive()
    assert message.data == b"after"


async def test_move_on_after_wait_connected(aeron):
    sub = await aeron.add_subscription("aeron:ipc", 3)
    lonely = await aeron.add_publication("aeron:ipc", 4)  # nobody subscribes to stream 4
    with anyio.move_on_after(0.1) as scope:
        await lonely.wait_connected()
    assert scope.cancelled_caught
    with anyio.move_on_after(0.1) as scope:
        await sub.wait_connected()
    assert scope.cancelled_caught
    assert waker._slots == {} and sub.changed.waiters == 0
    assert lonely._signals.limit.waiters == 0

    pub = await aeron.add_publication("aeron:ipc", 3)
    with anyio.fail_after(5):
        await pub.wait_connected()
        await sub.wait_connected()
    assert pub.is_connected and sub.is_connected


async def test_wait_connected_timeouts_and_closed_errors(aeron):
    sub = await aeron.add_subscription("aeron:ipc", 5)
    pub = await aeron.add_publication("aeron:ipc", 6)
    with pytest.raises(TimeoutError, match="not connected within 0.05 s"):
        await pub.wait_connected(timeout=0.05)
    with pytest.raises(TimeoutError, match="has no image after 0.05 s"):
        await sub.wait_connected(timeout=0.05)
    async with anyio.create_task_group() as group:
        group.start_soon(pub.close)
        with pytest.raises(aeronio.PublicationClosedError):
            await pub.wait_connected()
    async with anyio.create_task_group() as group:
        group.start_soon(sub.close)
        with pytest.raises(aeronio.SubscriptionClosedError):
            await sub.wait_connected()


async def test_task_groups_take_the_completed_awaitables(aeron):
    """anyio's start_soon wants a coroutine: offer's fast path returns one (a Completed is a
    collections.abc.Coroutine)."""
    sub = await aeron.add_subscription("aeron:ipc", 7)
    pub = await aeron.add_publication("aeron:ipc", 7)
    await pub.wait_connected(timeout=5)
    async with anyio.create_task_group() as group:
        for i in range(5):
            group.start_soon(pub.offer, bytes([i]))
    assert [m.data async for m in first_messages(sub, 5)] == [bytes([i]) for i in range(5)]


async def test_a_scope_cancelled_in_the_body_closes_the_client_and_its_driver():
    with anyio.CancelScope() as scope:
        async with aeronio.connect() as client:
            pub = await client.add_publication("aeron:ipc", 1)
            sub = await client.add_subscription("aeron:ipc", 1)
            await sub.wait_connected()
            scope.cancel()  # every await of the close below is cancelled too
            await anyio.sleep_forever()
    assert scope.cancelled_caught
    assert pub.is_closed and sub.is_closed and sub.images == ()
    assert client._conductor is not None and client._conductor.is_closed
    assert embedded.find(client.driver_dir) is None
    assert not os.path.exists(client.driver_dir)


async def test_a_scope_cancelled_in_the_body_tells_the_driver_the_client_went(tmp_path):
    async with aeronio.MediaDriver.launch(tmp_path / "driver") as driver:
        with anyio.CancelScope() as scope:
            async with aeronio.connect(driver.dir) as client:
                pub = await client.add_publication("aeron:ipc", 1)
                scope.cancel()
                await anyio.sleep_forever()
        assert scope.cancelled_caught and pub.is_closed
        conductor = client._conductor
        assert conductor is not None and conductor._keepalive is not None
        assert conductor._keepalive.done()
        assert driver.conductor is not None
        resources = driver.conductor.resources
        await await_until(lambda: not resources.clients, 5, "the client's ClientClose")
