"""Ports a test names in its channels.

The rules:
- A chosen port lies below the kernel's ephemeral range. A socket bound to port 0 - a driver's
  sender, a client, a probe of another test - takes its port from that range, so nothing of ours
  can take a chosen port between the test choosing it and a driver binding it. (Choosing by
  binding port 0 and closing hands out an ephemeral port, which the next port-0 bind may take:
  a driver then fails "Address already in use".)
- A process hands out each port once, from a start of its own, so processes started by one test
  choose apart too.
- A port is handed out only when UDP and TCP both bind it on every address now (a multicast
  receiver binds 0.0.0.0:port; the Spark remote reader's TCP sockets share the same numbers).
"""

from __future__ import annotations

import os
import random
import socket

_SPAN = 16_384


def _band() -> range:
    """The ports below the ephemeral range (from /proc; 32768 where it is not there)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32_768
    return range(max(1_024, low - _SPAN), low)


_BAND = _band()
_given: set[int] = set()
_next = 0


def _start() -> None:
    global _next
    _next = random.SystemRandom().randrange(len(_BAND))


_start()
os.register_at_fork(after_in_child=_start)


def _free(port: int) -> bool:
    """Whether UDP and TCP both bind `port` on every address now."""
    for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
        with socket.socket(socket.AF_INET, kind) as probe:
            try:
                probe.bind(("0.0.0.0", port))
            except OSError:
                return False
    return True


def free_ports(count: int) -> list[int]:
    """`count` different ports, free for UDP and TCP on every address now, never handed out
    before by this process."""
    global _next
    ports: list[int] = []
    for _ in range(len(_BAND)):
        port = _BAND[_next]
        _next = (_next + 1) % len(_BAND)
        if port not in _given and _free(port):
            _given.add(port)
            ports.append(port)
            if len(ports) == count:
                return ports
    raise RuntimeError(f"no {count} free ports left in {_BAND.start}..{_BAND.stop - 1}")


def free_port() -> int:
    """A port free for UDP and TCP on every address now, never handed out before here."""
    return free_ports(1)[0]
