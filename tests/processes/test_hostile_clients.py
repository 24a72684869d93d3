"""Hostile input from client processes: a bad request is refused and its client goes on."""

from __future__ import annotations

import asyncio
import contextlib
import signal

import pytest

import aeronio
from aeronio.counters import SystemCounters
from aeronio.driver.client_proxy import MAX_ERROR_LENGTH
from aeronio.driver.media_driver import MediaDriver
from aeronio.errors import ConfigurationError, DriverError
from aeronio.protocol import control as p
from tests.support.procs import IPC, await_until, procs_fixture, system_counters

procs = pytest.fixture(procs_fixture, name="procs")

BIG = 2 * 1024 * 1024  # over the control protocol's maximum command length


async def still_served(aeron, stream: int) -> None:
    """The client's requests still reach the driver and are answered."""
    subscription = await aeron.add_subscription(IPC, stream)
    publication = await aeron.add_publication(IPC, stream)
    await publication.offer(b"still served", timeout=10)
    assert (await asyncio.wait_for(subscription.receive(), 10)).data == b"still served"
    await publication.close()
    await subscription.close()


async def raw_request(aeron, command: p.Command) -> p.Response:
    """Send `command` as it is (no client-side checks) and wait for the driver's answer."""
    future = asyncio.get_running_loop().create_future()
    aeron._pending[command.correlation_id] = future
    try:
        aeron._transport.submit(command)
        return await asyncio.wait_for(future, 10)
    finally:
        aeron._pending.pop(command.correlation_id, None)


@pytest.mark.slow
@pytest.mark.parametrize("driver", ["standalone", "embedded"])
async def test_bad_arguments_are_refused_and_the_client_goes_on(procs, driver):
    dir = procs.new_dir()
    async with contextlib.AsyncExitStack() as stack:
        if driver == "standalone":
            procs.driver(dir)
        else:
            await stack.enter_async_context(MediaDriver.launch(dir))
        aeron = await stack.enter_async_context(aeronio.connect(dir, driver_timeout_s=5))
        calls = {
            "type_id": lambda: aeron.add_counter(2**40, "x"),
            "label must be a str": lambda: aeron.add_counter(1001, None),
            "key must be bytes": lambda: aeron.add_counter(1001, "x", "not bytes"),
            "label of 2097152 characters": lambda: aeron.add_counter(1001, "x" * BIG),
            "channel of 2097168 characters": lambda: aeron.add_publication(
                "aeron:ipc?alias=" + "x" * BIG, 1
            ),
            "stream_id": lambda: aeron.add_subscription(IPC, 2**40),
        }
        for stream, (named, call) in enumerate(calls.items()):
            with pytest.raises(ConfigurationError, match=named):
                await asyncio.wait_for(call(), 10)
            await still_served(aeron, stream)


@pytest.mark.slow
async def test_the_driver_answers_a_bad_command_and_keeps_the_connection(procs):
    """Commands that skip the client's checks: each is refused with an ErrorResponse naming
    the field at fault (or the length), and the connection stays in step."""
    dir = procs.new_dir()
    procs.driver(dir)
    async with aeronio.connect(dir, driver_timeout_s=5) as aeron:
        before = system_counters(dir)
        cid = aeron._correlation_id
        me = aeron.client_id
        long_label = p.AddCounter(cid(), me, 1001, b"", "x" * BIG)
        long_channel = p.AddPublication(cid(), me, "aeron:ipc?alias=" + "x" * BIG, 1)
        refused = {
            p.AddCounter(cid(), me, 2**40, b"", "x"): "at `$.type_id`",
            p.AddCounter(cid(), me, 1001, b"", None): "at `$.label`",
            long_label: f"a command of {len(p.pack(long_label))} bytes exceeds",
            long_channel: f"a command of {len(p.pack(long_channel))} bytes exceeds",
            p.AddSubscription(cid(), me, IPC, 2**40): "at `$.stream_id`",
            p.ClientHello(p.PROTOCOL_VERSION, me, 1): "ClientHello sent twice",
        }
        for command, named in refused.items():
            if isinstance(command, p.ClientHello):  # no correlation id: counted, unanswered
                aeron._transport.submit(command)
                continue
            response = await raw_request(aeron, command)
            assert isinstance(response, p.ErrorResponse), response
            assert response.correlation_id == command.correlation_id
            assert response.code == p.GENERIC_ERROR
            assert named in response.message, response.message
            assert response.message.startswith(f"{type(command).__name__} refused: ")
        await still_served(aeron, 1)
        counters = system_counters(dir)
        assert counters[SystemCounters.INVALID_PACKETS] == (
            before[SystemCounters.INVALID_PACKETS] + len(refused)
        )
        assert counters[SystemCounters.ERRORS] >= before[SystemCounters.ERRORS] + len(refused)
        # And the driver's error for such a command reaches the caller as a DriverError.
        with pytest.raises(DriverError, match="type_id"):
            await aeron._request(p.AddCounter(cid(), me, 2**40, b"", "x"))
        await still_served(aeron, 2)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["poll", "async_for"])
async def test_a_subscriber_stopped_past_its_liveness_timeout_is_told(procs, how):
    """A subscriber process stopped (SIGSTOP) until the driver times it out learns it when it
    resumes: its images close, the unavailable-image handler runs, `poll` (and `async for`)
    raise ClientTimeoutError."""
    dir = procs.new_dir()
    procs.driver(dir, "--client-liveness-timeout-ns", "1000000000")
    async with aeronio.connect(dir, driver_timeout_s=5) as aeron:
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
async def test_an_error_echoing_a_long_argument_is_cut_to_fit_the_protocol(procs):
    """A refusal whose message quotes a near-maximal argument still fits in a response frame
    (the client would take a longer one as a broken connection)."""
    dir = procs.new_dir()
    procs.driver(dir)
    async with aeronio.connect(dir, driver_timeout_s=5) as aeron:
        publication = await aeron.add_publication(IPC, 3)
        channel = "aeron:ipc?alias=" + "x" * (p.MAX_FRAME_LENGTH - 200)
        while len(_add_destination(aeron, channel + "x")) <= p.MAX_FRAME_LENGTH:
            channel += "x"  # the longest that the command carries
        with pytest.raises(aeronio.ChannelUriError) as refused:
            await publication.add_destination(channel)
        message = str(refused.value)
        full = f"destination {channel!r} must be aeron:udp?endpoint=host:port"
        assert message == full[:MAX_ERROR_LENGTH] + f"... ({len(full) - MAX_ERROR_LENGTH} more)"
        await still_served(aeron, 4)


def _add_destination(aeron, channel: str) -> bytes:
    return p.pack(p.AddDestination(2**62, aeron.client_id, 2**62, channel))
