"""Worker processes of bench/versus_aeron_c.py, Aeron C side: current Aeron (1.53) as pyaeron's C
client and C media driver, on an interpreter of its own (CPython 3.12+ with pyaeron).

Run as `python bench/aeron_c_workers.py JSON` (the spec of bench/aeron_workers.py: role, size,
count, warmup, timeout, grace, mode, channel/sub_channel, stream, fragment_limit, idle_yield, and
`dir` - a standalone driver's - or `dirs` - each role's own embedded driver's); it speaks the same
protocol on stdout ("READY", "SENT", "RESULT {json}"; waits for its stdin to close when it must
outlive its peer). Imports neither aeronio nor numpy: the standard library, pyaeron and the
harness's own modules (bench/ and the repository on the path, as versus_aeron_c.py sets it).

The loops are the plain ones Aeron's samples use, busy-spinning: `offer` until it takes the
message, `poll(handler, limit)` until every message came; each message carries its number
(u64, little-endian) in its first 8 bytes, checked at the receiver: a gap or reorder fails the run.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator

import pyaeron
from children import driver_cpu, proc_cpu_s
from worker_protocol import PYAERON_ENV, SEQ, Pace, Released, emit

os.environ.update(PYAERON_ENV)  # before any client of this worker is made

CHECK_EVERY = 4096  # idle spins between looks at the clock


class RunFailed(RuntimeError):
    """Wrong, missing or late messages: no number to report."""


def driver(dir: str) -> pyaeron.MediaDriver:
    """Aeron's C media driver on `dir`: SHARED threading (one agent thread), its defaults
    otherwise (idle strategy, term lengths, MTU, window)."""
    return pyaeron.MediaDriver(dir=dir, threading="shared", dir_delete_on_shutdown=True)


@contextlib.contextmanager
def client(spec: dict) -> Iterator[tuple[pyaeron.Aeron, int | None]]:
    """(client, pid of its driver when that is another process, else None): with spec["dirs"],
    a client of an embedded driver of this worker's own on its role's dir; else of the
    standalone driver on spec["dir"]."""
    if "dirs" in spec:
        embedded = driver(spec["dirs"][spec["role"]])
        aeron = pyaeron.Aeron.connect(dir=embedded.dir)
        try:
            yield aeron, None
        finally:
            aeron.close()
            embedded.close()
    else:
        aeron = pyaeron.Aeron.connect(dir=spec["dir"])
        try:
            yield aeron, spec.get("driver_pid")
        finally:
            aeron.close()


def await_connected(thing, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not thing.is_connected:
        if time.monotonic() > deadline:
            raise RunFailed(f"not connected within {seconds:g} s")
        time.sleep(0.001)


class Deadline:
    """The run's time limit, looked at every CHECK_EVERY idle spins; in a paced run (`rate`)
    each idle spin sleeps Pace.IDLE."""

    def __init__(self, seconds: float, what: str, rate: float = 0.0) -> None:
        self.at = time.monotonic() + seconds
        self.what = what
        self.spins = 0
        self.nap = Pace.nap(rate)

    def idle(self, done: int, total: int) -> None:
        if self.nap:
            time.sleep(self.nap)
        self.spins += 1
        if self.spins >= CHECK_EVERY:
            self.spins = 0
            if time.monotonic() > self.at:
                raise RunFailed(f"{self.what} stalled at {done}/{total}")


def offer_all(pub, start: int, stop: int, size: int, deadline: Deadline, rate: float) -> None:
    """Messages start..stop-1, each carrying its number, spinning until `offer` takes it; with
    a rate, each once it is due (Pace)."""
    pace = Pace(rate) if rate else None
    msg = bytearray(size)
    stamp, offer = SEQ.pack_into, pub.offer
    for i in range(start, stop):
        if pace is not None:
            pace.wait(i)
        stamp(msg, 0, i)
        while not offer(msg):
            deadline.idle(i, stop)


class Counter:
    """Checks each message's number against the count so far (a gap or reorder is an error).
    Slots, as aeronio's side's Received: the handlers' attribute accesses are of one kind."""

    __slots__ = ("count", "errors", "last_length")

    def __init__(self) -> None:
        self.count = 0
        self.errors = 0
        self.last_length = 0

    def handler(self) -> Callable[[object, object], None]:
        """Checks and counts each message and notes its length (aeronio's counting_handler)."""
        unpack = SEQ.unpack_from

        def on_message(buffer, header) -> None:
            if unpack(buffer)[0] != self.count:
                self.errors += 1
            self.count += 1
            self.last_length = len(buffer)

        return on_message

    def checker(self) -> Callable[[object, object], None]:
        """Checks and counts each message, no more (aeronio's sub_poll handler): the subscriber
        across processes notes the length of the last message alone, through handler()."""
        unpack = SEQ.unpack_from

        def on_message(buffer, header) -> None:
            if unpack(buffer)[0] != self.count:
                self.errors += 1
            self.count += 1

        return on_message

    def check(self, total: int, size: int) -> None:
        if self.errors:
            raise RunFailed(f"sequence check failed: {self.errors} messages out of sequence")
        if self.count != total or self.last_length != size:
            raise RunFailed(
                f"received {self.count} messages (last {self.last_length} B), "
                f"expected {total} of {size} B"
            )


