"""The loss report of an embedded driver, fed by a sender forged on a real UDP socket: a gap it
leaves is NAKed, and each NAK is one observation in `loss-report.dat`, for that image's session,
stream, channel and source, as `aeronio loss` prints it."""

import asyncio
import os
import socket
import time

import aeronio
from aeronio import cli
from aeronio.counters import SystemCounters
from aeronio.driver.loss_report import load_loss_report
from aeronio.protocol.frames import HDR_TYPE_NAK, NakFrame, iter_frames
from aeronio.protocol.layout import LOSS_REPORT_FILE
from tests.support.forged_sender import INITIAL_TERM_ID, SESSION, STREAM, data, forge_image
from tests.support.ports import free_port


async def naks_heard(sender: socket.socket, wanted: int, timeout: float = 10) -> list[NakFrame]:
    """The NAKs the driver sends the forged sender, until `wanted` of them came."""
    naks, deadline = [], time.monotonic() + timeout
    while len(naks) < wanted:
        assert time.monotonic() < deadline, f"only {len(naks)} NAKs within {timeout} s"
        try:
            datagram = sender.recv(2048)
        except BlockingIOError:
            await asyncio.sleep(0.005)
            continue
        naks += [
            NakFrame.decode(datagram, ref.offset)
            for ref in iter_frames(datagram)
            if ref.type == HDR_TYPE_NAK
        ]
    return naks


def system_counter(aeron, descriptor: SystemCounters) -> int:
    return next(c.value for c in aeron.counters.for_each() if c.label == descriptor.label)


async def test_each_nak_of_a_gap_is_an_observation_in_the_loss_report(capsys):
    port = free_port()
    channel = f"aeron:udp?endpoint=127.0.0.1:{port}"
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender.bind(("127.0.0.1", 0))
    sender.setblocking(False)
    source = f"127.0.0.1:{sender.getsockname()[1]}"
    started_ms = time.time_ns() // 1_000_000
    try:
        async with aeronio.connect() as aeron:
            subscription = await aeron.add_subscription(channel, STREAM)
            report = os.path.join(aeron.driver_dir, LOSS_REPORT_FILE)
            assert load_loss_report(report) == []
            await forge_image(sender, port, subscription)
            for offset in (0, 128, 192):  # the frame at 64 is "lost"
                sender.sendto(data(offset), ("127.0.0.1", port))
            naks = await naks_heard(sender, 2)  # the NAK, and one retry (60 ms later)
            assert {(n.term_id, n.term_offset, n.length) for n in naks} == {
                (INITIAL_TERM_ID, 64, 64)
            }
            sender.sendto(data(64), ("127.0.0.1", port))  # the retransmission closes the gap
            async with asyncio.timeout(10):
                received = [(await subscription.receive()).data[:4] for _ in range(4)]
            assert received == [offset.to_bytes(4, "little") for offset in (0, 64, 128, 192)]

            naks_sent = system_counter(aeron, SystemCounters.NAK_MESSAGES_SENT)
            (entry,) = load_loss_report(report)
            assert entry.observation_count == naks_sent >= 2
            assert entry.total_bytes_lost == 64 * naks_sent
            assert (entry.session_id, entry.stream_id) == (SESSION, STREAM)
            assert (entry.channel, entry.source) == (channel, source)
            now_ms = time.time_ns() // 1_000_000
            assert started_ms <= entry.first_observation_ms < entry.last_observation_ms <= now_ms

            assert cli.main(["loss", "--dir", aeron.driver_dir]) == 0
            out = capsys.readouterr().out.splitlines()
            assert out[0] == (
                "#OBSERVATION_COUNT, TOTAL_BYTES_LOST, FIRST_OBSERVATION, LAST_OBSERVATION, "
                "SESSION_ID, STREAM_ID, CHANNEL, SOURCE"
            )
            assert out[1].startswith(f"{naks_sent},{64 * naks_sent},")
            assert out[1].endswith(f",{SESSION},{STREAM},{channel},{source}")
            assert out[2] == "1 entries read"
    finally:
        sender.close()
