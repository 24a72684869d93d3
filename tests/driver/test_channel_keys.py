"""Channels that name one endpoint are one endpoint in the driver (Aeron keys endpoints, logs
and spies on `UdpChannel.canonicalForm()`; aeronio on `ChannelUri.canonical_form`):
`localhost` is its address."""

import asyncio

import aeronio
from tests.driver.test_udp_driver import connected, exchange
from tests.support.ports import free_port
from tests.support.procs import await_until


async def next_message(sub: aeronio.Subscription, timeout: float) -> bytes:
    async with asyncio.timeout(timeout):
        async for message in sub:
            return message.data
    raise AssertionError("the subscription ended")


async def test_two_spellings_of_one_endpoint_share_its_socket_log_and_spies():
    port = free_port()
    names = [f"aeron:udp?endpoint=localhost:{port}", f"aeron:udp?endpoint=127.0.0.1:{port}"]
    async with aeronio.connect() as a, aeronio.connect() as b:
        subs = [await b.add_subscription(channel, 5) for channel in names]  # one socket
        pubs = [await a.add_publication(channel, 5) for channel in names]
        assert pubs[0].session_id == pubs[1].session_id  # one log
        spies = [await a.add_subscription(f"aeron-spy:{channel}", 5) for channel in names]
        for sub in subs:
            await connected(pubs[0], sub)
        assert await exchange(pubs[1], subs[0], [b"one"], 10) == [b"one"]
        assert await next_message(subs[1], 10) == b"one"
        for spy in spies:
            await await_until(lambda spy=spy: len(spy.images) == 1, 10, "the spy's image")
            assert await next_message(spy, 10) == b"one"