def drain(sub, counter: Counter, upto: int, limit: int, deadline: Deadline) -> None:
    """poll(checker, limit) until `upto` messages came, as aeronio's sub_poll drains."""
    poll, handler = sub.poll, counter.checker()
    while counter.count < upto:
        if poll(handler, min(limit, upto - counter.count)) == 0:
            deadline.idle(counter.count, upto)


def drain_last(sub, counter: Counter, deadline: Deadline) -> None:
    """The last message, through the handler that notes its length (as sub_poll's); poll
    counts fragments, so a message of several is polled until it came whole."""
    poll, handler, upto = sub.poll, counter.handler(), counter.count + 1
    while counter.count < upto:
        if poll(handler, 1) == 0:
            deadline.idle(counter.count, upto)


# -- throughput across processes ------------------------------------------------------------


def pub_role(spec: dict, released: Released) -> dict:
    warmup, total = spec["warmup"], spec["warmup"] + spec["count"]
    with client(spec) as (aeron, driver_pid):
        pub = aeron.add_publication(spec["channel"], spec["stream"])
        await_connected(pub, spec["timeout"])
        emit("READY")
        deadline = Deadline(spec["timeout"], "publisher")  # spins through back-pressure
        offer_all(pub, 0, warmup, spec["size"], deadline, spec.get("rate", 0))
        d0, cpu0, t0 = proc_cpu_s(driver_pid), time.process_time(), time.perf_counter()
        offer_all(pub, warmup, total, spec["size"], deadline, spec.get("rate", 0))
        t1, cpu1, d1 = time.perf_counter(), time.process_time(), proc_cpu_s(driver_pid)
        emit("SENT")
        released.wait_blocking(spec["timeout"] + spec.get("grace", 0.0))
        pub.close()
        return {
            "sent": total,
            "t_first": t0,
            "elapsed": t1 - t0,
            "cpu_s": cpu1 - cpu0,
            **driver_cpu(driver_pid, d0, d1),
        }


def sub_role(spec: dict, released: Released) -> dict:
    warmup, total = spec["warmup"], spec["warmup"] + spec["count"]
    with client(spec) as (aeron, driver_pid):
        sub = aeron.add_subscription(spec.get("sub_channel", spec["channel"]), spec["stream"])
        emit("READY")
        await_connected(sub, spec["timeout"])
        counter = Counter()
        deadline = Deadline(spec["timeout"], "subscriber", spec.get("rate", 0))
        drain(sub, counter, warmup, spec["fragment_limit"], deadline)
        d0, cpu0, t0 = proc_cpu_s(driver_pid), time.process_time(), time.perf_counter()
        drain(sub, counter, total - 1, spec["fragment_limit"], deadline)
        drain_last(sub, counter, deadline)
        t1, cpu1, d1 = time.perf_counter(), time.process_time(), proc_cpu_s(driver_pid)
        counter.check(total, spec["size"])
        sub.close()
        return {
            "count": total - warmup,
            "received": counter.count,
            "incomplete": None,
            "t0": t0,
            "t_last": t1,
            "elapsed": t1 - t0,
            "cpu_s": cpu1 - cpu0,
            **driver_cpu(driver_pid, d0, d1),
        }


