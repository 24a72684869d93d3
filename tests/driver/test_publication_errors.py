"""A publication's errors (ON_PUBLICATION_ERROR: here its IPC image rejected) reach the clients
that hold it: logged, and handed to the `publication_error_handler` given to `connect`, as
Aeron's publicationErrorFrameHandler; a handler that raises is logged, the client goes on."""

import asyncio
import logging

import pytest

import aeronio
from aeronio.counters import SystemCounters
from aeronio.protocol import control as p
from tests.support.procs import await_until
from tests.support.ring_client import RingClient

CHANNEL = "aeron:ipc?term-length=64k"


async def test_a_publications_error_reaches_its_clients_handler_and_no_other_client(caplog):
    errors: list[p.PublicationError] = []
    others: list[p.PublicationError] = []
    async with (
        aeronio.connect(publication_error_handler=errors.append) as aeron,
        aeronio.connect(aeron.driver_dir, publication_error_handler=others.append) as other,
    ):
        subscription = await aeron.add_subscription(CHANNEL, 5)
        publication = await aeron.add_exclusive_publication(CHANNEL, 5)
        await subscription.wait_connected(timeout=10)
        (image,) = subscription.images
        rejecter = RingClient(aeron.driver_dir)
        try:
            with caplog.at_level(logging.WARNING, "aeronio.client"):
                rejecter.send(
                    p.RejectImage(rejecter.next_id(), 0, image.correlation_id, 0, "not wanted")
                )
                await await_until(lambda: errors, 10, "the publication's error")
        finally:
            rejecter.close()
        assert errors == [_rejected(publication, "not wanted")]
        assert (
            f"aeronio client {aeron.client_id}: publication {publication.registration_id} "
            f"(session {publication.session_id}, stream 5) got error 13 from receiver -1 at "
            "127.0.0.1:0: not wanted"
        ) in caplog.messages
        await other.add_publication(CHANNEL, 6)  # answered after the error: it read that too
        assert others == []


async def test_an_error_read_with_its_publications_ready_reaches_the_handler():
    """The driver may answer an add and report the new publication's error (its image rejected
    at once) in one read of the to-clients buffer, before the add's coroutine takes the answer
    up: the error is the client's all the same. It used to be dropped, as another client's."""
    errors: list[p.PublicationError] = []
    async with aeronio.connect(publication_error_handler=errors.append) as aeron:
        conductor = aeron._conductor
        dispatch = conductor._dispatch

        def dispatch_with_an_error(response: p.Response) -> None:
            dispatch(response)
            if isinstance(response, p.PublicationReady):  # the add not yet resumed
                dispatch(_rejected(response, "rejected at once"))

        conductor._dispatch = dispatch_with_an_error
        publication = await aeron.add_exclusive_publication(CHANNEL, 5)
    assert errors == [_rejected(publication, "rejected at once")]


def _rejected(
    publication: aeronio.Publication | p.PublicationReady, why: str
) -> p.PublicationError:
    """What aeronio's driver tells of an IPC publication on stream 5 whose image was rejected."""
    return p.PublicationError(
        registration_id=publication.registration_id,
        destination_registration_id=-1,
        session_id=publication.session_id,
        stream_id=5,
        receiver_id=-1,
        group_tag=-1,
        source_address="127.0.0.1",
        source_port=0,
        error_code=p.IMAGE_REJECTED,
        error_message=why,
    )


async def test_a_handler_that_raises_is_logged_and_the_client_goes_on(caplog):
    def bad(error: p.PublicationError) -> None:
        raise RuntimeError("bad handler")

    async with aeronio.connect(publication_error_handler=bad) as aeron:
        subscription = await aeron.add_subscription(CHANNEL, 5)
        publication = await aeron.add_exclusive_publication(CHANNEL, 5)
        await subscription.wait_connected(timeout=10)
        rejecter = RingClient(aeron.driver_dir)
        try:
            with caplog.at_level(logging.WARNING, "aeronio.client"):
                rejecter.send(
                    p.RejectImage(
                        rejecter.next_id(), 0, subscription.images[0].correlation_id, 0, "no"
                    )
                )
                await await_until(
                    lambda: any("raised for PublicationError" in m for m in caplog.messages),
                    10,
                    "the handler's failure logged",
                )
        finally:
            rejecter.close()
        assert any(r.exc_info and r.exc_info[0] is RuntimeError for r in caplog.records)
        later = await aeron.add_subscription(CHANNEL, 7)  # its conductor goes on
        again = await aeron.add_exclusive_publication(CHANNEL, 7)
        await again.offer(b"on", timeout=10)
        assert (await asyncio.wait_for(later.receive(), 10)).data == b"on"
        assert publication.registration_id != again.registration_id


def test_a_handler_that_is_not_callable_is_refused_naming_it(tmp_path):
    with pytest.raises(aeronio.ConfigurationError, match="publication_error_handler 'no'"):
        aeronio.Aeron(str(tmp_path), publication_error_handler="no")


async def test_an_image_its_subscriber_rejects_goes_and_its_publisher_is_told():
    """Image.reject (Aeron's): the publisher's client is told the reason, the image goes from
    the subscription, the publication is not connected; a reason over Aeron's 1023 bytes is
    refused naming it, before anything is sent."""
    told: list[p.PublicationError] = []
    async with aeronio.connect(publication_error_handler=told.append) as aeron:
        subscription = await aeron.add_subscription(CHANNEL, 5)
        publication = await aeron.add_exclusive_publication(CHANNEL, 5)
        await subscription.wait_connected(timeout=10)
        (image,) = subscription.images
        with pytest.raises(aeronio.ConfigurationError, match="reason of 1024 bytes"):
            await image.reject("x" * 1024)
        await image.reject("not wanted")
        await await_until(lambda: told and not subscription.images, 10, "the image rejected")
        assert [(e.registration_id, e.error_code, e.error_message) for e in told] == [
            (publication.registration_id, p.IMAGE_REJECTED, "not wanted")
        ]
        assert not publication.is_connected
        assert aeron.counters.get_counter_value(SystemCounters.IMAGES_REJECTED) == 1
