"""Real processes for the cross-process tests: a standalone driver, client children running the
roles below, line-oriented stdout with bounded waits, counters read from the driver's file.

A child runs `python -c BOOT ROLE JSON-KWARGS`: it imports this module and runs `ROLES[ROLE]`
on its own event loop. Children talk to the test on stdout, one `tag payload` line per event.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import time
import uuid
import zlib
from collections.abc import Callable, Iterator

from tests.support.child import Child, child_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PATH = f"import sys; sys.path.insert(0, {ROOT!r})"  # the repository, so `tests.support` imports
BOOT = f"{PATH}; from tests.support import procs; procs.child_main()"
IPC = "aeron:ipc"
CLI = [sys.executable, "-m", "aeronio.cli"]  # the `aeronio` command


def module_argv(module: str) -> list[str]:
    """The command that runs `module` (e.g. "tests.support.netns_worker") as __main__, wherever
    the child's working directory is."""
    run = f"import runpy; runpy.run_module({module!r}, run_name='__main__')"
    return [sys.executable, "-c", f"{PATH}; {run}"]


# -- the test side ------------------------------------------------------------------------------


def aeronio_cmd(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    """`aeronio ARGS` run to its end, its output captured; in `env`, by default the environment
    without AERONIO_* variables."""
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env() if env is None else env,
    )


def new_driver_dir() -> str:
    return f"/dev/shm/aeronio-test-{uuid.uuid4().hex}"


class Procs:
    """Every child of one test, killed at teardown; driver directories removed at teardown."""

    def __init__(self) -> None:
        self.children: list[Child] = []
        self.dirs: list[str] = []

    def new_dir(self) -> str:
        dir = new_driver_dir()
        self.dirs.append(dir)
        return dir

    def spawn(self, args: list[str], name: str, stdin: bool = False) -> Child:
        child = Child(args, name, stdin)
        self.children.append(child)
        return child

    def role(self, role: str, name: str | None = None, stdin: bool = False, **kwargs) -> Child:
        """A child running ROLES[role](**kwargs)."""
        args = [sys.executable, "-c", BOOT, role, json.dumps(kwargs)]
        return self.spawn(args, name or role, stdin)

    def driver_process(self, dir: str, *options: str, name: str = "driver") -> Child:
        """`aeronio driver --dir DIR OPTIONS...`, not waited for."""
        args = [*CLI, "driver", "--dir", dir, *options]
        return self.spawn(args, name)

    def driver(self, dir: str, *options: str, name: str = "driver") -> Child:
        """A standalone driver on `dir`, once it says it is ready."""
        child = self.driver_process(dir, *options, name=name)
        ready = child.expect("aeronio driver pid", timeout=20)
        assert ready == f"{child.pid} on {dir}", ready
        return child

    def close(self) -> None:
        # Drivers last: clients first, so nothing of theirs outlives the test either way.
        for child in reversed(self.children):
            child.finish()
        for dir in self.dirs:
            shutil.rmtree(dir, ignore_errors=True)


def procs_fixture() -> Iterator[Procs]:
    """The `procs` fixture of the process tests (`procs = pytest.fixture(procs_fixture,
    name="procs")`): a Procs for one test, closed at its teardown."""
    procs = Procs()
    try:
        yield procs
    finally:
        procs.close()


def counters_path(dir: str) -> str:
    return os.path.join(dir, "cnc.dat")


def system_counters(dir: str) -> dict:
    """SystemCounters -> value, read from the counters in the driver's cnc.dat."""
    from aeronio.counters import CountersReader, SystemCounters

    types = {descriptor.type_id for descriptor in SystemCounters}
    values = {}
    with CountersReader.open(counters_path(dir)) as reader:
        for info in reader.for_each():
            if info.type_id in types:
                (descriptor,) = struct.unpack_from("=i", info.key)
                values[SystemCounters(descriptor)] = info.value
    return values


def counter_labels(dir: str) -> list[str]:
    from aeronio.counters import CountersReader

    with CountersReader.open(counters_path(dir)) as reader:
        return [info.label for info in reader.for_each()]


