"""What a subscription keeps of images lost before their end: the errors its iterators raise,
bounded for a subscription that is only polled (its unavailable-image callback tells it of
each), and none once it is closed; where they say the stream was lost."""

import asyncio
import os
import socket

import pytest

import aeronio
from aeronio._core import FRAME_ALIGNMENT, HEADER_LENGTH
from aeronio.client.subscription import MAX_LOST_IMAGES
from aeronio.counters import SystemCounters
from aeronio.driver import publication_image, receiver_state
from aeronio.logbuffer import descriptor
from aeronio.protocol import control as p
from aeronio.protocol.frames import BEGIN_FRAG_FLAG, DataHeader
from tests.support.forged_sender import INITIAL_TERM_ID, SESSION, STREAM, data, forge_image
from tests.support.ports import free_port
from tests.support.procs import await_until
from tests.support.refused_logs import refuse_the_next_log
from tests.support.ring_client import RingClient


class LostImage:
    """An image that went away before its end (what `_remove_image` reads of one)."""

    _reader = None
    is_end_of_stream = False
    is_publication_revoked = False
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


async def test_a_publisher_back_from_another_port_with_its_session_id_ends_the_image_it_left(
    monkeypatch,
):
    """A publisher that died without an end of stream comes back at once, from another port,
    with its session id and where it left off (its heartbeats are at the image's position): not
    the image's connection, it does not keep the image alive. The image goes silent and away,
    its subscriber told where; the publisher's new image comes after the cool-down."""
    for module in (receiver_state, publication_image):
        monkeypatch.setattr(module, "IMAGE_LIVENESS_TIMEOUT_NS", 2_000_000_000)
    monkeypatch.setattr(publication_image, "IMAGE_COOL_DOWN_NS", 500_000_000)
    port = free_port()
    channel = f"aeron:udp?endpoint=127.0.0.1:{port}"
    first = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    first.bind(("127.0.0.1", 0))
    first.setblocking(False)
    async with aeronio.connect() as subscriber, aeronio.connect() as publisher:
        subscription = await subscriber.add_subscription(channel, STREAM)
        try:
            await forge_image(first, port, subscription)
            for offset in (0, 64, 128):
                first.sendto(data(offset), ("127.0.0.1", port))
            messages = subscription.batches()
            received: list[bytes] = []
            async with asyncio.timeout(10):
                while len(received) < 3:
                    received += [bytes(m.data) for m in await anext(messages)]
            assert received == [data(offset)[32:] for offset in (0, 64, 128)]
            (left,) = subscription.images
        finally:
            first.close()  # died: no end of stream
        back = await publisher.add_exclusive_publication(
            f"{channel}|term-length=64k|session-id={SESSION}|init-term-id={INITIAL_TERM_ID}"
            f"|term-id={INITIAL_TERM_ID}|term-offset=192",
            STREAM,
        )
        with pytest.raises(aeronio.ImageUnavailableError) as lost:
            await asyncio.wait_for(anext(messages), 10)
        assert (lost.value.session_id, lost.value.position) == (SESSION, 192)
        await back.wait_connected(timeout=10)
        await back.offer(b"back", timeout=10)
        batch = await asyncio.wait_for(anext(messages), 10)
        assert [bytes(m.data) for m in batch] == [b"back"]
        (image,) = subscription.images
        assert image.correlation_id != left.correlation_id and image.join_position == 192


def fragment(payload: bytes, flags: int, term_offset: int) -> bytes:
    """A DATA frame, aligned (try_offer_block gives it the publication's ids)."""
    header = DataHeader.build(
        frame_length=HEADER_LENGTH + len(payload), flags=flags, term_offset=term_offset,
        session_id=0, stream_id=0, term_id=0,
    )  # fmt: skip
    frame = header.encode() + payload
    return frame + bytes(-len(frame) % FRAME_ALIGNMENT)


