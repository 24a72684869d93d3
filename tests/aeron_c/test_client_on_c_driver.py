"""aeronio's client on Aeron's C media driver (1.53): it speaks Aeron's client protocol through the
driver's cnc.dat, as Aeron's own clients do."""

import asyncio
import contextlib
import time

import numpy
import pytest

import aeronio
from aeronio.cnc import CONTROL_PROTOCOL_VERSION
from aeronio.counters import CountersReader, control_protocol_version
from aeronio.errors import DriverNotFoundError, DriverTimeoutError
from aeronio.protocol import control as p
from tests.aeron_c.streams import COUNT, SIZES, expected, receive, send_to_pyaeron
from tests.driver.test_channel_status import port_0_scenario
from tests.driver.test_publication_session_ids_and_destinations import shared_publication_scenario
from tests.support.procs import await_until
from tests.support.refused_logs import refuse_the_next_log

IPC = "aeron:ipc"
# Where Aeron's C driver says an IPC image's rejection came from: INADDR_LOOPBACK stored
# without htonl (aeron_ipc_publication_reject), so its bytes read 1.0.0.127 (Java's: 127.0.0.1).
C_DRIVER_IPC_SOURCE = "1.0.0.127"


async def test_the_readme_example_runs_on_a_c_drivers_directory(aeron_c):
    dir = aeron_c.new_dir()
    driver = aeron_c.pyaeron("driver", dir=dir)
    driver_pid = (await driver.aexpect_json("ready", 30))["pid"]
    received = []
    async with aeronio.connect(dir) as aeron:
        subscription = await aeron.add_subscription("aeron:ipc", stream_id=10)
        publication = await aeron.add_publication("aeron:ipc?term-length=64k", stream_id=10)
        await publication.wait_connected(timeout=5)
        position = await publication.offer(b"hello", timeout=5)
        assert position == 64  # a 32-byte header, aligned to 32
        assert publication.try_offer(b"world") == 128
        async with publication.claim(8) as buf:
            buf[:] = b"claimed!"
        async for message in subscription:
            received.append((message.data, message.header.position))
            if message.data == b"claimed!":
                break
        assert aeron.driver_pid == driver_pid
    assert received == [(b"hello", 64), (b"world", 128), (b"claimed!", 192)]


async def test_the_next_session_ids_come_from_the_c_drivers_sequence(aeron_c):
    """Aeron's C driver shows control protocol 1.0.0 (its system counter, id 43): aeronio's
    client asks it for the next session ids (GET_NEXT_AVAILABLE_SESSION_ID), which come from
    the driver's sequence, one after the other, and a publication added then takes the next."""
    dir = aeron_c.new_dir()
    await aeron_c.pyaeron("driver", dir=dir).aexpect_json("ready", 30)
    async with aeronio.connect(dir) as aeron:
        assert control_protocol_version(aeron.counters) == CONTROL_PROTOCOL_VERSION
        first = await aeron.next_session_id(7)
        assert await aeron.next_session_id(7) == first + 1
        publication = await aeron.add_publication(IPC, 7)
        assert publication.session_id == first + 2


async def test_a_pyaeron_publication_reaches_an_aeronio_subscription_and_its_image_goes(aeron_c):
    dir = aeron_c.new_dir()
    await aeron_c.pyaeron("driver", dir=dir).aexpect_json("ready", 30)
    available, unavailable = asyncio.Event(), asyncio.Event()
    async with aeronio.connect(dir) as aeron:
        subscription = await aeron.add_subscription(
            IPC,
            7,
            available_image=lambda image: available.set(),
            unavailable_image=lambda image: unavailable.set(),
        )
        publisher = aeron_c.pyaeron(
            "publish", dir=dir, channel=IPC, stream_id=7, count=COUNT, sizes=SIZES
        )
        session_id = (await publisher.aexpect_json("publication", 30))["session_id"]
        async with asyncio.timeout(30):
            await available.wait()
        assert [image.session_id for image in subscription.images] == [session_id]
        assert await receive(subscription, COUNT) == expected()
        await publisher.aexpect_json("sent", 30)
        publisher.release()  # the publication closes: its image goes
        async with asyncio.timeout(30):
            await unavailable.wait()
        assert subscription.images == ()


