"""`aeronio streams` and `aeronio loss` against a live UDP stream with loss: a publisher in one
network namespace and a subscriber in another (each with an embedded driver of its own), 5 % of
the UDP each namespace receives dropped by nftables, and the tools run from outside, as an
operator runs them, on the two drivers' directories.

While the stream flows, `streams` shows the publication and its sender on the publisher's
driver, the image and the subscription on the subscriber's, every position within the stream;
once every message arrived, all positions stand at the stream's end with no backlog. `loss`
shows one entry on the subscriber's driver for the image, with as many observations as its
driver sent NAKs, and none on the publisher's (it has no image).
"""

from __future__ import annotations

import csv
import json
import re
import time
from datetime import datetime

from aeronio.logbuffer.descriptor import align
from tests.support.netns import NetnsPair
from tests.support.netns_worker import message
from tests.support.procs import Procs, aeronio_cmd, module_argv, wait_until

MESSAGES = 50_000
PORT = 40127
STREAM_ID = 1001
WORKER = module_argv("tests.support.netns_worker")


def run(*args: str) -> str:
    done = aeronio_cmd(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def streams(dir: str) -> dict[tuple[int, int], tuple[str, dict[str, int], dict[str, int]]]:
    """`aeronio streams` taken apart: (stream id, session id) -> (channel, {position name:
    value}, {backlog name: value}); a subscriber's sub-pos appears as "sub-pos"."""
    found: dict = {}
    current = None

    def values(text: str) -> dict[str, int]:
        pairs = (pair.rpartition(" ") for pair in text.split(", "))
        return {re.sub(r"\(\d+\)| \d+$", "", k): int(v.replace(",", "")) for k, _, v in pairs}

    for line in run("streams", "--dir", dir).splitlines():
        if m := re.fullmatch(r"session (-?\d+) stream (-?\d+) (.*)", line):
            current = found[int(m[2]), int(m[1])] = (m[3], {}, {})
        elif line.startswith("  backlog: "):
            current[2].update(values(line.removeprefix("  backlog: ")))
        elif line.startswith("  log "):
            assert " MB mapped, " in line, line
        else:
            assert line.startswith("  ") and current is not None, line
            current[1].update(values(line.strip()))
    return found


def loss_entries(dir: str) -> list[list[str]]:
    lines = run("loss", "--dir", dir).splitlines()
    assert lines[0].startswith("#OBSERVATION_COUNT, TOTAL_BYTES_LOST")
    assert lines[-1] == f"{len(lines) - 2} entries read"
    return list(csv.reader(lines[1:-1]))


def test_streams_and_loss_on_a_live_lossy_udp_stream(netns: NetnsPair, procs: Procs):
    started = time.time()
    channel = f"aeron:udp?endpoint={netns.b.address}:{PORT}"
    pub_dir, sub_dir = procs.new_dir(), procs.new_dir()
    subscriber = procs.spawn(
        netns.b.exec_args(
            [*WORKER, "subscriber", json.dumps(dict(
                dir=sub_dir, channel=channel, stream=STREAM_ID, count=MESSAGES, timeout=120,
                stay=True,
            ))]
        ),
        "subscriber", stdin=True,
    )  # fmt: skip
    subscriber.expect("ready", timeout=60)
    publisher = procs.spawn(
        netns.a.exec_args(
            [*WORKER, "publisher", json.dumps(dict(
                dir=pub_dir, channel=f"{channel}|term-length=1m", stream=STREAM_ID,
                count=MESSAGES,
            ))]
        ),
        "publisher", stdin=True,
    )  # fmt: skip
    session = json.loads(publisher.expect("connected", timeout=60))["session_id"]
    key = (STREAM_ID, session)

    # while it flows: each driver shows its side of the stream, within the stream
    subscriber.expect("progress", timeout=60)
    live_pub, live_sub = streams(pub_dir)[key], streams(sub_dir)[key]
    assert set(live_pub[1]) == {"pub-pos", "pub-lmt", "snd-pos", "snd-lmt"}, live_pub
    assert set(live_sub[1]) == {"rcv-hwm", "rcv-pos", "sub-pos"}, live_sub
    live_positions = [
        value
        for side in (live_pub, live_sub)
        for name, value in side[1].items()
        if name.endswith(("-pos", "-hwm"))
    ]
    assert live_pub[0] == f"{channel}|term-length=1m"
    assert live_sub[0] == f"aeron:udp?endpoint={netns.b.address}:{PORT}"

    result = json.loads(subscriber.expect("result", timeout=180, peer=publisher))
    assert result["errors"] == [] and result["received"] == MESSAGES, result
    end = json.loads(publisher.expect("published", timeout=30))["position"]
    # the messages' frames, and a PAD at the end of each 1 MiB term but the last
    assert 0 <= end - sum(align(32 + len(message(seq))) for seq in range(MESSAGES)) < 7 * 256
    assert all(0 <= value <= end for value in live_positions), (live_positions, end)

    # at rest: every position at the stream's end, no backlog anywhere
    def settled():
        pub, sub = streams(pub_dir)[key], streams(sub_dir)[key]
        done = pub[1]["pub-pos"] == pub[1]["snd-pos"] == end
        return (pub, sub) if done else None

    pub, sub = wait_until(settled, 10, "the publisher's positions to settle")
    assert pub[1]["pub-lmt"] > end
    assert pub[2] == {"sender": 0}, pub
    assert sub[1] == {"rcv-hwm": end, "rcv-pos": end, "sub-pos": end}, sub
    assert sub[2] == {"receiver": 0, "sub": 0}, sub

    # the loss: one entry for the image, an observation per NAK its driver sent
    naks = result["counters"]["NAKs sent"]
    assert naks > 0 and netns.b.udp_counts()[1] > 0
    ((count, lost, first, last, session_id, stream_id, entry_channel, source),) = loss_entries(
        sub_dir
    )
    print(
        f"live positions {live_positions} of {end}; loss entry: {count} observations, {lost} "
        f"bytes lost; nft (seen, dropped): {netns.udp_counts()}"
    )
    assert int(count) == naks
    assert int(lost) >= 32 * naks
    assert (int(session_id), int(stream_id), entry_channel) == (session, STREAM_ID, channel)
    assert source.startswith(f"{netns.a.address}:")
    first_at, last_at = (datetime.fromisoformat(t).timestamp() for t in (first, last))
    assert started <= first_at <= last_at <= time.time()
    assert loss_entries(pub_dir) == []  # the publisher's driver has no image: nothing lost there

    subscriber.send("stop")
    publisher.send("stop")
    assert subscriber.wait(30) == 0, subscriber.describe()
    publisher.expect("counters", timeout=30)
    assert publisher.wait(30) == 0, publisher.describe()
