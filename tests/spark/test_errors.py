"""Errors of both sources, the JVM one ("aeronio") and the Python one ("aeronio_python", its
oracle), as a PySpark user meets them: the same call raises (load, the action, or a streaming
query's awaitTermination), the same class (aeronio's SourceError or DataLossError) and the same
message, word for word."""

import json
import re
import shutil
from types import SimpleNamespace

import pytest

from tests.spark.conftest import SEGMENT, TERM

pytestmark = pytest.mark.slow

IPC = f"aeron:ipc?term-length={TERM}"
RECORD = "ts long, symbol int, price double, qty int"  # 24 bytes
OPTIONS = (
    "archive, archive_control, archive_control_stream_id, archive_timeout, channel, driver_dir, "
    "end_position, fail_on_data_loss, layout, max_bytes_per_trigger, max_partition_bytes, "
    "metadata_columns, path, push_down_aggregates, recording_ids, start_position, "
    "starting_positions, stream_id"
)
LOST = (
    ", though the query reads to {limit}: the recording was truncated under the query, or the "
    "segment is damaged (option fail_on_data_loss false skips it)"
)


@pytest.fixture(params=["aeronio", "aeronio_python"])
def source(request):
    return request.param


@pytest.fixture(scope="module")
def recorded(host):
    """big: 8 KiB messages over many segment files; small: records of 24 bytes and one of 40
    (the second message); json: maps."""
    big = host.run(host.record(f"{IPC}|alias=big", 301, [bytes([i]) * 8000 for i in range(120)]))
    sizes = [24, 40, 24]
    small = host.run(host.record(f"{IPC}|alias=small", 302, [bytes(n) for n in sizes]))
    maps = [json.dumps({"ts": i, "symbol": f"S{i}"}).encode() for i in range(5)]
    return SimpleNamespace(big=big, small=small, json=host.run(host.record(IPC, 303, maps)))


def failure(load, act=lambda df: df.collect()) -> tuple[str, Exception]:
    """Where a read fails ("load" or "action") and what it raises."""
    try:
        df = load()
    except Exception as e:
        return "load", e
    try:
        act(df)
    except Exception as e:
        return "action", e
    raise AssertionError("no error")


def loading(spark, source, archive, schema=None, stream=False, **options):
    """A load() of the source (readStream's: `stream`) with these options."""

    def load():
        reader = (spark.readStream if stream else spark.read).format(source)
        if archive is not None:
            reader = reader.option("archive", str(archive))
        if schema is not None:
            reader = reader.schema(schema)
        for key, value in options.items():
            reader = reader.option(key, str(value))
        return reader.load()

    return load


def available_now(checkpoint):
    """The action of a stream: a query to the noop sink, Trigger.AvailableNow, awaited."""

    def act(df):
        writer = df.writeStream.format("noop").option("checkpointLocation", str(checkpoint))
        writer.trigger(availableNow=True).start().awaitTermination(60)

    return act


def assert_raises(got: tuple[str, Exception], where: str, kind, message: str) -> None:
    error = got[1]
    assert (got[0], type(error), str(error)) == (where, kind, message)