async def await_until(
    condition: Callable[[], object], timeout: float, what: str | Callable[[], str]
) -> object:
    """Poll `condition` on the loop until truthy (returned; awaited first if it is awaitable, as
    a request's answer); AssertionError after `timeout` seconds, saying what `what()` says, or
    that it timed out waiting for `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(
                what() if callable(what) else f"timed out after {timeout} s waiting for {what}"
            )
        await asyncio.sleep(0.01)


async def wait_recorded(client, recording_id: int, position: int, timeout: float = 15) -> None:
    """Until the archive (its control client `client`) recorded `recording_id` to `position`."""

    async def reached() -> bool:
        return await client.get_recording_position(recording_id) >= position

    await await_until(reached, timeout, f"recording {recording_id} to reach {position}")


def wait_until(condition: Callable[[], object], timeout: float, what: str) -> object:
    """Poll `condition` until truthy (returned) or fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def cpu_seconds(pid: int) -> float:
    """The CPU time of a process, in seconds, to the nanosecond: its CPU-time clock (Linux's
    MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED), what clock_getcpuclockid(3) gives); /proc's
    utime + stime count in 10 ms ticks, too coarse for an idle process."""
    return time.clock_gettime(((~pid) << 3) | 2)


# -- messages: (publisher id, seq, length, crc32) header + a deterministic body ------------------

HEADER = struct.Struct("<iiII")
_BLOCK = random.Random(20240601).randbytes(1 << 16)
FRAGMENTED_EVERY = 97  # every 97th message is longer than mtu - 32, so it goes as fragments


def payload_size(pub_id: int, seq: int) -> int:
    if seq % FRAGMENTED_EVERY == 0:
        return 3000 + (seq // FRAGMENTED_EVERY % 5) * 700  # 3000..5800 > 1408 - 32
    return HEADER.size + (seq * 7 + pub_id * 13) % 200


def make_payload(pub_id: int, seq: int) -> bytes:
    n = payload_size(pub_id, seq) - HEADER.size
    start = (pub_id * 7919 + seq * 131) % (len(_BLOCK) - n)
    body = _BLOCK[start : start + n]
    return HEADER.pack(pub_id, seq, len(body) + HEADER.size, zlib.crc32(body)) + body


def check_payload(data: bytes) -> tuple[int, int, str | None]:
    """(pub id, seq, error or None) of a received message."""
    if len(data) < HEADER.size:
        return -1, -1, f"short message of {len(data)} bytes"
    pub_id, seq, length, crc = HEADER.unpack_from(data)
    if length != len(data):
        return pub_id, seq, f"length {len(data)}, header says {length}"
    if zlib.crc32(data[HEADER.size :]) != crc:
        return pub_id, seq, "checksum mismatch"
    if data != make_payload(pub_id, seq):
        return pub_id, seq, "bytes differ from what was sent"
    return pub_id, seq, None


# -- the child side ----------------------------------------------------------------------------


def say(tag: str, payload: object = "") -> None:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    print(f"{tag} {text}".rstrip(), flush=True)


async def read_stdin_line() -> str:
    return await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)


