"""The ports tests name in their channels (tests/support/ports.py): below the ephemeral range,
each handed out once, never one that something holds."""

from __future__ import annotations

import socket

from tests.support import ports


def ephemeral_low() -> int:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        return int(f.read().split()[0])


def test_ports_lie_below_the_ephemeral_range_and_are_handed_out_once():
    chosen = ports.free_ports(200) + [ports.free_port() for _ in range(50)]
    assert len(set(chosen)) == 250
    assert all(1024 <= port < ephemeral_low() for port in chosen)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        assert probe.getsockname()[1] >= ephemeral_low()  # where a port-0 bind lands instead


def test_a_port_held_for_udp_or_tcp_is_passed_over(monkeypatch):
    band = ports._BAND
    start = (band.index(ports.free_port()) + 1) % len(band)
    held = [band[start], band[(start + 1) % len(band)]]
    with (
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp,
        socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp,
    ):
        udp.bind(("127.0.0.1", held[0]))
        tcp.bind(("127.0.0.1", held[1]))
        monkeypatch.setattr(ports, "_next", start)
        port = ports.free_port()
    assert port not in held
