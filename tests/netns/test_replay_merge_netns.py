"""Replay-merge through 5 % loss (issue 12): a live stream (dynamic multi-destination-cast) in
namespace `a`; in namespace `b` an archive records it and, once it has recorded a good part, a
late joiner replays the recording and merges into the live stream, which goes on meanwhile.
Each namespace drops 5 % of the UDP datagrams it receives (nftables), so the recording, the
live stream's data, status messages and NAKs all see loss. The joiner must receive every
message exactly once, in order, at the live stream's positions."""

from __future__ import annotations

import json

import pytest

from tests.support.netns import NetnsPair
from tests.support.procs import Procs, module_argv

COUNT = 30_000
STREAM_ID = 1001
CONTROL_PORT, RECORDING_PORT, REPLAY_PORT, LIVE_PORT = 40200, 40201, 40202, 40203


def spawn(procs: Procs, ns, role: str, **kwargs):
    args = [
        *module_argv("tests.support.archive_netns_worker"),
        role,
        json.dumps({"dir": procs.new_dir(), **kwargs}),
    ]
    return procs.spawn(ns.exec_args(args), f"{role} in {ns.name}", stdin=True)


@pytest.mark.slow
def test_a_late_joiner_merges_into_the_live_stream_through_loss(netns: NetnsPair, procs: Procs):
    a, b = netns.a.address, netns.b.address
    control = f"{a}:{CONTROL_PORT}"
    joiner = spawn(
        procs, netns.b, "joiner",
        recording_channel=f"aeron:udp?endpoint={b}:{RECORDING_PORT}|control={control}",
        replay_destination=f"aeron:udp?endpoint={b}:{REPLAY_PORT}",
        live_destination=f"aeron:udp?endpoint={b}:{LIVE_PORT}|control={control}",
        stream=STREAM_ID, count=COUNT, join_after=COUNT // 3,
    )  # fmt: skip
    joiner.expect("ready", timeout=60)
    live = spawn(
        procs, netns.a, "live",
        channel=f"aeron:udp?control={control}|control-mode=dynamic|term-length=1m",
        stream=STREAM_ID, count=COUNT, per_ms=10,
    )  # fmt: skip
    session_id = json.loads(live.expect("ready", timeout=60))["session_id"]
    published = json.loads(live.expect("published", timeout=120))
    result = json.loads(joiner.expect("result", timeout=120))
    live.send("stop")
    live_counters = json.loads(live.expect("counters", timeout=30))
    assert live.wait(30) == 0, live.describe()
    assert joiner.wait(30) == 0, joiner.describe()
    udp = netns.udp_counts()
    print(
        f"replay-merge of {COUNT} messages in {result['seconds']:.1f} s; nft (seen, dropped): "
        f"{udp}; joiner NAKs sent {result['counters']['NAKs sent']}, live retransmits "
        f"{live_counters['Retransmits sent']}; live session {session_id}"
    )
    assert result["errors"] == []
    assert result["replaying_2000_before_the_end"] is False  # merged while live went on
    # every message once, in order, at the live stream's positions
    assert (result["received"], result["first_out_of_order"]) == (COUNT, None)
    assert published["count"] == COUNT
    assert published["most_destinations"] == 2  # the archive's and, while it went on, the joiner's
    assert result["positions"] == published["positions"]
    for name, (seen, dropped) in udp.items():
        assert dropped > 0, f"namespace {name}: nothing dropped of {seen}"
    assert result["counters"]["NAKs sent"] > 0
    assert live_counters["Retransmits sent"] > 0
