"""What a subscription keeps of images lost before their end: the errors its iterators raise,
bounded for a subscription that is only polled (its unavailable-image callback tells it of
each), and none once it is closed."""

import asyncio

import pytest

import aeronio
from aeronio.client.subscription import MAX_LOST_IMAGES


class LostImage:
    """An image that went away before its end (what `_remove_image` reads of one)."""

    _reader = None
    is_end_of_stream = False
    session_id = 7
    taken_position = 4096

    def __init__(self, correlation_id: int):
        self.correlation_id = correlation_id


async def test_a_polled_subscription_keeps_a_bounded_number_of_losses_and_none_once_closed():
    told = []
    async with aeronio.connect() as aeron:
        subscription = await aeron.add_subscription("aeron:ipc", 10, unavailable_image=told.append)
        images = [LostImage(correlation_id) for correlation_id in range(MAX_LOST_IMAGES + 5)]
        for image in images:
            subscription._add_image(image)
            subscription._remove_image(image.correlation_id)
        assert told == images
        assert [e.session_id for e in subscription._lost] == [7] * MAX_LOST_IMAGES
        await subscription.close()
        assert subscription._lost == []


async def test_the_iterators_raise_a_loss_once_then_go_on_with_the_other_images():
    """`aeronio rate` and `pong` and the examples' consumers say the loss and read on."""
    async with aeronio.connect() as aeron:
        subscription = await aeron.add_subscription("aeron:ipc", 10)
        publication = await aeron.add_exclusive_publication("aeron:ipc", 10)
        await publication.wait_connected(timeout=10)
        lost = LostImage(correlation_id=-1)
        subscription._add_image(lost)
        subscription._remove_image(lost.correlation_id)
        await publication.offer(b"after", timeout=10)
        batches = subscription.batches()
        with pytest.raises(aeronio.ImageUnavailableError) as raised:
            await asyncio.wait_for(anext(batches), 10)
        assert (raised.value.session_id, raised.value.position) == (7, 4096)
        batch = await asyncio.wait_for(anext(batches), 10)
        assert [m.data for m in batch] == [b"after"]
        await publication.offer(b"and on", timeout=10)
        async with asyncio.timeout(10):
            async for message in subscription:
                assert message.data == b"and on"
                break