# 64 KiB terms: the publisher is held back by the subscriber and waits on its idle strategy (an
# Aeron driver rings no doorbell when it moves the publication's limit)
@pytest.mark.parametrize("channel", [IPC, "aeron:ipc?term-length=64k"])
async def test_an_aeronio_publication_reaches_a_pyaeron_subscription_and_its_image_goes(
    aeron_c, channel
):
    dir = aeron_c.new_dir()
    await aeron_c.pyaeron("driver", dir=dir).aexpect_json("ready", 30)
    subscriber = aeron_c.pyaeron("subscribe", dir=dir, channel=IPC, stream_id=8, count=COUNT)
    await subscriber.aexpect("subscribed", 30)
    async with aeronio.connect(dir) as aeron:
        publication = await aeron.add_exclusive_publication(channel, 8)
        await publication.wait_connected(timeout=30)
        await send_to_pyaeron(publication, subscriber)
        await publication.close()
        gone = await subscriber.aexpect_json("image-unavailable", 30)
        assert gone["session_id"] == publication.session_id


async def test_claims_batches_and_counters_on_a_c_driver(aeron_c):
    dir = aeron_c.new_dir()
    await aeron_c.pyaeron("driver", dir=dir).aexpect_json("ready", 30)
    async with aeronio.connect(dir) as aeron:
        subscription = await aeron.add_subscription(IPC, 9)
        publication = await aeron.add_publication(IPC, 9)
        await publication.wait_connected(timeout=30)
        async with publication.claim(5, timeout=30) as buf:
            buf[:] = b"claim"
        records = numpy.arange(4 * 16, dtype=numpy.uint8).reshape(4, 16)
        await publication.offer_batch(records, timeout=30)
        await publication.offer_batch([b"a", b"bc"], timeout=30)
        received = []
        async with asyncio.timeout(30):
            async for batch in subscription.batches():
                received += [message.data for message in batch]
                if len(received) >= 7:
                    break
        assert received == [b"claim", *(bytes(r) for r in records), b"a", b"bc"]

        counter = await aeron.add_counter(1001, "an aeronio counter", key=b"\x07" * 8)
        counter.set(42)
        with CountersReader.open(dir) as reader:  # as any other process sees it
            seen = {info.id: info for info in reader.for_each()}
            info = seen[counter.id]
            assert (info.type_id, info.label, info.value) == (1001, "an aeronio counter", 42)
            assert info.key[:8] == b"\x07" * 8
            await counter.close()
            assert reader.get_counter_state(counter.id) != 1  # freed by the driver


async def test_udp_from_an_aeronio_client_to_a_pyaeron_subscriber_on_another_c_driver(
    aeron_c, free_port
):
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port}"
    receiving_dir, sending_dir = aeron_c.new_dir(), aeron_c.new_dir()
    await aeron_c.pyaeron("driver", dir=receiving_dir).aexpect_json("ready", 30)
    await aeron_c.pyaeron("driver", dir=sending_dir).aexpect_json("ready", 30)
    subscriber = aeron_c.pyaeron(
        "subscribe", dir=receiving_dir, channel=channel, stream_id=11, count=COUNT
    )
    await subscriber.aexpect("subscribed", 30)
    async with aeronio.connect(sending_dir) as aeron:
        publication = await aeron.add_publication(channel, 11)
        await publication.wait_connected(timeout=30)
        await send_to_pyaeron(publication, subscriber)


@contextlib.asynccontextmanager
async def udp_from_a_c_driver_to_an_aeronio_driver(aeron_c, port: int):
    """(subscription, publication), connected: the publication an aeronio client's on a C
    driver, the subscription an aeronio client's on an aeronio driver embedded here."""
    channel = f"aeron:udp?endpoint=127.0.0.1:{port}"
    sending_dir = aeron_c.new_dir()
    await aeron_c.pyaeron("driver", dir=sending_dir).aexpect_json("ready", 30)
    async with aeronio.connect() as receiving, aeronio.connect(sending_dir) as sending:
        subscription = await receiving.add_subscription(channel, 13)
        publication = await sending.add_publication(channel, 13)
        await publication.wait_connected(timeout=30)
        yield subscription, publication


async def test_udp_from_an_aeronio_client_on_a_c_driver_to_an_aeronio_driver(aeron_c, free_port):
    """An aeronio client of Aeron's C driver sends over UDP to an aeronio client of an aeronio
    driver (embedded in this process): every message, in order, byte for byte."""
    async with udp_from_a_c_driver_to_an_aeronio_driver(aeron_c, free_port) as (sub, pub):
        received = asyncio.create_task(receive(sub, COUNT))
        for data in expected():
            await pub.offer(data, timeout=30)
        assert await received == expected()