async def wait_for_image(subscription, timeout: float = 15.0):
    """The subscription's first image, once it has one; TimeoutError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not subscription.images:
        if time.monotonic() > deadline:
            raise TimeoutError(f"no image on {subscription} within {timeout} s")
        await asyncio.sleep(0.001)
    return subscription.images[0]


async def role_publisher(
    dir: str, stream: int, pub_id: int, count: int, exclusive: bool = False, channel: str = IPC
) -> None:
    """Add a (concurrent or exclusive) publication, report its session, wait for "go" on stdin,
    then offer `count` checkable messages."""
    import aeronio

    async with aeronio.connect(dir) as aeron:
        if exclusive:
            publication = await aeron.add_exclusive_publication(channel, stream)
        else:
            publication = await aeron.add_publication(channel, stream)
        say(
            "session",
            {
                "pub_id": pub_id,
                "session_id": publication.session_id,
                "original_registration_id": publication.original_registration_id,
                "exclusive": publication.is_exclusive,
                "max_payload_length": publication.max_payload_length,
            },
        )
        await read_stdin_line()
        for seq in range(count):
            await publication.offer(make_payload(pub_id, seq), timeout=30)
        say("done", {"pub_id": pub_id, "position": publication.position})


async def role_checking_subscriber(
    dir: str,
    stream: int,
    expected: dict[str, int],
    timeout: float = 60.0,
    channel: str = IPC,
    form: str = "copy",
) -> None:
    """Subscribe, say "ready", receive with `async for` until every publisher's count arrived,
    checking order, content and sessions; report the findings as JSON. `form`: "copy" (`async
    for message in subscription`), "views" (`subscription.messages(copy=False)`, checked in
    place) or "batches" (`subscription.batches()`)."""
    import aeronio

    expected_counts = {int(k): v for k, v in expected.items()}
    total = sum(expected_counts.values())
    next_seq = dict.fromkeys(expected_counts, 0)
    sessions: dict[int, set[int]] = {k: set() for k in expected_counts}
    errors: list[str] = []
    image_sessions: list[int] = []
    longest = 0
    received = 0

    async with aeronio.connect(dir) as aeron:
        subscription = await aeron.add_subscription(
            channel, stream, available_image=lambda image: image_sessions.append(image.session_id)
        )
        say("ready")

        async def each_message():
            if form == "batches":
                async for batch in subscription.batches():
                    for message in batch:
                        yield message
            else:
                async for message in subscription.messages(copy=form != "views"):
                    yield message

        async def receive_all() -> None:
            nonlocal received, longest
            async for message in each_message():
                received += 1
                data = message.data
                longest = max(longest, len(data))
                pub_id, seq, error = check_payload(data)
                if error is None and pub_id not in next_seq:
                    error = f"unknown publisher {pub_id}"
                if error is None and seq != next_seq[pub_id]:
                    error = f"publisher {pub_id}: seq {seq}, expected {next_seq[pub_id]}"
                if error is not None:
                    if len(errors) < 20:
                        errors.append(f"message {received}: {error}")
                else:
                    next_seq[pub_id] = seq + 1
                    sessions[pub_id].add(message.header.session_id)
                if received >= total and next_seq == expected_counts:
                    return

        try:
            await asyncio.wait_for(receive_all(), timeout)
        except TimeoutError:
            errors.append(f"timed out after {timeout} s with {received} of {total} messages")
        # Anything further would be a duplicate or a stray: give it a moment to show up.
        with contextlib.suppress(TimeoutError):
            extra = await asyncio.wait_for(subscription.receive(), 0.3)
            errors.append(f"an extra message arrived: {check_payload(extra.data)}")
        say(
            "result",
            {
                "received": received,
                "counts": next_seq,
                "sessions": {k: sorted(v) for k, v in sessions.items()},
                "image_sessions": image_sessions,
                "longest": longest,
                "errors": errors,
            },
        )


async def role_claimer(dir: str, stream: int, before: int) -> None:
    """Offer `before` messages, then claim a frame, write into it and never commit it."""
    import aeronio

    async with aeronio.connect(dir) as aeron:
        publication = await aeron.add_publication(IPC, stream)
        say(
            "session",
            {
                "session_id": publication.session_id,
                "original_registration_id": publication.original_registration_id,
            },
        )
        for i in range(before):
            await publication.offer(b"before-%d" % i, timeout=10)
        deadline = time.monotonic() + 10
        while isinstance(claim := publication.try_claim(64), int):
            if time.monotonic() > deadline:
                raise TimeoutError(f"try_claim kept returning {claim}")
            await asyncio.sleep(0.001)
        claim.buffer[:] = b"claimed-but-never-committed".ljust(64, b"!")
        say("claimed", {"position": claim.position})
        await asyncio.sleep(120)  # the test SIGKILLs us


async def role_block_cut_short(dir: str, stream: int, before: int, path: str) -> None:
    """Offer `before` messages on an exclusive publication, then `offer_block` one 16 KiB frame
    from a mapping of `path` cut to its first page: the copy reads past the file's end, and
    SIGBUS kills this process in the middle of it (as any kill there would)."""
    import mmap

    import aeronio
    from aeronio.protocol.frames import data_header

    async with aeronio.connect(dir) as aeron:
        publication = await aeron.add_exclusive_publication(IPC, stream)
        for i in range(before):
            await publication.offer(b"before-%d" % i, timeout=10)
        term_offset = publication.position % (64 * 1024)
        length = 16 * 1024
        header = data_header(  # its ids are the publication's once copied
            frame_length=length, term_offset=term_offset, session_id=0, stream_id=0, term_id=0
        ).encode()
        with open(path, "w+b") as file:
            file.write(header + b"\xab" * (length - len(header)))
            file.flush()
            block = mmap.mmap(file.fileno(), length)
            file.truncate(mmap.PAGESIZE)
        say("cutting", {"position": publication.position})
        await publication.offer_block(block, timeout=10)
        say("copied")  # never: the copy faults


async def role_text_publisher(
    dir: str, stream: int, prefix: str, count: int, exclusive: bool = False, stay: bool = False
) -> None:
    """Offer `prefix-0` ... `prefix-(count-1)`, each within 20 s; with `stay`, then sleep (until
    SIGKILLed) instead of closing."""
    import aeronio

    async with aeronio.connect(dir) as aeron:
        if exclusive:
            publication = await aeron.add_exclusive_publication(IPC, stream)
        else:
            publication = await aeron.add_publication(IPC, stream)
        say(
            "session",
            {
                "session_id": publication.session_id,
                "original_registration_id": publication.original_registration_id,
                "log_file": publication.log_file,
            },
        )
        for i in range(count):
            await publication.offer(f"{prefix}-{i}".encode(), timeout=20)
        say("done", {"position": publication.position})
        if stay:
            await asyncio.sleep(120)


async def role_stalled_subscriber(
    dir: str, stream: int, channel: str = IPC, embedded: bool = False
) -> None:
    """Subscribe (`embedded`: on a driver of its own on `dir`, else on the driver of `dir`),
    wait for an image, report, then never consume (until SIGKILLed)."""
    import aeronio

    # Any driver option launches a driver: this one its default.
    options = {"dir_delete_on_shutdown": True} if embedded else {}
    async with aeronio.connect(dir, **options) as aeron:
        subscription = await aeron.add_subscription(channel, stream)
        await wait_for_image(subscription)
        image = subscription.images[0]
        say(
            "ready",
            {"registration_id": subscription.registration_id, "position": image.position},
        )
        await asyncio.sleep(120)


async def role_stalling_publisher(dir: str, stream: int) -> None:
    """Offer "before stall" on an exclusive publication and report, then block the event loop
    until a line comes on stdin (as a blocking call would: no keepalive meanwhile), then report
    what three `try_offer` returned and the position, then what an `await offer` raised."""
    import aeronio

    async with aeronio.connect(dir) as aeron:
        publication = await aeron.add_exclusive_publication(IPC, stream)
        await publication.wait_connected(timeout=15)
        await publication.offer(b"before stall", timeout=15)
        say("ready", {"position": publication.position})
        sys.stdin.readline()  # the loop stalls here
        results = [publication.try_offer(b"after stall %d" % i) for i in range(3)]
        say("offers", {"results": results, "position": publication.position})
        try:
            await publication.offer(b"awaited after stall", timeout=15)
            say("then", "no error")
        except Exception as e:
            say("then", type(e).__name__)


async def role_polling_subscriber(dir: str, stream: int, how: str = "poll") -> None:
    """Subscribe, wait for an image, report, then `poll` (idling between empty polls) or
    `async for` (how="async_for") until that raises: report what it raised, the images left and
    what the unavailable-image handler was told."""
    import aeronio

    unavailable = []
    async with aeronio.connect(dir, driver_timeout_s=30) as aeron:
        subscription = await aeron.add_subscription(
            IPC, stream, unavailable_image=lambda image: unavailable.append(image.is_closed)
        )
        await wait_for_image(subscription)
        image = subscription.images[0]
        say("ready")
        try:
            if how == "async_for":
                async for _ in subscription:
                    pass
            while True:
                if not subscription.poll(lambda buffer, header: None, 10):
                    await asyncio.sleep(0.005)
        except aeronio.AeronError as e:
            report = {"images": len(subscription.images), "image_closed": image.is_closed}
            say("raised", {"type": type(e).__name__, "unavailable": unavailable, **report})


async def role_idle_reader(
    dir: str, stream: int, want_image: bool, idle_strategy: str = "default"
) -> None:
    """`async for` with the default (or the yielding) idle strategy; print the first message
    and exit."""
    import aeronio
    from aeronio.idle import DEFAULT_IDLE_STRATEGY, YieldingIdleStrategy

    strategy = YieldingIdleStrategy() if idle_strategy == "yielding" else DEFAULT_IDLE_STRATEGY
    async with aeronio.connect(dir, idle_strategy=strategy) as aeron:
        subscription = await aeron.add_subscription(IPC, stream)
        if want_image:
            await wait_for_image(subscription)
        say("ready", {"images": len(subscription.images)})
        async for message in subscription:
            say("got", message.data.decode())
            return


async def role_blocked_publisher(dir: str, stream: int) -> None:
    """Fill the window until back-pressured, report, then `await offer` one final message."""
    import aeronio

    async with aeronio.connect(dir) as aeron:
        publication = await aeron.add_publication(IPC, stream)
        deadline = time.monotonic() + 15
        sent = 0
        while True:
            result = publication.try_offer(b"fill-%d" % sent + bytes(1000))
            if result > 0:
                sent += 1
            elif result == aeronio.BACK_PRESSURED:
                break
            elif time.monotonic() > deadline:
                raise TimeoutError(f"never back-pressured: last result {result}")
            else:
                await asyncio.sleep(0.001)
        say("blocked", {"sent": sent, "position": publication.position})
        await publication.offer(b"final", timeout=60)
        say("offered", {"position": publication.position})


async def role_idle_service(channel: str | None = None, timer_interval_ns: int = 0) -> None:
    """An embedded driver (its own directory) and, given a channel, a publication and a
    subscription on it, connected, one message exchanged; say "ready" (with the driver
    directory), then nothing until a line on stdin: offer it and say "got" with what the
    subscription received. `timer_interval_ns`: the driver's, if not 0."""
    import aeronio

    options = {"timer_interval_ns": timer_interval_ns} if timer_interval_ns else {}
    async with aeronio.connect(**options) as aeron:
        if channel is not None:
            subscription = await aeron.add_subscription(channel, 7)
            publication = await aeron.add_publication(channel, 7)
            await publication.wait_connected(10)
            await subscription.wait_connected(10)
            await publication.offer(b"first", timeout=10)
            assert (await subscription.receive()).data == b"first"
        say("ready", {"dir": aeron.driver_dir})
        line = (await read_stdin_line()).strip()
        if channel is not None:
            await publication.offer(line.encode(), timeout=10)
            async with asyncio.timeout(10):
                say("got", (await subscription.receive()).data.decode())