async def begun_message(aeron, stream_id: int, copy: bool):
    """A stream that has a whole message, then the first two fragments of one whose END never
    comes; an iterator (`copy`: messages(copy=)) that took the first and holds the fragments,
    waiting for the rest. Returns the publication, the subscription's image, the iterator and
    where the unfinished message begins."""
    subscription = await aeron.add_subscription("aeron:ipc", stream_id)
    publication = await aeron.add_exclusive_publication("aeron:ipc?term-length=64k", stream_id)
    await publication.wait_connected(timeout=10)
    begins = await publication.offer(b"whole", timeout=10)
    first = fragment(b"B" * 64, BEGIN_FRAG_FLAG, begins)
    after = publication.try_offer_block(first + fragment(b"M" * 64, 0, begins + len(first)))
    assert after == begins + 2 * 96
    messages = aiter(subscription.messages(copy=copy))
    assert bytes((await asyncio.wait_for(anext(messages), 10)).data) == b"whole"
    image = subscription.images[0]
    waiting = asyncio.ensure_future(anext(messages))
    await await_until(lambda: image.position == after, 10, "the fragments to be taken")
    waiting.cancel()
    assert image.taken_position == begins
    return publication, image, messages, begins


def end_of_stream(image) -> int:
    return image.metadata.get_int64_volatile(descriptor.LOG_END_OF_STREAM_POSITION_OFFSET)


@pytest.mark.parametrize("copy", [True, False], ids=["copies", "views"])
async def test_a_loss_says_where_a_message_cut_off_by_the_images_going_began(aeron, copy):
    """What was lost begins with the message whose first fragments the iterator held."""
    publication, image, messages, begins = await begun_message(aeron, 11, copy)
    await publication.offer(b"never read", timeout=10)
    await publication.close()
    await await_until(lambda: image.is_closed, 10, "the image to go")
    with pytest.raises(aeronio.ImageUnavailableError) as lost:
        await asyncio.wait_for(anext(messages), 10)
    assert (lost.value.session_id, lost.value.position) == (image.session_id, begins)


@pytest.mark.parametrize("copy", [True, False], ids=["copies", "views"])
async def test_a_stream_that_ends_in_the_middle_of_a_message_is_not_at_its_end(aeron, copy):
    """The stream ended with the first fragments of a message, taken into the iterator: that
    message was never taken, so the image's going is a loss from its beginning."""
    publication, image, messages, begins = await begun_message(aeron, 12, copy)
    await publication.close()
    await await_until(lambda: end_of_stream(image) == image.position, 10, "the stream's end")
    assert not image.is_end_of_stream
    with pytest.raises(aeronio.ImageUnavailableError) as lost:
        await asyncio.wait_for(anext(messages), 10)
    assert lost.value.position == begins


@pytest.mark.parametrize("form", ["receive", "async for", "poll"])
async def test_an_image_whose_log_is_refused_is_raised_once_then_the_others_go_on(
    monkeypatch, form
):
    """A new image's log the client refuses as it maps it (here its file grown a page past its
    terms and metadata just before): its messages never come, and the next step or poll says
    so, naming the session, the log and why, once (a poll and the iterators alike); then the
    other images' messages come."""
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}"
    async with aeronio.connect() as aeron:
        conductor = aeron._conductor
        map_image = conductor._on_image_ready
        grown = []

        def grow_the_first_log(ready):
            if not grown:
                grown.append(ready.log_file)
                os.truncate(ready.log_file, os.path.getsize(ready.log_file) + 4096)
            map_image(ready)

        monkeypatch.setattr(conductor, "_on_image_ready", grow_the_first_log)
        subscription = await aeron.add_subscription(channel, 12)

        async def step(form: str) -> bytes:
            if form == "receive":
                return (await subscription.receive()).data
            if form == "async for":
                return (await anext(aiter(subscription))).data
            got = []
            await await_until(
                lambda: subscription.poll(lambda buffer, _: got.append(bytes(buffer)), 10),
                10,
                "a poll",
            )
            return got[0]

        refused = await aeron.add_exclusive_publication(channel, 12)
        with pytest.raises(aeronio.ImageUnavailableError) as raised:
            await asyncio.wait_for(step(form), 10)
        log_file = grown[0]  # its metadata read a page further on, in zeros
        assert str(raised.value) == (
            f"the image of session {refused.session_id} on {channel} stream 12 was refused at "
            f"position 0, its messages lost: its log {log_file} did not map: {log_file} is not "
            "a log buffer: log metadata has an invalid term length 0"
        )
        assert (raised.value.session_id, raised.value.position) == (refused.session_id, 0)
        other = await aeron.add_exclusive_publication(channel, 12)
        await other.offer(b"after", timeout=10)
        then = {"receive": "poll", "async for": "receive", "poll": "async for"}[form]
        assert await asyncio.wait_for(step(then), 10) == b"after"


