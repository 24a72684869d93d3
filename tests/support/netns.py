"""Network namespaces for the tests that need real networks: hosts whose UDP input an nftables rule
thins out at random (netem is not available everywhere; nftables' `numgen random` is), on a veth
pair (NetnsPair) or on a bridge (NetnsBridge, for multicast). Both need root, `ip` and `nft`;
without them `create` skips the test and prints why.

Two namespaces on one veth pair, each dropping `loss_percent` % of the UDP it receives:

    pair = NetnsPair.create(loss_percent=5)    # a: 10.201.0.1, b: 10.201.0.2
    args = pair.a.exec_args([sys.executable, ...])   # run a command inside namespace a
    pair.a.udp_counts()                        # (UDP datagrams received, dropped) in a
    pair.close()                               # kills whatever runs inside, deletes both

`hosts` namespaces on one Ethernet bridge (one-to-many delivery):

    with NetnsBridge.create(4, loss_percent={3: 5}) as bridge:   # or create() ... close()
        host = bridge.hosts[i]      # a Namespace; host.address == f"10.203.0.{i + 1}"
        host.veth                   # its interface, f"veth{i}" (10.203.0.0/24, the only one)
        host.run("ip", "-br", "addr")            # a command inside it, its stdout
        args = host.exec_args([sys.executable, ...])  # for Popen / procs.spawn
        host.udp_counts()           # (UDP datagrams received, dropped by the loss rule)

  - The bridge `br0` lives in a namespace of its own (`bridge.switch`), with port `port{i}` the
    other end of host i's `veth{i}`: nothing is added to the root namespace.
  - IGMP snooping is off, so the bridge floods multicast to every port: every host sees every
    group, joined or not (the kernel then delivers to the sockets that joined).
  - Each host has `224.0.0.0/4 dev veth{i}` (and no default route), so multicast sends and joins
    pick that interface even without naming it. Still, say it: IP_MULTICAST_IF = host.address
    for senders, IP_ADD_MEMBERSHIP with interface host.address for receivers. The default
    multicast TTL of 1 is enough (one L2 segment); IP_MULTICAST_LOOP (default on) only matters
    to receivers in the sender's own host.
  - Every host counts the UDP datagrams reaching its input hook; hosts named in `loss_percent`
    (host index -> percent, fractions down to 0.01 %) drop that share at random.

Names carry a random suffix, so parallel runs and leftovers of killed runs never clash. `close()`
SIGKILLs every process still inside the namespaces and deletes them (the veths and the bridge go
with them).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Self

import pytest

TABLE = "aeronio_loss"
_COUNTER = re.compile(r"counter packets (\d+) bytes \d+")


def _run(*args: str, timeout: float = 20) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"`{' '.join(args)}` failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


class Namespace:
    """One network namespace; `veth` is its interface with `address` (None for the switch)."""

    def __init__(self, name: str, veth: str | None = None, address: str | None = None):
        self.name, self.veth, self.address = name, veth, address

    def exec_args(self, args: list[str]) -> list[str]:
        """`args` run inside this namespace (`ip netns exec` execs it: same pid, no fork)."""
        return ["ip", "netns", "exec", self.name, *args]

    def run(self, *args: str) -> str:
        return _run(*self.exec_args(list(args)))

    def udp_counts(self) -> tuple[int, int]:
        """(UDP datagrams that reached the input hook, of which dropped) since creation."""
        text = self.run("nft", "list", "chain", "inet", TABLE, "input")
        counts = [int(n) for n in _COUNTER.findall(text)]
        seen, dropped = counts if len(counts) == 2 else (counts[0], 0)
        return seen, dropped

    def pids(self) -> list[int]:
        with contextlib.suppress(Exception):
            return [int(p) for p in _run("ip", "netns", "pids", self.name).split()]
        return []

    def _configure_host(self) -> None:
        """`address`/24 on `veth`, both it and lo up."""
        self.run("ip", "addr", "add", f"{self.address}/24", "dev", self.veth)
        self.run("ip", "link", "set", self.veth, "up")
        self.run("ip", "link", "set", "lo", "up")

    def _add_udp_loss(self, loss_percent: float) -> None:
        """A counter of the UDP datagrams reaching the input hook and, for a positive
        `loss_percent`, a rule dropping that share of them at random (in steps of 0.01 %)."""
        nft = ("nft", "add", "rule", "inet", TABLE, "input")
        self.run("nft", "add", "table", "inet", TABLE)
        self.run(
            "nft", "add", "chain", "inet", TABLE, "input",
            "{ type filter hook input priority 0; policy accept; }",
        )  # fmt: skip
        self.run(*nft, *"meta l4proto udp counter".split())  # every UDP datagram, counted
        if loss_percent > 0:
            basis_points = round(loss_percent * 100)
            drop = f"meta l4proto udp numgen random mod 10000 < {basis_points} counter drop"
            self.run(*nft, *drop.split())


def _refused_by_the_kernel(error: BaseException) -> bool:
    """`error` says this machine does not allow or support what was asked (a container without
    the capability or the module), not that the setup went wrong."""
    if isinstance(error, OSError) and error.errno in (errno.EPERM, errno.EACCES, errno.EOPNOTSUPP):
        return True
    text = str(error)
    return isinstance(error, RuntimeError) and any(
        words in text for words in ("Operation not permitted", "Permission denied", "not supported")
    )


def _wait_carrier(namespaces: Iterable[Namespace], timeout: float = 10) -> None:
    """Until every namespace's `veth` reports its carrier (it comes up asynchronously)."""
    namespaces = list(namespaces)
    deadline = time.monotonic() + timeout
    while True:
        down = [
            ns
            for ns in namespaces
            if "LOWER_UP" not in ns.run("ip", "link", "show", "dev", ns.veth)
        ]
        if not down:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"never came up: {', '.join(f'{ns.veth} in {ns.name}' for ns in down)}"
            )
        time.sleep(0.02)


