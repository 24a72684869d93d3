"""Plain UDP sockets for tests/test_netns_bridge.py, run as `python tests/mcast_probe.py ROLE
JSON-KWARGS` inside a network namespace, talking to the test on stdout (`tag json` lines).

send: `count` datagrams, each its sequence number as text, to `group`:`port` (multicast, with
    IP_MULTICAST_IF = `interface`, TTL `ttl`) or to a unicast `group`; says `sent`.
recv: binds `bind`:`port` (SO_REUSEADDR), joins `group` on `interface` unless `group` is None,
    says `ready`; on a line on stdin, reads what is still queued and says `received` with the
    sorted distinct sequence numbers, the duplicates and the senders' addresses.
"""

from __future__ import annotations

import json
import select
import socket
import sys
import time

SO_RCVBUFFORCE = 33  # Linux; not in Python's socket module


def say(tag: str, payload: object) -> None:
    print(f"{tag} {json.dumps(payload)}", flush=True)


def send(
    group: str, port: int, count: int, interface: str | None = None, ttl: int = 1, burst: int = 32
) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if interface is not None:
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(interface))
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, ttl)
    start = time.monotonic()
    for seq in range(count):
        sock.sendto(str(seq).encode(), (group, port))
        if seq % burst == burst - 1:
            time.sleep(0.0005)  # bursts no receiver's queue or backlog can overflow
    say("sent", {"count": count, "seconds": time.monotonic() - start})


def recv(port: int, group: str | None = None, interface: str = "0.0.0.0", bind: str = "") -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 8 << 20)  # root: beyond rmem_max
    sock.bind((bind, port))
    if group is not None:
        mreq = socket.inet_aton(group) + socket.inet_aton(interface)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
    say("ready", {"port": port})
    seen: set[int] = set()
    duplicates = 0
    senders: set[str] = set()

    def take() -> None:
        nonlocal duplicates
        data, (address, _port) = sock.recvfrom(65536)
        seq = int(data)
        duplicates += seq in seen
        seen.add(seq)
        senders.add(address)

    while True:
        readable, _, _ = select.select([sock, sys.stdin], [], [])
        if sock in readable:
            take()
        if sys.stdin in readable:
            break
    # what was sent before the line on stdin is queued already; read it all
    while select.select([sock], [], [], 0.2)[0]:
        take()
    say("received", {"seqs": sorted(seen), "duplicates": duplicates, "senders": sorted(senders)})


if __name__ == "__main__":
    role, kwargs = sys.argv[1], json.loads(sys.argv[2])
    {"send": send, "recv": recv}[role](**kwargs)