def test_bad_options_and_schemas(spark, source, host, recorded, tmp_path):
    from aeronio.spark import SourceError

    archive = host.archive_dir
    cases = [
        (
            {"recordingids": 1},
            "load",
            f"unknown option(s) for reading: recordingids (the options are: {OPTIONS})",
        ),
        (
            {"layout": "fixed"},
            "load",
            'layout fixed needs a schema: .schema("ts long, price double")',
        ),
        (
            {"layout": "Avro"},
            "load",
            "option layout: 'avro' is not one of raw, fixed, msgpack, json",
        ),
        ({"stream_id": "x"}, "load", "option stream_id: 'x' is not an integer"),
        ({"stream_id": 2**32 + 7}, "load", f"option stream_id: {2**32 + 7} does not fit 32 bits"),
        ({"stream_id": -(2**31) - 1}, "load", "option stream_id: -2147483649 does not fit 32 bits"),
        (
            {"archive_control_stream_id": 10},
            "load",
            "option archive_control_stream_id is for a remote archive (archive_control)",
        ),
        (
            {"archive_timeout": 5},
            "load",
            "option archive_timeout is for a remote archive (archive_control)",
        ),
        # values quoted as Python's repr quotes them
        ({"stream_id": "it's"}, "load", """option stream_id: "it's" is not an integer"""),
        (
            {"stream_id": "a'b\"c\\"},
            "load",
            """option stream_id: 'a\\'b"c\\\\' is not an integer""",
        ),
        (
            {"stream_id": "x\ty\u2028é"},
            "load",
            "option stream_id: 'x\\ty\\u2028é' is not an integer",
        ),
        (
            {"fail_on_data_loss": "maybe"},
            "load",
            "option fail_on_data_loss: 'maybe' is not true or false",
        ),
        (
            {"max_partition_bytes": "lots"},
            "load",
            "option max_partition_bytes: 'lots' is not a size (bytes, or with k, m or g)",
        ),
        (
            {"max_partition_bytes": "0k"},
            "load",
            "option max_partition_bytes: '0k' must be positive",
        ),
        (
            {"recording_ids": "a,b"},
            "load",
            "option recording_ids: 'a,b' is not a comma-separated list of ids",
        ),
        ({"recording_ids": ","}, "load", "option recording_ids is empty"),
        # integers as Java's Long.parseLong reads them, sizes of 64 bits
        ({"start_position": "1_000"}, "load", "option start_position: '1_000' is not an integer"),
        ({"end_position": 2**64}, "load", f"option end_position: '{2**64}' is not an integer"),
        (
            {"recording_ids": "1_0"},
            "load",
            "option recording_ids: '1_0' is not a comma-separated list of ids",
        ),
        (
            {"max_partition_bytes": "9999999999g"},
            "load",
            "option max_partition_bytes: '9999999999g' does not fit 64 bits",
        ),
        (
            {"max_partition_bytes": "9" * 20},
            "load",
            f"option max_partition_bytes: '{'9' * 20}' does not fit 64 bits",
        ),
        ({"start_position": -1}, "load", "option start_position: -1 must be at least 0"),
        (
            {"start_position": 100, "end_position": 10},
            "load",
            "option end_position 10 is before start_position 100",
        ),
        (
            {"metadata_columns": "position"},
            "load",
            "option metadata_columns is for the fixed, msgpack and json layouts",
        ),
        (
            {"starting_positions": "soonest"},
            "load",
            "option starting_positions: 'soonest' is not earliest, latest or a JSON object "
            '{"<recording id>": <position, -2 earliest, -1 latest>}',
        ),
        *(
            (
                {"starting_positions": text},
                "load",
                f"option starting_positions: {text!r} is not earliest, latest or a JSON object "
                '{"<recording id>": <position, -2 earliest, -1 latest>}',
            )
            # positions and ids as whole numbers of 64 bits, never truncated
            for text in (
                '{"1": 12.5}',
                '{"1": 1e3}',
                '{"1": true}',
                '{"1": "1_000"}',
                '{"1_0": 5}',
                f'{{"1": {2**63}}}',
            )
        ),
        (
            {"starting_positions": "earliest"},
            "action",
            "option(s) starting_positions are for a streaming read, not a batch read",
        ),
        (
            {"schema": "price double"},
            "action",
            "column 'price' is not one of the raw layout's (recording_id, session_id, stream_id, "
            "channel, position, length, reserved_value, data); decode messages with option layout "
            "fixed, msgpack or json",
        ),
        (
            {"schema": "name string", "layout": "fixed"},
            "action",
            "layout fixed: column 'name' is string; a fixed record holds long, int, short, byte, "
            "double, float or boolean",
        ),
        (
            {"schema": "ts long, at timestamp_ntz", "layout": "json"},
            "action",
            "layout json: column 'at': type timestamp_ntz is not supported",
        ),
        (
            {"schema": "ts long, gap interval day to second", "layout": "json"},
            "action",
            "layout json: column 'gap': type interval day to second is not supported",
        ),
        (
            {"schema": "ts long", "layout": "fixed", "metadata_columns": "foo"},
            "action",
            "option metadata_columns: 'foo' is not one of recording_id, session_id, stream_id, "
            "channel, position, length, reserved_value",
        ),
        (
            {"schema": "ts long", "layout": "fixed", "metadata_columns": "position"},
            "action",
            "option metadata_columns: 'position' is not a column of the schema",
        ),
        (
            {"schema": "ts long, position int", "layout": "fixed", "metadata_columns": "position"},
            "action",
            "column 'position' must be bigint, not int",
        ),
    ]
    for options, where, message in cases:
        got = failure(loading(spark, source, archive, **options))
        assert_raises(got, where, SourceError, message)
    nowhere = tmp_path / "nowhere"
    cases = [
        (None, {}, 'option archive is required: .option("archive", DIR) or .load(DIR) (or '
         "archive_control, a remote archive's control channel)"),
        (nowhere, {}, f"archive directory '{nowhere}' does not exist"),
        (tmp_path, {}, f"no archive catalog in '{tmp_path}' (archive.catalog missing)"),
        (archive, {"path": tmp_path}, f"two archives given: option archive '{archive}' and path "
         f"'{tmp_path}'"),
    ]  # fmt: skip
    for directory, options, message in cases:
        got = failure(loading(spark, source, directory, **options))
        assert_raises(
            got, "load" if directory is None or options else "action", SourceError, message
        )