class _Namespaces:
    """What NetnsPair and NetnsBridge share: creation that skips the test (reason printed) when it
    cannot work, the namespaces made so far, and their teardown."""

    _skip_print = "network namespace tests skipped"  # "<this>: <reason>" printed when skipping
    _skip_reason = "network namespaces"  # and "<this>: <reason>" the skip's reason
    _setup_failed = "cannot set up namespaces"  # "<this>: <error>" when setting up fails

    def __init__(self) -> None:
        self._created: list[Namespace] = []

    @classmethod
    def _create_or_skip(cls, make: Callable[[], Self]) -> Self:
        """`make()` set up, or a skipped test (with the reason printed) when `ip` or `nft` is
        missing, we are not root, or the kernel refuses namespaces, veths, bridges or nftables
        (not permitted, not supported). Any other failure to set up (a timeout, a port that
        never forwards, a rule the helper got wrong) fails the test."""
        reason = None
        missing = [tool for tool in ("ip", "nft") if shutil.which(tool) is None]
        if missing:
            reason = f"{' and '.join(missing)} not on PATH (apt-get install iproute2 nftables)"
        elif os.geteuid() != 0:
            reason = "network namespaces and nftables need root"
        if reason is None:
            made = make()
            try:
                made._setup()
                return made
            except BaseException as e:
                made.close()
                if not _refused_by_the_kernel(e):
                    raise
                reason = f"{cls._setup_failed}: {e}"
        print(f"{cls._skip_print}: {reason}")
        pytest.skip(f"{cls._skip_reason}: {reason}")

    def _setup(self) -> None:
        raise NotImplementedError

    def _add_namespace(self, ns: Namespace) -> Namespace:
        _run("ip", "netns", "add", ns.name)
        self._created.append(ns)
        return ns

    def close(self) -> None:
        """SIGKILL every process still inside the namespaces (ours: nothing else runs there),
        then delete the namespaces (their veths and bridges go with them). Idempotent."""
        for ns in self._created:
            for pid in ns.pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        for ns in self._created:
            deadline = time.monotonic() + 10
            while ns.pids() and time.monotonic() < deadline:
                time.sleep(0.05)
            with contextlib.suppress(Exception):
                _run("ip", "netns", "del", ns.name)
        self._created.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


class NetnsPair(_Namespaces):
    """Namespaces `a` (10.201.0.1) and `b` (10.201.0.2) on one veth pair, lo up in each, and in
    each an input rule dropping `loss_percent` % of UDP datagrams at random."""

    _skip_print = "UDP loss tests skipped"
    _skip_reason = "UDP loss in network namespaces"
    _setup_failed = "cannot set up namespaces with nftables loss"

    def __init__(self, loss_percent: int):
        super().__init__()
        suffix = uuid.uuid4().hex[:8]
        self.loss_percent = loss_percent
        self.a = Namespace(f"aeronio-loss-{suffix}-a", f"ael{suffix}a", "10.201.0.1")
        self.b = Namespace(f"aeronio-loss-{suffix}-b", f"ael{suffix}b", "10.201.0.2")

    @classmethod
    def create(cls, loss_percent: int = 5) -> NetnsPair:
        """The pair, or a skipped test (with the reason printed) when `ip` or `nft` is missing,
        we are not root, or the kernel refuses namespaces, veths or nftables."""
        return cls._create_or_skip(lambda: cls(loss_percent))

    def _setup(self) -> None:
        for ns in (self.a, self.b):
            self._add_namespace(ns)
        _run("ip", "link", "add", self.a.veth, "type", "veth", "peer", "name", self.b.veth)
        for ns in (self.a, self.b):
            _run("ip", "link", "set", ns.veth, "netns", ns.name)
        for ns in (self.a, self.b):
            ns._configure_host()
            ns._add_udp_loss(self.loss_percent)
        _wait_carrier((self.a, self.b))

    def udp_counts(self) -> dict[str, tuple[int, int]]:
        return {"a": self.a.udp_counts(), "b": self.b.udp_counts()}


