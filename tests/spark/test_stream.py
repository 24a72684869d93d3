"""Streaming reads through Spark: Trigger.AvailableNow in batches of max_bytes_per_trigger, a
processing-time query following live recordings (and new ones), restarts from a checkpoint,
starting positions, and recordings truncated under a running query. Each test runs over both
sources: the JVM one ("aeronio") and the Python one ("aeronio_python"), its oracle; a checkpoint
of either resumes with the other."""

import asyncio
import json
import random
import struct
import threading
import time

import pytest

from tests.spark.conftest import TERM, Host, rows_of

pytestmark = pytest.mark.slow

IPC = f"aeron:ipc?term-length={TERM}"


def varied(count: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [
        seed.to_bytes(2, "little")
        + i.to_bytes(4, "little")
        + rng.randbytes(rng.choice([0, 28, 100, 500, 1400, 3000]))
        for i in range(count)
    ]


@pytest.fixture(params=["aeronio", "aeronio_python"])
def source(request):
    return request.param


def sid(source: str, stream_id: int) -> int:
    """Each source's test records on its own stream (both share the module's archive)."""
    return stream_id if source == "aeronio" else stream_id + 50


def stream(spark, host, source="aeronio", **options):
    reader = spark.readStream.format(source).option("archive", str(host.archive_dir))
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


class Collected:
    """A foreachBatch sink that keeps every row (and the batches' sizes) in this process."""

    def __init__(self):
        self.rows: list[tuple] = []
        self.batches: list[int] = []
        self.lock = threading.Lock()

    def __call__(self, df, batch_id):
        got = [tuple(r) for r in df.collect()]
        with self.lock:
            self.rows += got
            self.batches.append(len(got))

    def wait_for(self, count: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while len(self.rows) < count and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(self.rows) >= count, f"{len(self.rows)} rows of {count} after {timeout} s"

    def sorted(self) -> list[tuple]:
        return sorted(self.rows)


def start(df, sink, checkpoint, trigger):
    writer = df.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
    return writer.trigger(**trigger).start()


def available_now(df, sink, checkpoint):
    query = start(df, sink, checkpoint, {"availableNow": True})
    query.awaitTermination(120)
    assert query.exception() is None
    return query


def offsets(query, key: str) -> list[dict]:
    out = []
    for p in query.recentProgress:
        for source in p["sources"]:
            value = source[key]
            out.append(json.loads(value) if isinstance(value, str) else value)
    return out


def last_end(query) -> dict:
    ends = offsets(query, "endOffset")
    return ends[-1] if ends else {}


def test_available_now_reads_everything_in_batches_of_max_bytes(spark, host, tmp_path, source):
    stream_id = sid(source, 201)
    a = host.run(host.record(f"{IPC}|alias=s1", stream_id, varied(800, 1)))
    sink = Collected()
    df = stream(spark, host, source, stream_id=stream_id, max_bytes_per_trigger="128k")
    query = available_now(df, sink, tmp_path / "ck")
    assert sink.sorted() == rows_of(a)
    assert len([n for n in sink.batches if n]) >= a.end // (128 * 1024)
    rid = str(a.recording_id)
    for begin, end in zip(offsets(query, "startOffset"), offsets(query, "endOffset"), strict=True):
        if begin and end[rid] > begin[rid] and end[rid] < a.end:
            assert end[rid] - begin[rid] <= 128 * 1024
    assert offsets(query, "endOffset")[-1] == {rid: a.end}


def test_a_processing_time_query_follows_live_recordings(spark, host, tmp_path, source):
    """Active recordings read to their rec-pos counters (driver_dir) while publishers go on."""
    stream_id = sid(source, 202)
    channel = f"{IPC}|alias=live"
    rid, _ = host.run(host.start(channel, stream_id))
    first = host.run(host.publish(rid, varied(100, 2)))
    sink = Collected()
    query = start(
        stream(spark, host, source, stream_id=stream_id, driver_dir=host.driver_dir),  # rec-pos
        sink,
        tmp_path / "ck",
        {"processingTime": "300 milliseconds"},
    )

    async def keep_publishing():
        """Eight rounds, each once the query has taken the last (however long a micro-batch
        takes on a busy host)."""
        more = {rid: []}
        for i in range(8):
            more[rid] += await host.publish(rid, varied(40, 10 + i))
            if i == 3:  # a second publisher: a new recording, found by the running query
                second, _ = await host.add_publisher(channel, stream_id)
                more[second] = []
            if i > 3:
                more[second] += await host.publish(second, varied(30, 20 + i))
            await asyncio.to_thread(sink.wait_for, len(first) + sum(map(len, more.values())))
        return more

    try:
        sink.wait_for(len(first))  # the query runs
        more = host.run(keep_publishing(), timeout=8 * 60)
        session = {r: host.publications[r].session_id for r in more}
        expected = sorted(
            (r, session[r], stream_id, channel, p, len(d), rv, d)
            for r, rows in ((rid, first + more[rid]), *((r, more[r]) for r in more if r != rid))
            for p, rv, d in rows
        )
        sink.wait_for(len(expected))
        time.sleep(0.5)  # and nothing more comes
        assert query.exception() is None
        assert sink.sorted() == expected  # no duplicate, no gap
        assert len([n for n in sink.batches if n]) > 8  # it kept up: a batch or more a round
    finally:
        query.stop()
        host.run(host.client.stop_recording(channel, stream_id))


def test_a_restarted_query_continues_from_its_checkpoint(spark, host, tmp_path, source):
    stream_id = sid(source, 203)
    channel = f"{IPC}|alias=restart"
    rid, publication = host.run(host.start(channel, stream_id))
    published = host.run(host.publish(rid, varied(400, 3)))
    checkpoint, out = tmp_path / "ck", str(tmp_path / "out")

    def query(trigger):
        df = stream(spark, host, source, stream_id=stream_id, max_bytes_per_trigger="64k")
        writer = df.writeStream.format("parquet").option("path", out)
        return writer.option("checkpointLocation", str(checkpoint)).trigger(**trigger).start()

    def written():
        return sorted(tuple(r) for r in spark.read.parquet(out).collect())

    first = query({"availableNow": True})
    first.awaitTermination(120)
    assert len(written()) == len(published)
    published += host.run(host.publish(rid, varied(300, 4)))  # while no query runs
    second = query({"processingTime": "200 milliseconds"})
    published += host.run(host.publish(rid, varied(300, 5)))  # while it runs
    deadline = time.monotonic() + 60
    while len(written()) < len(published) // 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    second.stop()  # part way
    published += host.run(host.publish(rid, varied(100, 6)))
    host.run(host.stop(rid, channel, stream_id))
    third = query({"availableNow": True})
    third.awaitTermination(120)
    assert third.exception() is None
    session = publication.session_id
    assert written() == sorted(
        (rid, session, stream_id, channel, p, len(d), rv, d) for p, rv, d in published
    )


def test_starting_positions(spark, host, tmp_path, source):
    stream_id = sid(source, 204)
    channel = f"{IPC}|alias=start"
    a = host.run(host.record(channel, stream_id, varied(200, 7), stop=False))
    rid = a.recording_id
    df = stream(spark, host, source, stream_id=stream_id, starting_positions="latest")
    sink = Collected()
    available_now(df, sink, tmp_path / "latest")
    assert sink.rows == []
    more = host.run(host.publish(rid, varied(50, 8)))
    host.run(host.stop(rid, channel, stream_id))
    available_now(df, sink, tmp_path / "latest")  # the same checkpoint: what came since
    expected = rows_of(a._replace(rows=a.rows + more))
    assert sink.sorted() == expected[200:]
    # from a message's position, or from inside one (then from the next message); inside one
    # longer than a trigger's byte budget too (its first trigger found no boundary from there
    # and stayed put: the query ended with nothing read)
    long = max(i for i, row in enumerate(expected) if len(row[-1]) >= 3000)  # few after it
    for position, first, budget in (
        (a.rows[120][0], 120, None),
        (a.rows[120][0] + 32, 121, None),
        (expected[long][4] + 32, long + 1, "1k"),
    ):
        sink = Collected()
        limit = {} if budget is None else {"max_bytes_per_trigger": budget}
        df = stream(
            spark, host, source, stream_id=stream_id,
            starting_positions=json.dumps({rid: position}), **limit,
        )  # fmt: skip
        available_now(df, sink, tmp_path / f"json{position}")
        assert sink.sorted() == expected[first:]


@pytest.mark.parametrize("fail", [True, False])
def test_a_recording_truncated_under_a_running_query(spark, host, tmp_path, source, fail):
    stream_id = sid(source, 205 if fail else 206)
    channel = f"{IPC}|alias=t{stream_id}"
    a = host.run(host.record(channel, stream_id, varied(300, 9)))
    sink = Collected()
    df = stream(spark, host, source, stream_id=stream_id, fail_on_data_loss=str(fail).lower())
    query = start(df, sink, tmp_path / "ck", {"processingTime": "200 milliseconds"})
    try:
        sink.wait_for(300)
        cut = a.rows[150][0]
        host.run(host.client.truncate_recording(a.recording_id, cut))
        if fail:
            with pytest.raises(
                Exception, match=f"recording {a.recording_id} was truncated to {cut}"
            ):
                query.awaitTermination(30)
            return
        rid = str(a.recording_id)
        deadline = time.monotonic() + 30  # the query has seen it, and goes on from the cut
        while last_end(query).get(rid) != cut and time.monotonic() < deadline:
            time.sleep(0.1)
        assert last_end(query)[rid] == cut
        extended = host.run(extend(host, a.recording_id, channel, stream_id, cut, varied(60, 10)))
        sink.wait_for(360)
        time.sleep(0.5)
        assert query.exception() is None
        # all that was read before, and the new messages from the cut on
        assert sink.sorted() == sorted(
            rows_of(a)
            + [
                (a.recording_id, a.session_id, stream_id, channel, p, len(d), rv, d)
                for p, rv, d in extended
            ]
        )
        assert extended[0][0] == cut
    finally:
        query.stop()


async def extend(host: Host, rid: int, channel: str, stream_id: int, stop: int, payloads):
    """Extend a stopped recording from its stop position with a new publication."""
    d = host.archive.catalog.descriptor(rid)
    params = (
        f"|init-term-id={d.initial_term_id}|term-id={d.initial_term_id + stop // TERM}"
        f"|term-offset={stop % TERM}|mtu={d.mtu_length}"
    )
    await host.client.extend_recording(rid, channel + params, stream_id)
    publication = await host.aeron.add_exclusive_publication(channel + params, stream_id)
    host.publications[rid] = publication
    rows = await host.publish(rid, payloads)
    await host.stop(rid, channel + params, stream_id)
    return rows


def test_bad_stream_options(spark, host, tmp_path, source):
    a = host.run(host.record(f"{IPC}|alias=bad", sid(source, 207), varied(5, 11)))
    cases = [
        ({"start_position": 0}, "start_position are for a batch read"),
        ({"starting_positions": "soonest"}, "is not earliest, latest or a JSON object"),
        ({"starting_positions": '{"999": 0}'}, "recording 999 is not in the archive's catalog"),
        (
            {"starting_positions": json.dumps({a.recording_id: a.end + 32})},
            f"recording {a.recording_id} holds positions 0 to {a.end}, not {a.end + 32}",
        ),
        ({"max_bytes_per_trigger": "lots"}, "option max_bytes_per_trigger: 'lots' is not a size"),
    ]
    for i, (options, message) in enumerate(cases):
        with pytest.raises(Exception, match=message):
            df = stream(spark, host, source, recording_ids=a.recording_id, **options)
            query = start(df, Collected(), tmp_path / f"ck{i}", {"availableNow": True})
            query.awaitTermination(60)


def checkpointed_offsets(checkpoint) -> list[str]:
    """The offsets a query's checkpoint holds, each batch's as written (its last line)."""
    files = sorted((checkpoint / "offsets").glob("[0-9]*"), key=lambda f: int(f.name))
    return [f.read_text().splitlines()[-1] for f in files]


def test_the_jvm_source_writes_the_python_sources_offsets(spark, host, tmp_path):
    """Offset for offset, byte for byte: the JVM source's checkpoint is the Python source's."""
    a = host.run(host.record(f"{IPC}|alias=same", 208, varied(600, 12)))
    written = {}
    for source in ("aeronio", "aeronio_python"):
        sink = Collected()
        df = stream(spark, host, source, stream_id=208, max_bytes_per_trigger="100k")
        query = available_now(df, sink, tmp_path / source)
        assert sink.sorted() == rows_of(a)
        description = query.recentProgress[-1]["sources"][0]["description"]
        assert ("aeronio MicroStream" in description) == (source == "aeronio"), description
        written[source] = checkpointed_offsets(tmp_path / source)
    assert len(written["aeronio"]) >= a.end // (100 * 1024)
    assert written["aeronio"] == written["aeronio_python"]
    assert written["aeronio"][-1] == json.dumps({str(a.recording_id): a.end})


def test_the_jvm_source_resumes_a_python_sources_checkpoint(spark, host, tmp_path):
    """A query checkpointed by the Python source (before the JVM one read streams) goes on
    with the JVM one from where it was: into the same Parquet sink, every row once."""
    channel = f"{IPC}|alias=resume"
    rid, publication = host.run(host.start(channel, 209))
    published = host.run(host.publish(rid, varied(300, 13)))
    checkpoint, out = tmp_path / "ck", str(tmp_path / "out")

    def run(source):
        df = stream(spark, host, source, stream_id=209, max_bytes_per_trigger="64k")
        writer = df.writeStream.format("parquet").option("path", out)
        query = writer.option("checkpointLocation", str(checkpoint))
        query = query.trigger(availableNow=True).start()
        query.awaitTermination(120)
        assert query.exception() is None
        return query

    first = run("aeronio_python")
    assert "aeronio MicroStream" not in first.recentProgress[-1]["sources"][0]["description"]
    before = checkpointed_offsets(checkpoint)
    published += host.run(host.publish(rid, varied(300, 14)))
    host.run(host.stop(rid, channel, 209))
    second = run("aeronio")
    assert "aeronio MicroStream" in second.recentProgress[-1]["sources"][0]["description"]
    after = checkpointed_offsets(checkpoint)
    assert after[: len(before)] == before
    assert json.loads(second.recentProgress[0]["sources"][0]["startOffset"]) == json.loads(
        before[-1]
    )
    session = publication.session_id
    assert sorted(tuple(r) for r in spark.read.parquet(out).collect()) == sorted(
        (rid, session, 209, channel, p, len(d), rv, d) for p, rv, d in published
    )


@pytest.mark.parametrize("layout", ["fixed", "json"])
def test_decoding_layouts(spark, host, tmp_path, source, layout):
    """Layouts fixed and json, with metadata columns, read in micro-batches."""
    stream_id = sid(source, 210 if layout == "fixed" else 211)
    values = [(1_700_000_000 + i, i % 7, i / 8) for i in range(700)]
    if layout == "fixed":
        payloads = [struct.pack("<qid", *v) for v in values]
        schema = "ts long, symbol int, price double, position long, recording_id long"
    else:
        payloads = [
            json.dumps({"ts": t, "symbol": f"S{s}", "price": p}).encode() for t, s, p in values
        ]
        values = [(t, f"S{s}", p) for t, s, p in values]
        schema = "ts long, symbol string, price double, position long, recording_id long"
    a = host.run(host.record(f"{IPC}|alias={layout}", stream_id, payloads))
    df = (
        spark.readStream.format(source)
        .option("archive", str(host.archive_dir))
        .option("stream_id", stream_id)
        .option("layout", layout)
        .option("metadata_columns", "position,recording_id")
        .option("max_bytes_per_trigger", "8k")
        .schema(schema)
        .load()
    )
    sink = Collected()
    available_now(df, sink, tmp_path / "ck")
    assert sink.sorted() == sorted(
        (*v, p, a.recording_id) for v, (p, _, _) in zip(values, a.rows, strict=True)
    )
    assert len([n for n in sink.batches if n]) >= a.end // 8192
