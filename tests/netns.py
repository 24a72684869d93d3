"""Two network namespaces joined by a veth pair, each dropping a share of the UDP datagrams it
receives with an nftables rule (netem is not available everywhere; nftables' `numgen random` is).

    pair = NetnsPair.create(loss_percent=5)   # skips the test (reason printed) without privilege
    args = pair.a.exec_args([sys.executable, ...])   # run a command inside namespace a
    pair.a.udp_counts()                        # (UDP datagrams received, dropped) in a
    pair.close()                               # kills whatever runs inside, deletes both

Names carry a random suffix, so parallel runs and leftovers of killed runs never clash.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
import uuid

import pytest

TABLE = "aeronio_loss"
_COUNTER = re.compile(r"counter packets (\d+) bytes \d+")


def _run(*args: str, timeout: float = 20) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"`{' '.join(args)}` failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


class Namespace:
    def __init__(self, name: str, veth: str, address: str):
        self.name, self.veth, self.address = name, veth, address

    def exec_args(self, args: list[str]) -> list[str]:
        """`args` run inside this namespace (`ip netns exec` execs it: same pid, no fork)."""
        return ["ip", "netns", "exec", self.name, *args]

    def run(self, *args: str) -> str:
        return _run(*self.exec_args(list(args)))

    def udp_counts(self) -> tuple[int, int]:
        """(UDP datagrams that reached the input hook, of which dropped) since creation."""
        text = self.run("nft", "list", "chain", "inet", TABLE, "input")
        seen, dropped = (int(n) for n in _COUNTER.findall(text))
        return seen, dropped

    def pids(self) -> list[int]:
        with contextlib.suppress(Exception):
            return [int(p) for p in _run("ip", "netns", "pids", self.name).split()]
        return []


class NetnsPair:
    """Namespaces `a` (10.201.0.1) and `b` (10.201.0.2) on one veth pair, lo up in each, and in
    each an input rule dropping `loss_percent` % of UDP datagrams at random."""

    def __init__(self, loss_percent: int):
        suffix = uuid.uuid4().hex[:8]
        self.loss_percent = loss_percent
        self.a = Namespace(f"aeronio-loss-{suffix}-a", f"ael{suffix}a", "10.201.0.1")
        self.b = Namespace(f"aeronio-loss-{suffix}-b", f"ael{suffix}b", "10.201.0.2")
        self._created: list[Namespace] = []

    @classmethod
    def create(cls, loss_percent: int = 5) -> NetnsPair:
        """The pair, or a skipped test (with the reason printed) when `ip` or `nft` is missing,
        we are not root, or the kernel refuses namespaces, veths or nftables."""
        reason = None
        missing = [tool for tool in ("ip", "nft") if shutil.which(tool) is None]
        if missing:
            reason = f"{' and '.join(missing)} not on PATH (apt-get install iproute2 nftables)"
        elif os.geteuid() != 0:
            reason = "network namespaces and nftables need root"
        if reason is None:
            pair = cls(loss_percent)
            try:
                pair._setup()
                return pair
            except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
                pair.close()
                reason = f"cannot set up namespaces with nftables loss: {e}"
        print(f"UDP loss tests skipped: {reason}")
        pytest.skip(f"UDP loss in network namespaces: {reason}")

    def _setup(self) -> None:
        for ns in (self.a, self.b):
            _run("ip", "netns", "add", ns.name)
            self._created.append(ns)
        _run("ip", "link", "add", self.a.veth, "type", "veth", "peer", "name", self.b.veth)
        for ns in (self.a, self.b):
            _run("ip", "link", "set", ns.veth, "netns", ns.name)
        for ns in (self.a, self.b):
            ns.run("ip", "addr", "add", f"{ns.address}/24", "dev", ns.veth)
            ns.run("ip", "link", "set", ns.veth, "up")
            ns.run("ip", "link", "set", "lo", "up")
            nft = ("nft", "add", "rule", "inet", TABLE, "input")
            ns.run("nft", "add", "table", "inet", TABLE)
            ns.run(
                "nft", "add", "chain", "inet", TABLE, "input",
                "{ type filter hook input priority 0; policy accept; }",
            )  # fmt: skip
            ns.run(*nft, *"meta l4proto udp counter".split())  # every UDP datagram, counted
            drop = f"meta l4proto udp numgen random mod 100 < {self.loss_percent} counter drop"
            ns.run(*nft, *drop.split())
        # the veth carrier comes up asynchronously: wait until both ends report it
        deadline = time.monotonic() + 10
        while not all(
            "LOWER_UP" in ns.run("ip", "link", "show", "dev", ns.veth) for ns in (self.a, self.b)
        ):
            if time.monotonic() > deadline:
                raise RuntimeError(f"veth {self.a.veth}/{self.b.veth} never came up")
            time.sleep(0.02)

    def udp_counts(self) -> dict[str, tuple[int, int]]:
        return {"a": self.a.udp_counts(), "b": self.b.udp_counts()}

    def close(self) -> None:
        """SIGKILL every process still inside either namespace (ours: nothing else runs there),
        then delete the namespaces (the veth pair goes with them)."""
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
