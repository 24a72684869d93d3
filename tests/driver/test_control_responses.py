"""What the driver tells a client, as Aeron's command protocol has it: the image notifications
(the join position in the subscriber position counter, the image found by its correlation id)
and Aeron's error codes."""

import pytest

import aeronio
from aeronio.protocol import control as p
from tests.support.procs import await_until

TERM_64K = "aeron:ipc?term-length=64k"


@pytest.fixture
async def aeron():
    async with aeronio.connect(
        publication_unblock_timeout_ns=300_000_000, publication_linger_ns=50_000_000
    ) as client:
        seen: list[p.Response] = []
        conductor = client._conductor
        dispatch = conductor._dispatch
        conductor._dispatch = lambda response: (seen.append(response), dispatch(response))
        client.seen = seen
        yield client


async def test_an_image_is_told_by_its_counter_and_goes_by_its_correlation_id(aeron):
    """ImageReady names the image's correlation id and its subscriber position counter, whose
    value is the join position; ImageUnavailable names the image and the subscription's
    channel, and the client closes that image."""
    gone = []
    publication = await aeron.add_publication(TERM_64K, 5)
    first = await aeron.add_subscription(TERM_64K, 5)
    await await_until(lambda: first.images, 10, "the first image")
    position = await publication.offer(b"x" * 100)
    assert position == 160  # a 100-byte message's aligned frame
    subscription = await aeron.add_subscription(TERM_64K, 5, unavailable_image=gone.append)
    image = await await_until(lambda: subscription.images and subscription.images[0], 10, "image")
    (ready,) = [
        r
        for r in aeron.seen
        if isinstance(r, p.ImageReady)
        and r.subscription_registration_id == subscription.registration_id
    ]
    assert ready == p.ImageReady(
        correlation_id=publication.registration_id,
        session_id=publication.session_id,
        stream_id=5,
        subscription_registration_id=subscription.registration_id,
        subscriber_position_id=ready.subscriber_position_id,
        log_file=publication.log_file,
        source_identity="aeron:ipc",
    )
    assert aeron.counters.get_counter_type_id(ready.subscriber_position_id) == 4  # sub-pos
    assert aeron.counters.get_counter_value(ready.subscriber_position_id) == position
    assert image.join_position == position
    await publication.close()
    assert subscription.poll(lambda *args: None, 10) == 0  # the joiner starts at the end
    first.poll(lambda *args: None, 10)  # the first drains: the log ends
    await await_until(lambda: gone, 10, "unavailable_image")
    (unavailable,) = [
        r
        for r in aeron.seen
        if isinstance(r, p.ImageUnavailable)
        and r.subscription_registration_id == subscription.registration_id
    ]
    assert unavailable == p.ImageUnavailable(
        publication.registration_id, subscription.registration_id, 5, TERM_64K
    )
    assert gone == [image] and image.is_closed


async def test_a_refused_command_has_aerons_error_code(aeron):
    with pytest.raises(aeronio.DriverError) as refused:
        conductor = aeron._conductor
        command = p.RemoveCounter(conductor.next_correlation_id(), aeron.client_id, 99)
        await conductor.request(command, p.OperationSuccess)
    assert refused.value.code == p.UNKNOWN_COUNTER == 5


async def test_an_answer_of_another_type_than_asked_is_a_driver_error(aeron):
    """The client conductor takes from the driver only the answer a command has."""
    counter = await aeron.add_counter(1001, "answered")
    conductor = aeron._conductor
    command = p.RemoveCounter(
        conductor.next_correlation_id(), aeron.client_id, counter.registration_id
    )
    with pytest.raises(aeronio.DriverError) as wrong:
        await conductor.request(command, p.CounterReady)
    assert str(wrong.value) == (
        "the driver answered RemoveCounter with OperationSuccess, not CounterReady"
    )
    assert wrong.value.code == p.GENERIC_ERROR