async def role_idle_ipc_client(dir: str, stream: int, side: str) -> None:
    """A client of the standalone driver on `dir` with an IPC publication (side "pub") or
    subscription ("sub") on `stream`; says "ready" once connected, then: the publication offers
    the line read from stdin, the subscription says "got" with the first message."""
    import aeronio

    async with aeronio.connect(dir) as aeron:
        if side == "pub":
            publication = await aeron.add_publication(IPC, stream)
            await publication.wait_connected(10)
            say("ready")
            line = (await read_stdin_line()).strip()
            await publication.offer(line.encode(), timeout=10)
            say("offered")
        else:
            subscription = await aeron.add_subscription(IPC, stream)
            await subscription.wait_connected(10)
            say("ready")
            async with asyncio.timeout(60):
                say("got", (await subscription.receive()).data.decode())


async def role_tagged_publisher(dir: str, stream: int, tag: str, count: int) -> None:
    """The aeronio side of pyaeron_roles.publish_tagged: once connected and told "go" on
    stdin, offer `count` tagged messages."""
    import aeronio
    from tests.support.pyaeron_roles import tagged

    async with aeronio.connect(dir) as aeron:
        publication = await aeron.add_publication(IPC, stream)
        await publication.wait_connected(60)
        say("connected", {"session_id": publication.session_id})
        await read_stdin_line()
        for i in range(count):
            await publication.offer(tagged(tag, i), timeout=30)
        say("sent", {"count": count})
        await read_stdin_line()


