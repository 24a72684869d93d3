"""One host of the multicast tests (tests/test_multicast_netns.py), run as
`python tests/multicast_worker.py ROLE JSON-KWARGS` inside a network namespace: an embedded media
driver on a directory of its own and a publication or a subscription, talking to the test on
stdout (`tag json` lines, see procs.say) and listening on stdin.

The messages are netns_worker's: `seq` as a little-endian u64 followed by bytes derived from it,
16..200 bytes in all (netns_worker.message).

publish: waits until the publication is connected (with `fc=min,g:/N` that is once N receivers
    sent status messages) and its flow control tracks `receivers`, says `connected`, offers
    messages 0..count-1 as fast as back-pressure lets it, says `published`; then, on a line on
    stdin, `counters` and exits. Says `progress` (how many offered, and how often it had to wait;
    the publication's position and limit; the sender's position, limit, back-pressure events and
    tracked receivers from the driver's counters) every `report_every` seconds throughout.
subscribe: says `ready`, then checks every message: seq 0..count-1 exactly once, in order,
    byte-identical; says `progress` (received, next seq, the image's position, paused or not)
    every `report_every` seconds and one `result` (with the driver's system counters) when all
    arrived and half a second more brought nothing extra, `timeout` seconds passed or `exit`
    came on stdin. Commands on stdin: `pause` (stop consuming: the image's position stays where
    it is; says `paused` with it), `resume` (says `resumed`), `exit`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time

from tests.support.netns_worker import message, publish_all, system_counters
from tests.support.procs import read_stdin_line, say


def publication_counters(aeron) -> dict[str, int]:
    """The sender's counters (this driver has the one publication), name -> value."""
    from aeronio import counters as c

    names = {
        c.SENDER_POSITION_TYPE_ID: "snd_pos",
        c.SENDER_LIMIT_TYPE_ID: "snd_lmt",
        c.SENDER_BPE_TYPE_ID: "snd_bpe",
        c.FLOW_CONTROL_RECEIVERS_TYPE_ID: "fc_receivers",
    }
    return {
        names[info.type_id]: info.value
        for info in aeron.counters.for_each()
        if info.type_id in names
    }


async def every(seconds: float, report) -> None:
    """`report()` every `seconds` until cancelled."""
    while True:
        await asyncio.sleep(seconds)
        report()


async def publish(
    dir: str,
    channel: str,
    stream: int,
    count: int,
    receivers: int = 0,
    report_every: float = 0.25,
) -> None:
    import aeronio

    async with aeronio.MediaDriver.launch(dir) as driver, aeronio.connect(driver.dir) as aeron:
        publication = await aeron.add_publication(channel, stream)
        stats = {"sent": 0, "waits": 0}

        def progress() -> None:
            say(
                "progress",
                {
                    **stats,
                    "position": publication.position,
                    "limit": publication.position_limit,
                    "time": time.monotonic(),
                    **publication_counters(aeron),
                },
            )

        reporter = asyncio.create_task(every(report_every, progress))
        deadline = time.monotonic() + 30
        while not (
            publication.is_connected
            and publication_counters(aeron).get("fc_receivers", 0) >= receivers
        ):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{channel} not connected to {receivers} within 30 s")
            await asyncio.sleep(0.005)
        say("connected", {"session_id": publication.session_id, **publication_counters(aeron)})
        await publish_all(publication, count, stats)
        await read_stdin_line()
        reporter.cancel()
        say("counters", system_counters(aeron))


