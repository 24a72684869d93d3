"""Hostile clients of an `aeronio archive serve` process (issue 30): its CPU and RSS under

- `fuzz`: a stream recorded, then N fuzzed control requests (random bytes and mutated valid
  encodings of every request) from a connected session that reads its answers; then another
  stream is recorded and replayed, and the replay must be the published messages byte for
  byte;
- `self-ipc`, `self-udp`: one ConnectRequest whose response channel and stream are the
  archive's own control stream (`aeron:ipc` 11, or its UDP control endpoint and stream 10);
- `never-reads`: a connected client (response term 64 KiB) that sends N requests and reads
  none of their answers.

    python -m bench.hostile.fuzz_archive_requests [--scenario NAME|all]
        [--requests N] [--seconds S]

Prints one JSON line per scenario (the archive's RSS before and after, its CPU over the
window, what was sent and answered). The archive runs with its embedded driver; the probe is
a client of that driver.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys
import time

import aeronio
from aeronio import archive
from aeronio.archive import codecs
from bench.children import Scope, free_ports, proc_cpu_s, progress

RESPONSE_STREAM = 77
SENTINEL = -7  # the correlation id of the request sent after the fuzzed ones
RECORDED = "aeron:ipc?term-length=65536"


def memory(pid: int, when: str) -> dict[str, float]:
    """The archive's resident memory (MB): all of it (`rss`, with the pages of the stream logs
    it maps and reads) and its own (`anon`: heap, Python objects)."""
    with open(f"/proc/{pid}/status") as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)
    kb = {k: int(fields[k].split()[0]) for k in ("VmRSS", "RssAnon")}
    return {
        f"rss_{when}_mb": round(kb["VmRSS"] / 1024, 1),
        f"anon_{when}_mb": round(kb["RssAnon"] / 1024, 1),
    }


def valid_requests(session: int, rng: random.Random) -> list[codecs.Message]:
    """One valid encoding of each control request, with plausible values."""
    c = rng.randrange(1 << 40)
    channel = rng.choice([RECORDED, "aeron:ipc", "aeron:udp?endpoint=localhost:40999"])
    return [
        codecs.ConnectRequest(c, rng.randrange(100, 200), "aeron:ipc?term-length=65536"),
        codecs.CloseSessionRequest(session + 1000),
        codecs.StartRecordingRequest(session, c, rng.randrange(2000, 2100), 0, channel),
        codecs.StopRecordingRequest(session, c, rng.randrange(2000, 2100), channel),
        codecs.ReplayRequest(session, c, rng.randrange(4), 0, 4096, 3001, "aeron:ipc"),
        codecs.StopReplayRequest(session, c, rng.randrange(1 << 33)),
        codecs.ListRecordingsRequest(session, c, rng.randrange(4), rng.randrange(5)),
        codecs.ListRecordingsForUriRequest(session, c, 0, 3, rng.randrange(2000, 2100), channel),
        codecs.ListRecordingRequest(session, c, rng.randrange(5)),
        codecs.ExtendRecordingRequest(session, c, rng.randrange(4), 2001, 0, channel),
        codecs.RecordingPositionRequest(session, c, rng.randrange(4)),
        codecs.TruncateRecordingRequest(session, c, rng.randrange(4), rng.randrange(4) * 32),
        codecs.StopRecordingSubscriptionRequest(session, c, rng.randrange(1 << 20)),
        codecs.StopPositionRequest(session, c, rng.randrange(4)),
        codecs.FindLastMatchingRecordingRequest(session, c, 0, -1, 2001, channel),
    ]


def fuzzed(session: int, rng: random.Random) -> bytes:
    """Random bytes (a quarter), else a valid request with a few bytes flipped, cut or grown."""
    if rng.random() < 0.25:
        return rng.randbytes(rng.randrange(1, 300))
    data = bytearray(rng.choice(valid_requests(session, rng)).encode())
    for _ in range(rng.randrange(4)):
        match rng.randrange(4):
            case 0:  # flip a byte, mostly past the header (so it still decodes)
                first = 8 if len(data) > 8 else 0
                data[rng.randrange(first, len(data))] = rng.randrange(256)
            case 1:  # cut (not to nothing)
                del data[rng.randrange(1, len(data) + 1) :]
            case 2:
                data += rng.randbytes(rng.randrange(1, 40))
            case 3:
                at = rng.randrange(len(data))
                data[at : at + 4] = rng.randbytes(4)
    return bytes(data)


class Responses:
    """A response subscription, counted: answers, ERRORs, descriptors."""

    def __init__(self, subscription):
        self.subscription = subscription
        self.answered = self.responses = self.errors = self.descriptors = 0
        self.last: codecs.Message | None = None
        self.sentinel_answered = False

    def drain(self) -> int:
        return self.subscription.poll(self._on, 1000)

    def _on(self, buffer, header) -> None:
        message = codecs.decode(buffer)
        self.last = message
        self.sentinel_answered |= getattr(message, "correlation_id", None) == SENTINEL
        self.answered += 1
        if isinstance(message, codecs.ControlResponse):
            self.responses += 1
            self.errors += message.code == codecs.ControlResponseCode.ERROR
        else:
            self.descriptors += 1


async def connect_raw(aeron, control, response_stream: int, term: str = "") -> tuple:
    """A control session by hand: (its id, its Responses)."""
    channel = "aeron:ipc" + term
    responses = Responses(await aeron.add_subscription(channel, response_stream))
    await control.offer(codecs.ConnectRequest(1, response_stream, channel).encode())
    async with asyncio.timeout(20):
        while responses.last is None:
            if not responses.drain():
                await asyncio.sleep(0.001)
    return responses.last.control_session_id, responses


async def offer(publication, data: bytes) -> None:
    """Offer, waiting out back-pressure (at most 30 s: a stalled archive fails the run)."""
    await publication.offer(data, timeout=30)


async def fuzz(aeron, pid: int, requests: int) -> dict:
    first = await record_and_replay(aeron)  # recording 0: something to list, replay, truncate
    assert first["replay_identical"], first
    control = await aeron.add_exclusive_publication("aeron:ipc", 11)
    await control.wait_connected(20)
    session, responses = await connect_raw(aeron, control, RESPONSE_STREAM)
    responses.answered = 0
    rng = random.Random(30)
    before = memory(pid, "before")
    cpu = proc_cpu_s(pid)
    for i in range(requests):
        await offer(control, fuzzed(session, rng))
        responses.drain()
        if i % 10_000 == 0:
            progress(f"fuzz: {i} sent, {responses.answered} answered")
    # answered in order after every fuzzed request (unless one closed the session)
    await offer(control, codecs.StopPositionRequest(session, SENTINEL, 0).encode())
    deadline = time.monotonic() + 120
    while not responses.sentinel_answered and time.monotonic() < deadline:
        if not responses.drain():
            await asyncio.sleep(0.01)
    responses.drain()
    cpu = proc_cpu_s(pid) - cpu
    after = memory(pid, "after")
    replay = await record_and_replay(aeron)
    return dict(
        scenario="fuzz", requests=requests, all_processed=responses.sentinel_answered,
        answered=responses.answered - responses.sentinel_answered,
        errors=responses.errors, descriptors=responses.descriptors, cpu_s=round(cpu, 2),
        **before, **after, **replay,
    )  # fmt: skip


async def record_and_replay(aeron) -> dict:
    """Record 2,000 messages and replay them: byte for byte?"""
    rng = random.Random(7)
    sizes = [28, 500, 3000]
    sent = [i.to_bytes(4, "little") + rng.randbytes(rng.choice(sizes)) for i in range(2000)]
    async with archive.connect(aeron, **archive.LOCAL, message_timeout_s=30) as client:
        stream = 3999
        await client.start_recording(RECORDED, stream)
        publication = await aeron.add_exclusive_publication(RECORDED, stream)
        for data in sent:
            await publication.offer(data)
        recordings = await client.list_recordings_for_uri(RECORDED, stream)
        recording_id = recordings[-1].recording_id
        async with asyncio.timeout(30):
            while await client.get_recording_position(recording_id) < publication.position:
                await asyncio.sleep(0.01)
        await client.stop_recording(RECORDED, stream)
        await publication.close()
        replay = await client.replay(recording_id, 0, -1, "aeron:ipc", 4001)
        got = []
        async with asyncio.timeout(30):
            async for message in replay:
                got.append(bytes(message.data))
                if len(got) == len(sent):
                    break
        await replay.close()
    return dict(replayed=len(got), replay_identical=got == sent)


async def self_answer(aeron, pid: int, udp_control: str | None, seconds: float) -> dict:
    """One ConnectRequest answering to the archive's own control stream."""
    channel, stream = (udp_control, 10) if udp_control else ("aeron:ipc", 11)
    watch = Responses(await aeron.add_subscription(channel, stream))  # sees the control stream
    control = await aeron.add_exclusive_publication(channel, stream)
    await control.wait_connected(20)
    before, cpu = memory(pid, "before"), proc_cpu_s(pid)
    await offer(control, codecs.ConnectRequest(5, stream, channel).encode())
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if not watch.drain():
            await asyncio.sleep(0.001)
    cpu = proc_cpu_s(pid) - cpu
    async with archive.connect(aeron, **archive.LOCAL, message_timeout_s=30) as client:
        served = await client.list_recordings() is not None
    return dict(
        scenario="self-udp" if udp_control else "self-ipc", seconds=seconds,
        responses_on_control_stream=watch.responses, cpu_s=round(cpu, 2),
        cpu_share=round(cpu / seconds, 2), **before, **memory(pid, "after"),
        other_client_served=served,
    )  # fmt: skip


