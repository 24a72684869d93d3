"""Hostile input from client processes: a bad request is refused and its client goes on."""

from __future__ import annotations

import asyncio
import contextlib
import signal

import pytest

import aeronio
from aeronio.counters import SUBSCRIBER_POSITION_TYPE_ID, SystemCounters
from aeronio.driver.media_driver import MediaDriver
from aeronio.errors import ConfigurationError
from aeronio.protocol import control as p
from tests.support.ports import free_port
from tests.support.procs import IPC, await_until, procs_fixture, system_counters

procs = pytest.fixture(procs_fixture, name="procs")

BIG = 2 * 1024 * 1024  # over the longest command the to-driver ring buffer takes


async def still_served(aeron, stream: int) -> None:
    """The client's requests still reach the driver and are answered."""
    subscription = await aeron.add_subscription(IPC, stream)
    publication = await aeron.add_publication(IPC, stream)
    await publication.offer(b"still served", timeout=10)
    assert (await asyncio.wait_for(subscription.receive(), 10)).data == b"still served"
    await publication.close()
    await subscription.close()


@pytest.mark.slow
@pytest.mark.parametrize("driver", ["standalone", "embedded"])
async def test_bad_arguments_are_refused_and_the_client_goes_on(procs, driver):
    dir = procs.new_dir()
    async with contextlib.AsyncExitStack() as stack:
        if driver == "standalone":
            procs.driver(dir)
        else:
            await stack.enter_async_context(MediaDriver.launch(dir))
        aeron = await stack.enter_async_context(aeronio.connect(dir))
        calls = {
            "type_id": lambda: aeron.add_counter(2**40, "x"),
            "label must be a str": lambda: aeron.add_counter(1001, None),
            "key must be bytes": lambda: aeron.add_counter(1001, "x", "not bytes"),
            "label of 2097152 characters": lambda: aeron.add_counter(1001, "x" * BIG),
            "channel URI of 2097168 characters": lambda: aeron.add_publication(
                "aeron:ipc?alias=" + "x" * BIG, 1
            ),
            "stream_id": lambda: aeron.add_subscription(IPC, 2**40),
        }
        for stream, (named, call) in enumerate(calls.items()):
            with pytest.raises(ConfigurationError, match=named):
                await asyncio.wait_for(call(), 10)
            await still_served(aeron, stream)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["poll", "async_for"])
async def test_a_subscriber_stopped_past_its_liveness_timeout_is_told(procs, how):
    """A subscriber process stopped (SIGSTOP) until the driver times it out learns it when it
    resumes: its images close, the unavailable-image handler runs, `poll` (and `async for`)
    raise ClientTimeoutError."""
    dir = procs.new_dir()
    procs.driver(dir, "--client-liveness-timeout-ns", "1000000000")
    async with aeronio.connect(dir) as aeron:
        publication = await aeron.add_publication(IPC, 9)
        subscriber = procs.role("polling_subscriber", dir=dir, stream=9, how=how)
        await subscriber.aexpect("ready", timeout=30)
        timeouts = system_counters(dir)[SystemCounters.CLIENT_TIMEOUTS]
        subscriber.send_signal(signal.SIGSTOP)
        try:
            await await_until(
                lambda: system_counters(dir)[SystemCounters.CLIENT_TIMEOUTS] > timeouts,
                30,
                "the driver to time the stopped subscriber out",
            )
            await await_until(lambda: not publication.is_connected, 30, "the image to go")
        finally:
            subscriber.send_signal(signal.SIGCONT)
        raised = await subscriber.aexpect_json("raised", timeout=30)
        assert raised == {
            "type": "ClientTimeoutError",
            "unavailable": [True],  # the handler ran, with the image closed
            "images": 0,
            "image_closed": True,
        }
        assert await subscriber.await_exit(30) == 0, subscriber.describe()


@pytest.mark.slow
async def test_a_destination_as_long_as_a_command_carries_is_refused_naming_its_length(procs):
    """A destination of the greatest length the to-driver command carries (it went to the
    driver, whose refusal quoted it whole, cut to fit a response) is refused for its length,
    past Aeron's 4095 characters, and the client goes on. (ClientProxy.error still cuts what
    would not fit: tests/unit/test_client_proxy.py.)"""
    dir = procs.new_dir()
    procs.driver(dir)
    async with aeronio.connect(dir) as aeron:
        publication = await aeron.add_publication(IPC, 3)
        longest = aeron._conductor.transport.max_command_length
        channel = "aeron:ipc?alias=" + "x" * (longest - 200)
        while len(_add_destination(aeron, channel + "x")) <= longest:
            channel += "x"  # the longest that the command carries
        with pytest.raises(aeronio.ChannelUriError) as refused:
            await publication.add_destination(channel)
        assert str(refused.value) == (
            f"channel URI of {len(channel)} characters is longer than 4095 (Aeron's limit): "
            f"{channel[:80]}..."
        )
        await still_served(aeron, 4)


def _add_destination(aeron, channel: str) -> bytes:
    return p.encode(p.AddDestination(2**62, aeron.client_id, 2**62, channel))[1]


@pytest.mark.parametrize("transport", ["ipc", "udp"])
async def test_a_subscriber_position_set_far_ahead_does_not_hold_the_driver(procs, transport):
    """A subscriber's position is shared memory its client can set anywhere: set to 2**60, the
    driver still serves every client (it cleaned the log up to it, a term at a time, before)."""
    dir = procs.new_dir()
    procs.driver(dir)
    channel = IPC if transport == "ipc" else f"aeron:udp?endpoint=127.0.0.1:{free_port()}"
    async with aeronio.connect(dir) as aeron:
        subscription = await aeron.add_subscription(channel, 11)
        publication = await aeron.add_publication(channel, 11)
        await publication.offer(b"before", timeout=10)
        assert (await asyncio.wait_for(subscription.receive(), 10)).data == b"before"
        position_id = aeron.counters.find_by_type_id_and_registration_id(
            SUBSCRIBER_POSITION_TYPE_ID, subscription.registration_id
        )
        aeron.counters.counter(position_id).set(2**60)
        await still_served(aeron, 12)
        await publication.close()
        await subscription.close()
