"""A standalone driver's to-driver ring buffer written by a hostile or dying client in another
process: records that are no command are counted and answered, a record a producer claimed and
never finished is unblocked after the client liveness timeout, and the driver serves on."""

import os
import struct
import time

import pytest

from aeronio.concurrent.error_log import read_error_log
from aeronio.concurrent.records import HEADER_LENGTH, align
from aeronio.concurrent.ring_buffer import TAIL_POSITION_OFFSET
from aeronio.counters import SystemCounters
from aeronio.protocol import control as p
from tests.support.procs import await_until, cpu_seconds, procs_fixture, system_counters
from tests.support.ring_client import RingClient

procs = pytest.fixture(procs_fixture, name="procs")


def _claim_and_die(client: RingClient, payload_length: int) -> None:
    """What a producer killed inside its write leaves: the tail moved past a record whose
    length is still negative (claimed, never committed)."""
    ring = client.cnc.to_driver
    atomic, capacity = ring._atomic, ring.capacity
    tail_at = capacity + TAIL_POSITION_OFFSET
    tail = atomic.get_int64_volatile(tail_at)
    length = HEADER_LENGTH + payload_length
    assert atomic.compare_and_set_int64(tail_at, tail, tail + align(length))
    atomic.put_int32_ordered(tail & (capacity - 1), -length)


async def test_hostile_records_and_a_dead_producers_claim(procs):
    dir = procs.new_dir()
    procs.driver(dir, "--client-liveness-timeout-ns", "1000000000")
    client = RingClient(dir)
    try:
        before = system_counters(dir)
        hostile = {
            "huge channel length": (
                p.ADD_PUBLICATION,
                struct.pack("<qqii", client.client_id, client.next_id(), 1, 2**31 - 1),
                p.MALFORMED_COMMAND,
            ),
            "negative channel length": (
                p.ADD_SUBSCRIPTION,
                struct.pack("<qqqii", client.client_id, client.next_id(), -1, 1, -8) + b"x" * 8,
                p.MALFORMED_COMMAND,
            ),
            "bytes past its end": (
                p.REMOVE_COUNTER,
                struct.pack("<qqq", client.client_id, client.next_id(), 5) + b"\0" * 8,
                p.MALFORMED_COMMAND,
            ),
            "an unknown type": (
                0x7FFF_FFFF,
                struct.pack("<qq", client.client_id, client.next_id()),
                p.UNKNOWN_COMMAND_TYPE_ID,
            ),
        }
        for msg_type_id, payload, _ in hostile.values():
            client.write(msg_type_id, payload)
        for name, (_, payload, code) in hostile.items():
            (correlation_id,) = struct.unpack_from("<q", payload, 8)
            error = await client.answer(correlation_id)
            assert isinstance(error, p.ErrorResponse) and error.code == code, name

        _claim_and_die(client, 40)
        add = p.AddSubscription(client.next_id(), client.client_id, "aeron:ipc", 1)
        client.send(add)  # behind the dead claim: served once the driver unblocks it
        assert await client.answer(add.correlation_id) == p.SubscriptionReady(add.correlation_id)
        after = system_counters(dir)
        assert (
            after[SystemCounters.UNBLOCKED_COMMANDS]
            == before[SystemCounters.UNBLOCKED_COMMANDS] + 1
        )
        assert after[SystemCounters.ERRORS] == before[SystemCounters.ERRORS] + len(hostile)
    finally:
        client.close()


async def test_a_record_length_past_the_buffer_is_dropped_and_the_driver_serves_on(procs):
    """A client claims 32 bytes and stores a length past the buffer's end: the driver reports
    it, drops it after the client liveness timeout and serves the commands written after.
    Meanwhile it parks as an idle driver does (it took a core until dropped, before)."""
    dir = procs.new_dir()
    driver = procs.driver(dir, "--client-liveness-timeout-ns", "1000000000")
    client = RingClient(dir)
    try:
        before = system_counters(dir)
        cpu_before, wall_before = cpu_seconds(driver.pid), time.monotonic()
        ring = client.cnc.to_driver
        atomic, capacity = ring._atomic, ring.capacity
        tail_at = capacity + TAIL_POSITION_OFFSET
        tail = atomic.get_int64_volatile(tail_at)
        assert atomic.compare_and_set_int64(tail_at, tail, tail + 32)
        index = tail & (capacity - 1)
        atomic.put_int32(index + 4, p.CLIENT_KEEPALIVE)
        atomic.put_int32_ordered(index, 2**31 - 16)
        add = p.AddSubscription(client.next_id(), client.client_id, "aeron:ipc", 1)
        client.send(add)
        assert await client.answer(add.correlation_id) == p.SubscriptionReady(add.correlation_id)
        cpu, wall = cpu_seconds(driver.pid) - cpu_before, time.monotonic() - wall_before
        assert wall > 1 and cpu < 0.2 * wall, (cpu, wall)
        assert [o.text for o in read_error_log(client.cnc.error_log_buffer)] == [
            f"command refused: the record at position {tail} of length {2**31 - 16} is longer "
            f"than a record can be ({8 + capacity // 8} bytes)"
        ]
        after = system_counters(dir)
        assert after[SystemCounters.ERRORS] == before[SystemCounters.ERRORS] + 1
        assert (
            after[SystemCounters.UNBLOCKED_COMMANDS]
            == before[SystemCounters.UNBLOCKED_COMMANDS] + 1
        )
    finally:
        client.close()


async def test_terminate_driver_stops_a_standalone_driver_only_when_enabled(procs):
    """Off (the default) the command is recorded and ignored; with terminate_driver_enabled the
    driver stops as on SIGTERM: exit status 0, its directory removed."""
    dir = procs.new_dir()
    driver = procs.driver(dir, "--terminate-driver-enabled", "true")
    refusing_dir = procs.new_dir()
    procs.driver(refusing_dir, name="refusing-driver")
    refusing = RingClient(refusing_dir)
    try:
        refusing.send(p.TerminateDriver(refusing.next_id(), refusing.client_id, b""))
        await await_until(
            lambda: any(
                "TERMINATE_DRIVER" in o.text for o in read_error_log(refusing.cnc.error_log_buffer)
            ),
            30,
            "the refused TERMINATE_DRIVER recorded",
        )
        client = RingClient(dir)
        try:
            client.send(p.TerminateDriver(client.next_id(), client.client_id, b"token"))
        finally:
            client.close()
        assert await driver.await_exit(30) == 0
        assert not os.path.exists(dir)
        add = p.AddSubscription(refusing.next_id(), refusing.client_id, "aeron:ipc", 1)
        refusing.send(add)  # the other driver serves on
        assert await refusing.answer(add.correlation_id) == p.SubscriptionReady(add.correlation_id)
    finally:
        refusing.close()
