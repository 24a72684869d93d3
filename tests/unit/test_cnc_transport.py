"""The client's end of cnc.dat (aeronio/client/transport.py) against a cnc.dat this test plays the
driver of: ids from the ring buffer, commands into it, responses from the broadcast buffer (on
the watcher or the doorbell), the heartbeat counter, and the failures a client must name."""

import struct
import time

import pytest

from aeronio import _core
from aeronio.client.aeron import Aeron
from aeronio.client.transport import CncTransport, wake_key
from aeronio.cnc import CNC_VERSION_OFFSET, CncFile, CncFileError, semantic_version
from aeronio.concurrent.broadcast import LATEST_COUNTER_OFFSET, BroadcastTransmitter
from aeronio.counters import (
    CLIENT_DOORBELL_TYPE_ID,
    CLIENT_HEARTBEAT_TYPE_ID,
    DRIVER_DOORBELL_TYPE_ID,
    CountersManager,
)
from aeronio.errors import AeronError, ClientTimeoutError, DriverNotFoundError, DriverTimeoutError
from aeronio.logbuffer import waker
from aeronio.protocol import control as p
from tests.support.procs import await_until

pytestmark = pytest.mark.loops  # the client's readers on the watcher's eventfd and doorbell


class FakeDriver:
    """A cnc.dat with a fresh driver heartbeat, and what a client handed the test."""

    def __init__(self, dir, to_driver_capacity: int = 64 * 1024):
        self.cnc = CncFile.create(
            dir, to_driver_capacity=to_driver_capacity, to_clients_capacity=1024, max_counters=16
        )
        self.cnc.to_driver.set_consumer_heartbeat_time(time.time_ns() // 1_000_000)
        self.counters = CountersManager.of(self.cnc)
        self.transmitter = BroadcastTransmitter(self.cnc.to_clients_buffer)
        self.responses: list[p.Response] = []
        self.failures: list[AeronError] = []

    async def client(self, dir, timeout_s: float = 5.0) -> CncTransport:
        return await CncTransport.connect(
            str(dir), self.responses.append, self.failures.append, timeout_s
        )

    def commands(self) -> list[p.Command]:
        """Every command written since the last call (past a padding record at the end)."""
        read: list[p.Command] = []
        ring = self.cnc.to_driver
        while ring.consumer_position() != ring.producer_position():
            ring.read(lambda type_id, data: read.append(p.decode_command(type_id, data)))
        return read

    def transmit(self, response: p.Response) -> None:
        self.transmitter.transmit(*p.encode(response))


@pytest.fixture
def driver(tmp_path):
    fake = FakeDriver(tmp_path)
    yield fake
    fake.counters.close()


async def test_ids_come_from_the_ring_buffer_and_commands_go_into_it(driver, tmp_path):
    client = await driver.client(tmp_path)
    try:
        assert client.client_id == 0 and client.next_correlation_id() == 1
        command = p.AddSubscription(2, client.client_id, "aeron:ipc", 7)
        await client.send(command)
        assert driver.commands() == [command]
    finally:
        await client.close()


async def test_responses_are_read_within_the_watch_interval_without_a_doorbell(driver, tmp_path):
    client = await driver.client(tmp_path)
    try:
        driver.transmit(p.OperationSuccess(5))
        driver.transmit(p.ClientTimeout(client.client_id + 1))  # another client's: not ours
        driver.transmit(p.ClientTimeout(client.client_id))
        # no poll by the test: the watcher's wake-ups read the responses
        await await_until(lambda: len(driver.responses) == 2, 10, "two responses")
        assert driver.responses == [p.OperationSuccess(5), p.ClientTimeout(client.client_id)]
    finally:
        await client.close()


async def test_a_driver_doorbell_is_rung_after_each_command(driver, tmp_path):
    own = waker.waker()
    driver.counters.allocate("driver doorbell", DRIVER_DOORBELL_TYPE_ID, wake_key(own.id))
    rung = []
    own.callbacks.append(lambda: rung.append(len(driver.commands())))
    try:
        client = await driver.client(tmp_path)
        await client.send(p.ClientKeepalive(client.client_id))
        assert rung[0] == 1  # rung once the command was there
        await client.close()
    finally:
        own.callbacks.pop()


async def test_a_lapped_client_fails_with_a_clear_error(driver, tmp_path):
    client = await driver.client(tmp_path)
    try:
        for i in range(100):  # far more than the 1 KiB broadcast buffer holds
            driver.transmit(p.OperationSuccess(i))
        client.poll()
        assert [str(e) for e in driver.failures] == [
            f"client {client.client_id} could not keep up with the broadcast buffer of the "
            f"driver on {tmp_path}: it was lapped and lost responses"
        ]
    finally:
        await client.close()


async def test_a_corrupt_record_fails_the_client_naming_the_buffer_not_a_lap(driver, tmp_path):
    client = await driver.client(tmp_path)
    try:
        driver.transmit(p.OperationSuccess(1))
        client.poll()
        driver.transmit(p.OperationSuccess(2))
        buffer = driver.cnc.to_clients_buffer
        (offset,) = struct.unpack_from("<q", buffer, 1024 + LATEST_COUNTER_OFFSET)
        buffer[offset : offset + 4] = bytes(4)  # the latest record's length
        driver.transmit(p.OperationSuccess(3))
        assert client.poll() == 0
        assert driver.responses == [p.OperationSuccess(1)]
        assert [str(e) for e in driver.failures] == [
            f"the to-clients broadcast buffer of {tmp_path}/cnc.dat is corrupt: record at "
            f"offset {offset}: length 0 is not within 8..136"
        ]
    finally:
        await client.close()


async def test_a_full_ring_buffer_waits_then_names_the_stuck_driver(tmp_path):
    driver = FakeDriver(tmp_path, to_driver_capacity=1024)
    client = await driver.client(tmp_path, timeout_s=0.2)
    try:
        while driver.cnc.to_driver.write(*p.encode(p.ClientKeepalive(1))):
            pass
        with pytest.raises(DriverTimeoutError, match="ring buffer of .* stayed full for 0.2 s"):
            await client.send(p.ClientKeepalive(client.client_id))
        driver.commands()  # the driver reads: the next command goes
        await client.send(p.ClientClose(client.client_id))
        assert driver.commands() == [p.ClientClose(client.client_id)]
    finally:
        await client.close()
        driver.counters.close()


async def test_the_heartbeat_counter_is_kept_and_its_loss_is_a_client_timeout(driver, tmp_path):
    client = await driver.client(tmp_path)
    try:
        client.keepalive()  # no counter yet: a keepalive command makes the driver allocate it
        assert driver.commands() == [p.ClientKeepalive(client.client_id)]
        counter_id = driver.counters.allocate(
            f"client-heartbeat: {client.client_id}",
            CLIENT_HEARTBEAT_TYPE_ID,
            client.client_id.to_bytes(8, "little"),  # found by its key, as Aeron's clients
        )
        before = time.time_ns() // 1_000_000
        client.keepalive()
        assert driver.counters.get_counter_value(counter_id) >= before
        assert driver.commands() == []  # the counter, not commands, says it lives now
        driver.counters.free(counter_id)
        client.keepalive()
        assert len(driver.failures) == 1 and isinstance(driver.failures[0], ClientTimeoutError)
    finally:
        await client.close()


async def test_a_heartbeat_counter_freed_by_a_driver_that_closed_is_a_driver_timeout(
    driver, tmp_path
):
    """A driver that closes marks its cnc closed before it frees its clients' counters: the
    client is told the driver went, not that it was timed out."""
    client = await driver.client(tmp_path)
    try:
        client.keepalive()
        counter_id = driver.counters.allocate(
            f"client-heartbeat: {client.client_id}",
            CLIENT_HEARTBEAT_TYPE_ID,
            client.client_id.to_bytes(8, "little"),
        )
        client.keepalive()
        assert driver.failures == []
        driver.cnc.mark_driver_closed()
        driver.counters.free(counter_id)
        client.keepalive()
        assert len(driver.failures) == 1 and isinstance(driver.failures[0], DriverTimeoutError)
        assert str(driver.failures[0]) == f"media driver on {client.dir} lost: it closed"
    finally:
        await client.close()


async def test_a_stale_heartbeat_is_no_driver(driver, tmp_path):
    driver.cnc.to_driver.set_consumer_heartbeat_time(time.time_ns() // 1_000_000 - 60_000)
    with pytest.raises(DriverNotFoundError, match=r"driver heartbeat is \d+ ms old after waiting"):
        await driver.client(tmp_path, timeout_s=0.1)


async def test_the_directory_of_a_driver_that_closed_says_so(driver, tmp_path):
    """Its heartbeat is -1 (DRIVER_CLOSED): it was named as "heartbeat is 1796151170453 ms old"."""
    driver.cnc.mark_driver_closed()
    with pytest.raises(DriverNotFoundError) as raised:
        await driver.client(tmp_path, timeout_s=0.1)
    assert str(raised.value) == (
        f"no media driver runs on dir {tmp_path}: cnc.dat's driver closed after waiting 0.1 s"
    )


async def test_a_cnc_dat_not_ready_is_waited_for_then_named(driver, tmp_path):
    atomic = _core.AtomicBuffer(memoryview(driver.cnc._mmap))
    atomic.put_int32_ordered(CNC_VERSION_OFFSET, 0)  # as while a driver writes it
    with pytest.raises(DriverNotFoundError, match=r"cnc.dat not ready after waiting 0.1 s"):
        await driver.client(tmp_path, timeout_s=0.1)


async def test_another_cnc_version_is_refused_at_once_naming_both(driver, tmp_path):
    atomic = _core.AtomicBuffer(memoryview(driver.cnc._mmap))
    atomic.put_int32_ordered(CNC_VERSION_OFFSET, semantic_version(0, 1, 0))
    with pytest.raises(CncFileError, match=r"CnC version 0\.1\.0, this client needs 0\.2\.0"):
        await driver.client(tmp_path, timeout_s=30)


async def test_attach_registers_the_doorbell_and_fails_when_the_driver_does_not_answer(
    driver, tmp_path
):
    aeron = Aeron(str(tmp_path), driver_timeout_s=0.3)
    with pytest.raises(DriverTimeoutError, match="did not answer AddCounter within 0.3 s"):
        await aeron.attach()
    client_id = aeron.client_id
    assert driver.commands() == [
        p.ClientKeepalive(client_id),
        p.AddCounter(
            client_id + 1,
            client_id,
            CLIENT_DOORBELL_TYPE_ID,
            wake_key(waker.waker().id),
            f"aeronio client doorbell: {client_id}",
        ),
        p.ClientClose(client_id),
    ]
    assert aeron.is_closed
