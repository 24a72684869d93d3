"""A client belongs to the process and the event loop that made it. Used from a forked child or
a later event loop, every call that would speak to the driver is an AeronError at once, and
nothing is sent: before, a forked child's close removed the parent's streams and freed its
client on the driver, and a call on another loop waited the driver timeout for an answer only
the first loop reads, then blamed the driver."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

import aeronio
from tests.support.procs import IPC, procs_fixture

procs = pytest.fixture(procs_fixture, name="procs")


def in_forked_child(client: aeronio.Aeron) -> int:
    """Fork; in the child, call the inherited client (an add and a close); the child's exit
    status: 0 when both were refused as made in another process, in under a second."""
    pid = os.fork()
    if pid:
        return pid
    status = 1
    try:
        asyncio.events._set_running_loop(None)  # 3.11 keeps the parent's running loop in a child

        async def calls() -> list[str]:
            said = []
            for call in (lambda: client.add_publication(IPC, 31), client.close):
                try:
                    await call()
                except aeronio.AeronError as e:
                    said.append(str(e))
            return said

        started = time.monotonic()
        said = asyncio.run(calls())
        made_here = f"this Aeron client was made in process {os.getppid()}"
        quick = time.monotonic() - started < 1
        status = 0 if quick and len(said) == 2 and all(made_here in s for s in said) else 2
    finally:
        os._exit(status)


# The fork of a process with threads (the embedded driver's) is the scenario: the child only
# calls the inherited client and exits (os._exit), touching no lock a thread may hold.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
async def test_a_forked_child_cannot_speak_for_its_parents_client():
    async with aeronio.connect() as client:
        subscription = await client.add_subscription(IPC, 30)
        publication = await client.add_publication(IPC, 30)
        await publication.wait_connected(10)
        images = subscription.images
        pid = in_forked_child(client)
        _, status = await asyncio.to_thread(os.waitpid, pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        client.check_alive()  # not timed out by the driver
        assert subscription.images == images and publication.is_connected
        await publication.offer(b"after the fork", timeout=10)
        assert (await asyncio.wait_for(subscription.receive(), 10)).data == b"after the fork"


def test_a_client_used_on_another_event_loop_says_so(procs):
    dir = procs.new_dir()
    procs.driver(dir)

    async def made() -> aeronio.Aeron:
        return await aeronio.connect(dir, driver_timeout_s=30).__aenter__()

    client = asyncio.run(made())

    async def elsewhere() -> None:
        started = time.monotonic()
        for call in (lambda: client.add_publication(IPC, 32), client.close):
            with pytest.raises(aeronio.AeronError, match="runs on the event loop it was made on"):
                await call()
        assert time.monotonic() - started < 1  # before: 30 s, then DriverTimeoutError

    asyncio.run(elsewhere())


async def test_a_close_on_another_event_loop_touches_nothing():
    """A close of the client, a publication or a subscription from another thread's event loop
    is refused, and each is still open, working and closable on its own loop. Before, each
    was marked closed first: the client's own close then returned at once (its driver and
    streams left open), the publication and subscription were released here but never
    removed from the driver."""
    async with aeronio.connect() as client:
        subscription = await client.add_subscription(IPC, 33)
        publication = await client.add_publication(IPC, 33)
        await publication.wait_connected(10)

        def close_elsewhere(closable) -> str:
            async def close() -> None:
                await closable.close()

            try:
                asyncio.run(close())
            except aeronio.AeronError as e:
                return str(e)
            return "closed"

        for closable in (publication, subscription, client):
            said = await asyncio.to_thread(close_elsewhere, closable)
            assert "runs on the event loop it was made on" in said, said
        assert not (client.is_closed or publication.is_closed or subscription.is_closed)
        await publication.offer(b"still open", timeout=10)
        assert (await asyncio.wait_for(subscription.receive(), 10)).data == b"still open"
        await publication.close()
        await subscription.close()
    assert client.is_closed
