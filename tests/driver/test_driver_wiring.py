"""How an embedded driver makes its publications and images. Each piece is made before what
refers to it (an image's receiver does not lead back to its image). A publication or image
whose making fails at any step leaves nothing behind: each step's constructor (or allocation)
is made to raise, and afterwards every counter made for it is freed, every socket made for it
is closed, its log file is gone, the client that asked is told (an error response) and the
same thing made again works."""

import contextlib
import gc
import os
from collections.abc import AsyncIterator

import pytest

import aeronio
from aeronio.concurrent.error_log import read_error_log
from aeronio.driver import conductor, udp_media
from aeronio.driver.context import DriverContext
from aeronio.driver.raw_log_factory import RawLogFactory, free_log
from aeronio.driver.stream_counters import StreamCounters
from aeronio.logbuffer import log_buffers
from aeronio.logbuffer.descriptor import LogParams
from aeronio.logbuffer.log_buffers import LogBuffers
from tests.support.ports import free_port
from tests.support.procs import await_until
from tests.support.udp_harness import Slot


class Injected(RuntimeError):
    pass


def fail(*args, **kwargs):
    raise Injected("injected failure")


def fail_os(*args, **kwargs):
    raise OSError("injected failure")  # a failure of the driver's own (no space, ...)


# (module or class, name): a step of making a publication or an image.
STEPS = {
    "log": (LogBuffers, "create"),
    "publication counters": (StreamCounters, "publication"),
    "ipc publication": (conductor, "IpcPublication"),
    "sender counters": (StreamCounters, "sender"),
    "mdc counter": (StreamCounters, "mdc_destinations"),
    "send endpoint": (udp_media, "SendChannelEndpoint"),
    "sender": (udp_media, "SenderStateMachine"),
    "network publication": (udp_media, "NetworkPublication"),
    "image counters": (StreamCounters, "image"),
    "receiver": (udp_media, "ReceiverStateMachine"),
    "image": (udp_media, "PublicationImage"),
}
IPC = ["log", "publication counters", "ipc publication"]
UDP = ["log", "publication counters", "sender counters", "send endpoint", "sender"]
UDP += ["network publication"]
PUBLICATION_CASES = (
    [("ipc", step) for step in IPC]
    + [("unicast", step) for step in UDP]
    + [("mdc", step) for step in [*UDP, "mdc counter"]]
    + [("shared endpoint", step) for step in ["sender", "network publication"]]
)


def failing_for_images(create):
    """LogBuffers.create, failing for images' logs."""

    def create_or_fail(path, **log):
        if os.path.basename(os.path.dirname(path)) == "images":
            fail_os()
        return create(path, **log)

    return create_or_fail


def counters(client) -> list[tuple[int, str]]:
    return sorted((c.id, c.label) for c in client.counters.for_each())


def logs(driver, kind: str) -> list[str]:
    return os.listdir(os.path.join(driver.dir, kind))


