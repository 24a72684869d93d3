"""The driver serves Aeron's command protocol through cnc.dat: commands written to the to-driver
ring buffer are answered on the to-clients broadcast buffer; clients live by their heartbeat
counters; records that are no command are counted, recorded and answered with Aeron's codes;
doorbells wake the parked conductor (the ChangeWatcher: test_command_watch)."""

import os
import socket
import struct
import sys
import time

import pytest

from aeronio.concurrent.error_log import read_error_log
from aeronio.counters import (
    CLIENT_DOORBELL_TYPE_ID,
    CLIENT_HEARTBEAT_TYPE_ID,
    DRIVER_DOORBELL_TYPE_ID,
    RECORD_ALLOCATED,
    SystemCounters,
)
from aeronio.driver.driver_publication import State
from aeronio.driver.media_driver import MediaDriver
from aeronio.logbuffer import waker
from aeronio.protocol import control as p
from aeronio.protocol.channel import MAX_URI_LENGTH
from tests.support.ports import free_port
from tests.support.procs import await_until
from tests.support.ring_client import TIMEOUT_S, RingClient

# Logs made in a blink: a default one (3 x 64 MiB) can take the loop past a 1 s liveness timeout
# on a busy machine, with the driver on the test's loop.
SMALL_IPC = "aeron:ipc?term-length=64k"


@pytest.fixture
async def driver(request):
    options = getattr(request, "param", {})
    async with MediaDriver.launch(**options) as driver:
        yield driver


@pytest.fixture
def client(driver):
    client = RingClient(driver.dir)
    yield client
    client.close()


def _heartbeat_of(client: RingClient) -> int:
    """The id of the client's heartbeat counter, told by ON_COUNTER_READY."""
    (counter_id,) = [
        r.counter_id
        for r in client.poll()
        if isinstance(r, p.CounterReady) and r.correlation_id == client.client_id
    ]
    return counter_id


def _add_publication(
    client: RingClient, channel: str = "aeron:ipc", stream_id: int = 7, exclusive: bool = False
):
    command = p.AddPublication(client.next_id(), client.client_id, channel, stream_id, exclusive)
    client.send(command)
    return command


async def test_a_command_is_answered_on_the_broadcast_buffer_and_makes_a_heartbeat(client):
    """The first command of a client makes its heartbeat counter (Aeron's: type 11, key and
    registration id its client id, value epoch ms), told with ON_COUNTER_READY; the publication
    is answered with ON_PUBLICATION_READY, a subscription with ON_SUBSCRIPTION_READY and the
    image with ON_AVAILABLE_IMAGE."""
    before_ms = time.time_ns() // 1_000_000
    add = _add_publication(client)
    ready = await client.answer(add.correlation_id)
    assert isinstance(ready, p.PublicationReady) and ready.stream_id == 7
    counter = await client.expect(
        lambda r: isinstance(r, p.CounterReady) and r.correlation_id == client.client_id,
        "the heartbeat counter",
    )
    reader = client.counters
    assert reader.get_counter_type_id(counter.counter_id) == CLIENT_HEARTBEAT_TYPE_ID
    assert reader.get_counter_key(counter.counter_id)[:8] == struct.pack("<q", client.client_id)
    assert reader.get_counter_registration_id(counter.counter_id) == client.client_id
    assert reader.get_counter_label(counter.counter_id) == f"client-heartbeat: {client.client_id}"
    assert reader.get_counter_value(counter.counter_id) >= before_ms

    subscribe = p.AddSubscription(client.next_id(), client.client_id, "aeron:ipc", 7)
    client.send(subscribe)
    assert await client.answer(subscribe.correlation_id) == p.SubscriptionReady(
        subscribe.correlation_id
    )
    image = await client.expect(lambda r: isinstance(r, p.ImageReady), "the image")
    assert image.subscription_registration_id == subscribe.correlation_id
    assert image.session_id == ready.session_id and image.log_file == ready.log_file