def test_a_corrupt_catalog(spark, source, host, recorded, tmp_path):
    from aeronio.spark import SourceError

    copy = tmp_path / "copy"
    shutil.copytree(host.archive_dir, copy)
    with open(copy / "archive.catalog", "r+b") as f:
        f.write(b"\xff" * 16)
    assert_raises(
        failure(loading(spark, source, copy)),
        "action",
        SourceError,
        f"archive catalog in '{copy}' cannot be read: {copy}/archive.catalog: version -1, entry "
        "length -1 (this archive reads version 0, entries of 1024)",
    )


def test_a_missing_or_cut_segment_fails_the_task(spark, source, host, recorded, tmp_path):
    from aeronio.spark import DataLossError

    big = recorded.big
    assert big.end > 6 * SEGMENT
    copy = tmp_path / "copy"
    shutil.copytree(host.archive_dir, copy)
    missing, cut = copy / f"{big.recording_id}-3.rec", copy / f"{big.recording_id}-5.rec"
    missing.unlink()
    with open(cut, "r+b") as f:
        f.truncate(SEGMENT // 2 + 100)
    for segment, why in (
        (3, f"segment file {missing} is missing (positions {3 * SEGMENT}..{4 * SEGMENT} are gone)"),
        (5, f"segment file {cut} is cut short ({SEGMENT // 2 + 100} of {SEGMENT} bytes)"),
    ):
        load = loading(
            spark,
            source,
            copy,
            recording_ids=big.recording_id,
            start_position=segment * SEGMENT,
            end_position=(segment + 1) * SEGMENT,
        )
        message = f"recording {big.recording_id}: {why}" + LOST.format(
            limit=(segment + 1) * SEGMENT
        )
        assert_raises(failure(load), "action", DataLossError, message)


@pytest.mark.parametrize(
    "field, value",
    [(5, b"\x00"), (6, b"\x09\x00"), (1408 + 6, b"\x00\x00")],
    ids=["begin flag lost", "unknown type", "pad inside"],
)
def test_fragments_that_make_no_whole_message_fail_the_task(
    spark, source, host, recorded, tmp_path, field, value
):
    """A damaged flag or type leaves frames that are no whole message (a fragment without its
    BEGIN, a message without its END, a frame of no known type): the read fails naming where,
    or skips that message alone."""
    from aeronio.spark import DataLossError

    big = recorded.big
    copy = tmp_path / "copy"
    shutil.copytree(host.archive_dir, copy)
    rid = big.recording_id
    p = next(q for q, _, _ in big.rows if q > 3 * SEGMENT + 1000)  # 8000 bytes: 6 frames
    with open(copy / f"{rid}-3.rec", "r+b") as f:
        f.seek(p - 3 * SEGMENT + field)
        f.write(value)
    message = (
        f"recording {rid}: the frames at position {p} of {copy}/{rid}-3.rec are not a whole "
        "message (a fragment without its first or last, or a frame of unknown type): the "
        "segment is damaged (option fail_on_data_loss false skips it)"
    )
    assert_raises(
        failure(loading(spark, source, copy, recording_ids=rid)), "action", DataLossError, message
    )
    skipped = loading(spark, source, copy, recording_ids=rid, fail_on_data_loss="false")()
    got = sorted(r.position for r in skipped.select("position").collect())
    assert got == [q for q, _, _ in big.rows if q != p]


def test_a_record_of_the_wrong_size_fails_the_task(spark, source, host, recorded):
    from aeronio.spark import SourceError

    small = recorded.small
    load = loading(spark, source, host.archive_dir, schema=RECORD, layout="fixed", stream_id=302)
    assert_raises(
        failure(load),
        "action",
        SourceError,
        f"layout fixed: the message at position 64 of recording {small.recording_id} is 40 bytes, "
        "the record (ts, symbol, price, qty) is 24 bytes",
    )


def test_a_json_message_that_does_not_decode_fails_the_task(spark, source, host, recorded):
    """The reason is the parser's own (Spark's JSON reader, msgspec): the rest is the same."""
    from aeronio.spark import SourceError

    schema = "ts long, symbol int"
    load = loading(spark, source, host.archive_dir, schema=schema, layout="json", stream_id=303)
    where, error = failure(load)
    assert (where, type(error)) == ("action", SourceError)
    assert str(error).startswith(
        f"layout json: the message at position 0 of recording {recorded.json.recording_id} does "
        "not decode: "
    )


def test_stream_errors(spark, source, host, recorded, tmp_path):
    from aeronio.spark import SourceError

    small = recorded.small
    rid = small.recording_id

    def started(options, schema=None):
        load = loading(spark, source, host.archive_dir, schema, True, recording_ids=rid, **options)
        return failure(load, available_now(tmp_path / f"ck{len(list(tmp_path.iterdir()))}"))

    cases = [
        (
            {"max_bytes_per_trigger": "lots"},
            "load",
            "option max_bytes_per_trigger: 'lots' is not a size (bytes, or with k, m or g)",
        ),
        (
            {"start_position": 0},
            "action",
            "option(s) start_position are for a batch read, not a streaming read",
        ),
        (
            {"starting_positions": '{"999": 0}'},
            "action",
            "option starting_positions: recording 999 is not in the "
            "archive's catalog, or the options leave it out",
        ),
        (
            {"starting_positions": json.dumps({rid: small.end + 32})},
            "action",
            f"option starting_positions: recording {rid} holds positions 0 to {small.end}, "
            f"not {small.end + 32}",
        ),
    ]
    for options, where, message in cases:
        assert_raises(started(options), where, SourceError, message)
    # with a schema, nothing is checked before the query starts
    assert_raises(
        started({"max_bytes_per_trigger": "lots", "layout": "fixed"}, RECORD),
        "action",
        SourceError,
        "option max_bytes_per_trigger: 'lots' is not a size (bytes, or with k, m or g)",
    )


def test_a_stream_over_a_missing_segment(spark, source, host, recorded, tmp_path):
    from aeronio.spark import DataLossError

    big = recorded.big
    copy = tmp_path / "copy"
    shutil.copytree(host.archive_dir, copy)
    missing = copy / f"{big.recording_id}-2.rec"
    missing.unlink()

    load = loading(spark, source, copy, stream=True, recording_ids=big.recording_id)
    why = f"segment file {missing} is missing (positions {2 * SEGMENT}..{3 * SEGMENT} are gone)"
    assert_raises(
        failure(load, available_now(tmp_path / "ck")),
        "action",
        DataLossError,
        f"recording {big.recording_id}: {why}" + LOST.format(limit=3 * SEGMENT),
    )


def test_a_write_in_mode_overwrite(spark, source):
    from aeronio.spark import SourceError

    df = spark.createDataFrame([(b"x",)], "data binary")
    writer = (
        df.write.format(source)
        .mode("overwrite")
        .option("channel", "aeron:udp?endpoint=127.0.0.1:9")
    )
    with pytest.raises(SourceError) as e:
        writer.option("stream_id", 1).save()
    assert (
        str(e.value)
        == "a stream has nothing to overwrite: use mode append (every row is published)"
    )


def test_a_new_session_keeps_the_translation(spark, source, tmp_path):
    """Every new SparkSession installs PySpark's handler again: over aeronio's, not instead."""
    from aeronio.spark import SourceError

    spark.newSession()
    got = failure(loading(spark, source, tmp_path / "nowhere"))
    assert_raises(
        got, "action", SourceError, f"archive directory '{tmp_path / 'nowhere'}' does not exist"
    )


# -- the translation itself -------------------------------------------------------------------


class Java:
    """A stand-in for py4j's proxy of a Java exception."""

    def __init__(self, message, cause=None):
        self.message, self.cause = message, cause

    def getMessage(self):  # noqa: N802 - Java's
        return self.message

    def getCause(self):  # noqa: N802
        return self.cause


def test_the_deepest_cause_naming_an_error_and_its_last_line_win():
    from aeronio.spark import DataLossError, SourceError
    from aeronio.spark.captured import translate

    jvm = Java("Job aborted: java.lang.IllegalStateException: aeronio DataLossError: gone", Java(
        "aeronio DataLossError: recording 1: gone"
    ))  # fmt: skip
    error = translate(jvm)
    assert (type(error), str(error)) == (DataLossError, "recording 1: gone")
    python = Java(
        "[PYTHON_DATA_SOURCE_ERROR] Failed: Traceback (most recent call last):\n  File x\n"
        "aeronio.spark.recordings.SourceError: option layout: 'x' is not one of raw\n\n"
        "During handling ...\nUnboundLocalError: cannot access local variable\n SQLSTATE: 38000"
    )
    error = translate(Java("[STREAM_FAILED] ... aeronio.spark.recordings.SourceError: no", python))
    assert (type(error), str(error)) == (SourceError, "option layout: 'x' is not one of raw")
    assert translate(Java("java.lang.IllegalStateException: aeronio: other", Java(None))) is None
    assert translate(Java("x\nmy.SourceError: not ours\naeronio.spark.SourceError: nor")) is None


@pytest.mark.parametrize("damage", ["missing", "cut"])
def test_a_stream_planned_over_a_missing_or_cut_segment(spark, host, recorded, tmp_path, damage):
    """Finding a micro-batch's last message boundary in a segment file that is gone (or cut
    before it) fails the query in both sources with the same words and positions (the oracle's
    positions: where its planning scans)."""
    from aeronio.spark import DataLossError

    big = recorded.big
    copy = tmp_path / "copy"
    shutil.copytree(host.archive_dir, copy)
    segment = copy / f"{big.recording_id}-2.rec"
    if damage == "missing":
        segment.unlink()
        why = r"is missing \(positions \d+\.\.\d+ are gone\)"
    else:
        with open(segment, "r+b") as f:
            f.truncate(100)
        why = r"is cut short: 100 bytes, positions up to \d+ need \d+"
    messages = {}
    for source in ("aeronio", "aeronio_python"):
        options = {"recording_ids": big.recording_id, "max_bytes_per_trigger": "100k"}
        load = loading(spark, source, copy, stream=True, **options)
        with pytest.raises(DataLossError) as e:
            available_now(tmp_path / source)(load())
        messages[source] = str(e.value)
    pattern = rf"recording {big.recording_id}: segment file {re.escape(str(segment))} {why}"
    assert re.fullmatch(pattern, messages["aeronio_python"])
    assert messages["aeronio"] == messages["aeronio_python"]


def test_recording_ids_naming_no_sound_recording(spark, source, host, recorded, tmp_path):
    """A batch read whose recording_ids names an id the catalog has not, or whose entry is
    corrupt, fails naming it, and a stream whose recording_ids names a corrupt entry: they read
    nothing of it, silently (an empty result, a stream that never reads it)."""
    from aeronio.spark import SourceError

    copy = tmp_path / "copy"
    shutil.copytree(host.archive_dir, copy)
    rid = recorded.small.recording_id
    with open(copy / "archive.catalog", "r+b") as f:  # its term length: not a power of two
        f.seek((rid + 1) * 1024 + 32 + 64)
        f.write((12345).to_bytes(4, "little"))
    for named in (999, rid):
        assert_raises(
            failure(
                loading(spark, source, copy, recording_ids=f"{recorded.big.recording_id},{named}")
            ),
            "action",
            SourceError,
            f"option recording_ids: recording {named} is not a sound recording of the archive's "
            "catalog (not there, invalidated, or its entry corrupt: logged)",
        )
    assert loading(spark, source, copy, recording_ids=recorded.big.recording_id)().count() == 120
    # a stream may wait for a recording not there yet, not for a corrupt entry
    available_now(tmp_path / "ck999")(
        loading(spark, source, copy, stream=True, recording_ids=999)()
    )
    assert_raises(
        failure(
            loading(spark, source, copy, stream=True, recording_ids=rid),
            available_now(tmp_path / "ck"),
        ),
        "action",
        SourceError,
        f"option recording_ids: recording {rid} has a corrupt catalog entry (logged)",
    )


def test_an_entry_with_a_bad_valid_flag_or_another_id_is_corrupt(
    spark, source, host, recorded, tmp_path
):
    """A valid flag neither 0 nor 1, and a descriptor whose recording id is not its entry's, are
    corrupt entries (logged, a stream naming one fails), as the archive says. Before, the first
    was taken for invalidated, without a word, and in the JVM the second was read as another
    recording of that id."""
    from aeronio.spark import SourceError

    copy = tmp_path / "copy"
    shutil.copytree(host.archive_dir, copy)
    small, maps = recorded.small.recording_id, recorded.json.recording_id
    with open(copy / "archive.catalog", "r+b") as f:
        f.seek((small + 1) * 1024 + 32 + 16)  # its descriptor's recording id: json's
        f.write(maps.to_bytes(8, "little"))
        f.seek((maps + 1) * 1024 + 4)
        f.write(bytes([7]))
    ids = [r.recording_id for r in loading(spark, source, copy)().select("recording_id").collect()]
    assert ids == [recorded.big.recording_id] * 120
    for rid in (small, maps):
        assert_raises(
            failure(
                loading(spark, source, copy, stream=True, recording_ids=rid),
                available_now(tmp_path / f"ck{rid}"),
            ),
            "action",
            SourceError,
            f"option recording_ids: recording {rid} has a corrupt catalog entry (logged)",
        )


def test_a_micro_batch_planned_after_its_recording_went(host, recorded, tmp_path, caplog):
    """A micro-batch planned (or replanned by a restart) after its recording went since its
    offset was taken: its range was skipped without a word. It is data loss, raised or (option
    fail_on_data_loss false) logged. The Python source's planning, called as Spark calls it."""
    from aeronio.spark import DataLossError
    from aeronio.spark.options import read_options
    from aeronio.spark.source import StreamReader

    small = recorded.small
    copy = tmp_path / "copy"
    shutil.copytree(host.archive_dir, copy)

    def reader(fail: bool) -> StreamReader:
        given = {"archive": str(copy), "recording_ids": str(small.recording_id)}
        options = read_options(given | {"fail_on_data_loss": str(fail).lower()}, streaming=True)
        return StreamReader(options, None)

    planner = reader(True)
    start = planner.initialOffset()
    end = planner.latestOffset(start, None)
    planner.stop()
    with open(copy / "archive.catalog", "r+b") as f:  # the recording deleted
        f.seek((small.recording_id + 1) * 1024 + 4)
        f.write(b"\x00")
    for segment in copy.glob(f"{small.recording_id}-*.rec"):
        segment.unlink()
    message = (
        f"recording {small.recording_id} is no longer a sound recording of the archive's "
        f"catalog: positions {small.rows[0][0]} to {small.end} are not read"
    )
    with pytest.raises(DataLossError) as e:
        reader(True).partitions(start, end)
    assert str(e.value) == f"{message} (option fail_on_data_loss false skips it)"
    assert reader(False).partitions(start, end) == []
    assert f"{message}; skipping it" in caplog.text


def test_a_recording_whose_entry_turns_corrupt_under_a_stream(host, recorded, tmp_path):
    """The Python source took a recording read by a stream whose catalog entry became corrupt
    for one the options now leave out: its offset stood still for good, without a word (the
    JVM source raised). Both now call it data loss."""
    from aeronio.spark import DataLossError
    from aeronio.spark.options import read_options
    from aeronio.spark.source import StreamReader

    small = recorded.small
    copy = tmp_path / "copy"
    shutil.copytree(host.archive_dir, copy)
    given = {"archive": str(copy), "recording_ids": str(small.recording_id)}
    reader = StreamReader(read_options(given, streaming=True), None)
    start = reader.initialOffset()
    with open(copy / "archive.catalog", "r+b") as f:  # its term length: not a power of two
        f.seek((small.recording_id + 1) * 1024 + 32 + 64)
        f.write((12345).to_bytes(4, "little"))
    with pytest.raises(DataLossError) as e:
        reader.latestOffset(start, None)
    assert str(e.value) == (
        f"recording {small.recording_id} is no longer a sound recording of the archive's "
        "catalog (deleted, invalidated, or its entry corrupt) (option fail_on_data_loss false "
        "skips it)"
    )
    reader.stop()
