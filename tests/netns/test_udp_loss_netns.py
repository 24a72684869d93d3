"""Real sockets under loss (issue 4): a publisher in one network namespace and a subscriber in
another, joined by a veth pair, each namespace dropping 5 % of the UDP datagrams it receives with
an nftables rule, so DATA, SETUPs, status messages, NAKs and retransmits are all lost at times.
Every side is one process with an embedded media driver on a directory of its own: aeronio
(tests/netns_worker.py) or the reference Aeron 1.15.1 (tests/java/*.java, compiled here).

250,000 messages of 16..200 bytes (AERONIO_NETNS_MESSAGES for more or fewer: 1000000 for the
issue's million), each a u64 sequence number and bytes derived from it (about 40 MB: over 30
rotations of the 1 MiB terms, each term of the log reused ten times, losses repaired throughout),
go aeronio -> aeronio, Java -> aeronio and aeronio -> Java; the subscriber checks each arrives
exactly once, in order, byte-identical. Afterwards: both nftables drop counters moved (about
5 % of what each namespace received), the receiver sent NAKs, the sender received NAKs and
retransmitted, and neither driver counted errors, invalid packets or loss gap fills.

Skipped (reason printed) without `ip`/`nft` or the privilege to make namespaces; the Java cases
also without Java (see tests/java_aeron.py).
"""

from __future__ import annotations

import json
import os
import time

import pytest

from tests.support.java_aeron import (
    cnc_counters,
    compile_java_sources,
    require_aeron_java,
)
from tests.support.netns import NetnsPair
from tests.support.procs import Child, Procs, module_argv, system_counters
from tests.support.reference_aeron import java_args

MESSAGES = int(os.environ.get("AERONIO_NETNS_MESSAGES", 250_000))
# The subscriber gives up after this many seconds (and says how far it got).
TIMEOUT_S = float(os.environ.get("AERONIO_NETNS_TIMEOUT", 60 + MESSAGES / 4000))
STALL_S = 30  # and the test fails as soon as nothing more arrived for this long
PORT = 40123
STREAM_ID = 1001
WORKER = module_argv("tests.support.netns_worker")


@pytest.fixture(scope="module")
def java_classpath(tmp_path_factory) -> str:
    return compile_java_sources(require_aeron_java(), tmp_path_factory.mktemp("java-classes"))


class Side:
    """One end of a run: a child in a namespace, its kind, its driver directory."""

    def __init__(self, kind: str, child: Child, dir: str):
        self.kind, self.child, self.dir = kind, child, dir

    def live_counters(self) -> dict[str, int]:
        """The driver's non-zero system counters now, read from its files (for failure
        messages)."""
        try:
            if self.kind == "java":
                return {label: v for _i, t, label, v in cnc_counters(self.dir) if t == 0 and v}
            return {c.label: v for c, v in system_counters(self.dir).items() if v}
        except Exception as e:  # the file may be gone once the process ended
            return {"unreadable": repr(e)}


def start(procs: Procs, ns, kind: str, role: str, java_cp: str | None, **kwargs) -> Side:
    dir = procs.new_dir()
    if kind == "aeronio":
        args = [
            *module_argv("tests.support.netns_worker"),
            role,
            json.dumps({"dir": dir, **kwargs}),
        ]
    else:
        cls = {"publisher": "SequencePublisher", "subscriber": "CheckingSubscriber"}[role]
        positional = [kwargs["channel"], kwargs["stream"], kwargs["count"]]
        if role == "subscriber":
            positional.append(int(kwargs["timeout"]))
        args = java_args(cls, {"aeron.dir": dir}, tuple(positional), java_cp)
    child = procs.spawn(ns.exec_args(args), f"{kind} {role} in {ns.name}", stdin=True)
    return Side(kind, child, dir)