async def test_records_that_are_no_command_are_counted_answered_and_the_driver_lives(
    driver, client
):
    """An unknown msg type id and malformed payloads: each counted as an error and kept in the
    error log, answered with Aeron's code to the correlation id when the record holds one; the
    commands after them are served."""
    errors = driver.conductor.system[SystemCounters.ERRORS]
    before = errors.get()
    unknown_id = client.next_id()
    client.write(0x77, struct.pack("<qq", client.client_id, unknown_id) + b"xyz")
    truncated_id = client.next_id()
    channel = b"aeron:ipc"
    client.write(
        p.ADD_PUBLICATION,
        struct.pack("<qqii", client.client_id, truncated_id, 7, 1000) + channel,
    )
    bad_text_id = client.next_id()
    client.write(
        p.ADD_SUBSCRIPTION,
        struct.pack("<qqqii", client.client_id, bad_text_id, -1, 7, 2) + b"\xff\xfe",
    )
    client.write(p.REMOVE_PUBLICATION, b"\x01\x02\x03")  # no correlation id to answer
    add = _add_publication(client)
    assert isinstance(await client.answer(add.correlation_id), p.PublicationReady)

    unknown = await client.answer(unknown_id)
    assert (unknown.code, type(unknown)) == (p.UNKNOWN_COMMAND_TYPE_ID, p.ErrorResponse)
    assert "unknown command msg type id 0x77" in unknown.message
    truncated = await client.answer(truncated_id)
    assert truncated.code == p.MALFORMED_COMMAND and "runs past its end" in truncated.message
    bad_text = await client.answer(bad_text_id)
    assert bad_text.code == p.MALFORMED_COMMAND
    assert errors.get() == before + 4
    texts = [o.text for o in read_error_log(client.cnc.error_log_buffer)]
    assert any("msg type id 0x2 of 3 bytes too short" in text for text in texts)


async def test_an_invalid_channel_is_answered_with_aerons_code(client):
    add = _add_publication(client, "aeron:udp?endpoint=nope")
    error = await client.answer(add.correlation_id)
    assert error.code == p.INVALID_CHANNEL and "nope" in error.message


