"""Real processes for the cross-process tests: a standalone driver, client children running the
roles below, line-oriented stdout with bounded waits, counters read from the driver's file.

A child runs `python -c BOOT ROLE JSON-KWARGS`: it imports this module and runs `ROLES[ROLE]`
on its own event loop. Children talk to the test on stdout, one `tag payload` line per event.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import queue
import random
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterator

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PATH = f"import sys; sys.path.insert(0, {ROOT!r})"  # the repository, so `tests.support` imports
BOOT = f"{PATH}; from tests.support import procs; procs.child_main()"
IPC = "aeron:ipc"


def module_argv(module: str) -> list[str]:
    """The command that runs `module` (e.g. "tests.support.netns_worker") as __main__, wherever
    the child's working directory is."""
    run = f"import runpy; runpy.run_module({module!r}, run_name='__main__')"
    return [sys.executable, "-c", f"{PATH}; {run}"]


PR_SET_PDEATHSIG = 1

# -- the test side ------------------------------------------------------------------------------


def new_driver_dir() -> str:
    return f"/dev/shm/aeronio-test-{uuid.uuid4().hex}"


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL me when the test process dies (no orphans, even if
    pytest itself is killed)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _child_env() -> dict[str, str]:
    """The environment without AERONIO_* variables, so nothing configures drivers behind our
    back."""
    return {k: v for k, v in os.environ.items() if not k.startswith("AERONIO_")}


class Child:
    """A subprocess whose stdout lines are read by a thread and handed out with timeouts."""

    def __init__(self, args: list[str], name: str, stdin: bool = False):
        self.name = name
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_child_env(),
            preexec_fn=_die_with_parent,
        )
        self.pid = self.proc.pid
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []
        self.stdout_seen: list[str] = []
        self._threads = [
            threading.Thread(target=self._pump_stdout, daemon=True),
            threading.Thread(target=self._pump_stderr, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _pump_stdout(self) -> None:
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def _pump_stderr(self) -> None:
        for line in self.proc.stderr:
            self._stderr.append(line)

    @property
    def stderr(self) -> str:
        return "".join(self._stderr)

    def describe(self) -> str:
        return (
            f"{self.name} (pid {self.pid}, returncode {self.proc.poll()}); "
            f"stdout so far: {self.stdout_seen[-10:]!r}; stderr:\n{self.stderr[-4000:]}"
        )

    def expect(self, tag: str, timeout: float = 15.0) -> str:
        """The rest of the next stdout line starting with `tag` (lines before it are kept in
        stdout_seen); fails the test if none comes within `timeout` seconds or stdout ends."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                line = self._lines.get(timeout=max(0.0, remaining))
            except queue.Empty:
                raise AssertionError(
                    f"no {tag!r} line within {timeout} s from {self.describe()}"
                ) from None
            if line is None:
                self._lines.put(None)  # keep reporting the end
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(5)
                raise AssertionError(f"stdout ended before a {tag!r} line: {self.describe()}")
            self.stdout_seen.append(line)
            if line.startswith(tag):
                return line[len(tag) :].strip()

    def expect_json(self, tag: str, timeout: float = 15.0):
        return json.loads(self.expect(tag, timeout))

    async def aexpect(self, tag: str, timeout: float = 15.0) -> str:
        """`expect` without blocking the event loop (whose client must keep sending keepalives)."""
        return await asyncio.to_thread(self.expect, tag, timeout)

    async def aexpect_json(self, tag: str, timeout: float = 15.0):
        return json.loads(await self.aexpect(tag, timeout))

    def send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def wait(self, timeout: float = 15.0) -> int:
        """The exit status, once the process exited and its output was read."""
        try:
            status = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"did not exit within {timeout} s: {self.describe()}") from None
        for thread in self._threads:
            thread.join(5)
        return status

    async def await_exit(self, timeout: float = 15.0) -> int:
        return await asyncio.to_thread(self.wait, timeout)

    def send_signal(self, signum: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signum)

    def kill(self) -> None:
        """SIGKILL and reap (a zombie would still look alive to kill(pid, 0))."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)

    def finish(self) -> None:
        """Teardown: SIGKILL if still running, reap, close pipes."""
        with contextlib.suppress(Exception):
            self.kill()
        for thread in self._threads:
            thread.join(5)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(Exception):
                    stream.close()


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
        args = [sys.executable, "-m", "aeronio.cli", "driver", "--dir", dir, *options]
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
    return os.path.join(dir, "counters.dat")


def system_counters(dir: str) -> dict:
    """SystemCounters -> value, read from the driver's counters file."""
    from aeronio.counters import SYSTEM_COUNTER_TYPE_ID, CountersReader, SystemCounters

    values = {}
    with CountersReader.open(counters_path(dir)) as reader:
        for info in reader.for_each():
            if info.type_id == SYSTEM_COUNTER_TYPE_ID:
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
    """Poll `condition` on the loop until truthy (returned); AssertionError after `timeout`
    seconds, saying what `what()` says, or that it timed out waiting for `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(
                what() if callable(what) else f"timed out after {timeout} s waiting for {what}"
            )
        await asyncio.sleep(0.01)


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
    """utime + stime of a process (fields 14 and 15 of /proc/<pid>/stat), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2 :].split()  # fields from 3 on; comm may hold spaces
    utime, stime = int(fields[14 - 3]), int(fields[15 - 3])
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


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


async def wait_for_image(subscription, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not subscription.images:
        if time.monotonic() > deadline:
            raise TimeoutError(f"no image on {subscription} within {timeout} s")
        await asyncio.sleep(0.005)


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
                "registration_id": publication.registration_id,
                "exclusive": publication.is_exclusive,
                "max_payload_length": publication.max_payload_length,
            },
        )
        await read_stdin_line()
        for seq in range(count):
            await publication.offer(make_payload(pub_id, seq), timeout=30)
        say("done", {"pub_id": pub_id, "position": publication.position})


async def role_checking_subscriber(
    dir: str, stream: int, expected: dict[str, int], timeout: float = 60.0, channel: str = IPC
) -> None:
    """Subscribe, say "ready", receive with `async for` until every publisher's count arrived,
    checking order, content and sessions; report the findings as JSON."""
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

        async def receive_all() -> None:
            nonlocal received, longest
            async for message in subscription:
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
            {"session_id": publication.session_id, "registration_id": publication.registration_id},
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
                "registration_id": publication.registration_id,
                "log_file": publication.log_file,
            },
        )
        for i in range(count):
            await publication.offer(f"{prefix}-{i}".encode(), timeout=20)
        say("done", {"position": publication.position})
        if stay:
            await asyncio.sleep(120)


async def role_stalled_subscriber(dir: str, stream: int) -> None:
    """Subscribe, wait for an image, report, then never consume (until SIGKILLed)."""
    import aeronio

    async with aeronio.connect(dir) as aeron:
        subscription = await aeron.add_subscription(IPC, stream)
        await wait_for_image(subscription)
        image = subscription.images[0]
        say(
            "ready",
            {"registration_id": subscription.registration_id, "position": image.position},
        )
        await asyncio.sleep(120)


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


ROLES = {
    "publisher": role_publisher,
    "checking_subscriber": role_checking_subscriber,
    "claimer": role_claimer,
    "text_publisher": role_text_publisher,
    "stalled_subscriber": role_stalled_subscriber,
    "idle_reader": role_idle_reader,
    "blocked_publisher": role_blocked_publisher,
}


def child_main() -> None:
    role, kwargs = sys.argv[1], json.loads(sys.argv[2])
    asyncio.run(ROLES[role](**kwargs))
