"""Aggregates pushed into format("aeronio")'s fixed-layout scan (Aggregates.java): which
aggregations are pushed (the scan says so in the plan), and that every one gives what Spark
gives aggregating the same rows itself (option push_down_aggregates false) and what the Python
source gives, value for value, bit for bit for floating point (NaN, -0.0, infinities, sums of
inexact values), with overflow, empty reads and damaged segments as Spark has them."""

import math
import shutil
import struct

import numpy as np
import pytest

from tests.spark.conftest import SEGMENT, TERM

pytestmark = pytest.mark.slow

IPC = f"aeron:ipc?term-length={TERM}"
RECORD = np.dtype(
    [("ts", "<i8"), ("symbol", "<i4"), ("price", "<f8"), ("qty", "<i2"), ("side", "<i1")]
    + [("flag", "?"), ("rate", "<f4"), ("seq", "<i8")]
)
SCHEMA = (
    "ts long, symbol int, price double, qty short, side byte, flag boolean, rate float, seq long"
)
METADATA = "recording_id,session_id,stream_id"
WITH_METADATA = f"recording_id long, session_id int, stream_id int, {SCHEMA}"
NUMERIC = ["ts", "symbol", "price", "qty", "side", "rate", "seq"]
STREAM = 401
SPECIAL = [math.nan, -0.0, 0.0, math.inf, -math.inf, 3e38, -3e38, 1e-45]  # as float32


def records(n: int, seed: int) -> np.ndarray:
    """Records whose sums of price and rate are inexact (their order shows), some special."""
    rng = np.random.default_rng(seed)
    out = np.zeros(n, RECORD)
    out["ts"] = rng.integers(-(2**40), 2**40, n)
    out["symbol"] = rng.integers(0, 50, n)  # keys in the direct table
    out["price"] = rng.standard_normal(n) * 1e6
    out["qty"] = rng.integers(-(2**15), 2**15 - 1, n)  # many keys, negative ones: hashed
    out["side"] = rng.integers(-3, 3, n)
    out["flag"] = rng.random(n) < 0.5
    out["rate"] = rng.standard_normal(n).astype(np.float32)
    out["seq"] = rng.integers(-(2**48), 2**48, n)
    special = rng.choice(n, 200, replace=False)  # NaN and infinities in rate only: the
    out["rate"][special] = np.resize(np.array(SPECIAL, np.float32), 200)  # sums of price stay
    out["price"][special[:50]] = np.resize([-0.0, 0.0], 50)  # finite; zeros of both signs
    return out