@pytest.fixture
def endpoints_made(monkeypatch) -> list:
    """Every send endpoint the driver makes from now on."""
    made = []
    real = udp_media.SendChannelEndpoint

    def recording(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(udp_media, "SendChannelEndpoint", recording)
    return made


@pytest.mark.parametrize("kind,step", PUBLICATION_CASES)
async def test_a_publication_failing_at_any_step_leaves_nothing_behind(
    tmp_path, monkeypatch, endpoints_made, kind, step
):
    channel = {
        "ipc": "aeron:ipc",
        "unicast": f"aeron:udp?endpoint=127.0.0.1:{free_port()}",
        "mdc": f"aeron:udp?control=127.0.0.1:{free_port()}",
        "shared endpoint": f"aeron:udp?endpoint=127.0.0.1:{free_port()}",
    }[kind]
    async with aeronio.MediaDriver.launch(str(tmp_path / "driver")) as driver:
        async with aeronio.connect(driver.dir) as client:
            udp = driver.conductor.udp
            if kind == "shared endpoint":  # the endpoint is another publication's too
                await client.add_publication(channel, 1)
            before = counters(client), logs(driver, "publications"), dict(udp.send_endpoints)
            made = len(endpoints_made)
            with monkeypatch.context() as patch:
                patch.setattr(*STEPS[step], fail)
                for _ in range(2):
                    with pytest.raises(aeronio.DriverError, match="Injected: injected failure"):
                        await client.add_publication(channel, 2)
            after = counters(client), logs(driver, "publications"), dict(udp.send_endpoints)
            assert after == before
            assert [e.socket.fileno() for e in endpoints_made[made:]] == [-1] * (
                len(endpoints_made) - made
            )
            errors = read_error_log(driver.conductor.cnc.error_log_buffer)
            assert any("injected failure" in e.text for e in errors)
            publication = await client.add_publication(channel, 2)  # nothing left in its way
            assert publication.session_id is not None
            if kind == "shared endpoint":  # it stayed open
                (endpoint,) = before[2].values()
                assert endpoint.socket.fileno() != -1


@pytest.mark.parametrize("step", ["log", "image counters", "receiver", "image"])
async def test_an_image_failing_at_any_step_leaves_nothing_behind(tmp_path, monkeypatch, step):
    """The SETUP of a new session while a step of making its image fails: recorded, nothing
    left; the publication's next SETUP makes the image once the step works."""
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=64k"
    async with aeronio.MediaDriver.launch(str(tmp_path / "driver")) as driver:
        async with aeronio.connect(driver.dir) as client:
            sub = await client.add_subscription(channel, 3)
            before = counters(client)
            with monkeypatch.context() as patch:
                if step == "log":  # an image's, not the publication's
                    patch.setattr(LogBuffers, "create", failing_for_images(LogBuffers.create))
                else:
                    patch.setattr(*STEPS[step], fail_os)
                pub = await client.add_publication(channel, 3)
                errors = driver.conductor.cnc.error_log_buffer
                await await_until(
                    lambda: any("injected failure" in e.text for e in read_error_log(errors)),
                    10,
                    "the failure recorded",
                )
                mine = [(i, label) for i, label in counters(client) if (i, label) not in before]
                assert [label.split(":")[0] for _, label in mine] == [
                    "pub-lmt",
                    "pub-pos (sampled)",
                    "snd-pos",
                    "snd-lmt",
                    "snd-bpe",
                    "snd-channel",  # its endpoint's
                    "snd-local-sockaddr",
                ]
                assert logs(driver, "images") == []
                assert driver.conductor.resources.images == []
            await await_until(lambda: sub.images, 10, "the image, once it can be made")
            await await_until(lambda: pub.is_connected, 10, "the publication connected")


def reachable(start: object, depth: int) -> list[object]:
    """What `start` refers to, within `depth` references."""
    found, layer = [], [start]
    for _ in range(depth):
        layer = [referent for item in layer for referent in gc.get_referents(item)]
        found += layer
    return found


@contextlib.asynccontextmanager
async def udp_stream(tmp_path) -> AsyncIterator[tuple[aeronio.MediaDriver, aeronio.Aeron]]:
    """A driver and its client with one UDP stream (stream 3) whose image has come."""
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=64k"
    async with aeronio.MediaDriver.launch(str(tmp_path / "driver")) as driver:
        async with aeronio.connect(driver.dir) as client:
            sub = await client.add_subscription(channel, 3)
            await client.add_publication(channel, 3)
            await await_until(lambda: sub.images, 10, "the image")
            yield driver, client


async def test_an_images_receiver_is_made_before_its_image_and_leads_not_back_to_it(tmp_path):
    async with udp_stream(tmp_path) as (driver, _):
        (image,) = driver.conductor.resources.images
        receiver = image.receiver
        assert receiver.rebuilder.data_doorbell is image.signals.data
        assert receiver.loss_handler is not None
        assert not any(item is image for item in reachable(receiver, 4))


def new_log(factory: RawLogFactory, registration_id: int) -> LogBuffers:
    return factory.new_publication(
        registration_id,
        term_length=64 * 1024,
        initial_term_id=0,
        session_id=1,
        stream_id=2,
        mtu=1408,
        term_id=None,
        term_offset=0,
        params=LogParams(sparse=True),
    )


def test_the_log_factory_removes_what_it_made_and_only_that(tmp_path, monkeypatch):
    """A log that cannot be mapped leaves no file; a file already there is not the factory's
    to remove; `free_log` removes the file of a log it made."""
    factory = RawLogFactory(DriverContext(dir=str(tmp_path)), Slot())
    publications = tmp_path / "publications"
    with monkeypatch.context() as patch:
        patch.setattr(log_buffers, "_map", fail)
        with pytest.raises(Injected):
            new_log(factory, 1)
    assert os.listdir(publications) == []
    (publications / "2.logbuffer").write_bytes(b"another's")
    with pytest.raises(FileExistsError):
        new_log(factory, 2)
    assert (publications / "2.logbuffer").read_bytes() == b"another's"
    log = new_log(factory, 3)
    assert log.session_id == 1 and log.correlation_id == 3
    free_log(log)
    assert sorted(os.listdir(publications)) == ["2.logbuffer"]


async def test_a_driver_that_parks_at_once_parks_with_its_bookkeeping(tmp_path):
    """A standalone driver serving network streams only parks at once after work: its schedule
    knows (`spins` False), so that pending bookkeeping parks too, until its delay is over
    (else it would keep the driver spinning for BOOKKEEPING_IDLE_CYCLES, or run after every
    message); serving IPC it spins, and the bookkeeping waits for those idle cycles again, as
    in a driver that always spins."""
    channel = f"aeron:udp?endpoint=127.0.0.1:{free_port()}|term-length=64k"
    options = {"conductor_idle_spins_ipc_only": True}
    async with aeronio.MediaDriver.launch(str(tmp_path / "driver"), **options) as driver:
        schedule = driver.conductor.schedule
        async with aeronio.connect(driver.dir) as client:
            sub = await client.add_subscription(channel, 3)
            await client.add_publication(channel, 3)
            await await_until(lambda: sub.images, 10, "the image")
            await await_until(lambda: not schedule.spins, 10, "parks at once")
            ipc_sub = await client.add_subscription("aeron:ipc", 4)
            await client.add_publication("aeron:ipc", 4)
            await await_until(lambda: ipc_sub.images, 10, "the IPC image")
            await await_until(lambda: schedule.spins, 10, "spins")
    # An embedded driver without spins may be invoked in a loop by its application: its
    # bookkeeping waits for the idle duty cycles as before.
    no_spins = {"conductor_idle_spins": 0}
    async with aeronio.MediaDriver.launch(str(tmp_path / "no-spins"), **no_spins) as driver:
        async with aeronio.connect(driver.dir) as client:
            sub = await client.add_subscription(channel, 5)
            await client.add_publication(channel, 5)
            await await_until(lambda: sub.images, 10, "the image")
            assert not driver.conductor.serves_ipc()
            assert driver.conductor.schedule.spins


async def test_the_conductor_serves_ipc_while_an_ipc_publication_has_subscribers(tmp_path):
    """What a standalone driver's spins wait on (conductor_idle_spins_ipc_only): a UDP stream
    does not count, nor an IPC publication without subscribers."""
    async with udp_stream(tmp_path) as (driver, client):
        assert not driver.conductor.serves_ipc()
        await client.add_publication("aeron:ipc", 4)
        assert not driver.conductor.serves_ipc()
        ipc_sub = await client.add_subscription("aeron:ipc", 4)
        await await_until(lambda: ipc_sub.images, 10, "the IPC image")
        assert driver.conductor.serves_ipc()
        await ipc_sub.close()
        await await_until(lambda: not driver.conductor.serves_ipc(), 10, "no subscriber")
