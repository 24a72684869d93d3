"""One measured run of the cross-process benchmarks: workers started, their results read and
reported."""

from __future__ import annotations

from collections.abc import Callable

from children import Scope, progress
from reports import RttCell, TputCell


def pct(part: float | None, whole: float) -> str:
    return "?" if part is None or whole <= 0 else f"{100 * part / whole:.0f}%"


def ms(seconds: float | None) -> str:
    return "? ms" if seconds is None else f"{seconds * 1e3:.0f} ms"


def cpu_per_message(received: dict, sent: dict | None) -> dict[str, float]:
    """Nanoseconds of CPU per timed message in each process of a run that reported it: the
    receiver, the sender, the receiver's driver and the sender's (a driver both share counted
    once, as the receiver's). Each over its own timed window of the same messages."""
    n = received["count"]
    if not n or received.get("incomplete"):
        return {}
    out = {"receiver": received["cpu_s"] / n * 1e9}
    if received.get("driver_cpu_s") is not None:
        out["receiver's driver"] = received["driver_cpu_s"] / n * 1e9
    if sent is not None:
        out["sender"] = sent["cpu_s"] / n * 1e9
        shared = sent.get("driver_pid") == received.get("driver_pid")
        if sent.get("driver_cpu_s") is not None and not shared:
            out["sender's driver"] = sent["driver_cpu_s"] / n * 1e9
    return out


def report_throughput(
    received: dict, sent: dict | None, names: tuple[str, str]
) -> dict[str, float | None]:
    """Rates of one run: `rate` timed in the receiver (end of warmup to last message) and `e2e`
    from the sender's first timed send to the receiver's last message (CLOCK_MONOTONIC is one
    clock for all processes); None when nothing was timed. Prints where the CPU went (`names`:
    the receiver's and the sender's; `sent` is None when the sender was not waited for)."""
    n, wall = received["count"], received["elapsed"]
    rate = n / wall if n and wall > 0 else None
    e2e = None
    if rate is not None and sent is not None and not received.get("incomplete"):
        e2e = n / (received["t_last"] - sent["t_first"])
    parts = [f"{names[0]} {pct(received['cpu_s'], wall)} of {wall * 1e3:.1f} ms"]
    if sent is not None:
        parts.append(
            f"{names[1]} {pct(sent['cpu_s'], sent['elapsed'])} of {sent['elapsed'] * 1e3:.1f} ms "
            f"({n / sent['elapsed']:,.0f} msgs/s sent)"
        )
    per_message = cpu_per_message(received, sent)
    if "sender's driver" in per_message:  # two drivers: the receiver's may be unknown
        drivers = (received.get("driver_cpu_s"), sent["driver_cpu_s"])
        parts.append(f"drivers {names[0]}'s {ms(drivers[0])}, {names[1]}'s {ms(drivers[1])}")
    elif received.get("driver_cpu_s") is not None:
        parts.append(f"driver {ms(received['driver_cpu_s'])}")
    head = "n/a" if rate is None else f"{rate:,.0f}"
    tail = f" (e2e {e2e:,.0f})" if e2e is not None else ""
    if received.get("incomplete"):
        tail += f" INCOMPLETE: {received['incomplete']}"
    progress(f"    {head:>14} msgs/s{tail}   cpu: " + ", ".join(parts))
    if per_message:
        each = ", ".join(f"{k} {v:.0f}" for k, v in per_message.items())
        progress(f"    CPU ns a message: {each}; all {sum(per_message.values()):.0f}")
    return {"rate": rate, "e2e": e2e, "cpu_ns": per_message}


def run_spec(size: int, count: int, warmup: int, timeout: float, **spec) -> dict:
    """The workers' spec of one run: `spec` and what every run has."""
    return {**spec, "size": size, "count": count, "warmup": warmup, "timeout": timeout}


def worker_limit(spec: dict) -> float:
    """How long the parent waits for a worker's result: its own limit and some."""
    return spec["timeout"] + spec.get("grace", 0.0) + 30.0