@pytest.fixture(scope="module")
def recorded(host):
    """Two recordings on one stream over many segment files (so several partitions), and one
    whose sums of seq overflow a long."""
    first, second = records(6000, 1), records(3000, 2)
    big = np.zeros(3, RECORD)
    big["seq"] = 2**62
    big["symbol"] = 1
    zeros = np.zeros(40, RECORD)  # groups of zeros of both signs, first one sign or the other
    zeros["symbol"] = np.arange(40) % 5
    signs = (np.arange(40) // 5 + np.arange(40) % 5) % 2
    zeros["price"] = np.where(signs | (zeros["symbol"] == 4), -0.0, 0.0)  # 4: all -0.0
    zeros["rate"] = zeros["price"]
    return {
        "a": host.run(host.record(f"{IPC}|alias=a", STREAM, [r.tobytes() for r in first])),
        "b": host.run(host.record(f"{IPC}|alias=b", STREAM, [r.tobytes() for r in second])),
        "big": host.run(host.record(f"{IPC}|alias=big", STREAM + 1, [r.tobytes() for r in big])),
        "zeros": host.run(host.record(IPC, STREAM + 2, [r.tobytes() for r in zeros])),
    }


def read(spark, archive, source="aeronio", schema=WITH_METADATA, stream=STREAM, **options):
    reader = (
        spark.read.format(source)
        .option("archive", str(archive))
        .option("layout", "fixed")
        .option("stream_id", stream)
        .option("metadata_columns", METADATA)
        .option("max_partition_bytes", SEGMENT // 2)
        .schema(schema)
    )
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def pushed(df) -> bool:
    """Whether the query's scan aggregates (its description in the executed plan)."""
    return ", aggregated: " in df._jdf.queryExecution().executedPlan().toString()


def exact(rows) -> list[tuple]:
    """Rows sorted, floats as their bits (NaN as one value: Spark may carry any NaN)."""

    def bits(v):
        if isinstance(v, float):
            return "nan" if math.isnan(v) else struct.pack("<d", v).hex()
        return v

    return sorted((tuple(bits(v) for v in r) for r in rows), key=repr)


def same_everywhere(spark, archive, query, expect_pushed=True, **options) -> list[tuple]:
    """`query`'s rows through the pushed scan, equal to Spark's own aggregation of the rows
    and to the Python source's; the rows."""
    df = query(read(spark, archive, **options))
    assert pushed(df) == expect_pushed
    got = exact(df.collect())
    spark_own = query(read(spark, archive, push_down_aggregates="false", **options))
    assert not pushed(spark_own)
    assert_same(got, exact(spark_own.collect()), spark_own.columns)
    python = query(read(spark, archive, "aeronio_python", **options))
    assert_same(got, exact(python.collect()), python.columns)
    return got


def assert_same(got: list[tuple], want: list[tuple], columns: list[str]) -> None:
    """got == want, or an error naming the columns that differ."""
    differ = [
        (i, columns[j], a[j], b[j])
        for i, (a, b) in enumerate(zip(got, want, strict=True))
        for j in range(len(columns))
        if a[j] != b[j]
    ]
    assert not differ and len(got) == len(want), differ[:10]


def by(*keys):
    """A query: GROUP BY `keys`, every function over every numeric record column (AVG over
    the floating ones: over an integral one it is not pushed, below)."""
    from pyspark.sql import functions as F

    functions = [F.count(F.lit(1)), F.count("price"), F.avg("price"), F.avg("rate")]
    functions += [f(c) for c in NUMERIC for f in (F.sum, F.min, F.max)]
    return lambda df: df.groupBy(*keys).agg(*functions)


@pytest.mark.parametrize(
    "keys",
    [(), ("symbol",), ("side",), ("qty",), ("ts",), ("recording_id",), ("session_id",)]
    + [("stream_id",)],
)
def test_pushed_aggregates_equal_sparks_own(spark, host, recorded, keys):
    rows = same_everywhere(spark, host.archive_dir, by(*keys))
    a, b = recorded["a"], recorded["b"]
    records = np.concatenate([records_of(a), records_of(b)])
    if keys and keys[0] in METADATA:
        groups = {(getattr(r, keys[0]),) for r in (a, b)}
    else:
        groups = {tuple(r[k] for k in keys) for r in records}
    assert len(rows) == len(groups)
    assert sum(r[len(keys)] for r in rows) == len(records)


def records_of(r) -> np.ndarray:
    return np.frombuffer(b"".join(d for _, _, d in r.rows), RECORD)


def test_zeros_of_both_signs_as_spark_orders_them(spark, host, recorded):
    """MIN and MAX keep the first of equal values (-0.0 and 0.0 are equal), a SUM starts from
    0.0: a group of -0.0 sums to 0.0."""
    rows = same_everywhere(spark, host.archive_dir, by("symbol"), stream=STREAM + 2)
    zero, minus = struct.pack("<d", 0.0).hex(), struct.pack("<d", -0.0).hex()
    at = 1 + 4 + 3 * NUMERIC.index("price")  # by()'s columns: the key, 4, then sum, min, max
    first = {0: zero, 1: minus, 2: zero, 3: minus, 4: minus}
    assert {r[0]: (r[at + 1], r[at + 2]) for r in rows} == {k: (v, v) for k, v in first.items()}
    assert {r[0]: r[at] for r in rows} == dict.fromkeys(first, zero)


def test_what_is_not_pushed_is_aggregated_by_spark(spark, host, recorded):
    from pyspark.sql import functions as F

    for query in (
        lambda df: df.groupBy("symbol", "side").count(),  # two keys
        lambda df: df.groupBy("price").count(),  # a floating key
        lambda df: df.groupBy("flag").count(),  # a boolean key
        lambda df: df.agg(F.countDistinct("symbol")),
        lambda df: df.agg(F.sum(F.col("qty") * 2)),  # an expression
        lambda df: df.agg(F.max("flag")),  # a boolean
        lambda df: df.where("symbol > 3").groupBy("side").count(),  # a filter stays above
        # AVG of an integral column: Spark's own sums doubles, which a long sum is not past
        # 2^53 (as here), and SUM with COUNT of one such column may be an AVG
        lambda df: df.groupBy("side").agg(F.avg("seq")),
        lambda df: df.agg(F.sum("qty"), F.count("qty")),
    ):
        same_everywhere(spark, host.archive_dir, query, expect_pushed=False)
    raw = spark.read.format("aeronio").option("archive", str(host.archive_dir)).load()
    assert not pushed(raw.groupBy("stream_id").count())


def test_an_overflowing_sum_fails_as_sparks_own_or_wraps(spark, host, recorded):
    from pyspark.sql import functions as F

    query = lambda df: df.groupBy("symbol").agg(F.sum("seq"))  # noqa: E731
    key = "spark.sql.ansi.enabled"
    before = spark.conf.get(key)
    try:
        spark.conf.set(key, "true")
        errors = []
        for push in ("true", "false"):
            df = query(read(spark, host.archive_dir, stream=STREAM + 1, push_down_aggregates=push))
            assert pushed(df) == (push == "true")
            with pytest.raises(Exception) as raised:
                df.collect()
            errors.append(str(raised.value))
        assert errors[0] == errors[1], errors
        assert errors[0].startswith("[ARITHMETIC_OVERFLOW] overflow. Use 'try_add'"), errors
        spark.conf.set(key, "false")
        rows = same_everywhere(spark, host.archive_dir, query, stream=STREAM + 1)
        assert rows == [(1, 3 * 2**62 - 2**64)]
    finally:
        spark.conf.set(key, before)


def test_a_read_of_nothing(spark, host, recorded):
    from pyspark.sql import functions as F

    nothing = {"stream": 999}
    row = same_everywhere(spark, host.archive_dir, lambda df: df.agg(F.count(F.lit(1))), **nothing)
    assert row == [(0,)]
    rows = same_everywhere(spark, host.archive_dir, by(), **nothing)
    assert rows[0][:2] == (0, 0) and set(rows[0][2:]) == {None}
    assert same_everywhere(spark, host.archive_dir, by("symbol"), **nothing) == []


def test_a_damaged_segment(spark, host, recorded, tmp_path):
    """Lost data fails the pushed read as the rows' read (the same error), or with
    fail_on_data_loss false ends its partition there, as the rows' read does."""
    a = recorded["a"]
    copy = tmp_path / "copy"
    shutil.copytree(host.archive_dir, copy)
    assert a.end > 4 * SEGMENT
    with open(copy / f"{a.recording_id}-2.rec", "r+b") as f:
        f.truncate(SEGMENT // 2 + SEGMENT // 3)  # in its second term: one partition's
    query = by("symbol")
    from aeronio.spark import DataLossError

    errors = []
    for push in ("true", "false"):
        df = query(read(spark, copy, push_down_aggregates=push))
        assert pushed(df) == (push == "true")
        with pytest.raises(DataLossError) as raised:
            df.collect()
        errors.append(str(raised.value))
    assert errors[0] == errors[1], errors
    rows = same_everywhere(spark, copy, query, fail_on_data_loss="false")
    kept = sum(r[1] for r in rows)  # COUNT(*), after the key
    assert 0 < kept < len(a.rows) + len(recorded["b"].rows)


def test_the_option_is_checked_by_both_sources(spark, host, recorded):
    from aeronio.spark import SourceError

    for source in ("aeronio", "aeronio_python"):
        with pytest.raises(SourceError) as raised:
            read(spark, host.archive_dir, source, push_down_aggregates="maybe").collect()
        assert str(raised.value) == "option push_down_aggregates: 'maybe' is not true or false"