# -- round trips ----------------------------------------------------------------------------


def percentile(ordered: list[float], q: float) -> float:
    """numpy's default (linear) percentile of sorted values."""
    k = (len(ordered) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def rtt_stats(rtts_ns: list[int]) -> dict:
    """The statistics of bench/aeron_ping_pong.rtt_stats, in microseconds."""
    if not rtts_ns:
        return {"n": 0}
    a = sorted(x / 1000.0 for x in rtts_ns)
    return {
        "n": len(a),
        "median": percentile(a, 50),
        "p99": percentile(a, 99),
        "p999": percentile(a, 99.9),
        "mean": sum(a) / len(a),
        "min": a[0],
        "max": a[-1],
    }


def ping_role(spec: dict, released: Released) -> dict:
    """Offer a ping carrying its number, busy-poll for the pong that carries it back."""
    warmup, total = spec["warmup"], spec["warmup"] + spec["count"]
    with client(spec) as (aeron, _):
        sub = aeron.add_subscription(spec["pong_channel"], spec["pong_stream"])
        pub = aeron.add_publication(spec["ping_channel"], spec["ping_stream"])
        await_connected(pub, spec["timeout"])
        await_connected(sub, spec["timeout"])
        emit("READY")
        msg = bytearray(spec["size"])
        stamp, unpack = SEQ.pack_into, SEQ.unpack_from
        offer, poll, clock = pub.offer, sub.poll, time.perf_counter_ns
        got = [-1]

        def handler(buffer, header) -> None:
            got[0] = unpack(buffer)[0]

        deadline = Deadline(spec["timeout"], "ping")
        rtts: list[int] = []
        t_start, cpu0 = time.perf_counter(), time.process_time()
        for i in range(total):
            stamp(msg, 0, i)
            t0 = clock()
            while not offer(msg):
                deadline.idle(i, total)
            while poll(handler, 1) == 0:
                deadline.idle(i, total)
            t1 = clock()
            if got[0] != i:
                raise RunFailed(f"pong {got[0]} answered ping {i}")
            if i >= warmup:
                rtts.append(t1 - t0)
        elapsed, cpu = time.perf_counter() - t_start, time.process_time() - cpu0
        return {**rtt_stats(rtts), "incomplete": None, "elapsed": elapsed, "cpu_s": cpu}


def pong_role(spec: dict, released: Released) -> dict:
    """Send each ping back as it came, as aeronio's pong_spin (the ping checks each answer's
    number)."""
    total = spec["warmup"] + spec["count"]
    with client(spec) as (aeron, _):
        sub = aeron.add_subscription(spec["ping_channel"], spec["ping_stream"])
        pub = aeron.add_publication(spec["pong_channel"], spec["pong_stream"])
        emit("READY")
        await_connected(sub, spec["timeout"])
        offer = pub.offer
        deadline = Deadline(spec["timeout"], "pong")
        count = [0]

        def handler(buffer, header) -> None:
            while not offer(buffer):
                deadline.idle(count[0], total)
            count[0] += 1

        poll = sub.poll
        cpu0 = time.process_time()
        while count[0] < total:
            if poll(handler, 1) == 0:
                deadline.idle(count[0], total)
        cpu = time.process_time() - cpu0
        released.wait_blocking(spec["timeout"] + spec.get("grace", 0.0))
        return {"count": count[0], "cpu_s": cpu, "incomplete": None}


# -- one process: one thread, one call ------------------------------------------------------


def open_pair(aeron, spec: dict):
    sub = aeron.add_subscription(spec["channel"], spec["stream"])
    pub = aeron.add_publication(spec["channel"], spec["stream"])
    await_connected(pub, spec["timeout"])
    await_connected(sub, spec["timeout"])
    return pub, sub


def one_thread_role(spec: dict, released: Released) -> dict:
    """(a) in one thread: offer up to `burst` messages, poll up to `burst`, again until every
    message came (the warmup first, untimed)."""
    size, warmup, burst = spec["size"], spec["warmup"], spec["burst"]
    with client(spec) as (aeron, _):
        pub, sub = open_pair(aeron, spec)
        emit("READY")
        counter = Counter()
        deadline = Deadline(spec["timeout"], "one thread")
        msg = bytearray(size)
        stamp, offer, poll, handler = SEQ.pack_into, pub.offer, sub.poll, counter.handler()

        def run(stop: int) -> None:
            sent = counter.count
            while counter.count < stop:
                k = min(sent + burst, stop)
                while sent < k:
                    stamp(msg, 0, sent)
                    if not offer(msg):
                        break
                    sent += 1
                if poll(handler, burst) == 0:
                    deadline.idle(counter.count, stop)

        run(warmup)
        t0, cpu0 = time.perf_counter(), time.process_time()
        run(warmup + spec["count"])
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        counter.check(warmup + spec["count"], size)
        return {"count": spec["count"], "received": counter.count, "elapsed": elapsed, "cpu_s": cpu}


def wait_window(pub, length: int, seconds: float) -> None:
    """Until the publication may take `length` bytes more without back-pressure (the driver
    moves its limit as the subscriber catches up)."""
    deadline = time.monotonic() + seconds
    while pub.position_limit - pub.position < length:
        if time.monotonic() > deadline:
            raise RunFailed(f"publication window under {length} B for {seconds:g} s")
        time.sleep(0.001)


def one_call_role(spec: dict, released: Released) -> dict:
    """`offer(msg)` alone in a loop (chunks of `chunk` messages, each timed once the window has
    room for all of it: no offer is refused), then `poll(handler, 1)` alone until the chunk is
    read; the seconds of each kind of call, summed."""
    size, chunk, total = spec["size"], spec["chunk"], spec["warmup"] + spec["count"]
    frame = (32 + size + 31) // 32 * 32
    with client(spec) as (aeron, _):
        pub, sub = open_pair(aeron, spec)
        emit("READY")
        counter = Counter()
        msg = bytearray(size)
        stamp, offer, poll, handler = SEQ.pack_into, pub.offer, sub.poll, counter.handler()
        clock = time.perf_counter
        offer_s = poll_s = 0.0
        empty = 0
        for first in range(0, total, chunk):
            stop = min(first + chunk, total)
            wait_window(pub, (stop - first) * frame, spec["timeout"])
            t0 = clock()
            for i in range(first, stop):
                stamp(msg, 0, i)
                result = offer(msg)
                if result == pyaeron.ADMIN_ACTION:  # the term rotated under this offer: retry
                    result = offer(msg)
                if not result:
                    raise RunFailed(f"offer {i} refused with room in the window: {result!r}")
            t1 = clock()
            while counter.count < stop:
                if poll(handler, 1) == 0:
                    empty += 1
            t2 = clock()
            if first >= spec["warmup"]:
                offer_s += t1 - t0
                poll_s += t2 - t1
        counter.check(total, size)
        return {"count": total - spec["warmup"], "received": counter.count, "offer_s": offer_s,
                "poll_s": poll_s, "empty_polls": empty}  # fmt: skip


ROLES: dict[str, Callable[[dict, Released], dict]] = {
    "c-pub": pub_role,
    "c-sub": sub_role,
    "c-ping": ping_role,
    "c-pong": pong_role,
    "c-one-thread": one_thread_role,
    "c-one-call": one_call_role,
}


def driver_main(dir: str) -> int:
    """A standalone C media driver on `dir` until stdin closes."""
    media_driver = driver(dir)
    emit(f"aeron c driver pid {os.getpid()} dir {media_driver.dir}")
    Released().event.wait()
    media_driver.close()
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--driver"]:
        return driver_main(argv[1])
    spec = json.loads(argv[0])
    try:
        result = ROLES[spec["role"]](spec, Released())
    except BaseException:
        traceback.print_exc()
        return 1
    emit("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