@pytest.mark.parametrize(
    "driver",
    [
        {
            "client_liveness_timeout_ns": 1_000_000_000,
            "client_keepalive_interval_ns": 100_000_000,
            "timer_interval_ns": 100_000_000,
        }
    ],
    indirect=True,
)
async def test_a_client_lives_by_its_heartbeat_counter(driver, client):
    """Two clients: the one that writes its heartbeat counter lives; the one that does not is
    timed out: ON_CLIENT_TIMEOUT, its counters unavailable and freed, its publication
    released."""
    silent = RingClient(driver.dir)
    try:
        live = await client.answer(_add_publication(client, SMALL_IPC, stream_id=1).correlation_id)
        live_heartbeat = _heartbeat_of(client)
        counters = client.counters
        live_counter = counters.counter(live_heartbeat)

        def beating(condition):
            def beat():
                live_counter.set(time.time_ns() // 1_000_000)
                client.poll()
                return condition()

            return beat

        silent_add = _add_publication(silent, SMALL_IPC, stream_id=2)
        gone = await await_until(
            beating(
                lambda: next(
                    (
                        r
                        for r in silent.poll()
                        if getattr(r, "correlation_id", None) == silent_add.correlation_id
                    ),
                    None,
                )
            ),
            TIMEOUT_S,
            "the silent client's publication",
        )
        assert isinstance(gone, p.PublicationReady)
        silent_heartbeat = _heartbeat_of(silent)
        timed_out = beating(lambda: any(isinstance(r, p.ClientTimeout) for r in client.seen))
        await await_until(timed_out, TIMEOUT_S, "the silent client's timeout")
        assert p.ClientTimeout(silent.client_id) in client.seen
        assert p.ClientTimeout(client.client_id) not in client.seen
        assert p.UnavailableCounter(silent.client_id, silent_heartbeat) in client.seen
        assert counters.get_counter_state(silent_heartbeat) != RECORD_ALLOCATED
        assert counters.get_counter_state(live_heartbeat) == RECORD_ALLOCATED
        registrations = {pub.registration_id for pub in driver.conductor.publications}
        assert live.registration_id in registrations
        await await_until(
            beating(
                lambda: (
                    gone.registration_id
                    not in {pub.registration_id for pub in driver.conductor.publications}
                )
            ),
            TIMEOUT_S,
            "the silent client's publication released",
        )
        assert driver.conductor.system[SystemCounters.CLIENT_TIMEOUTS].get() == 1
        again = _add_publication(silent, SMALL_IPC, stream_id=2)
        assert await silent.answer(again.correlation_id) == p.ErrorResponse(
            again.correlation_id,
            p.GENERIC_ERROR,
            f"client {silent.client_id} was timed out by the driver",
        )
    finally:
        silent.close()


async def test_a_closed_client_is_ended_at_once(driver, client):
    await client.answer(_add_publication(client).correlation_id)
    client.send(p.ClientClose(client.client_id))
    await client.expect(
        lambda r: (
            r == p.UnavailableCounter(client.client_id, r.counter_id)
            if isinstance(r, p.UnavailableCounter)
            else False
        ),
        "the heartbeat counter unavailable",
    )
    assert client.client_id not in driver.conductor.resources.clients
    assert p.ClientTimeout(client.client_id) not in client.seen


@pytest.mark.loops
async def test_the_driver_doorbell_counter_and_a_client_doorbell_rung(driver, client):
    """The driver's doorbell counter holds its process's wake id; a client doorbell (ADD_COUNTER
    of CLIENT_DOORBELL_TYPE_ID, key a wake id) gets one datagram after the driver transmits."""
    counters = client.counters
    (doorbell,) = [c for c in counters.for_each() if c.type_id == DRIVER_DOORBELL_TYPE_ID]
    assert doorbell.key[:8] == waker.waker().id.to_bytes(8, sys.byteorder)

    wake_id = 0x5EA4_0000_0000 | os.getpid()  # this process's: two runs at once do not collide
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as bell:
        bell.bind(waker._address(wake_id))
        bell.setblocking(False)
        key = wake_id.to_bytes(8, sys.byteorder)
        label = f"aeronio client doorbell: {client.client_id}"
        add = p.AddCounter(client.next_id(), client.client_id, CLIENT_DOORBELL_TYPE_ID, key, label)
        client.send(add)
        await client.answer(add.correlation_id)

        def rung():
            try:
                return bell.recv(64)
            except BlockingIOError:
                return None

        while rung():  # the datagrams of the counter's own answer
            pass
        await client.answer(_add_publication(client).correlation_id)
        assert await await_until(rung, TIMEOUT_S, "a doorbell datagram") == b"\x01"


@pytest.mark.parametrize(
    "driver, stops",
    [({}, False), ({"terminate_driver_enabled": True}, True)],
    indirect=["driver"],
)
async def test_terminate_driver_only_when_enabled(driver, client, stops):
    """As Aeron's driver: no answer; off (the default) the command is recorded and ignored."""
    client.send(p.TerminateDriver(client.next_id(), client.client_id, b"token"))
    if stops:
        await await_until(driver.terminated.is_set, TIMEOUT_S, "the driver terminated")
    else:
        await await_until(
            lambda: any(
                "TERMINATE_DRIVER" in o.text for o in read_error_log(client.cnc.error_log_buffer)
            ),
            TIMEOUT_S,
            "the ignored TERMINATE_DRIVER recorded",
        )
        assert not driver.terminated.is_set()


# -- the commands of Aeron 1.53: static counters, destinations by id, session ids, rejection --


def _static_counter(client: RingClient, type_id: int, registration_id: int, label: str):
    command = p.AddStaticCounter(
        client.next_id(), client.client_id, registration_id, type_id, b"\x07\x08", label
    )
    client.send(command)
    return command


async def test_a_static_counter_is_found_again_and_outlives_its_client(driver, client):
    """ON_STATIC_COUNTER; no client owns it (owner id Aeron's NULL_VALUE -1), the registration
    id is the command's; a second add of the same type and registration id (another client,
    another label) is answered with the same counter; the adding client's close frees it not."""
    other = RingClient(driver.dir)
    try:
        add = _static_counter(client, 1006, 777, "static one")
        answer = await client.answer(add.correlation_id)
        assert answer == p.StaticCounter(add.correlation_id, answer.counter_id)
        counters, counter_id = client.counters, answer.counter_id
        assert counters.get_counter_type_id(counter_id) == 1006
        assert counters.get_counter_registration_id(counter_id) == 777
        assert counters.get_counter_owner_id(counter_id) == -1
        assert counters.get_counter_key(counter_id)[:2] == b"\x07\x08"
        assert counters.get_counter_label(counter_id) == "static one"

        again = _static_counter(other, 1006, 777, "another label")
        assert await other.answer(again.correlation_id) == p.StaticCounter(
            again.correlation_id, counter_id
        )
        other_type = _static_counter(other, 1016, 777, "another type")
        assert (await other.answer(other_type.correlation_id)).counter_id != counter_id

        client.send(p.ClientClose(client.client_id))
        await await_until(
            lambda: client.client_id not in driver.conductor.resources.clients,
            TIMEOUT_S,
            "the client closed",
        )
        assert counters.get_counter_state(counter_id) == RECORD_ALLOCATED
        assert counters.get_counter_label(counter_id) == "static one"
    finally:
        other.close()


async def test_a_static_counter_where_a_client_owns_the_counter_is_refused(client):
    """As Aeron's driver: GENERIC_ERROR when the counter of that type and registration id is a
    client's (ADD_COUNTER's registration id is its correlation id)."""
    owned = p.AddCounter(client.next_id(), client.client_id, 1007, b"", "owned")
    client.send(owned)
    counter_id = (await client.answer(owned.correlation_id)).counter_id
    add = _static_counter(client, 1007, owned.correlation_id, "static")
    error = await client.answer(add.correlation_id)
    assert error == p.ErrorResponse(
        add.correlation_id,
        p.GENERIC_ERROR,
        "cannot add static counter, because a non-static counter exists "
        f"(counterId={counter_id}) for typeId=1007 and registrationId={owned.correlation_id}",
    )


async def test_a_destination_is_removed_by_the_id_its_add_got(driver, client):
    """REMOVE_DESTINATION_BY_ID: the destination ADD_DESTINATION of that correlation id added
    goes (ON_OPERATION_SUCCESS); an id no destination has removes nothing and succeeds (as
    Aeron's driver); an unknown publication is UNKNOWN_PUBLICATION."""
    control = f"127.0.0.1:{free_port()}"
    add = _add_publication(client, f"aeron:udp?control={control}|control-mode=manual")
    publication = await client.answer(add.correlation_id)
    (endpoint,) = [
        pub.endpoint
        for pub in driver.conductor.publications
        if pub.registration_id == publication.registration_id
    ]
    ports = [free_port() for _ in range(2)]
    adds = []
    for port in ports:
        command = p.AddDestination(
            client.next_id(),
            client.client_id,
            publication.registration_id,
            f"aeron:udp?endpoint=127.0.0.1:{port}",
        )
        client.send(command)
        assert await client.answer(command.correlation_id) == p.OperationSuccess(
            command.correlation_id
        )
        adds.append(command)
    assert set(endpoint.destinations) == {("127.0.0.1", port) for port in ports}

    def remove(registration_id: int, destination_id: int) -> p.RemoveDestinationById:
        command = p.RemoveDestinationById(
            client.next_id(), client.client_id, registration_id, destination_id
        )
        client.send(command)
        return command

    by_id = remove(publication.registration_id, adds[0].correlation_id)
    assert await client.answer(by_id.correlation_id) == p.OperationSuccess(by_id.correlation_id)
    assert set(endpoint.destinations) == {("127.0.0.1", ports[1])}
    for destination_id in (adds[0].correlation_id, publication.registration_id):
        nothing = remove(publication.registration_id, destination_id)
        assert await client.answer(nothing.correlation_id) == p.OperationSuccess(
            nothing.correlation_id
        )
    assert set(endpoint.destinations) == {("127.0.0.1", ports[1])}

    unknown = remove(publication.registration_id + 1000, adds[1].correlation_id)
    error = await client.answer(unknown.correlation_id)
    assert error.code == p.UNKNOWN_PUBLICATION
    assert f"unknown publication registration id {publication.registration_id + 1000}" in (
        error.message
    )
    assert set(endpoint.destinations) == {("127.0.0.1", ports[1])}


def _next_session_id(client: RingClient, stream_id: int) -> p.GetNextAvailableSessionId:
    command = p.GetNextAvailableSessionId(client.next_id(), client.client_id, stream_id)
    client.send(command)
    return command


async def test_the_next_session_id_is_the_drivers_next_free_on_the_stream(driver, client):
    """ON_NEXT_AVAILABLE_SESSION_ID: the driver's session ids come in sequence (from a random
    start: set here), for its publications and for this command alike; one a live publication
    of the stream has (here given with session-id=) is passed over; another stream's
    publication is no obstacle."""
    driver.conductor._session_id_sequence = 5000
    first = await client.answer(_add_publication(client, stream_id=7).correlation_id)
    assert first.session_id == 5000
    taken = 5001
    explicit = _add_publication(client, f"aeron:ipc?session-id={taken}", 7, exclusive=True)
    assert (await client.answer(explicit.correlation_id)).session_id == taken
    other_stream = _add_publication(client, f"aeron:ipc?session-id={taken + 1}", stream_id=8)
    assert isinstance(await client.answer(other_stream.correlation_id), p.PublicationReady)

    ask = _next_session_id(client, 7)
    answer = await client.answer(ask.correlation_id)
    assert answer == p.NextAvailableSessionId(ask.correlation_id, taken + 1)
    after = await client.answer(_add_publication(client, stream_id=9).correlation_id)
    assert after.session_id == taken + 2


async def test_the_session_ids_pass_over_aerons_reserved_range_and_wrap(driver, client):
    """Aeron's default reserved range, -1..1000, is for channels' session-id=; the int32
    sequence wraps."""
    driver.conductor._session_id_sequence = -2
    answers = []
    for _ in range(3):
        ask = _next_session_id(client, 7)
        answers.append((await client.answer(ask.correlation_id)).next_session_id)
    assert answers == [-2, 1001, 1002]
    driver.conductor._session_id_sequence = 2**31 - 1
    ask = _next_session_id(client, 7)
    assert (await client.answer(ask.correlation_id)).next_session_id == 2**31 - 1
    publication = await client.answer(_add_publication(client).correlation_id)
    assert publication.session_id == -(2**31)


@pytest.mark.parametrize("driver", [{"image_liveness_timeout_ns": 60_000_000_000}], indirect=True)
async def test_rejecting_an_ipc_image_tells_its_publishers_and_unlinks_it_for_a_cool_down(
    driver, client
):
    """As Aeron's driver: REJECT_IMAGE of an IPC image (by its ON_AVAILABLE_IMAGE correlation
    id) is answered with success, tells every client the publication's error (IMAGE_REJECTED,
    the reason, from loopback port 0) and its subscribers that the image went: the publication
    is not connected, its publisher held where it is. No subscription links during the
    cool-down (the image liveness timeout, from the last rejection), then all link again, at
    the producer position. The driver used to refuse it, NOT_SUPPORTED: the image held its
    publisher."""
    ready = await client.answer(_add_publication(client, SMALL_IPC).correlation_id)
    (publication,) = [
        pub for pub in driver.conductor.publications if pub.registration_id == ready.registration_id
    ]
    first = p.AddSubscription(client.next_id(), client.client_id, SMALL_IPC, 7)
    client.send(first)
    image = await client.expect(lambda r: isinstance(r, p.ImageReady), "the image")
    assert publication.log.mapped.is_connected()
    reject = p.RejectImage(client.next_id(), client.client_id, image.correlation_id, 0, "bad data")
    before_ns = time.monotonic_ns()
    client.send(reject)
    assert await client.answer(reject.correlation_id) == p.OperationSuccess(reject.correlation_id)
    error = p.PublicationError(
        registration_id=ready.registration_id,
        destination_registration_id=p.NULL_VALUE,
        session_id=ready.session_id,
        stream_id=7,
        receiver_id=p.NULL_VALUE,
        group_tag=p.NULL_VALUE,
        source_address="127.0.0.1",
        source_port=0,
        error_code=p.IMAGE_REJECTED,
        error_message="bad data",
    )
    assert error in client.poll()
    assert p.ImageUnavailable(image.correlation_id, first.correlation_id, 7, SMALL_IPC) in (
        client.poll()
    )
    assert not publication.log.mapped.is_connected() and publication.subscribers == []
    assert publication.publisher_limit.get() == publication.producer_position
    assert publication.cool_down_until_ns >= before_ns + 60_000_000_000
    second = p.AddSubscription(client.next_id(), client.client_id, SMALL_IPC, 7)
    client.send(second)
    await client.answer(second.correlation_id)
    again = p.RejectImage(client.next_id(), client.client_id, image.correlation_id, 0, "again")
    client.send(again)
    await client.answer(again.correlation_id)
    images = [r for r in client.poll() if isinstance(r, p.ImageReady)]
    assert images == [image]  # none during the cool-down
    assert [r.error_message for r in client.poll() if isinstance(r, p.PublicationError)] == [
        "bad data",
        "again",
    ]
    publication.cool_down_until_ns = time.monotonic_ns()  # its end, for the next timer tick
    relinked = await client.expect(
        lambda r: (
            isinstance(r, p.ImageReady) and r.subscription_registration_id == second.correlation_id
        ),
        "the image again",
    )
    assert relinked.correlation_id == image.correlation_id
    assert [
        r.subscription_registration_id
        for r in client.poll()
        if isinstance(r, p.ImageReady) and r is not image
    ] == [first.correlation_id, second.correlation_id]
    assert publication.log.mapped.is_connected() and publication.cool_down_until_ns is None


async def test_rejecting_a_network_image_ends_it_and_its_publisher_is_told(client):
    """A network image rejected ends (its subscriber told it went) and its senders get an ERR
    frame: here the driver's own publication, whose clients are told (ON_PUBLICATION_ERROR:
    IMAGE_REJECTED, the reason, the receiver's id and address). As Aeron's driver, an unknown
    image or a reason over 1023 bytes is GENERIC_ERROR. The driver used to answer NOT_SUPPORTED:
    the image went on holding its publisher."""
    port = free_port()
    channel = f"aeron:udp?endpoint=127.0.0.1:{port}"
    subscribe = p.AddSubscription(client.next_id(), client.client_id, channel, 7)
    client.send(subscribe)
    ready = await client.answer(_add_publication(client, channel).correlation_id)
    image = await client.expect(lambda r: isinstance(r, p.ImageReady), "the network image")

    def reject(image_id: int, reason: str = "bad data") -> p.RejectImage:
        command = p.RejectImage(client.next_id(), client.client_id, image_id, 0, reason)
        client.send(command)
        return command

    unknown = await client.answer(reject(image.correlation_id + 1000).correlation_id)
    assert unknown == p.ErrorResponse(
        unknown.correlation_id,
        p.GENERIC_ERROR,
        f"Unable to resolve image for correlationId={image.correlation_id + 1000}",
    )
    too_long = await client.answer(reject(image.correlation_id, "x" * 1024).correlation_id)
    assert too_long.code == p.GENERIC_ERROR
    assert too_long.message == "Invalidation reason_text must be 1023 bytes or less"
    rejected = reject(image.correlation_id)
    assert await client.answer(rejected.correlation_id) == p.OperationSuccess(
        rejected.correlation_id
    )
    gone = [r for r in client.poll() if isinstance(r, p.ImageUnavailable)]
    assert [(r.correlation_id, r.subscription_registration_id) for r in gone] == [
        (image.correlation_id, subscribe.correlation_id)
    ]
    error = await client.expect(lambda r: isinstance(r, p.PublicationError), "the error")
    assert error == p.PublicationError(
        registration_id=ready.registration_id,
        destination_registration_id=p.NULL_VALUE,
        session_id=ready.session_id,
        stream_id=7,
        receiver_id=error.receiver_id,
        group_tag=0,
        source_address="127.0.0.1",
        source_port=port,
        error_code=p.IMAGE_REJECTED,
        error_message="bad data",
    )
    assert error.receiver_id not in (0, p.NULL_VALUE)


async def test_a_command_that_is_no_add_makes_no_client(client):
    """As Aeron's driver, only an add (or aeronio's first keepalive) makes a client the driver
    does not know (Aeron's C client leaves REJECT_IMAGE's client id unset): the other commands
    of one are answered (removes refused, their resource unknown) and make none, no heartbeat
    counter for the driver to time out later."""
    stranger = client.client_id + 1000
    commands = [
        p.RejectImage(client.next_id(), stranger, 10**12, 0, "bad data"),
        p.RemovePublication(client.next_id(), stranger, 10**12),
        p.RemoveCounter(client.next_id(), stranger, 10**12),
        p.GetNextAvailableSessionId(client.next_id(), stranger, 7),
    ]
    client.send(p.ClientClose(stranger))
    for command in commands:
        client.send(command)
    answers = [await client.answer(command.correlation_id) for command in commands]
    assert [getattr(answer, "code", None) for answer in answers] == [
        p.GENERIC_ERROR,
        p.UNKNOWN_PUBLICATION,
        p.UNKNOWN_COUNTER,
        None,
    ]
    assert answers[1].message == (
        f"unknown publication registration id {10**12}: client {stranger} is unknown to the driver"
    )
    assert isinstance(answers[3], p.NextAvailableSessionId)
    heartbeat = client.counters.find_by_type_id_and_registration_id
    assert heartbeat(CLIENT_HEARTBEAT_TYPE_ID, stranger) is None
    assert not any(isinstance(r, p.CounterReady) for r in client.poll())


async def test_a_publication_is_named_by_its_adds_correlation_id_as_aerons_clients_do(
    driver, client
):
    """As Aeron's driver: a publication's registration id is its first add's correlation id
    (Aeron's `isOriginal()` compares them), every add is removed by its own correlation id,
    and the log lives until the last is removed."""
    first = _add_publication(client, stream_id=3)
    ready = await client.answer(first.correlation_id)
    assert ready.registration_id == first.correlation_id
    second = _add_publication(client, stream_id=3)
    again_ready = await client.answer(second.correlation_id)
    assert (again_ready.correlation_id, again_ready.registration_id) == (
        second.correlation_id,
        first.correlation_id,
    )

    def remove(registration_id: int) -> p.Response:
        command = p.RemovePublication(client.next_id(), client.client_id, registration_id)
        client.send(command)
        return command

    def active() -> bool:
        return any(
            pub.state is State.ACTIVE
            for pub in driver.conductor.publications
            if pub.registration_id == first.correlation_id
        )

    for named, still_active in ((second.correlation_id, True), (first.correlation_id, False)):
        command = remove(named)
        assert await client.answer(command.correlation_id) == p.OperationSuccess(
            command.correlation_id
        )
        assert active() is still_active  # both adds released: it lingers, or has ended
    for named in (first.correlation_id, second.correlation_id):
        again = remove(named)
        assert (await client.answer(again.correlation_id)).code == p.UNKNOWN_PUBLICATION


async def test_a_correlation_id_in_use_is_refused_and_a_remove_touches_only_its_clients(
    driver, client
):
    """A registration id names one resource of one client: an add repeating one in use (by
    any client) is refused, so another client's remove cannot end it, nor leave its own."""
    other = RingClient(driver.dir)
    try:
        taken = client.next_id()
        client.send(p.AddSubscription(taken, client.client_id, SMALL_IPC, 1))
        assert await client.answer(taken) == p.SubscriptionReady(taken)
        repeats = [
            (other, p.AddSubscription(taken, other.client_id, SMALL_IPC, 2)),
            (other, p.AddCounter(taken, other.client_id, 1001, b"", "again")),
            (client, p.AddPublication(taken, client.client_id, SMALL_IPC, 3)),
        ]
        for sender, command in repeats:
            sender.poll()
            sender.seen.clear()  # what was answered to `taken` before
            sender.send(command)
            refused = await sender.answer(taken)
            assert refused == p.ErrorResponse(
                taken,
                p.GENERIC_ERROR,
                f"correlation id {taken} is already the registration id of a publication, "
                f"subscription or counter of client {client.client_id}",
            ), type(command).__name__
        remove = p.RemoveSubscription(other.next_id(), other.client_id, taken)
        other.send(remove)
        assert (await other.answer(remove.correlation_id)).code == p.UNKNOWN_SUBSCRIPTION
        assert [link.registration_id for link in driver.conductor.resources.subscriptions] == [
            taken
        ]
        assert not [pub for pub in driver.conductor.publications if pub.stream_id == 3]
        added = _add_publication(client, SMALL_IPC, stream_id=1)
        image = await client.expect(
            lambda r: isinstance(r, p.ImageReady) and r.subscription_registration_id == taken,
            "the image of the subscription another client could not remove",
        )
        assert image.stream_id == 1
        assert isinstance(await client.answer(added.correlation_id), p.PublicationReady)
    finally:
        other.close()


async def test_removes_of_unknown_ids_have_aerons_codes_and_a_removed_counter_is_announced(
    client,
):
    unknown = 10**12
    for command, code in (
        (p.RemovePublication(client.next_id(), client.client_id, unknown), p.UNKNOWN_PUBLICATION),
        (p.RemoveSubscription(client.next_id(), client.client_id, unknown), p.UNKNOWN_SUBSCRIPTION),
        (p.RemoveCounter(client.next_id(), client.client_id, unknown), p.UNKNOWN_COUNTER),
    ):
        client.send(command)
        error = await client.answer(command.correlation_id)
        assert (type(error), error.code) == (p.ErrorResponse, code)
        assert str(unknown) in error.message
    add = p.AddCounter(client.next_id(), client.client_id, 1001, b"", "mine")
    client.send(add)
    counter_id = (await client.answer(add.correlation_id)).counter_id
    remove = p.RemoveCounter(client.next_id(), client.client_id, add.correlation_id)
    client.send(remove)
    assert await client.answer(remove.correlation_id) == p.OperationSuccess(remove.correlation_id)
    assert await client.expect(
        lambda r: isinstance(r, p.UnavailableCounter), "ON_UNAVAILABLE_COUNTER"
    ) == p.UnavailableCounter(add.correlation_id, counter_id)


@pytest.mark.parametrize("driver", [{"max_counters": 64}], indirect=True)
async def test_a_subscription_refused_for_want_of_counters_is_answered_once_and_not_kept(
    driver, client
):
    """Its position on a publication's log is made before it is answered: counters full, the
    add gets only the error, and nothing of it stays (no link, no counter, no subscriber)."""
    published = _add_publication(client, SMALL_IPC, stream_id=7)
    assert isinstance(await client.answer(published.correlation_id), p.PublicationReady)
    while True:  # another client's counters take the rest
        add = p.AddCounter(client.next_id(), client.client_id, 1001, b"", "hog")
        client.send(add)
        if isinstance(await client.answer(add.correlation_id), p.ErrorResponse):
            break
    subscribe = p.AddSubscription(client.next_id(), client.client_id, SMALL_IPC, 7)
    client.send(subscribe)
    refused = await client.answer(subscribe.correlation_id)
    assert isinstance(refused, p.ErrorResponse) and "counters" in refused.message
    assert [
        r for r in client.poll() if getattr(r, "correlation_id", None) == subscribe.correlation_id
    ] == [refused]
    assert driver.conductor.resources.subscriptions == []
    (publication,) = driver.conductor.publications
    assert publication.subscribers == []


async def test_a_channel_longer_than_aerons_limit_is_refused_and_nothing_kept(driver, client):
    """A channel of Aeron's greatest length (4095 characters) is taken, and its spy's image
    told (its source "aeron:ipc", as Aeron's); one character more is INVALID_CHANNEL."""
    port = free_port()
    base = f"aeron:udp?endpoint=127.0.0.1:{port}|term-length=64k|alias="
    spy = p.AddSubscription(client.next_id(), client.client_id, f"aeron-spy:{base}a", 5)
    client.send(spy)
    assert isinstance(await client.answer(spy.correlation_id), p.SubscriptionReady)
    longest = base + "a" * (MAX_URI_LENGTH - len(base))
    for channel in (longest + "a", base + "a" * 100_000):
        refused = await client.answer(_add_publication(client, channel, 5).correlation_id)
        assert isinstance(refused, p.ErrorResponse)
        assert refused.code == p.INVALID_CHANNEL
        assert f"channel URI of {len(channel)} characters is longer than 4095" in refused.message
    assert not driver.conductor.publications
    taken = _add_publication(client, longest, 5)
    assert isinstance(await client.answer(taken.correlation_id), p.PublicationReady)
    image = await client.expect(
        lambda r: (
            isinstance(r, p.ImageReady) and r.subscription_registration_id == spy.correlation_id
        ),
        "the spy's image",
    )
    assert image.source_identity == "aeron:ipc"
