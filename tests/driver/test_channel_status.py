"""The channel status counters of the driver's UDP endpoints (Aeron's snd-channel and
rcv-channel: ChannelEndpointStatus), one per endpoint, and the local socket address counters of
their sockets (snd-local-sockaddr, rcv-local-sockaddr: LocalSocketAddressStatus), as Aeron's
clients and AeronStat read them."""

import re
import struct

import pytest

from aeronio import Aeron, connect
from aeronio.counters import (
    LOCAL_SOCKADDR_TYPE_ID,
    MAX_KEY_LENGTH,
    MAX_LABEL_LENGTH,
    RECEIVE_CHANNEL_STATUS_TYPE_ID,
    SEND_CHANNEL_STATUS_TYPE_ID,
    ChannelStatus,
    CounterInfo,
    CountersReader,
)
from aeronio.driver.media_driver import MediaDriver
from aeronio.driver.stream_counters import local_sockaddr_key
from tests.driver.test_udp_driver import exchange
from tests.support.ports import free_port
from tests.support.procs import await_until

STATUS_TYPE_IDS = (SEND_CHANNEL_STATUS_TYPE_ID, RECEIVE_CHANNEL_STATUS_TYPE_ID)


@pytest.fixture
async def driver(tmp_path):
    driver = await MediaDriver.launch(
        dir=str(tmp_path / "driver"), publication_linger_ns=50_000_000
    ).start()
    yield driver
    await driver.close()


def statuses(reader: CountersReader) -> list[CounterInfo]:
    return sorted(
        (c for c in reader.for_each() if c.type_id in STATUS_TYPE_IDS), key=lambda c: c.type_id
    )


def sockaddrs(reader: CountersReader) -> list[CounterInfo]:
    return [c for c in reader.for_each() if c.type_id == LOCAL_SOCKADDR_TYPE_ID]


def sockaddr_key(status_id: int, address: str) -> bytes:
    return (struct.pack("<ii", status_id, len(address)) + address.encode()).ljust(
        MAX_KEY_LENGTH, b"\0"
    )


async def test_each_udp_endpoint_has_one_active_channel_status_freed_with_it(driver):
    """Two streams on one endpoint share its counters; IPC has none; each goes with the
    endpoint's last stream. Key and label bytes as Aeron's driver writes them."""
    port = free_port()
    channel = f"aeron:udp?endpoint=127.0.0.1:{port}"
    key = struct.pack("<i", len(channel)) + channel.encode()
    async with connect(driver.dir) as aeron:
        sub = await aeron.add_subscription(channel, 1)
        other_sub = await aeron.add_subscription(channel, 2)
        pub = await aeron.add_publication(channel, 1)
        other_pub = await aeron.add_publication(channel, 2)
        ipc = await aeron.add_publication("aeron:ipc", 1)
        with CountersReader.open(driver.dir) as reader:
            snd, rcv = statuses(reader)
            assert snd.key == rcv.key == key.ljust(MAX_KEY_LENGTH, b"\0")
            (endpoint,) = driver.conductor.udp.send_endpoints.values()
            sender_port = endpoint.socket.getsockname()[1]
            assert snd.label == f"snd-channel: {channel} 0.0.0.0:{sender_port}"
            assert rcv.label == f"rcv-channel: {channel} 127.0.0.1:{port}"
            assert snd.value == rcv.value == ChannelStatus.ACTIVE
            assert (snd.registration_id, rcv.registration_id) == (
                pub.registration_id,
                sub.registration_id,
            )
            snd_address, rcv_address = f"0.0.0.0:{sender_port}", f"127.0.0.1:{port}"
            assert [(c.label, c.key, c.value, c.registration_id) for c in sockaddrs(reader)] == [
                (
                    f"rcv-local-sockaddr: {rcv.id} {rcv_address}",
                    sockaddr_key(rcv.id, rcv_address),
                    ChannelStatus.ACTIVE,
                    sub.registration_id,
                ),
                (
                    f"snd-local-sockaddr: {snd.id} {snd_address}",
                    sockaddr_key(snd.id, snd_address),
                    ChannelStatus.ACTIVE,
                    pub.registration_id,
                ),
            ]
            await ipc.close()
            await other_pub.close()
            await other_sub.close()
            assert statuses(reader) == [snd, rcv]
            await pub.close()
            await sub.close()
            await await_until(
                lambda: not statuses(reader) and not sockaddrs(reader), 10, "the counters freed"
            )