def wait_result(sub: Side, pub: Side, timeout: float) -> dict:
    """The subscriber's `result`; fails early, saying how far it got and with both drivers'
    counters, if either side dies or nothing more arrives for STALL_S seconds."""
    deadline = time.monotonic() + timeout
    last_progress, since = None, time.monotonic()
    while True:
        try:
            return json.loads(sub.child.expect("result", timeout=1))
        except AssertionError:
            if sub.child.proc.poll() is not None:
                raise
            problem = None
            progress = [line for line in sub.child.stdout_seen if line.startswith("progress")]
            if progress and progress[-1] != last_progress:
                last_progress, since = progress[-1], time.monotonic()
            if pub.child.proc.poll() is not None:
                problem = "the publisher ended before the subscriber's result"
            elif time.monotonic() - since > STALL_S:
                problem = f"no progress for {STALL_S} s (last: {last_progress})"
            elif time.monotonic() > deadline:
                problem = f"no result within {timeout} s (last: {last_progress})"
            if problem is not None:
                raise AssertionError(
                    f"{problem}; subscriber: {sub.child.describe()}\n"
                    f"subscriber counters: {sub.live_counters()}\n"
                    f"publisher: {pub.child.describe()}\npublisher counters: {pub.live_counters()}"
                ) from None


def assert_clean(side: str, counters: dict[str, int]) -> None:
    for label in ("Errors", "Invalid packets", "Loss gap fills"):
        assert counters[label] == 0, f"{side}: {label} = {counters[label]}: {counters}"


@pytest.mark.parametrize(
    "pub_kind,sub_kind",
    [("aeronio", "aeronio"), ("java", "aeronio"), ("aeronio", "java")],
    ids=["aeronio-to-aeronio", "java-to-aeronio", "aeronio-to-java"],
)
def test_every_message_arrives_once_in_order_through_5_percent_loss(
    netns: NetnsPair, procs: Procs, request, pub_kind: str, sub_kind: str
):
    java_cp = request.getfixturevalue("java_classpath") if "java" in (pub_kind, sub_kind) else None
    count = MESSAGES
    channel = f"aeron:udp?endpoint={netns.b.address}:{PORT}"
    sub = start(
        procs, netns.b, sub_kind, "subscriber", java_cp,
        channel=channel, stream=STREAM_ID, count=count, timeout=TIMEOUT_S,
    )  # fmt: skip
    sub.child.expect("ready", timeout=60)
    pub = start(
        procs, netns.a, pub_kind, "publisher", java_cp,
        channel=f"{channel}|term-length=1m", stream=STREAM_ID, count=count,
    )  # fmt: skip
    connected = json.loads(pub.child.expect("connected", timeout=60))

    result = wait_result(sub, pub, TIMEOUT_S + 60)
    published = json.loads(pub.child.expect("published", timeout=30))
    pub.child.send("stop")
    pub_counters = json.loads(pub.child.expect("counters", timeout=30))
    assert pub.child.wait(30) == 0, pub.child.describe()
    assert sub.child.wait(30) == 0, sub.child.describe()
    sub_counters = result["counters"]
    udp = netns.udp_counts()

    rate = result["received"] / result["seconds"] if result["seconds"] else 0.0
    print(
        f"{pub_kind} -> {sub_kind}: {result['received']} messages in {result['seconds']:.1f} s "
        f"({rate:,.0f} msg/s; publisher done in {published['seconds']:.1f} s); "
        f"nft (seen, dropped): {udp}; subscriber NAKs sent {sub_counters['NAKs sent']}, "
        f"publisher NAKs received {pub_counters['NAKs received']}, "
        f"retransmits sent {pub_counters['Retransmits sent']}"
    )

    # every message, once, in order, byte-identical, from the one session
    assert result["errors"] == [] and result["error_count"] == 0, result
    assert result["received"] == count and result["next_seq"] == count, result
    assert result["sessions"] == [connected["session_id"]], result
    assert published["count"] == count, published

    # the loss really happened, at about the rate asked for, in both namespaces
    for name, (seen, dropped) in udp.items():
        assert dropped > 0, f"namespace {name}: no datagram dropped of {seen}: {udp}"
        if seen >= 2000:
            share = 100 * dropped / seen
            expected = netns.loss_percent
            assert expected / 2 < share < expected * 2, f"namespace {name}: {udp}"

    # and was repaired by NAKs and retransmits, with nothing counted as bad
    assert sub_counters["NAKs sent"] > 0, sub_counters
    assert pub_counters["NAKs received"] > 0, pub_counters
    assert pub_counters["Retransmits sent"] > 0, pub_counters
    assert_clean(f"{sub_kind} subscriber", sub_counters)
    assert_clean(f"{pub_kind} publisher", pub_counters)