async def _refused_beside_another(aeron, refused_logs: list, channel: str):
    """A subscription of `channel` stream 12 whose first image delivers, and a second
    publication whose image's log the client refuses (`refused_logs` armed), raised once:
    (subscription, the first publication, the refused one)."""
    subscription = await aeron.add_subscription(channel, 12)
    other = await aeron.add_exclusive_publication(channel, 12)
    await other.offer(b"other", timeout=10)
    assert (await asyncio.wait_for(subscription.receive(), 10)).data == b"other"
    refused_logs.append(None)  # armed
    refused = await aeron.add_exclusive_publication(channel, 12)
    with pytest.raises(aeronio.ImageUnavailableError):
        await asyncio.wait_for(subscription.receive(), 10)
    return subscription, other, refused


async def _both_deliver(subscription, other, refused) -> None:
    """The first image delivers still; the refused one, once it came again after the driver's
    cool-down (its log maps now), delivers too."""
    await other.offer(b"other again", timeout=10)
    assert (await asyncio.wait_for(subscription.receive(), 10)).data == b"other again"
    await await_until(
        lambda: subscription.image_by_session_id(refused.session_id), 30, "the image again"
    )
    await refused.offer(b"after", timeout=10)
    assert (await asyncio.wait_for(subscription.receive(), 10)).data == b"after"


async def test_an_image_whose_log_is_refused_is_rejected_and_holds_its_publisher_no_more(
    monkeypatch,
):
    """The client rejects an image whose log it refused (REJECT_IMAGE, the reason naming the
    log): the driver tells the publisher so and unlinks the image, which holds the publisher no
    more. When the image comes again after the driver's cool-down, its log maps: the
    publisher's offers reach the subscription. The subscription's other image delivers all
    along. The client used to tell the driver nothing: the publisher stayed connected to an
    image nobody read, held at its window for ever."""
    channel = "aeron:ipc?term-length=64k"
    async with aeronio.connect(image_liveness_timeout_ns=500_000_000) as aeron:
        refused_logs = refuse_the_next_log(monkeypatch, aeron)
        watcher = RingClient(aeron.driver_dir)
        try:
            subscription, other, refused = await _refused_beside_another(
                aeron, refused_logs, channel
            )
            await await_until(lambda: not refused.is_connected, 10, "the image rejected")
            error = await watcher.expect(
                lambda r: isinstance(r, p.PublicationError), "the publication's error"
            )
            assert (error.registration_id, error.error_code, error.error_message) == (
                refused.registration_id,
                p.IMAGE_REJECTED,
                f"aeronio client {aeron.client_id} could not map the image's log "
                f"{refused.log_file}: {refused.log_file} is refused here",
            )
            await _both_deliver(subscription, other, refused)
            assert refused_logs == [refused.log_file]  # refused once
        finally:
            watcher.close()


async def test_a_network_image_whose_log_is_refused_is_rejected_and_its_publisher_told(
    monkeypatch,
):
    """On UDP too: the image whose log the client refused is rejected; the driver ends it and
    answers its sender with ERR frames, and the publisher's client is told (IMAGE_REJECTED, the
    reason naming the log). After the image's cool-down the session comes again as a new
    image, whose log maps: the publisher's offers reach the subscription. The other image
    delivers all along. The client used to tell the driver nothing: the sender went on
    sending into an image nobody read, its publisher held at the window it left."""
    monkeypatch.setattr(publication_image, "IMAGE_COOL_DOWN_NS", 500_000_000)
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=64k"
    told: list[p.PublicationError] = []
    async with aeronio.connect(publication_error_handler=told.append) as aeron:
        refused_logs = refuse_the_next_log(monkeypatch, aeron)
        subscription, other, refused = await _refused_beside_another(aeron, refused_logs, channel)
        await await_until(lambda: told, 10, "the publisher told")
        (log_file,) = refused_logs
        assert [(e.registration_id, e.error_code, e.error_message) for e in told] == [
            (
                refused.registration_id,
                p.IMAGE_REJECTED,
                f"aeronio client {aeron.client_id} could not map the image's log {log_file}: "
                f"{log_file} is refused here",
            )
        ]
        counted = aeron.counters.get_counter_value
        assert counted(SystemCounters.IMAGES_REJECTED) == 1
        assert counted(SystemCounters.ERROR_FRAMES_SENT) >= 1  # the publisher was told by one
        assert counted(SystemCounters.ERROR_FRAMES_RECEIVED) >= 1
        await _both_deliver(subscription, other, refused)