class Checker:
    """Messages as they arrive: each seq 0..count-1 exactly once, in order, byte-identical."""

    def __init__(self, count: int):
        self.count = count
        self.received = self.next_seq = self.error_count = 0
        self.errors: list[str] = []
        self.sessions: set[int] = set()
        self.first = self.last = 0.0

    def error(self, text: str) -> None:
        self.error_count += 1
        if len(self.errors) < 20:
            self.errors.append(text)

    def check(self, data: bytes, session_id: int) -> None:
        self.last = time.monotonic()
        if not self.received:
            self.first = self.last
        self.received += 1
        self.sessions.add(session_id)
        if len(data) < 8:
            self.error(f"message {self.received}: only {len(data)} bytes")
            return
        seq = int.from_bytes(data[:8], "little")
        if seq != self.next_seq:
            self.error(f"message {self.received}: seq {seq}, expected {self.next_seq}")
        if data != message(seq):
            self.error(f"message {self.received}: seq {seq}: {len(data)} bytes, not those sent")
        self.next_seq = seq + 1

    @property
    def complete(self) -> bool:
        return self.received >= self.count and self.next_seq == self.count

    def result(self) -> dict:
        return {
            "received": self.received,
            "next_seq": self.next_seq,
            "error_count": self.error_count,
            "errors": self.errors,
            "sessions": sorted(self.sessions),
            "seconds": self.last - self.first,
            "first": self.first,  # time.monotonic(): one clock for every namespace
            "last": self.last,
        }


async def subscribe(
    dir: str, channel: str, stream: int, count: int, timeout: float, report_every: float = 0.25
) -> None:
    import aeronio

    checker = Checker(count)
    running = asyncio.Event()  # cleared while paused
    running.set()
    halted = asyncio.Event()  # set while the receiver waits for `running`

    async with aeronio.MediaDriver.launch(dir) as driver, aeronio.connect(driver.dir) as aeron:
        subscription = await aeron.add_subscription(channel, stream)

        def position() -> int | None:
            images = subscription.images
            return images[0].position if images else None

        def progress() -> None:
            say(
                "progress",
                {
                    "received": checker.received,
                    "next_seq": checker.next_seq,
                    "position": position(),
                    "paused": not running.is_set(),
                    "time": time.monotonic(),
                },
            )

        async def receive(more: int = 0) -> None:
            """Until every message arrived (and `more` beyond the count)."""
            until = checker.count + more
            async for msg in subscription:
                checker.check(msg.data, msg.header.session_id)
                if checker.received >= until and checker.complete:
                    return
                if not running.is_set():
                    halted.set()
                    await running.wait()
                    halted.clear()

        async def receive_all() -> None:
            try:
                await asyncio.wait_for(receive(), timeout)
            except TimeoutError:
                checker.error(
                    f"timed out after {timeout} s with {checker.received} of {count} messages"
                )
                return
            before = checker.received
            try:
                await asyncio.wait_for(receive(before + 1 - count), 0.5)
            except TimeoutError:
                pass
            if checker.received != before:
                checker.error(f"{checker.received - before} extra messages after the last one")

        async def commands() -> None:
            # a pipe reader, not procs.read_stdin_line: a thread blocked in readline would keep
            # the process from exiting once the result is out
            loop = asyncio.get_running_loop()
            stdin = asyncio.StreamReader()
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
            while raw := await stdin.readline():
                line = raw.decode().strip()
                if line == "pause":
                    # the receiver halts at its next message (it may hold a batch taken from
                    # the image already); with none coming, the image's position stays put
                    running.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(halted.wait(), 1)
                    say("paused", {"received": checker.received, "position": position()})
                elif line == "resume":
                    running.set()
                    say("resumed", {"received": checker.received, "position": position()})
                elif line == "exit":
                    checker.error(f"told to exit with {checker.received} of {count} messages")
                    return
                else:
                    say("unknown", {"command": line})
            await asyncio.Event().wait()  # stdin closed: no more commands, carry on

        say("ready", {})
        reporter = asyncio.create_task(every(report_every, progress))
        tasks = [asyncio.create_task(receive_all()), asyncio.create_task(commands())]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in (reporter, *tasks):
            task.cancel()
        say("result", {**checker.result(), "counters": system_counters(aeron)})


ROLES = {"publish": publish, "subscribe": subscribe}

if __name__ == "__main__":
    asyncio.run(ROLES[sys.argv[1]](**json.loads(sys.argv[2])))