async def role_tagged_subscriber(dir: str, stream: int, counts: dict[str, int]) -> None:
    """The aeronio side of pyaeron_roles.subscribe_tagged."""
    import aeronio
    from tests.support.pyaeron_roles import check_tagged

    next_index = dict.fromkeys(counts, 0)
    errors: list[str] = []
    async with aeronio.connect(dir) as aeron:
        subscription = await aeron.add_subscription(IPC, stream)
        say("subscribed")

        async def receive_all() -> None:
            async for message in subscription:
                error = check_tagged(message.data, next_index)
                if error is not None:
                    errors.append(error)
                if next_index == counts or errors:
                    return

        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(receive_all(), 60)
        say("received", {"counts": next_index, "errors": errors})
        await read_stdin_line()


ROLES = {
    "tagged_publisher": role_tagged_publisher,
    "tagged_subscriber": role_tagged_subscriber,
    "publisher": role_publisher,
    "checking_subscriber": role_checking_subscriber,
    "claimer": role_claimer,
    "block_cut_short": role_block_cut_short,
    "text_publisher": role_text_publisher,
    "stalled_subscriber": role_stalled_subscriber,
    "stalling_publisher": role_stalling_publisher,
    "idle_reader": role_idle_reader,
    "blocked_publisher": role_blocked_publisher,
    "idle_service": role_idle_service,
    "idle_ipc_client": role_idle_ipc_client,
    "polling_subscriber": role_polling_subscriber,
}


def child_main() -> None:
    role, kwargs = sys.argv[1], json.loads(sys.argv[2])
    asyncio.run(ROLES[role](**kwargs))