class NetnsBridge(_Namespaces):
    """`hosts` namespaces, host i with `veth{i}` at 10.203.0.{i+1}/24, lo up and a route for
    224.0.0.0/4 on `veth{i}`, all on bridge `br0` (IGMP snooping off: multicast floods to every
    port) in a namespace of its own, `switch`. Every host counts its UDP input with nftables;
    hosts in `loss_percent` (index -> percent) drop that share of it at random."""

    SUBNET = "10.203.0"
    BRIDGE = "br0"
    _skip_print = "network namespace bridge tests skipped"
    _skip_reason = "bridge of network namespaces"
    _setup_failed = "cannot set up a bridge of namespaces with nftables"

    def __init__(self, hosts: int, loss_percent: dict[int, float] | None = None):
        super().__init__()
        if not 1 <= hosts <= 250:
            raise ValueError(f"hosts must be 1..250, not {hosts}")
        loss_percent = dict(loss_percent or {})
        if unknown := sorted(set(loss_percent) - set(range(hosts))):
            raise ValueError(f"loss_percent names hosts {unknown} of only {hosts}")
        self.loss_percent = loss_percent
        suffix = uuid.uuid4().hex[:8]
        self.switch = Namespace(f"aeronio-br-{suffix}-sw")
        self.hosts = [
            Namespace(f"aeronio-br-{suffix}-h{i}", f"veth{i}", f"{self.SUBNET}.{i + 1}")
            for i in range(hosts)
        ]

    @classmethod
    def create(cls, hosts: int, loss_percent: dict[int, float] | None = None) -> NetnsBridge:
        """The bridge and its hosts, or a skipped test (with the reason printed) when `ip` or
        `nft` is missing, we are not root, or the kernel refuses namespaces, veths, bridges or
        nftables. `loss_percent`: host index -> % of its UDP input dropped at random."""
        return cls._create_or_skip(lambda: cls(hosts, loss_percent))

    def _setup(self) -> None:
        switch = self._add_namespace(self.switch)
        # no STP (ports forward at once) and no IGMP snooping (multicast floods to every port)
        bridge = self.BRIDGE
        switch.run(
            "ip", "link", "add", bridge, "type", "bridge",
            "stp_state", "0", "forward_delay", "0", "mcast_snooping", "0",
        )  # fmt: skip
        switch.run("ip", "link", "set", bridge, "up")
        for i, host in enumerate(self.hosts):
            self._add_namespace(host)
            port = f"port{i}"
            # made inside the switch with the peer straight in the host: never in the root
            # namespace, so names cannot clash there
            switch.run(
                "ip", "link", "add", port, "type", "veth",
                "peer", "name", host.veth, "netns", host.name,
            )  # fmt: skip
            switch.run("ip", "link", "set", port, "master", bridge)
            switch.run("ip", "link", "set", port, "up")
            host._configure_host()
            host.run("ip", "route", "add", "224.0.0.0/4", "dev", host.veth)
            host._add_udp_loss(self.loss_percent.get(i, 0))
        _wait_carrier(self.hosts)
        self._wait_forwarding()

    def _wait_forwarding(self, timeout: float = 10) -> None:
        """Until every bridge port is in the forwarding state."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.switch.run("bridge", "link", "show")
            states = re.findall(r"^\d+: (\S+?)@\S+: .* state (\w+)", text, re.M)
            forwarding = {port for port, state in states if state == "forwarding"}
            waiting = [f"port{i}" for i in range(len(self.hosts)) if f"port{i}" not in forwarding]
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"bridge ports never forwarding: {waiting}: {text}")
            time.sleep(0.02)

    def udp_counts(self) -> list[tuple[int, int]]:
        """(UDP datagrams received, dropped) of each host, by index."""
        return [host.udp_counts() for host in self.hosts]
