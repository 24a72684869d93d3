"""The test network of one-to-many delivery (tests/netns.py NetnsBridge), proven with plain UDP
sockets (tests/mcast_probe.py) in its namespaces: host 0 sends to a multicast group and every
host that joined it receives every datagram, except host 3, whose nftables rule drops about 5 %
of its UDP input; unicast between hosts works too; close() leaves nothing behind.

Skipped (reason printed) without `ip`/`nft` or the privilege to make namespaces.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.support.netns import NetnsBridge
from tests.support.procs import Child, Procs, module_argv, procs_fixture

GROUP = "224.20.30.1"
PORT = 40456
COUNT = 4000
LOSS_PERCENT = 5
LOSSY = 3


@pytest.fixture
def bridge():
    bridge = NetnsBridge.create(4, loss_percent={LOSSY: LOSS_PERCENT})
    try:
        yield bridge
    finally:
        bridge.close()


@pytest.fixture
def procs(bridge):
    """Children of the test, killed before the namespaces they run in are deleted."""
    yield from procs_fixture()


def probe(procs: Procs, host, role: str, **kwargs) -> Child:
    args = host.exec_args([*module_argv("tests.support.mcast_probe"), role, json.dumps(kwargs)])
    return procs.spawn(args, f"{role} in {host.name}", stdin=True)


def receive(procs: Procs, host, **kwargs) -> Child:
    child = probe(procs, host, "recv", **kwargs)
    child.expect("ready", timeout=15)
    return child


def received(child: Child) -> dict:
    """Stop a receiver; what it got."""
    child.send("stop")
    result = child.expect_json("received", timeout=15)
    assert child.wait(15) == 0, child.describe()
    return result


def send(procs: Procs, host, **kwargs) -> dict:
    sender = probe(procs, host, "send", **kwargs)
    sent = sender.expect_json("sent", timeout=30)
    assert sender.wait(15) == 0, sender.describe()
    return sent


def test_layout(bridge: NetnsBridge):
    assert [h.address for h in bridge.hosts] == [f"10.203.0.{i}" for i in range(1, 5)]
    for i, host in enumerate(bridge.hosts):
        assert host.veth == f"veth{i}"
        assert f"inet {host.address}/24" in host.run("ip", "-o", "addr", "show", "dev", host.veth)
        assert "224.0.0.0/4 dev " + host.veth in host.run("ip", "route")
        assert host.udp_counts() == (0, 0)
    assert "mcast_snooping 0" in bridge.switch.run("ip", "-d", "link", "show", bridge.BRIDGE)


def test_multicast_reaches_every_joined_host_with_loss_only_where_asked(
    bridge: NetnsBridge, procs: Procs
):
    sender_host = bridge.hosts[0]
    join = {"port": PORT, "group": GROUP}
    receivers = {
        # two sockets on one port in one host (as two drivers would be): each gets a copy
        "host 1": receive(procs, bridge.hosts[1], interface=bridge.hosts[1].address, **join),
        "host 1 bound to the group": receive(
            procs, bridge.hosts[1], interface=bridge.hosts[1].address, bind=GROUP, **join
        ),
        "host 2": receive(procs, bridge.hosts[2], interface=bridge.hosts[2].address, **join),
        "host 3": receive(procs, bridge.hosts[3], interface=bridge.hosts[3].address, **join),
    }
    before = bridge.udp_counts()
    sent = send(
        procs, sender_host, group=GROUP, port=PORT, count=COUNT, interface=sender_host.address
    )
    results = {name: received(child) for name, child in receivers.items()}
    after = bridge.udp_counts()
    counts = [(s1 - s0, d1 - d0) for (s0, d0), (s1, d1) in zip(before, after, strict=True)]
    got = {name: len(r["seqs"]) for name, r in results.items()}
    print(f"sent {COUNT} in {sent['seconds']:.2f} s; received {got}; nft (seen, dropped) {counts}")

    for name, result in results.items():
        assert result["senders"] == [sender_host.address], (name, result["senders"])
        assert result["duplicates"] == 0, (name, result["duplicates"])
        assert set(result["seqs"]) <= set(range(COUNT)), name
    for name in ("host 1", "host 1 bound to the group", "host 2"):
        assert results[name]["seqs"] == list(range(COUNT)), f"{name}: {got}"
    for i in (1, 2):
        assert counts[i] == (COUNT, 0), counts
    share = got["host 3"] / COUNT
    assert 0.85 <= share <= 0.995, got
    seen, dropped = counts[LOSSY]
    assert seen == COUNT and dropped > 0, counts
    assert got["host 3"] == seen - dropped, (got, counts)  # lost only to the rule


def test_unicast_between_hosts(bridge: NetnsBridge, procs: Procs):
    a, b = bridge.hosts[1], bridge.hosts[2]
    receiver = receive(procs, b, port=PORT, bind=b.address)
    send(procs, a, group=b.address, port=PORT, count=1000)
    result = received(receiver)
    assert result["seqs"] == list(range(1000)) and result["senders"] == [a.address], result


def _netns_names() -> set[str]:
    return {
        line.split()[0]
        for line in subprocess.check_output(["ip", "netns", "list"], text=True).splitlines()
    }


def _root_links() -> set[str]:
    out = subprocess.check_output(["ip", "-o", "link", "show"], text=True)
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


def test_close_kills_what_runs_inside_and_leaves_nothing_behind():
    links_before = _root_links()
    bridge = NetnsBridge.create(3)
    # (other tests may add links of their own to the root namespace meanwhile)
    ours = {bridge.BRIDGE, *(f"port{i}" for i in range(3)), *(h.veth for h in bridge.hosts)}
    try:
        assert not (_root_links() - links_before) & ours  # nothing made in the root namespace
        names = {bridge.switch.name, *(h.name for h in bridge.hosts)}
        assert names <= _netns_names()
        sleeper = subprocess.Popen(bridge.hosts[1].exec_args(["sleep", "60"]))
    finally:
        bridge.close()
    assert sleeper.wait(10) == -9
    assert not names & _netns_names()
    assert not (_root_links() - links_before) & ours
    bridge.close()  # again: nothing to do
