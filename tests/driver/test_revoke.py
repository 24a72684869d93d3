"""`Publication.revoke` (Aeron's revoke): the stream ends where the publisher stopped, at once,
not drained. The subscribers' images go with what they had not read, raised to them as lost
(the error and `Image.is_publication_revoked` say the publication was revoked); over UDP the
sender's heartbeats (EOS and REVOKED flags) end the receiver's image. Nothing is reported lost
by the driver: the publisher gave the rest up."""

import asyncio
import os

import pytest

import aeronio
from aeronio.cnc import CncFile
from aeronio.concurrent.error_log import read_error_log
from aeronio.counters import SystemCounters
from aeronio.driver.driver_publication import State
from aeronio.driver.media_driver import MediaDriver
from tests.support.ports import free_port
from tests.support.procs import await_until


@pytest.mark.parametrize("medium", ["ipc", "udp"])
async def test_a_revoked_publications_images_go_at_once_their_unread_messages_raised(
    tmp_path, medium
):
    channel = channel_of(medium)
    dir = str(tmp_path / "driver")
    driver = await MediaDriver.launch(dir=dir, publication_linger_ns=100_000_000).start()
    try:
        async with aeronio.connect(dir) as aeron:
            subscription = await aeron.add_subscription(channel, 7)
            publication = await aeron.add_exclusive_publication(channel, 7)
            await subscription.wait_connected(timeout=10)
            (image,) = subscription.images
            for i in range(10):
                end = await publication.offer(b"message %d" % i, timeout=10)
            await await_until(lambda: _received(driver, end), 10, "the messages in the image")
            await publication.revoke()
            await await_until(lambda: not subscription.images, 10, "the image gone")
            assert image.is_publication_revoked and not image.is_end_of_stream
            with pytest.raises(aeronio.ImageUnavailableError) as lost:
                await asyncio.wait_for(anext(aiter(subscription)), 10)
            assert lost.value.position == 0
            assert "(its publication was revoked)" in str(lost.value)
            counted = aeron.counters.get_counter_value
            assert counted(SystemCounters.PUBLICATIONS_REVOKED) == 1
            revoked_images = counted(SystemCounters.PUBLICATION_IMAGES_REVOKED)
            assert revoked_images == (1 if medium == "udp" else 0)
            conductor = driver.conductor
            await await_until(lambda: not conductor.publications, 10, "the linger over")
        with CncFile.map(dir) as cnc:
            assert read_error_log(cnc.error_log_buffer) == []  # no loss reported
    finally:
        await driver.close()


@pytest.mark.parametrize("medium", ["ipc", "udp"])
async def test_the_other_holders_of_a_revoked_publication_are_told_and_keep_its_log(
    tmp_path, medium
):
    """A publication two clients hold, revoked by one: the other's offers return CLOSED and
    an awaited offer raises saying it was revoked, and the driver keeps the log and its
    counters until that holder lets go too (as Aeron's). Before, its offers said NOT_CONNECTED
    for ever, and once the linger was over its log was deleted and its limit counter freed
    for the next resource while it still read it."""
    channel = channel_of(medium)
    dir = str(tmp_path / "driver")
    driver = await MediaDriver.launch(dir=dir, publication_linger_ns=10_000_000).start()
    try:
        async with aeronio.connect(dir) as a, aeronio.connect(dir) as b:
            subscription = await a.add_subscription(channel, 7)
            revoker = await a.add_publication(channel, 7)
            holder = await b.add_publication(channel, 7)
            assert holder.session_id == revoker.session_id
            await subscription.wait_connected(timeout=10)
            end = await holder.offer(b"before", timeout=10)
            (published,) = driver.conductor.publications
            await revoker.revoke()
            await await_until(lambda: not subscription.images, 10, "the image gone")
            assert holder.try_offer(b"after") == aeronio.CLOSED
            with pytest.raises(aeronio.PublicationClosedError) as closed:
                await holder.offer(b"after", timeout=10)
            assert str(closed.value) == (
                f"publication {holder.registration_id} on {channel} was revoked (by a holder of "
                f"it): its stream ended at {end}"
            )
            # its linger over: it lingers on while `holder` holds it, its log and limit kept
            published.advance(published.linger_deadline_ns() + 1)
            assert published.state is State.LINGER and published.ref_count == 1
            await asyncio.sleep(0)  # a duty cycle of the driver's conductor, which would close it
            assert driver.conductor.publications == [published]
            assert os.path.exists(log := published.log_file) and holder.position_limit == end
            await holder.close()
            await await_until(lambda: not driver.conductor.publications, 10, "the log freed")
            assert not os.path.exists(log)
    finally:
        await driver.close()


def channel_of(medium: str) -> str:
    if medium == "ipc":
        return "aeron:ipc?term-length=64k"
    return f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=64k"


def _received(driver: MediaDriver, end: int) -> bool:
    """The image's log has the stream up to `end` (an IPC image's is the publication's)."""
    images = driver.conductor.resources.images
    return all(image.receiver.rebuild_position.get() >= end for image in images)