async def test_a_channel_too_long_for_the_key_or_label_is_cut_as_aerons(driver):
    """The key holds the channel's first 108 bytes (its length says 108), the label its first
    380 bytes."""
    port = free_port()
    channel = f"aeron:udp?endpoint=127.0.0.1:{port}|alias={'a' * 400}"
    async with connect(driver.dir) as aeron:
        sub = await aeron.add_subscription(channel, 1)
        with CountersReader.open(driver.dir) as reader:
            (rcv,) = statuses(reader)
            assert rcv.key == struct.pack("<i", MAX_KEY_LENGTH - 4) + channel.encode()[:108]
            label = f"rcv-channel: {channel} 127.0.0.1:{port}"
            assert rcv.label == label[:MAX_LABEL_LENGTH]
            await sub.close()


async def test_each_destination_of_a_multi_destination_subscription_has_its_address(driver):
    """A subscription with control-mode=manual has its rcv-channel from the start (no socket:
    its label ends in a space, as Aeron's), an rcv-local-sockaddr for each destination while it
    is one."""
    ports = [free_port(), free_port()]
    channel = "aeron:udp?control-mode=manual"
    async with connect(driver.dir) as aeron:
        sub = await aeron.add_subscription(channel, 1)
        with CountersReader.open(driver.dir) as reader:
            (rcv,) = statuses(reader)
            assert rcv.label == f"rcv-channel: {channel} "
            assert (rcv.value, sockaddrs(reader)) == (ChannelStatus.ACTIVE, [])
            for port in ports:
                await sub.add_destination(f"aeron:udp?endpoint=127.0.0.1:{port}")
            addresses = [f"127.0.0.1:{port}" for port in ports]
            assert [(c.label, c.key, c.registration_id) for c in sockaddrs(reader)] == [
                (f"rcv-local-sockaddr: {rcv.id} {a}", sockaddr_key(rcv.id, a), sub.registration_id)
                for a in addresses
            ]
            await sub.remove_destination(f"aeron:udp?endpoint=127.0.0.1:{ports[0]}")
            assert [c.label for c in sockaddrs(reader)] == [
                f"rcv-local-sockaddr: {rcv.id} {addresses[1]}"
            ]
            await sub.close()
            assert statuses(reader) == sockaddrs(reader) == []


def test_an_address_too_long_for_the_key_is_cut_as_aerons():
    """Aeron's C driver keeps the first 103 bytes (a NUL follows them in its key)."""
    address = "h" * 200 + ":1"
    assert local_sockaddr_key(7, address) == struct.pack("<ii", 7, 103) + b"h" * 103


async def port_0_scenario(aeron: Aeron, publication_host: str) -> None:
    """An aeronio client's subscription on port 0 learns its port (`local_socket_addresses`),
    a publication to it delivers and tells its own socket's address; IPC and a closed
    subscription have none."""
    sub = await aeron.add_subscription("aeron:udp?endpoint=127.0.0.1:0", 1)
    (address,) = sub.local_socket_addresses
    assert re.fullmatch(r"127\.0\.0\.1:[1-9]\d*", address)
    pub = await aeron.add_publication(f"aeron:udp?endpoint={address}", 1)
    (publication_address,) = pub.local_socket_addresses
    assert re.fullmatch(rf"{re.escape(publication_host)}:[1-9]\d*", publication_address)
    assert await exchange(pub, sub, [b"to the bound port"], 20) == [b"to the bound port"]
    ipc = await aeron.add_subscription("aeron:ipc", 1)
    assert ipc.local_socket_addresses == []
    await sub.close()
    await pub.close()
    assert sub.local_socket_addresses == pub.local_socket_addresses == []
    await ipc.close()


async def test_an_aeronio_subscription_on_port_0_tells_its_port(driver):
    """On aeronio's driver (its publication's socket is not connected: 0.0.0.0)."""
    async with connect(driver.dir) as aeron:
        await port_0_scenario(aeron, "0.0.0.0")