async def test_a_c_drivers_publication_hears_an_aeronio_subscription_leave_at_once(
    aeron_c, free_port
):
    """An aeronio driver's image says farewell as its subscription closes (a status message
    flagged end-of-stream, as Aeron 1.53's receivers send): Aeron's C driver takes that receiver
    out of its publication at once, where for one that said nothing it waited out its
    connection timeout (5 s; 4.8 s measured before the farewell)."""
    async with udp_from_a_c_driver_to_an_aeronio_driver(aeron_c, free_port) as (sub, pub):
        await await_until(lambda: sub.images, 30, "the publication's image")
        await sub.close()
        closed = time.monotonic()
        await await_until(lambda: not pub.is_connected, 10, "the publication let go")
        assert time.monotonic() - closed < 2.5


async def test_a_dead_c_driver_fails_the_client_with_driver_timeout(aeron_c):
    dir = aeron_c.new_dir()
    driver = aeron_c.pyaeron("driver", dir=dir)
    await driver.aexpect_json("ready", 30)
    async with aeronio.connect(dir, driver_timeout_s=2.0) as aeron:
        subscription = await aeron.add_subscription(IPC, 12)
        driver.kill()
        with pytest.raises(DriverTimeoutError, match="no driver heartbeat"):
            async with asyncio.timeout(30):
                async for _ in subscription:
                    pass
        with pytest.raises(DriverTimeoutError):
            await aeron.add_publication(IPC, 12)


async def test_connect_names_what_is_missing_on_a_directory_without_driver(tmp_path):
    with pytest.raises(DriverNotFoundError, match=rf"{tmp_path}: no cnc.dat after waiting 0.1 s"):
        await aeronio.connect(tmp_path, driver_timeout_s=0.1)


async def test_two_clients_of_one_process_keep_to_their_own_responses(aeron_c):
    dir = aeron_c.new_dir()
    await aeron_c.pyaeron("driver", dir=dir).aexpect_json("ready", 30)
    async with aeronio.connect(dir) as first, aeronio.connect(dir) as second:
        assert first.client_id != second.client_id
        came, gone = asyncio.Event(), asyncio.Event()
        subscription = await first.add_subscription(
            IPC,
            13,
            available_image=lambda image: came.set(),
            unavailable_image=lambda image: gone.set(),
        )
        publication = await second.add_publication(IPC, 13)
        async with asyncio.timeout(30):
            await came.wait()
        assert [image.session_id for image in subscription.images] == [publication.session_id]
        await second.close()  # its publication goes, and with it the first one's image
        async with asyncio.timeout(30):
            await gone.wait()
        first.check_alive()  # the other client's close is not this one's
        assert (await first.add_publication(IPC, 14)).stream_id == 14


async def test_static_counters_session_ids_and_destinations_by_id_on_a_c_driver(aeron_c, free_port):
    """The commands of 1.53 from aeronio's client, answered by Aeron's driver: a static counter
    found again by its type and registration id (refused where a client owns the counter); a
    next session id free for a publication's session-id=; a destination removed by id."""
    dir = aeron_c.new_dir()
    await aeron_c.pyaeron("driver", dir=dir).aexpect_json("ready", 30)
    async with aeronio.connect(dir) as aeron:
        static = await aeron.add_static_counter(1006, "a static counter", 777, key=b"\x07")
        static.set(5)
        async with aeronio.connect(dir) as other:
            found = await other.add_static_counter(1006, "another label", 777)
            assert (found.id, found.get(), found.label) == (static.id, 5, "a static counter")
            owned = await other.add_counter(1007, "owned")
            with pytest.raises(aeronio.DriverError, match="non-static counter") as refused:
                await other.add_static_counter(1007, "static", owned.registration_id)
            assert refused.value.code == 11  # GENERIC_ERROR
        assert aeron.counters.get_counter_owner_id(static.id) == -1

        first = await aeron.add_publication(IPC, 7)
        session_id = await aeron.next_session_id(7)
        assert session_id != first.session_id
        chosen = await aeron.add_exclusive_publication(f"{IPC}?session-id={session_id}", 7)
        assert chosen.session_id == session_id

        control = f"127.0.0.1:{free_port}"
        mdc = await aeron.add_publication(f"aeron:udp?control={control}|control-mode=manual", 8)
        # A destination is only sent to: any port will do.
        destination = await mdc.add_destination("aeron:udp?endpoint=127.0.0.1:9")
        await mdc.remove_destination_by_id(destination)  # answered ON_OPERATION_SUCCESS