async def never_reads(aeron, pid: int, requests: int) -> dict:
    control = await aeron.add_exclusive_publication("aeron:ipc", 11)
    await control.wait_connected(20)
    session, _ = await connect_raw(aeron, control, 78, "?term-length=65536")
    before, cpu = memory(pid, "before"), proc_cpu_s(pid)
    started = time.monotonic()
    for i in range(requests):
        await offer(control, codecs.StopPositionRequest(session, i, 12345).encode())
        if i % 100_000 == 0:
            progress(f"never-reads: {i} sent, archive memory {memory(pid, 'now')}")
    elapsed = time.monotonic() - started
    cpu = proc_cpu_s(pid) - cpu
    after = memory(pid, "after")
    async with asyncio.timeout(30):  # the archive's last requests
        async with archive.connect(aeron, **archive.LOCAL, message_timeout_s=30) as client:
            served = await client.list_recordings() is not None
    return dict(
        scenario="never-reads", requests=requests, send_s=round(elapsed, 1),
        cpu_s=round(cpu, 2), **before, **after, other_client_served=served,
    )  # fmt: skip


async def run(scenario: str, args: argparse.Namespace) -> dict:
    with Scope(__file__) as scope:
        control_port, events_port = free_ports(2)
        udp_control = f"aeron:udp?endpoint=localhost:{control_port}"
        serve = scope.child(
            "archive serve",
            [
                sys.executable, "-m", "aeronio.cli", "archive", "serve",
                "--dir", scope.temp_dir("aeronio-hostile-archive-"),
                "--control-channel", udp_control,
                "--recording-events-channel", f"aeron:udp?endpoint=localhost:{events_port}",
            ],
        )  # fmt: skip
        ready = await serve.aexpect("aeronio archive pid", timeout=60)
        driver_dir = re.search(r"\(driver (\S+),", ready).group(1)
        pid = serve.pid
        try:
            async with aeronio.connect(driver_dir) as aeron:
                match scenario:
                    case "fuzz":
                        result = await fuzz(aeron, pid, args.requests)
                    case "self-ipc" | "self-udp":
                        udp = udp_control if scenario == "self-udp" else None
                        result = await self_answer(aeron, pid, udp, args.seconds)
                    case "never-reads":
                        result = await never_reads(aeron, pid, args.requests)
        except BaseException:
            progress(f"{scenario} failed; the archive's stderr:{serve.tail(30)}")
            raise
        result["archive_alive"] = serve.proc.poll() is None
        result["archive_log"] = [
            line[:160] for line in serve.stderr.splitlines() if "dropped" in line or "abort" in line
        ]
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    names = ["fuzz", "self-ipc", "self-udp", "never-reads"]
    parser.add_argument("--scenario", choices=[*names, "all"], default="all")
    parser.add_argument("--requests", type=int, help="default 50,000 (fuzz), 1.5 M (never-reads)")
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    for name in names if args.scenario == "all" else [args.scenario]:
        scenario_args = argparse.Namespace(**vars(args))
        if scenario_args.requests is None:
            scenario_args.requests = 50_000 if name == "fuzz" else 1_500_000
        print(json.dumps(asyncio.run(run(name, scenario_args))), flush=True)


if __name__ == "__main__":
    main()