def pair_run(
    scope: Scope, spec: dict, first: tuple[str, str], second: tuple[str, str], first_measures: bool
) -> tuple[dict, dict | None]:
    """The `first` worker, then (once it is READY) the `second`, each given as (name, role).
    The result of the one that measures - the first (a receiver) if `first_measures`, else the
    second (a ping) - once it is done, then the other's once released (after its SENT, a
    sender's), or None when the run was incomplete and the other is stopped instead."""
    started = scope.worker(first[0], {**spec, "role": first[1]})
    started.expect("READY", 30.0)
    then = scope.worker(second[0], {**spec, "role": second[1]})
    measuring, other = (started, then) if first_measures else (then, started)
    result = measuring.expect_json("RESULT", worker_limit(spec), peer=other)
    answer = None
    if result.get("incomplete"):
        other.stop()
    else:
        if first_measures:
            other.expect("SENT", 30.0)
        other.release()
        answer = other.expect_json("RESULT", 30.0)
        other.wait(30.0)
    measuring.wait(30.0)
    return result, answer


def throughput_run(
    scope: Scope, spec: dict, receiver: tuple[str, str], sender: tuple[str, str]
) -> dict:
    """The receiver worker, then the sender, each given as (name, role); the receiver's result
    once it has every message (or ran out of time), then the sender's once released (a sender
    left behind by an incomplete run is stopped instead). The run's rates, `incomplete`
    and `received` (the messages the receiver counted, warmup included, where it says) (the CPU
    report names each worker by its role without the prefix: sub, pub, pull, push)."""
    received, sent = pair_run(scope, spec, receiver, sender, first_measures=True)
    names = (receiver[1].partition("-")[2], sender[1].partition("-")[2])
    if "dirs" in spec:
        names = (f"{names[0]}+driver", f"{names[1]}+driver")
    return {
        **report_throughput(received, sent, names),
        "incomplete": received.get("incomplete"),
        "received": received.get("received"),
    }


def latency_run(scope: Scope, spec: dict, pong: tuple[str, str], ping: tuple[str, str]) -> dict:
    """The pong worker, then the ping, each given as (name, role); the ping's statistics once it
    is done, after the pong's answer count once released (a pong left behind by an incomplete
    run is stopped instead)."""
    stats, answered = pair_run(scope, spec, pong, ping, first_measures=False)
    report_latency(stats, answered, embedded="dirs" in spec)
    return stats


# The two workers of a run, as (name, role): the receiver (or pong) first, the sender (or ping).
WORKER_PAIRS: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {
    "aeron-tput": (("aeronio subscriber", "aeron-sub"), ("aeronio publisher", "aeron-pub")),
    "zmq-tput": (("pyzmq PULL", "zmq-pull"), ("pyzmq PUSH", "zmq-push")),
    "aeron-rtt": (("aeronio pong", "aeron-pong"), ("aeronio ping", "aeron-ping")),
    "zmq-rtt": (("pyzmq pong", "zmq-pong"), ("pyzmq ping", "zmq-ping")),
}


def worker_run(
    script: str,
    pair: str,
    cell: TputCell | RttCell,
    warmup: int,
    timeout: float,
    spec_of: Callable[[Scope, tuple[str, str]], dict],
) -> dict:
    """One run of `cell` (its size and count, after `warmup` untimed messages or round trips)
    between the two workers of WORKER_PAIRS[pair], run as `script`: the throughput run's rates,
    or the latency run's statistics (pairs `*-rtt`). `spec_of(scope, roles)` gives what the
    workers' spec has for this benchmark and mode; it may start processes of its own in the
    run's scope (a standalone driver) or name directories for the roles."""
    first, second = WORKER_PAIRS[pair]
    with Scope(script) as scope:
        spec = run_spec(
            cell.size, cell.count, warmup, timeout, **spec_of(scope, (first[1], second[1]))
        )
        run = latency_run if pair.endswith("-rtt") else throughput_run
        return run(scope, spec, first, second)


def report_latency(stats: dict, answered: dict | None, embedded: bool = False) -> None:
    wall = stats["elapsed"]
    suffix = "+driver" if embedded else ""
    parts = [f"ping{suffix} {pct(stats['cpu_s'], wall)}"]
    if answered is not None:
        parts.append(f"pong{suffix} {pct(answered['cpu_s'], wall)}")
    if stats.get("driver_cpu_s") is not None:
        parts.append(f"driver {pct(stats['driver_cpu_s'], wall)}")
    head = (
        "no round trips timed"
        if not stats.get("n")
        else f"median {stats['median']:.2f} us, p99 {stats['p99']:.2f} us, "
        f"p99.9 {stats['p999']:.2f} us over {stats['n']:,}"
    )
    if stats.get("incomplete"):
        head += f" INCOMPLETE: {stats['incomplete']}"
    progress(f"    {head}   cpu over {wall:.2f} s: " + ", ".join(parts))