async def test_adds_of_one_publication_are_each_removed_by_their_own_id_on_a_c_driver(
    aeron_c, free_port
):
    """Aeron's driver keeps each add under its own correlation id and names the log by the
    first's: a later add closed (or a destination added through it) by the log's id is refused."""
    dir = aeron_c.new_dir()
    await aeron_c.pyaeron("driver", dir=dir).aexpect_json("ready", 30)
    await shared_publication_scenario(dir, free_port)


async def test_an_aeronio_subscription_on_port_0_tells_its_port_on_a_c_driver(aeron_c):
    """aeronio's client reads Aeron's C driver's local socket address counters as that driver
    writes them (its publication's socket is connected to the endpoint: 127.0.0.1)."""
    dir = aeron_c.new_dir()
    await aeron_c.pyaeron("driver", dir=dir).aexpect_json("ready", 30)
    async with aeronio.connect(dir) as aeron:
        await port_0_scenario(aeron, "127.0.0.1")


async def test_a_refused_image_is_rejected_and_the_publications_error_told_on_a_c_driver(
    aeron_c, monkeypatch
):
    """aeronio's client rejects an image whose log it refused (REJECT_IMAGE): Aeron's C driver
    takes the image from the subscription (the publication is not connected) and tells the
    publication's clients in its own layout (ON_PUBLICATION_ERROR), which aeronio's client
    decodes and hands to its publication_error_handler. The client used to reject nothing, and
    to drop the C driver's message as one it did not decode."""
    dir = aeron_c.new_dir()
    await aeron_c.pyaeron("driver", dir=dir).aexpect_json("ready", 30)
    errors: list[p.PublicationError] = []
    async with aeronio.connect(dir, publication_error_handler=errors.append) as aeron:
        refused_logs = refuse_the_next_log(monkeypatch, aeron)
        refused_logs.append(None)  # armed
        subscription = await aeron.add_subscription(IPC, 13)
        publication = await aeron.add_exclusive_publication(IPC, 13)
        with pytest.raises(aeronio.ImageUnavailableError):
            await asyncio.wait_for(subscription.receive(), 30)
        await await_until(lambda: errors, 30, "the publication's error")
        await await_until(lambda: not publication.is_connected, 30, "the image rejected")
    assert errors == [
        p.PublicationError(
            registration_id=publication.registration_id,
            destination_registration_id=-1,
            session_id=publication.session_id,
            stream_id=13,
            receiver_id=-1,
            group_tag=-1,
            source_address=C_DRIVER_IPC_SOURCE,
            source_port=0,
            error_code=p.IMAGE_REJECTED,
            error_message=f"aeronio client {aeron.client_id} could not map the image's log "
            f"{publication.log_file}: {publication.log_file} is refused here",
        )
    ]


async def test_an_aeronio_publication_is_told_when_aerons_receiver_rejects_its_image(
    aeron_c, free_port
):
    """Aeron's C client rejects the image of a publication of aeronio's driver (UDP on
    loopback): Aeron's C driver answers with ERR frames, and aeronio's driver tells the
    publication's client (ON_PUBLICATION_ERROR: IMAGE_REJECTED, the reason, the receiver's id
    and address). aeronio's driver counted the ERR frames as invalid packets: the publisher was
    never told."""
    dir = aeron_c.new_dir()
    await aeron_c.pyaeron("driver", dir=dir).aexpect_json("ready", 30)
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port}"
    rejecter = aeron_c.pyaeron(
        "reject_image", dir=dir, channel=channel, stream_id=14, reason="not this one"
    )
    await rejecter.aexpect("subscribed", 30)
    told: list[p.PublicationError] = []
    async with aeronio.connect(publication_error_handler=told.append) as aeron:  # its own driver
        publication = await aeron.add_exclusive_publication(channel, 14)
        rejected = await rejecter.aexpect_json("rejected", 60)
        assert rejected["session_id"] == publication.session_id
        await await_until(lambda: told, 30, "the receiver's error")
    (error,) = told
    assert error.receiver_id != p.NULL_VALUE and error.source_port > 0
    assert error == p.PublicationError(
        registration_id=publication.registration_id,
        destination_registration_id=p.NULL_VALUE,
        session_id=publication.session_id,
        stream_id=14,
        receiver_id=error.receiver_id,
        group_tag=error.group_tag,
        source_address="127.0.0.1",
        source_port=error.source_port,
        error_code=p.IMAGE_REJECTED,
        error_message="not this one",
    )
